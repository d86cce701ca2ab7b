use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::*;
use crate::eval::{Evaluation, UniformEvaluator};
use crate::game::test_game as game;
use crate::types::{Color, Kind};

/// Uniform priors; value from material for the side to move.
struct Material;

fn material(pos: &Position, color: Color) -> i32 {
    const VALUES: [i32; 5] = [1, 3, 3, 5, 9];
    (0..5)
        .map(|k| VALUES[k] * pos.pieces(color, Kind::from_index(k)).count() as i32)
        .sum()
}

impl Evaluator for Material {
    fn evaluate_batch(
        &self,
        requests: &[EvalRequest<'_>],
    ) -> Result<Vec<crate::eval::Evaluation>, EvalError> {
        let mut out = UniformEvaluator.evaluate_batch(requests)?;
        for (eval, request) in out.iter_mut().zip(requests) {
            let pos = request.position();
            let us = pos.side_to_move();
            let v = ((material(pos, us) - material(pos, !us)) as f32 / 5.0).tanh();
            eval.wdl = Wdl::from_value(v);
        }
        Ok(out)
    }
}

/// Priors decreasing with the move's place in the list; all values drawn.
struct Ranked;

fn ranked_priors(n: usize) -> Vec<f32> {
    let weights: Vec<f32> = (0..n).map(|i| 1.0 / (i + 1) as f32).collect();
    let total: f32 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

impl Evaluator for Ranked {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(requests
            .iter()
            .map(|r| Evaluation {
                policy: ranked_priors(r.moves.len()),
                wdl: Wdl::DRAW,
                moves_left: None,
            })
            .collect())
    }
}

/// [`Ranked`]'s priors; a White knight move looks bad for White (Black,
/// to move, wins), every other position a draw.
struct RankedKnightsBad;

impl Evaluator for RankedKnightsBad {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let start_knights = Position::start().pieces(Color::White, Kind::Knight);
        let mut out = Ranked.evaluate_batch(requests)?;
        for (eval, request) in out.iter_mut().zip(requests) {
            let pos = request.position();
            if pos.side_to_move() == Color::Black
                && pos.pieces(Color::White, Kind::Knight) != start_knights
            {
                eval.wdl = Wdl::from_value(1.0);
            }
        }
        Ok(out)
    }
}

struct Broken;

impl Evaluator for Broken {
    fn evaluate_batch(&self, _: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        Err(EvalError::Disconnected)
    }
}

fn search(fen: &str, evaluator: &dyn Evaluator, playouts: u32) -> Search {
    search_with(SearchConfig::default(), fen, evaluator, playouts)
}

fn search_with(
    config: SearchConfig,
    fen: &str,
    evaluator: &dyn Evaluator,
    playouts: u32,
) -> Search {
    let mut search = Search::new(config, &game(fen));
    search.run(evaluator, playouts).unwrap();
    search
}

/// A search of the start position, not run yet.
fn from_the_start(config: SearchConfig) -> Search {
    Search::new(config, &Game::new(Position::start()))
}

fn mv(pos: &Position, text: &str) -> Move {
    pos.parse_move(text).unwrap()
}

/// Rk1-k10 mates.
const MATE_IN_ONE: &str = "k9/pp8/10/10/10/10/10/10/10/5K3R w - - 0 17";

#[test]
fn finds_mate_in_one() {
    // Ranked gives the mate one of the smallest priors: the win check finds
    // it with a handful of playouts.
    let cases: [(&str, &dyn Evaluator, u32); 2] = [
        ("uniform priors", &UniformEvaluator, 400),
        ("win check, priors hide it", &Ranked, 16),
    ];
    for (name, evaluator, playouts) in cases {
        let s = search(MATE_IN_ONE, evaluator, playouts);
        assert_eq!(
            s.best_move(),
            Some(mv(s.root_position(), "k1k10")),
            "{name}"
        );
        assert!(s.root_wdl().win > 0.5, "{name}");
    }
}

