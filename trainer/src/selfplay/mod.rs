//! Self-play: one game at a time per worker thread, its searches sending
//! leaves to the shared inference server. Playout-cap randomisation,
//! resignation with a no-resign share, and a game-length cap.

pub mod bootstrap;
pub mod data;
pub mod resign;
pub mod starts;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use engine::mcts::{Search, SearchConfig};
use engine::players::player_from_spec;
use engine::{
    check, non_negative, within, Color, EvalError, Evaluator, Game, InvalidKey, Outcome, Position,
    Reason,
};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::selfplay::data::{Baseline, GameRecord, MoveRecord};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Adjudication {
    /// A game reaching the length cap is a draw.
    Draw,
    /// ...is won by the side ahead by at least `material_margin` pawns.
    Material,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfPlayConfig {
    /// Worker threads, each playing one game at a time (keep batches full:
    /// workers x search.leaves_in_flight should reach inference.max_batch).
    pub workers: usize,
    /// Playouts of a full search (its visits become a policy target).
    pub playouts: u32,
    /// Playouts of a fast search (not recorded as a policy target).
    pub fast_playouts: u32,
    /// Share of moves searched fully.
    pub full_search_share: f64,
    /// In full searches, KataGo's forced playouts with policy target pruning
    /// ([`engine::mcts::Search::set_forced_playouts`]).
    pub forced_playouts: bool,
    /// In full searches, one visit for every root capture before PUCT
    /// chooses, pruned from the target unless PUCT adds more
    /// ([`engine::mcts::Search::set_forced_captures`]).
    pub forced_captures: bool,
    /// Moves are drawn with this temperature for the first `temperature_plies`
    /// plies of every game, fast searches' moves too (so games differ from
    /// the start)...
    pub temperature: f32,
    pub temperature_plies: usize,
    /// Share of games that start from the start position with pieces taken
    /// off at random ([`starts::sparse_start`]): short games the rules
    /// decide, so that young networks meet mates and true results.
    pub sparse_start_share: f64,
    /// The range each side's keep chance for its non-king pieces is drawn
    /// from in a sparse start, `[low, high]`.
    pub sparse_keep: [f64; 2],
    /// Share of games in which one side, drawn at random, is a fixed
    /// baseline player instead of the network: its moves are no training
    /// samples, but the network's positions learn the results of a game
    /// against an opponent that takes what is hung...
    pub baseline_share: f64,
    /// ...drawn for each such game from these: random, greedy or
    /// alphabeta:DEPTH.
    pub baselines: Vec<String>,
    /// `[search] capture_prior` fades linearly to zero over this many
    /// training steps (0 = it stays): a crutch for a young network that a
    /// trained one should not lean on. It never shapes the root of a full
    /// search, whose visits become policy targets.
    pub capture_prior_anneal_steps: u64,
    /// Root value (for the side to move) at or below which a side resigns...
    pub resign_threshold: f32,
    /// ...after this many of its own full searches in a row.
    pub resign_consecutive: usize,
    /// Share of games played out without resigning, to measure false resignations.
    pub no_resign_share: f64,
    /// Above 0, the threshold is calibrated on the no-resign games to keep
    /// the share of would-be resignations that were wrong at or below this,
    /// `resign_threshold` being the highest it may go ([`resign::Calibration`]).
    pub resign_false_positive_target: f64,
    /// Plies after which a game is adjudicated.
    pub max_plies: usize,
    pub adjudication: Adjudication,
    pub material_margin: i32,
}

impl SelfPlayConfig {
    pub fn validate(&self) -> Result<(), InvalidKey> {
        within("workers", self.workers, 1, 100_000)?;
        check(self.playouts >= 1, "playouts", || {
            "must be at least 1".into()
        })?;
        check(self.fast_playouts >= 1, "fast_playouts", || {
            "must be at least 1".into()
        })?;
        check(
            self.full_search_share > 0.0 && self.full_search_share <= 1.0,
            "full_search_share",
            || format!("{} (expected 0 < share <= 1)", self.full_search_share),
        )?;
        non_negative("temperature", self.temperature)?;
        within("sparse_start_share", self.sparse_start_share, 0.0, 1.0)?;
        let [low, high] = self.sparse_keep;
        check(
            (0.0..=high).contains(&low) && high <= 1.0,
            "sparse_keep",
            || format!("[{low}, {high}] (expected 0 <= low <= high <= 1)"),
        )?;
        within("baseline_share", self.baseline_share, 0.0, 1.0)?;
        engine::players::check_specs("baselines", &self.baselines)?;
        check(
            self.baseline_share == 0.0 || !self.baselines.is_empty(),
            "baselines",
            || "empty, but baseline_share is above 0".into(),
        )?;
        within("resign_threshold", self.resign_threshold, -1.0, 1.0)?;
        check(self.resign_consecutive >= 1, "resign_consecutive", || {
            "must be at least 1".into()
        })?;
        within("no_resign_share", self.no_resign_share, 0.0, 1.0)?;
        within(
            "resign_false_positive_target",
            self.resign_false_positive_target,
            0.0,
            1.0,
        )?;
        check(self.max_plies >= 1, "max_plies", || {
            "must be at least 1".into()
        })?;
        check(self.material_margin >= 1, "material_margin", || {
            format!("{} (expected at least 1 pawn)", self.material_margin)
        })
    }
}

/// What a finished game tells the logs besides its record.
#[derive(Clone, Debug, Default)]
pub struct GameStats {
    pub plies: usize,
    /// Positions where rule 5 left only king moves.
    pub king_forced: u64,
    /// Positions where rule 6 banned a kind.
    pub kind_banned: u64,
    /// The threshold the game was played with.
    pub resign_threshold: f32,
    /// A no-resign game in which a side would have resigned...
    pub would_resign: Option<Color>,
    /// ...and then did not lose.
    pub false_resign: bool,
    /// In a no-resign game, the lowest threshold at which each side would
    /// have resigned ([`resign::Streak::point`]), for the calibration.
    pub resign_points: Option<[Option<f32>; 2]>,
    /// The game ended by resignation...
    pub resigned: bool,
    /// ...or at the length cap.
    pub capped: bool,
    /// It began from a sparse start.
    pub sparse: bool,
    /// The position's key after 10 plies, if the game got that far: the
    /// share of distinct ones measures how much games differ.
    pub key_at_ply10: Option<u64>,
}

/// Ply at which [`GameStats::key_at_ply10`] is taken.
pub const DIVERSITY_PLY: usize = 10;

impl SelfPlayConfig {
    /// The capture prior self-play searches with after `step` training steps.
    pub fn capture_prior_at(&self, base: f32, step: u64) -> f32 {
        match self.capture_prior_anneal_steps {
            0 => base,
            n => base * (1.0 - step as f32 / n as f32).max(0.0),
        }
    }
}

fn adjudicate(config: &SelfPlayConfig, pos: &Position) -> Outcome {
    // The engine's one material scale, in centipawns.
    let lead = engine::players::material_balance(pos, Color::White);
    let margin = config.material_margin * 100;
    match config.adjudication {
        Adjudication::Material if lead >= margin => {
            Outcome::win(Color::White, Reason::Adjudication)
        }
        Adjudication::Material if -lead >= margin => {
            Outcome::win(Color::Black, Reason::Adjudication)
        }
        _ => Outcome::draw(Reason::Adjudication),
    }
}

/// Work done by self-play's workers as it happens, the games still running
/// included: rates taken from finished games alone miss the long games in
/// progress, which with hundreds of workers on a GPU is most of the work.
#[derive(Debug, Default)]
pub struct Throughput {
    /// Positions the searches evaluated.
    pub nodes: AtomicU64,
    /// Moves played.
    pub plies: AtomicU64,
}

/// Plays one game from the start position, or a sparse start for a
/// `sparse_start_share` of games, adding its work to `throughput` move by move.
/// A side resigns at `resign_threshold` (the config's, or its calibration).
pub fn play_game(
    config: &SelfPlayConfig,
    search_config: &SearchConfig,
    resign_threshold: f32,
    evaluator: &dyn Evaluator,
    network: u32,
    throughput: &Throughput,
    rng: &mut SmallRng,
) -> Result<(GameRecord, GameStats), EvalError> {
    // No draw at a share of 0, so that such runs replay as before it existed.
    let sparse = config.sparse_start_share > 0.0 && rng.random_bool(config.sparse_start_share);
    let start = if sparse {
        starts::sparse_start(config.sparse_keep, rng)
    } else {
        Position::start()
    };
    // Likewise no draw at a share of 0.
    let mut baseline = (config.baseline_share > 0.0 && rng.random_bool(config.baseline_share))
        .then(|| {
            let spec = config
                .baselines
                .choose(rng)
                .expect("validate() keeps baselines non-empty when they are used");
            let side = if rng.random_bool(0.5) {
                Color::White
            } else {
                Color::Black
            };
            let player = player_from_spec(spec, rng.random()).expect("validate() checked it");
            let record = Baseline {
                side,
                spec: spec.clone(),
            };
            (record, player)
        });
    let mut game = Game::new(start);
    let mut search = Search::new(*search_config, &game);
    let mut moves = Vec::new();
    let mut stats = GameStats {
        sparse,
        resign_threshold,
        ..GameStats::default()
    };
    let may_resign = !rng.random_bool(config.no_resign_share);
    let mut streaks = [(); 2].map(|_| resign::Streak::new(config.resign_consecutive));
    let outcome = loop {
        if let Some(outcome) = game.outcome() {
            break outcome;
        }
        if moves.len() >= config.max_plies {
            stats.capped = true;
            break adjudicate(config, game.position());
        }
        let pos = *game.position();
        let us = pos.side_to_move();
        stats.king_forced += pos.must_move_king(us) as u64;
        stats.kind_banned += pos.banned_kind(us).is_some() as u64;

        if moves.len() == DIVERSITY_PLY {
            stats.key_at_ply10 = Some(pos.key());
        }
        if let Some((_, player)) = baseline.as_mut().filter(|(b, _)| b.side == us) {
            // Not searched: no policy target, and no search value to learn.
            let mv = player.choose(&game);
            moves.push(MoveRecord {
                mv,
                visits: Vec::new(),
                search_value: 0.0,
            });
            game.play_unchecked(mv);
            search.advance(mv);
            throughput.plies.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let full = rng.random_bool(config.full_search_share);
        let before = search.evaluations();
        search.set_forced_playouts(full && config.forced_playouts);
        search.set_forced_captures(full && config.forced_captures);
        // A full search's visits become the policy target: no heuristic at
        // its root, then the noise. Each search adds its playouts to what
        // the kept subtree already holds.
        search.set_root_capture_prior(!full);
        if full {
            search.add_root_noise(evaluator, rng)?;
            search.run(evaluator, config.playouts)?;
        } else {
            search.run(evaluator, config.fast_playouts)?;
        }
        throughput
            .nodes
            .fetch_add(search.evaluations() - before, Ordering::Relaxed);
        let value = search.root_wdl().value();

        if full {
            let high = streaks[us.index()].push(value);
            if high.is_some_and(|high| high <= resign_threshold) {
                if may_resign {
                    stats.resigned = true;
                    break Outcome::win(!us, Reason::Resignation);
                }
                stats.would_resign.get_or_insert(us);
            }
        }
        let temperature = if moves.len() < config.temperature_plies {
            config.temperature
        } else {
            0.0
        };
        let mv = search
            .choose_move(temperature, rng)
            .expect("a game that is not over has a move");
        let visits = if full {
            search.policy_target()
        } else {
            Vec::new()
        };
        moves.push(MoveRecord {
            mv,
            visits,
            search_value: value,
        });
        game.play_unchecked(mv);
        search.advance(mv);
        throughput.plies.fetch_add(1, Ordering::Relaxed);
    };
    stats.plies = moves.len();
    stats.false_resign = stats
        .would_resign
        .is_some_and(|c| outcome.winner != Some(!c));
    if !may_resign {
        stats.resign_points = Some(streaks.map(|s| s.point()));
    }
    let record = GameRecord {
        start,
        moves,
        outcome,
        network,
        baseline: baseline.map(|(record, _)| record),
    };
    Ok((record, stats))
}

/// A finished game from a worker.
pub struct Finished {
    pub record: GameRecord,
    pub stats: GameStats,
}

/// Runs `config.workers` threads of self-play until `stop` is set, sending
/// each finished game over `games`. A game in progress ends with the stop
/// only when the evaluator stops answering (shut the server down to cut it).
/// `train_step` (the trainer's progress) anneals the capture prior, and
/// `throughput` counts the work as it is done.
#[allow(clippy::too_many_arguments)]
pub fn run_workers(
    config: &SelfPlayConfig,
    search_config: &SearchConfig,
    evaluator: &(dyn Evaluator + Sync),
    network: &AtomicU32,
    train_step: &AtomicU64,
    throughput: &Throughput,
    stop: &AtomicBool,
    seed: u64,
    games: Sender<Finished>,
) -> Result<(), EvalError> {
    let failure: Arc<Mutex<Option<EvalError>>> = Arc::default();
    let calibration = Mutex::new(resign::Calibration::new(
        config.resign_threshold,
        config.resign_false_positive_target,
    ));
    let calibration = &calibration;
    std::thread::scope(|scope| {
        for worker in 0..config.workers {
            let games = games.clone();
            let failure = Arc::clone(&failure);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((worker as u64) << 32));
                while !stop.load(Ordering::Relaxed) {
                    let id = network.load(Ordering::Relaxed);
                    let search_config = SearchConfig {
                        capture_prior: config.capture_prior_at(
                            search_config.capture_prior,
                            train_step.load(Ordering::Relaxed),
                        ),
                        ..*search_config
                    };
                    let threshold = calibration.lock().expect("calibration lock").threshold();
                    match play_game(
                        config,
                        &search_config,
                        threshold,
                        evaluator,
                        id,
                        throughput,
                        &mut rng,
                    ) {
                        Ok((record, stats)) => {
                            if let Some(points) = stats.resign_points {
                                calibration
                                    .lock()
                                    .expect("calibration lock")
                                    .record(points, record.outcome);
                            }
                            if games.send(Finished { record, stats }).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            // Errors after a stop are the server going away.
                            if !stop.load(Ordering::Relaxed) {
                                failure.lock().expect("failure lock").get_or_insert(e);
                                stop.store(true, Ordering::Relaxed);
                            }
                            return;
                        }
                    }
                }
            });
        }
    });
    let failure = failure.lock().expect("failure lock").take();
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::UniformEvaluator;

    fn config() -> SelfPlayConfig {
        SelfPlayConfig {
            workers: 1,
            playouts: 8,
            fast_playouts: 2,
            full_search_share: 0.5,
            forced_playouts: false,
            forced_captures: false,
            temperature: 1.0,
            temperature_plies: 10,
            sparse_start_share: 0.0,
            sparse_keep: [0.1, 0.7],
            baseline_share: 0.0,
            baselines: Vec::new(),
            capture_prior_anneal_steps: 0,
            resign_threshold: -0.95,
            resign_consecutive: 2,
            no_resign_share: 0.0,
            resign_false_positive_target: 0.0,
            max_plies: 60,
            adjudication: Adjudication::Draw,
            material_margin: 3,
        }
    }

    #[test]
    fn a_game_replays_to_its_outcome() {
        let variants = [
            (false, false, 0.0),
            (true, false, 0.0),
            (true, true, 0.0),
            (false, false, 1.0),
        ];
        for (forced_playouts, forced_captures, sparse_start_share) in variants {
            let config = SelfPlayConfig {
                forced_playouts,
                forced_captures,
                sparse_start_share,
                ..config()
            };
            let mut rng = SmallRng::seed_from_u64(5);
            let throughput = Throughput::default();
            let (record, stats) = play_game(
                &config,
                &SearchConfig::default(),
                config.resign_threshold,
                &UniformEvaluator,
                3,
                &throughput,
                &mut rng,
            )
            .unwrap();
            assert_eq!(record.network, 3);
            assert_eq!(stats.plies, record.moves.len());
            assert_eq!(stats.sparse, record.start != Position::start());
            assert_eq!(stats.sparse, sparse_start_share == 1.0);
            let mut game = Game::new(record.start);
            for m in &record.moves {
                let legal = game.position().legal_moves();
                assert!(m.visits.is_empty() || m.visits.len() == legal.len());
                assert!(m.visits.is_empty() || m.visits.iter().any(|&v| v > 0));
                game.play(m.mv).unwrap();
            }
            match game.outcome() {
                Some(outcome) => assert_eq!(outcome, record.outcome),
                None => assert!(matches!(
                    record.outcome.reason,
                    Reason::Adjudication | Reason::Resignation
                )),
            }
            assert!(record.moves.iter().any(|m| !m.visits.is_empty()));
            // The throughput counts this game's moves and evaluations.
            assert_eq!(
                throughput.plies.load(Ordering::Relaxed),
                record.moves.len() as u64
            );
            assert!(throughput.nodes.load(Ordering::Relaxed) > 0);
        }
    }

    #[test]
    fn a_baseline_plays_one_side_and_leaves_it_no_samples() {
        let config = SelfPlayConfig {
            baseline_share: 1.0,
            baselines: vec!["greedy".into()],
            full_search_share: 1.0,
            ..config()
        };
        let mut sides = Vec::new();
        for seed in 0..6 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let (record, _) = play_game(
                &config,
                &SearchConfig::default(),
                config.resign_threshold,
                &UniformEvaluator,
                0,
                &Throughput::default(),
                &mut rng,
            )
            .unwrap();
            let baseline = record.baseline.clone().expect("a baseline at share 1");
            assert_eq!(baseline.spec, "greedy");
            let side = baseline.side;
            sides.push(side);
            let mut pos = record.start;
            for (ply, m) in record.moves.iter().enumerate() {
                let ours = pos.side_to_move() != side;
                assert_eq!(record.by_baseline(ply), !ours);
                // Every network move is searched fully here, and no baseline move is.
                assert_eq!(m.visits.is_empty(), !ours);
                let greedy = |mv| engine::players::material_balance(&pos.after(mv), side);
                let legal = pos.legal_moves();
                let wins = legal
                    .iter()
                    .any(|&mv| pos.after(mv).outcome_without_moves().is_some());
                if !ours && !wins {
                    let best = legal.iter().map(|&mv| greedy(mv)).max();
                    assert_eq!(Some(greedy(m.mv)), best, "the baseline played greedily");
                }
                pos = pos.after(m.mv);
            }
        }
        assert!(sides.contains(&Color::White) && sides.contains(&Color::Black));
    }

    #[test]
    fn the_capture_prior_fades_with_training() {
        let config = SelfPlayConfig {
            capture_prior_anneal_steps: 1000,
            ..config()
        };
        assert_eq!(config.capture_prior_at(0.2, 0), 0.2);
        assert!((config.capture_prior_at(0.2, 250) - 0.15).abs() < 1e-6);
        assert_eq!(config.capture_prior_at(0.2, 1000), 0.0);
        assert_eq!(config.capture_prior_at(0.2, 5000), 0.0);
        assert_eq!(
            SelfPlayConfig::capture_prior_at(&self::config(), 0.2, 5000),
            0.2
        );
    }

    #[test]
    fn material_adjudication_favours_the_side_ahead() {
        let material = SelfPlayConfig {
            adjudication: Adjudication::Material,
            ..config()
        };
        let pos = Position::from_fen("k9/10/10/10/10/10/10/10/10/1QQ6K w - - 0 30").unwrap();
        assert_eq!(adjudicate(&material, &pos).winner, Some(Color::White));
        assert_eq!(adjudicate(&config(), &pos).winner, None);
    }

    #[test]
    fn a_side_resigns_at_its_threshold_and_no_resign_games_report_their_points() {
        let play = |no_resign_share, threshold| {
            let config = SelfPlayConfig {
                no_resign_share,
                full_search_share: 1.0,
                temperature_plies: 0,
                ..config()
            };
            let mut rng = SmallRng::seed_from_u64(9);
            play_game(
                &config,
                &SearchConfig::default(),
                threshold,
                &UniformEvaluator,
                0,
                &Throughput::default(),
                &mut rng,
            )
            .unwrap()
        };
        // At the highest threshold White resigns after its second search.
        let (record, stats) = play(0.0, 1.0);
        assert!(stats.resigned && stats.resign_points.is_none());
        assert_eq!(record.moves.len(), 2);
        assert_eq!(
            record.outcome,
            Outcome::win(Color::Black, Reason::Resignation)
        );
        // Played out, each side's point is the lowest of the highest values
        // of its two searches in a row, and a would-be resigner is counted.
        let (record, stats) = play(1.0, 1.0);
        assert!(!stats.resigned);
        assert_eq!(stats.would_resign, Some(Color::White));
        let points = stats.resign_points.unwrap();
        for color in [Color::White, Color::Black] {
            let values: Vec<f32> = record
                .moves
                .iter()
                .skip(color.index())
                .step_by(2)
                .map(|m| m.search_value)
                .collect();
            let expected = values
                .windows(2)
                .map(|w| w[0].max(w[1]))
                .min_by(f32::total_cmp);
            assert_eq!(points[color.index()], expected);
        }
    }

    #[test]
    fn workers_stop_when_asked() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let stop = AtomicBool::new(false);
        let network = AtomicU32::new(0);
        let step = AtomicU64::new(0);
        let throughput = Throughput::default();
        let config = SelfPlayConfig {
            workers: 2,
            max_plies: 20,
            ..config()
        };
        std::thread::scope(|scope| {
            let handle = scope.spawn(|| {
                run_workers(
                    &config,
                    &SearchConfig::default(),
                    &UniformEvaluator,
                    &network,
                    &step,
                    &throughput,
                    &stop,
                    1,
                    tx,
                )
            });
            let first = rx.recv().unwrap();
            assert!(first.stats.plies <= 20);
            assert!(throughput.plies.load(Ordering::Relaxed) >= first.stats.plies as u64);
            stop.store(true, Ordering::Relaxed);
            handle.join().unwrap().unwrap();
        });
    }
}