#[test]
fn finds_mate_in_two_and_avoids_stalemate() {
    // Rook to the first rank, then to the tenth; Ri1 would stalemate.
    let fen = "9k/10/8K1/10/10/P9/10/10/10/R9 w - - 0 17";
    let s = search(fen, &UniformEvaluator, 6000);
    let best = s.best_move().unwrap();
    let after = s.root_position().after(best);
    let replies = after.legal_moves();
    assert!(!replies.is_empty(), "{best} stalemates");
    for reply in replies {
        let pos = after.after(reply);
        let mates = pos.legal_moves().into_iter().any(|m| {
            pos.after(m)
                .outcome()
                .is_some_and(|o| o.winner == Some(Color::White))
        });
        assert!(mates, "{best} {reply} has no mate");
    }
}

/// Rk1 allows ...Rxk1#; the search must see it.
fn assert_avoids_a_move_into_mate(evaluator: &dyn Evaluator, playouts: u32) {
    assert_avoids_a_move_into_mate_with(SearchConfig::default(), evaluator, playouts)
}

fn assert_avoids_a_move_into_mate_with(
    config: SearchConfig,
    evaluator: &dyn Evaluator,
    playouts: u32,
) {
    let fen = "9k/9r/10/10/10/10/10/10/PP8/K1R7 w - - 0 17";
    let s = search_with(config, fen, evaluator, playouts);
    let best = s.best_move().unwrap();
    let after = s.root_position().after(best);
    let mated = after.legal_moves().into_iter().any(|m| {
        after
            .after(m)
            .outcome()
            .is_some_and(|o| o.winner == Some(Color::Black))
    });
    assert!(!mated, "{best} allows mate");
}

#[test]
fn avoids_a_move_into_mate() {
    assert_avoids_a_move_into_mate(&UniformEvaluator, 3000);
}

#[test]
fn prefers_a_free_capture() {
    let s = search(FREE_ROOK, &Material, 300);
    assert_eq!(s.best_move(), Some(mv(s.root_position(), "d3d7")));
}

#[test]
fn visits_follow_priors_when_values_are_equal() {
    let mut s = from_the_start(SearchConfig {
        fpu_reduction: 0.0,
        ..SearchConfig::default()
    });
    s.run(&Ranked, 2000).unwrap();
    let children = s.root_children();
    let priors = ranked_priors(children.len());
    let total: u32 = children.iter().map(|c| c.visits).sum();
    for (child, prior) in children.iter().zip(&priors) {
        let share = child.visits as f32 / total as f32;
        assert!(
            (share - prior).abs() < 0.02,
            "{}: {share} vs {prior}",
            child.mv
        );
    }
    assert!(children.windows(2).all(|w| w[0].visits + 1 >= w[1].visits));
}

#[test]
fn subtree_is_kept_after_a_move() {
    let mut s = search(crate::position::START_FEN, &Material, 500);
    let best = s.best_move().unwrap();
    let child_visits = s
        .root_children()
        .iter()
        .find(|c| c.mv == best)
        .unwrap()
        .visits;
    s.advance(best);
    assert_eq!(s.root_visits(), child_visits);
    assert_eq!(*s.root_position(), Position::start().after(best));
    s.run(&Material, 100).unwrap();
    assert_eq!(s.root_visits(), child_visits + 100);
}

/// Kings shuffling beside a White queen: Black to move, Ka10 repeats the
/// position a third time, Ka8 is its other move.
fn black_to_repeat_a_third_time() -> Game {
    let mut g = game("k9/10/10/10/10/10/10/10/10/1Q7K w - - 0 17");
    for m in ["k1i1", "a10a9", "i1k1", "a9a10", "k1i1", "a10a9", "i1k1"] {
        let m = g.position().parse_move(m).unwrap();
        g.play(m).unwrap();
    }
    g
}

#[test]
fn repetition_in_the_tree_is_a_draw() {
    // A third occurrence scores exactly 0 and ends the line.
    let g = black_to_repeat_a_third_time();
    let mut s = Search::new(SearchConfig::default(), &g);
    s.run(&Material, 200).unwrap();
    let back = g.position().parse_move("a9a10").unwrap();
    assert_eq!(g.repetitions(), 1);
    let stats = s
        .root_children()
        .into_iter()
        .find(|c| c.mv == back)
        .unwrap();
    assert!(stats.visits == 0 || stats.q.abs() < 1e-6 || stats.q.is_nan());
}

/// Uniform priors; the side to move with Black's king on the a-file
/// scores 0.45 - 0.55 and never draws, the other side the reverse: Black
/// stands a little worse, and a decided game beats a draw only with contempt.
struct BlackWorseOnTheAFile;

impl Evaluator for BlackWorseOnTheAFile {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let mut out = UniformEvaluator.evaluate_batch(requests)?;
        for (eval, request) in out.iter_mut().zip(requests) {
            let black = request.position().side_to_move() == Color::Black;
            let worse = Wdl {
                win: 0.45,
                draw: 0.0,
                loss: 0.55,
            };
            eval.wdl = if black { worse } else { worse.flipped() };
        }
        Ok(out)
    }
}

#[test]
fn a_draw_score_below_zero_turns_the_root_side_from_a_repetition() {
    // Ka10 is a draw (0), Ka8 goes on a little worse (-0.1).
    let g = black_to_repeat_a_third_time();
    let repeat = mv(g.position(), "a9a10");
    let search = |draw_score: f32| {
        let config = SearchConfig {
            draw_score,
            ..SearchConfig::default()
        };
        let mut s = Search::new(config, &g);
        s.run(&BlackWorseOnTheAFile, 200).unwrap();
        s
    };
    assert_eq!(search(0.0).best_move(), Some(repeat), "a draw beats -0.1");
    let s = search(-0.3);
    assert_ne!(s.best_move(), Some(repeat), "a draw at -0.3 does not");
    let draw = s
        .root_children()
        .into_iter()
        .find(|c| c.mv == repeat)
        .unwrap();
    assert!(draw.visits > 0 && (draw.q + 0.3).abs() < 1e-6, "{draw:?}");
    // The root's own estimate stays the plain W - L and D.
    assert!(s.root_wdl().value() >= -0.1 - 1e-6);
}

#[test]
fn noise_changes_priors_but_keeps_a_distribution() {
    let mut s = from_the_start(SearchConfig {
        dirichlet_epsilon: 0.25,
        ..SearchConfig::default()
    });
    let mut rng = SmallRng::seed_from_u64(3);
    s.add_root_noise(&UniformEvaluator, &mut rng).unwrap();
    let priors: Vec<f32> = s.root_children().iter().map(|c| c.prior).collect();
    assert!((priors.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    assert!(priors.iter().any(|&p| (p - 1.0 / 38.0).abs() > 1e-3));
}

#[test]
fn evaluator_errors_leave_the_tree_usable() {
    let mut s = from_the_start(SearchConfig::default());
    s.run(&UniformEvaluator, 50).unwrap();
    assert_eq!(s.run(&Broken, 50), Err(EvalError::Disconnected));
    s.run(&UniformEvaluator, 50).unwrap();
    assert_eq!(s.root_visits(), 100);
}

#[test]
fn temperature_zero_is_the_best_move() {
    let s = search(MATE_IN_ONE, &UniformEvaluator, 300);
    let mut rng = SmallRng::seed_from_u64(1);
    assert_eq!(s.choose_move(0.0, &mut rng), s.best_move());
    let picked = s.choose_move(1.0, &mut rng).unwrap();
    assert!(s.root_position().is_legal(picked));
    assert_eq!(s.pv().first().copied(), s.best_move());
}

#[test]
fn a_leaf_with_a_winning_move_is_a_certain_win() {
    // The root itself: one playout expands it without asking the evaluator.
    let s = search(MATE_IN_ONE, &Broken, 1);
    assert_eq!(s.root_wdl().win, 1.0);
    assert_eq!(s.evaluations(), 0);
    assert_eq!(s.best_move(), Some(mv(s.root_position(), "k1k10")));

    // Rk1 allows ...Rxk1#: one visit scores it a certain loss, though the
    // evaluator calls every position a draw.
    // An optimistic first-play urgency makes the search try every move once.
    let fen = "9k/9r/10/10/10/10/10/10/PP8/K1R7 w - - 0 17";
    let every_move_once = SearchConfig {
        fpu_reduction: -10.0,
        leaves_in_flight: 1,
        ..SearchConfig::default()
    };
    let mut s = Search::new(every_move_once, &game(fen));
    let moves = s.root_position().legal_moves().len() as u32;
    s.run(&Ranked, moves + 1).unwrap();
    let blunder = mv(s.root_position(), "c1k1");
    let child = s
        .root_children()
        .into_iter()
        .find(|c| c.mv == blunder)
        .unwrap();
    assert_eq!((child.visits, child.q), (1, -1.0));
}

#[test]
fn win_check_finds_a_king_quota_win() {
    // Black must move its king at its move 10; a bishop move to the c4-i10
    // diagonal takes i10, its only square.
    let fen = "9k/8pp/10/10/10/10/10/1B8/10/K9 w - - 0 10 K -";
    let s = search(fen, &Ranked, 16);
    let after = s.root_position().after(s.best_move().unwrap());
    assert_eq!(
        after.outcome_without_moves().map(|o| o.reason),
        Some(crate::game::Reason::KingQuota)
    );
}

#[test]
fn win_check_avoids_a_move_into_mate_with_few_playouts() {
    // Ranked priors put the mate far down; the win check finds it anyway.
    assert_avoids_a_move_into_mate(&Ranked, 400);
}

#[test]
fn without_win_check_the_priors_decide() {
    let fen = MATE_IN_ONE;
    let config = SearchConfig {
        win_check: false,
        ..SearchConfig::default()
    };
    let s = search_with(config, fen, &Ranked, 2);
    let mate = mv(s.root_position(), "k1k10");
    let prior = |s: &Search| {
        s.root_children()
            .iter()
            .find(|c| c.mv == mate)
            .unwrap()
            .prior
    };
    assert!(prior(&s) < 0.1);
    assert_eq!(prior(&search(fen, &Ranked, 2)), 1.0);
}

/// Material values, but a capture gets a hundredth of another move's prior:
/// a network that has learnt to overlook captures.
struct CaptureShy;

impl Evaluator for CaptureShy {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let mut out = Material.evaluate_batch(requests)?;
        for (eval, request) in out.iter_mut().zip(requests) {
            let pos = request.position();
            let weights: Vec<f32> = request
                .moves
                .iter()
                .map(|m| {
                    if pos.piece_at(m.to).is_some() {
                        0.01
                    } else {
                        1.0
                    }
                })
                .collect();
            let total: f32 = weights.iter().sum();
            eval.policy = weights.iter().map(|w| w / total).collect();
        }
        Ok(out)
    }
}

/// The network's priors alone.
fn priors_only() -> SearchConfig {
    SearchConfig {
        capture_prior: 0.0,
        ..SearchConfig::default()
    }
}

/// Searches of the start position with one leaf in flight and the network's
/// priors alone, without and with forced playouts.
fn plain_and_forced(evaluator: &dyn Evaluator, playouts: u32) -> (Search, Search) {
    let one_leaf = SearchConfig {
        leaves_in_flight: 1,
        ..priors_only()
    };
    let fen = crate::position::START_FEN;
    let plain = search_with(one_leaf, fen, evaluator, playouts);
    let mut forced = Search::new(one_leaf, &game(fen));
    forced.set_forced_playouts(true);
    forced.run(evaluator, playouts).unwrap();
    (plain, forced)
}

const FREE_ROOK: &str = "9k/10/10/3r6/10/10/10/3Q6/10/K9 w - - 0 17";

#[test]
fn forced_playouts_give_each_move_its_share_and_the_target_prunes_them() {
    // Ranked priors; PUCT visits a knight move about once and then leaves it.
    let (plain, forced) = plain_and_forced(&RankedKnightsBad, 400);
    assert_eq!(plain.policy_target(), visits(&plain), "nothing forced");
    let total = forced.root_visits() as f32;
    let children = forced.root_children();
    for c in children.iter().filter(|c| c.visits > 0) {
        // Each visited move reached its forced count, sqrt(2 P N), give or
        // take the visit in which N grew past it.
        assert!(
            c.visits as f32 + 1.0 >= (2.0 * c.prior * total).sqrt(),
            "{c:?}"
        );
    }
    assert!(visits(&forced).iter().sum::<u32>() == visits(&plain).iter().sum::<u32>());
    // A move PUCT visited once or twice got more than PUCT alone gives it...
    let plain_children = plain.root_children();
    let low = (0..children.len())
        .rev()
        .find(|&i| children[i].visits > plain_children[i].visits.max(1))
        .unwrap_or_else(|| panic!("{:?} {:?}", visits(&forced), visits(&plain)));
    // ...and the target takes the forced visits back: the best move keeps
    // its visits, no move gains any, and the low-prior moves lose theirs.
    let target = forced.policy_target();
    let best = (0..children.len())
        .max_by_key(|&i| children[i].visits)
        .unwrap();
    assert_eq!(target[best], children[best].visits);
    assert!(target.iter().zip(&children).all(|(&t, c)| t <= c.visits));
    assert!(target.iter().zip(&children).all(|(&t, _)| t != 1));
    let pruned: u32 = children.iter().map(|c| c.visits).sum::<u32>() - target.iter().sum::<u32>();
    assert!(pruned > 0);
    assert!(target[low] < children[low].visits, "{target:?}");
}

#[test]
fn capture_prior_finds_a_capture_the_priors_hide() {
    let s = search(FREE_ROOK, &CaptureShy, 100);
    let capture = mv(s.root_position(), "d3d7");
    assert_eq!(s.best_move(), Some(capture));
    let children = s.root_children();
    let captures: Vec<&ChildStats> = children
        .iter()
        .filter(|c| s.root_position().is_capture(c.mv))
        .collect();
    let share = SearchConfig::default().capture_prior;
    let mass: f32 = captures.iter().map(|c| c.prior).sum();
    assert!(mass >= share && mass < share + 0.01, "{mass}");
    let total: f32 = children.iter().map(|c| c.prior).sum();
    assert!((total - 1.0).abs() < 1e-5, "{total}");
}

/// [`CaptureShy`]'s priors with every position a draw: a capture that
/// shows nothing.
struct CaptureShyDrawn;

impl Evaluator for CaptureShyDrawn {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let mut out = CaptureShy.evaluate_batch(requests)?;
        for eval in &mut out {
            eval.wdl = Wdl::DRAW;
        }
        Ok(out)
    }
}

/// A search of `fen` with the network's priors alone and one leaf in
/// flight, with or without forced captures.
fn with_forced_captures(fen: &str, evaluator: &dyn Evaluator, playouts: u32, on: bool) -> Search {
    let mut s = Search::new(
        SearchConfig {
            leaves_in_flight: 1,
            ..priors_only()
        },
        &game(fen),
    );
    s.set_forced_playouts(true);
    s.set_forced_captures(on);
    s.run(evaluator, playouts).unwrap();
    s
}

#[test]
fn forced_captures_find_a_capture_the_priors_hide() {
    let capture = |s: &Search| {
        let mv = mv(s.root_position(), "d3d7");
        let i = s.root_children().iter().position(|c| c.mv == mv).unwrap();
        (mv, i)
    };
    // The free rook's prior is a four-thousandth: PUCT never looks at it.
    let plain = with_forced_captures(FREE_ROOK, &CaptureShy, 48, false);
    let (_, i) = capture(&plain);
    assert_eq!(plain.root_children()[i].visits, 0);
    // One visit shows it wins a rook, and PUCT takes it from there.
    let forced = with_forced_captures(FREE_ROOK, &CaptureShy, 48, true);
    let (mv, i) = capture(&forced);
    assert_eq!(forced.best_move(), Some(mv));
    let target = forced.policy_target();
    assert_eq!(target[i], forced.root_children()[i].visits);
    assert!(target[i] > target.iter().sum::<u32>() / 2, "{target:?}");
}

#[test]
fn forced_captures_that_show_nothing_leave_the_target() {
    let s = with_forced_captures(FREE_ROOK, &CaptureShyDrawn, 48, true);
    let pos = s.root_position();
    let target = s.policy_target();
    let children = s.root_children();
    let captures: Vec<usize> = (0..children.len())
        .filter(|&i| pos.is_capture(children[i].mv))
        .collect();
    assert!(!captures.is_empty());
    for i in captures {
        assert_eq!(children[i].visits, 1, "{:?}", children[i]);
        assert_eq!(target[i], 0, "{target:?}");
    }
    assert!(target.iter().zip(&children).all(|(&t, c)| t <= c.visits));
}

#[test]
fn policy_temperature_flattens_the_priors_the_search_uses() {
    let config = SearchConfig {
        policy_temperature: 2.0,
        ..priors_only()
    };
    let s = search_with(config, crate::position::START_FEN, &Ranked, 1);
    let priors: Vec<f32> = s.root_children().iter().map(|c| c.prior).collect();
    let total: f32 = ranked_priors(priors.len()).iter().map(|p| p.sqrt()).sum();
    for (prior, net) in priors.iter().zip(ranked_priors(priors.len())) {
        assert!((prior - net.sqrt() / total).abs() < 1e-6, "{prior} {net}");
    }
}

#[test]
fn capture_prior_leaves_quiet_positions_alone() {
    let config = SearchConfig {
        capture_prior: 0.5,
        ..SearchConfig::default()
    };
    let s = search_with(config, crate::position::START_FEN, &Ranked, 1);
    let priors: Vec<f32> = s.root_children().iter().map(|c| c.prior).collect();
    assert_eq!(priors, ranked_priors(priors.len()));
}

#[test]
fn forced_playouts_leave_the_moves_puct_never_visits_alone() {
    // 48 playouts over the start's 38 moves: forcing every move would visit
    // each once; forcing only what PUCT visits leaves PUCT the choice.
    let (plain, forced) = plain_and_forced(&Ranked, 48);
    let visited = |s: &Search| visits(s).iter().filter(|&&v| v > 0).count();
    assert!(visited(&plain) < plain.root_children().len() / 2);
    assert!(visited(&forced) <= visited(&plain), "{:?}", visits(&forced));
}

#[test]
fn a_noised_root_lets_puct_try_the_moves_the_noise_lifts() {
    // Root moves visited by 48 playouts from the start, all values drawn,
    // with the noise of one seed (or none) and the reduction at a noised root.
    let visited = |epsilon: f32, noised_root_fpu_reduction: f32| {
        let mut s = from_the_start(SearchConfig {
            leaves_in_flight: 1,
            dirichlet_epsilon: epsilon,
            noised_root_fpu_reduction,
            ..priors_only()
        });
        s.add_root_noise(&Ranked, &mut SmallRng::seed_from_u64(5))
            .unwrap();
        s.run(&Ranked, 48).unwrap();
        visits(&s).iter().filter(|&&v| v > 0).count()
    };
    let reduced = SearchConfig::default().fpu_reduction;
    assert!(visited(0.25, 0.0) > visited(0.25, reduced));
    // A root without noise (a fast search, or play) keeps the reduction.
    assert_eq!(visited(0.0, 0.0), visited(0.0, reduced));
}

#[test]
fn a_root_reached_by_a_move_is_not_noised() {
    // A reduction of -10 at a noised root tries every move before any twice.
    let mut s = from_the_start(SearchConfig {
        leaves_in_flight: 1,
        dirichlet_epsilon: 0.25,
        noised_root_fpu_reduction: -10.0,
        ..priors_only()
    });
    s.add_root_noise(&Ranked, &mut SmallRng::seed_from_u64(5))
        .unwrap();
    let moves = s.root_children().len() as u32;
    s.run(&Ranked, moves).unwrap();
    assert!(visits(&s).iter().all(|&v| v == 1), "{:?}", visits(&s));
    // The root after a move has no noise: the usual reduction leaves most
    // of the reply moves untried.
    s.advance(s.best_move().unwrap());
    s.run(&Ranked, moves).unwrap();
    assert!(visits(&s).contains(&0), "{:?}", visits(&s));
}

#[test]
fn forced_visits_stay_in_the_target_when_nothing_else_is_left() {
    // The root's expansion and one child visit: the best move has a single
    // visit, which pruning would leave at nothing.
    let mut s = from_the_start(SearchConfig {
        leaves_in_flight: 1,
        ..SearchConfig::default()
    });
    s.set_forced_playouts(true);
    s.run(&Ranked, 2).unwrap();
    assert_eq!(visits(&s).iter().sum::<u32>(), 1);
    assert_eq!(s.policy_target(), visits(&s));
}

fn visits(s: &Search) -> Vec<u32> {
    s.root_children().iter().map(|c| c.visits).collect()
}

#[test]
fn a_root_without_the_capture_prior_keeps_the_evaluators_priors() {
    let capture_mass = |s: &Search| -> f32 {
        s.root_children()
            .iter()
            .filter(|c| s.root_position().is_capture(c.mv))
            .map(|c| c.prior)
            .sum()
    };
    let net_mass = {
        let s = search_with(priors_only(), FREE_ROOK, &CaptureShy, 1);
        capture_mass(&s)
    };
    assert!(net_mass < 0.01, "{net_mass}");

    // Off from the start: the root is expanded with the evaluator's priors.
    let mut s = Search::new(SearchConfig::default(), &game(FREE_ROOK));
    s.set_root_capture_prior(false);
    s.run(&CaptureShy, 1).unwrap();
    assert!((capture_mass(&s) - net_mass).abs() < 1e-6);
    // On again: shaped as every other node; off: restored.
    s.set_root_capture_prior(true);
    assert!(capture_mass(&s) >= SearchConfig::default().capture_prior);
    s.set_root_capture_prior(false);
    assert!((capture_mass(&s) - net_mass).abs() < 1e-6);

    // A root that was a shaped child before the move keeps its shaping only
    // while the heuristic is on.
    let mut s = Search::new(SearchConfig::default(), &game(FREE_ROOK));
    s.run(&CaptureShy, 200).unwrap();
    let reply = s.best_move().unwrap();
    s.advance(reply);
    let children = s.root_children();
    let shaped: Vec<f32> = children.iter().map(|c| c.prior).collect();
    s.set_root_capture_prior(false);
    let restored: Vec<f32> = s.root_children().iter().map(|c| c.prior).collect();
    let captures = children
        .iter()
        .filter(|c| s.root_position().is_capture(c.mv))
        .count();
    if captures > 0 {
        assert_ne!(shaped, restored);
    }
    let total: f32 = restored.iter().sum();
    assert!((total - 1.0).abs() < 1e-4, "{total}");
}

fn gumbel_root() -> SearchConfig {
    SearchConfig {
        root: RootSearch::Gumbel,
        ..priors_only()
    }
}

/// Visits of each root move in generation order.
fn new_visits(before: &[u32], s: &Search) -> Vec<u32> {
    visits(s).iter().zip(before).map(|(a, b)| a - b).collect()
}

#[test]
fn gumbel_halving_visits_the_top_priors_on_the_schedule() {
    // Ranked priors, every value a draw, no noise: Gumbel-top-k is the top
    // k priors, and each round keeps the better half of them.
    for leaves in [1, 8] {
        let config = SearchConfig {
            leaves_in_flight: leaves,
            ..gumbel_root()
        };
        let mut s = from_the_start(config);
        s.run(&Ranked, 1).unwrap();
        let before = visits(&s);
        s.run(&Ranked, 48).unwrap();
        let got = new_visits(&before, &s);
        // 16 moves once, the best 8 once more, the best 4 three times more,
        // the best 2 six times more: 48 in all (mctx's schedule).
        let mut want = vec![0; got.len()];
        for (i, w) in want.iter_mut().enumerate().take(16) {
            *w = match i {
                0..2 => 11,
                2..4 => 5,
                4..8 => 2,
                _ => 1,
            };
        }
        assert_eq!(got, want, "leaves in flight {leaves}");
        assert_eq!(s.best_move(), Some(s.root_children()[0].mv));
    }
}

#[test]
fn gumbel_finds_what_the_priors_hide_with_few_playouts() {
    // The capture has a hundredth of a quiet move's prior, so PUCT's few
    // visits follow the priors. Considering every move, halving visits it
    // once and keeps it on its value.
    let every_move = SearchConfig {
        gumbel_considered: 64,
        ..gumbel_root()
    };
    let s = search_with(every_move, FREE_ROOK, &CaptureShy, 64);
    let capture = mv(s.root_position(), "d3d7");
    assert_eq!(s.best_move(), Some(capture));
    assert_eq!(s.pv()[0], capture);
    assert_eq!(s.ranked_root_children()[0].mv, capture);
    // The improved policy puts the most weight on it, and sums to the scale.
    let target = s.policy_target();
    let children = s.root_children();
    let best = (0..target.len()).max_by_key(|&i| target[i]).unwrap();
    assert_eq!(children[best].mv, capture);
    let total: u32 = target.iter().sum();
    assert!(total.abs_diff(GUMBEL_TARGET_SCALE as u32) <= target.len() as u32);

    let mate = search_with(gumbel_root(), MATE_IN_ONE, &Ranked, 16);
    assert_eq!(mate.best_move(), Some(mv(mate.root_position(), "k1k10")));
    assert_avoids_a_move_into_mate_with(gumbel_root(), &Material, 64);
}

#[test]
fn gumbel_noise_makes_the_choice_a_sample() {
    // Uniform priors and equal values: without noise the first move of the
    // list; with noise, moves drawn all over the list.
    let quiet = search_with(
        gumbel_root(),
        crate::position::START_FEN,
        &UniformEvaluator,
        32,
    );
    assert_eq!(quiet.best_move(), Some(quiet.root_children()[0].mv));
    let mut chosen = std::collections::HashSet::new();
    for seed in 0..20 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut s = from_the_start(gumbel_root());
        s.add_root_noise(&UniformEvaluator, &mut rng).unwrap();
        s.run(&UniformEvaluator, 32).unwrap();
        chosen.insert(s.best_move().unwrap());
        // The target stays the improved policy: noise does not enter it.
        let target = s.policy_target();
        assert!(target.iter().all(|&w| w == target[0]), "{target:?}");
    }
    assert!(chosen.len() >= 10, "{} moves in 20 draws", chosen.len());
}

#[test]
fn gumbel_counts_only_the_visits_of_this_search_after_a_move() {
    let mut s = from_the_start(gumbel_root());
    s.run(&Ranked, 200).unwrap();
    let reply = s.best_move().unwrap();
    s.advance(reply);
    let before = visits(&s);
    assert!(
        before.iter().sum::<u32>() > 0,
        "the kept subtree has visits"
    );
    s.run(&Ranked, 48).unwrap();
    let mut got = new_visits(&before, &s);
    got.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(
        &got[..16],
        &[11, 11, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    );
    // A search past its plan keeps refining the last two moves.
    let before = visits(&s);
    s.run(&Ranked, 6).unwrap();
    let more = new_visits(&before, &s);
    assert_eq!(more.iter().sum::<u32>(), 6);
}

/// Uniform priors, a value of `white` for White to move (its negation for
/// Black), and a game expected to end 10 plies sooner for each White knight
/// that has left the first rank.
struct KnightsHurry {
    white: f32,
}

impl Evaluator for KnightsHurry {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let mut out = UniformEvaluator.evaluate_batch(requests)?;
        for (eval, request) in out.iter_mut().zip(requests) {
            let pos = request.position();
            let value = match pos.side_to_move() {
                Color::White => self.white,
                Color::Black => -self.white,
            };
            let home = pos.pieces(Color::White, Kind::Knight) & crate::Bitboard::rank(0);
            eval.wdl = Wdl::from_value(value);
            eval.moves_left = request
                .moves_left
                .then(|| 60.0 + 10.0 * home.count() as f32);
        }
        Ok(out)
    }
}

/// The share of the root's visits that went to knight moves, and the share
/// of the root's moves that are knight moves.
fn knight_shares(config: SearchConfig, white: f32) -> (f32, f32) {
    let mut s = from_the_start(config);
    s.run(&KnightsHurry { white }, 1000).unwrap();
    let pos = *s.root_position();
    let children = s.root_children();
    let knight = |c: &ChildStats| pos.piece_at(c.mv.from).map(|p| p.kind) == Some(Kind::Knight);
    let total: u32 = children.iter().map(|c| c.visits).sum();
    let knights: u32 = children
        .iter()
        .filter(|c| knight(c))
        .map(|c| c.visits)
        .sum();
    let count = children.iter().filter(|c| knight(c)).count();
    (
        knights as f32 / total as f32,
        count as f32 / children.len() as f32,
    )
}

#[test]
fn moves_left_utility_hurries_a_win_and_delays_a_loss() {
    let on = SearchConfig {
        moves_left_effect: 0.1,
        moves_left_slope: 0.01,
        fpu_reduction: 0.0,
        ..priors_only()
    };
    let off = SearchConfig {
        moves_left_effect: 0.0,
        ..on
    };
    // Off, the equal values and priors spread the visits evenly.
    for white in [0.8, -0.8] {
        let (visits, moves) = knight_shares(off, white);
        assert!(
            (visits - moves).abs() < 0.05,
            "off, {white}: {visits} vs {moves}"
        );
    }
    // Winning, the knight moves that shorten the game get most visits...
    let (visits, moves) = knight_shares(on, 0.8);
    assert!(
        visits > 0.5 && visits > 2.0 * moves,
        "winning: {visits} vs {moves}"
    );
    // ...losing, the others do.
    let (visits, moves) = knight_shares(on, -0.8);
    assert!(visits < 0.5 * moves, "losing: {visits} vs {moves}");
    // A level game has no preference.
    let (visits, moves) = knight_shares(on, 0.0);
    assert!((visits - moves).abs() < 0.05, "level: {visits} vs {moves}");
}
