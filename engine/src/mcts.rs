//! Monte Carlo tree search with PUCT, generic over an [`Evaluator`].
//!
//! One search keeps several leaves in flight with virtual loss, so a single
//! thread fills a batch for the evaluator. Terminal positions get exact values
//! from the rules (checkmate and `king-quota` lose; stalemate, threefold
//! repetition, the fifty-move rule and bare kings draw). After a move the
//! chosen subtree is kept. The root chooses its moves by PUCT or by Gumbel
//! sequential halving ([`RootSearch`]); every other node by PUCT.

use rand::Rng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

use crate::error::{check, non_negative, positive, within, InvalidKey};
use crate::eval::{EvalError, EvalRequest, Evaluator, Wdl};
use crate::game::Game;
use crate::position::{Move, Position};
use crate::search::MoveStats;

/// How the root of a search chooses the moves it visits, the move it plays
/// and the policy target it gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootSearch {
    /// PUCT as at every node; the most visited move; visits as the target
    /// (Dirichlet noise and forced playouts in self-play).
    #[default]
    Puct,
    /// Gumbel-top-k sampling of `gumbel_considered` moves and sequential
    /// halving over the playouts (Danihelka et al., ICLR 2022); the
    /// survivor with the best `g + logit + sigma(q)`; the completed-Q
    /// improved policy as the target. Made for a few playouts against many
    /// legal moves: it improves the policy where visit counts cannot.
    Gumbel,
}

impl std::str::FromStr for RootSearch {
    type Err = String;

    fn from_str(text: &str) -> Result<RootSearch, String> {
        match text {
            "puct" => Ok(RootSearch::Puct),
            "gumbel" => Ok(RootSearch::Gumbel),
            _ => Err(format!("`{text}` is not puct or gumbel")),
        }
    }
}

impl std::fmt::Display for RootSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RootSearch::Puct => "puct",
            RootSearch::Gumbel => "gumbel",
        })
    }
}

/// The policy temperatures a search accepts.
pub const POLICY_TEMPERATURES: std::ops::RangeInclusive<f32> = 0.1..=10.0;

/// The draw scores a search accepts: a draw is worth no more than a win.
pub const DRAW_SCORES: std::ops::RangeInclusive<f32> = -1.0..=1.0;

/// Search settings. [`SearchConfig::default`] is a plain search (a PUCT
/// root, no noise) and [`SearchConfig::play`] the play-time setting;
/// self-play's come from the `[search]` section of a run's config, every
/// key given there.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Exploration constant at the start...
    pub c_puct: f32,
    /// ...growing by `c_puct_factor * ln((N + c_puct_base + 1) / c_puct_base)` with parent visits N.
    pub c_puct_base: f32,
    pub c_puct_factor: f32,
    /// First-play urgency: unvisited children get the parent's value minus
    /// this times the square root of the visited children's prior mass.
    pub fpu_reduction: f32,
    /// The same at a root with Dirichlet noise (self-play's full searches).
    /// Leela Zero uses none there: the noise is meant to explore, and the
    /// reduction prices every move it lifts below every visited one, so
    /// that PUCT never tries it (and forced playouts top up only what PUCT
    /// has tried).
    pub noised_root_fpu_reduction: f32,
    /// Leaves one search keeps in flight (the evaluator's batch from one search).
    pub leaves_in_flight: usize,
    /// Each in-flight visit counts as this many lost visits while it waits.
    pub virtual_loss: f32,
    /// Dirichlet noise at the root: total concentration, divided among the legal moves...
    pub dirichlet_alpha_total: f32,
    /// ...and its weight against the priors (0 turns noise off).
    pub dirichlet_epsilon: f32,
    /// Positions of history passed to the evaluator (the current one included).
    pub history: usize,
    /// At each expansion, look one ply ahead for a move that wins at once
    /// (checkmate or a `king-quota` loss for the opponent), give it all of
    /// the node's prior and the node the exact value of a win: a few
    /// playouts then neither miss a mate in one nor walk into one, whatever
    /// the network says.
    pub win_check: bool,
    /// Share of each expanded node's prior moved onto its captures, spread
    /// evenly (0 = off): a young network's priors overlook captures, and a
    /// few playouts then miss both free pieces and the replies that punish
    /// a hung one.
    pub capture_prior: f32,
    /// The search's priors (PUCT's, and a Gumbel root's logits) are the
    /// evaluator's raised to 1 / this and renormalised (lc0's policy softmax
    /// temperature): above 1 flattens them, so that a move the network barely
    /// considers, such as a capture a young network has not learnt, still
    /// gets visits from a few playouts.
    pub policy_temperature: f32,
    /// How the root searches.
    pub root: RootSearch,
    /// Gumbel root: moves sampled for sequential halving (at most the legal ones)...
    pub gumbel_considered: usize,
    /// ...and the scale of the values against the logits:
    /// `sigma(q) = (gumbel_c_visit + max visits) * gumbel_c_scale * q`, with
    /// q rescaled to [0, 1] over the root's moves.
    pub gumbel_c_visit: f32,
    pub gumbel_c_scale: f32,
    /// lc0's moves-left utility: at most this much (0 = off) is added to a
    /// child's PUCT score, for ending the game sooner when its value says
    /// the mover wins and later when it says the mover loses...
    pub moves_left_effect: f32,
    /// ...`moves_left_slope` per ply the child's expected game length
    /// differs from its parent's, scaled by how sure the value is. Without
    /// it a won position is as good as a shorter win, and a search that
    /// sees every move winning does not hurry to mate. Needs an evaluator
    /// with a moves-left estimate (`[net] moves_left_head`); others get none.
    pub moves_left_slope: f32,
    /// What a draw is worth to the side to move at the root, in [-1, 1];
    /// the opponent's nodes count it the other way, so the tree stays
    /// zero-sum (lc0's draw score, `DrawScoreSideToMove`). It weighs every
    /// node's draw share, rules' draws and the evaluator's draw
    /// probabilities alike: a node's value is W - L + draw_score * D. Below
    /// 0 each side of a self-play game steers away from repetitions and
    /// dead positions, whose draws would otherwise fill the value targets.
    /// Node statistics stay plain W - L and D, so a subtree kept after a
    /// move is read from the new root side's point of view.
    pub draw_score: f32,
}

impl Default for SearchConfig {
    fn default() -> SearchConfig {
        SearchConfig {
            c_puct: 1.25,
            c_puct_base: 19652.0,
            c_puct_factor: 2.0,
            fpu_reduction: 0.25,
            noised_root_fpu_reduction: 0.0,
            leaves_in_flight: 8,
            virtual_loss: 1.0,
            dirichlet_alpha_total: 10.0,
            dirichlet_epsilon: 0.0,
            history: 8,
            win_check: true,
            capture_prior: 0.2,
            policy_temperature: 1.0,
            root: RootSearch::Puct,
            gumbel_considered: 16,
            gumbel_c_visit: 50.0,
            gumbel_c_scale: 0.1,
            moves_left_effect: 0.0,
            moves_left_slope: 0.0027,
            draw_score: 0.0,
        }
    }
}

impl SearchConfig {
    /// The play-time setting: the default with a Gumbel root. At 100
    /// playouts, with the same nets of 3 seeds, it scored 69.75% against
    /// greedy where the PUCT root scored 64.1% (network and search alone;
    /// more on every seed with the heuristics on: README, Status). Self-play
    /// with a Gumbel root learnt no faster, so only play uses it.
    pub fn play() -> SearchConfig {
        SearchConfig {
            root: RootSearch::Gumbel,
            ..SearchConfig::default()
        }
    }

    pub fn validate(&self) -> Result<(), InvalidKey> {
        positive("c_puct", self.c_puct)?;
        check(
            self.c_puct_base >= 1.0 && self.c_puct_base.is_finite(),
            "c_puct_base",
            || format!("{} (expected a number >= 1)", self.c_puct_base),
        )?;
        non_negative("c_puct_factor", self.c_puct_factor)?;
        check(self.fpu_reduction.is_finite(), "fpu_reduction", || {
            format!("{} (expected a number)", self.fpu_reduction)
        })?;
        check(
            self.noised_root_fpu_reduction.is_finite(),
            "noised_root_fpu_reduction",
            || format!("{} (expected a number)", self.noised_root_fpu_reduction),
        )?;
        within("leaves_in_flight", self.leaves_in_flight, 1, 4096)?;
        non_negative("virtual_loss", self.virtual_loss)?;
        positive("dirichlet_alpha_total", self.dirichlet_alpha_total)?;
        within("dirichlet_epsilon", self.dirichlet_epsilon, 0.0, 1.0)?;
        within("history", self.history, 1, 64)?;
        within("gumbel_considered", self.gumbel_considered, 1, 1024)?;
        non_negative("gumbel_c_visit", self.gumbel_c_visit)?;
        non_negative("gumbel_c_scale", self.gumbel_c_scale)?;
        within("moves_left_effect", self.moves_left_effect, 0.0, 1.0)?;
        within("moves_left_slope", self.moves_left_slope, 0.0, 1.0)?;
        within(
            "draw_score",
            self.draw_score,
            *DRAW_SCORES.start(),
            *DRAW_SCORES.end(),
        )?;
        within(
            "policy_temperature",
            self.policy_temperature,
            *POLICY_TEMPERATURES.start(),
            *POLICY_TEMPERATURES.end(),
        )?;
        check(
            (0.0..1.0).contains(&self.capture_prior),
            "capture_prior",
            || format!("{} (expected 0 <= capture_prior < 1)", self.capture_prior),
        )
    }
}

type NodeId = u32;

#[derive(Clone, Copy, Debug, PartialEq)]
enum NodeState {
    Unexpanded,
    /// Waiting for its evaluation.
    Pending,
    Expanded,
    /// Game over here; value for the side to move at this node.
    Terminal(f32),
}

#[derive(Clone, Debug)]
struct Node {
    mv: Option<Move>,
    /// The prior PUCT uses: the evaluator's, shaped by `capture_prior` and
    /// at the root by noise.
    prior: f32,
    /// The evaluator's prior (after the win check), kept so that a root can
    /// drop the shaping: see [`Search::set_root_capture_prior`].
    net_prior: f32,
    /// The evaluator's value of this node for its side to move, once
    /// expanded (Gumbel's completed q starts from the root's).
    net_value: f32,
    visits: u32,
    in_flight: u32,
    /// Sum of values from the view of the side that made `mv`.
    value_sum: f64,
    draw_sum: f64,
    /// Sum of the plies left until the game ends, from this node's position.
    moves_left_sum: f64,
    first_child: NodeId,
    child_count: u32,
    state: NodeState,
}

impl Node {
    fn new(mv: Option<Move>, prior: f32) -> Node {
        Node {
            mv,
            prior,
            net_prior: prior,
            net_value: 0.0,
            visits: 0,
            in_flight: 0,
            value_sum: 0.0,
            draw_sum: 0.0,
            moves_left_sum: 0.0,
            first_child: 0,
            child_count: 0,
            state: NodeState::Unexpanded,
        }
    }

    fn children(&self) -> std::ops::Range<usize> {
        self.first_child as usize..(self.first_child + self.child_count) as usize
    }

    /// Mean value for the side that made `mv` (nothing before a visit),
    /// its draws worth `draw_score` to that side.
    fn q(&self, draw_score: f32) -> Option<f32> {
        (self.visits > 0).then(|| {
            ((self.value_sum + draw_score as f64 * self.draw_sum) / self.visits as f64) as f32
        })
    }
}

/// Visit statistics of one root move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChildStats {
    pub mv: Move,
    pub visits: u32,
    pub prior: f32,
    /// Mean value for the side to move at the root, in [-1, 1], its draws
    /// worth [`SearchConfig::draw_score`] (NaN before a visit).
    pub q: f32,
}

impl From<ChildStats> for MoveStats {
    fn from(c: ChildStats) -> MoveStats {
        MoveStats {
            mv: c.mv,
            visits: c.visits,
            prior: c.prior,
            q: (!c.q.is_nan()).then_some(c.q),
        }
    }
}

/// A leaf waiting for its evaluation.
struct PendingLeaf {
    path: Vec<NodeId>,
    history: Vec<Position>,
    repetitions: u8,
    moves: Vec<Move>,
}

pub struct Search {
    config: SearchConfig,
    nodes: Vec<Node>,
    /// Game positions up to the root (the last `history` ones).
    history: Vec<Position>,
    /// Repetition keys since the last irreversible move, root included.
    keys: Vec<u64>,
    /// Evaluations requested so far (for nodes/s).
    evaluations: u64,
    /// KataGo's forced playouts at the root, pruned from the policy target.
    forced_playouts: bool,
    /// One visit for every root capture before PUCT chooses, pruned from the
    /// policy target unless PUCT adds more.
    forced_captures: bool,
    /// Whether `capture_prior` shapes the root's priors.
    root_capture_prior: bool,
    /// Whether Dirichlet noise is on the root's priors (until the next move).
    root_noised: bool,
    /// Gumbel root: a Gumbel draw per root child, from
    /// [`Search::add_root_noise`] (none: zeros)...
    gumbel_noise: Vec<f32>,
    /// ...the playouts asked for by [`Search::plan`] and the root's visits then...
    planned: Option<(u32, u32)>,
    /// ...and the halving under way, set up at the first root choice.
    halving: Option<Halving>,
    /// Whether the evaluator has given moves-left estimates: the
    /// moves-left utility counts only then.
    moves_left_known: bool,
}

/// A Gumbel root's sequential halving over one search.
struct Halving {
    /// Moves considered (at most the root's children).
    considered: usize,
    /// Simulations planned: they set each round's visits.
    planned: u32,
    /// Each root child's visits when the halving began: it counts new ones.
    base: Vec<u32>,
}

const ROOT: NodeId = 0;

impl Search {
    /// A search from the current position of `game`, which must not be over.
    pub fn new(config: SearchConfig, game: &Game) -> Search {
        let mut history = Vec::new();
        let mut keys = Vec::new();
        let mut pos = *game.start();
        let mut push = |pos: Position, history: &mut Vec<Position>| {
            if pos.halfmove_clock() == 0 {
                keys.clear();
            }
            keys.push(pos.key());
            history.push(pos);
        };
        push(pos, &mut history);
        for &mv in game.moves() {
            pos = pos.after(mv);
            push(pos, &mut history);
        }
        let keep = config.history.max(1);
        history.drain(..history.len().saturating_sub(keep));
        Search {
            config,
            nodes: vec![Node::new(None, 1.0)],
            history,
            keys,
            evaluations: 0,
            forced_playouts: false,
            forced_captures: false,
            root_capture_prior: true,
            root_noised: false,
            gumbel_noise: Vec::new(),
            planned: None,
            halving: None,
            moves_left_known: false,
        }
    }

    /// Tells a Gumbel root that the search will make `playouts` more
    /// playouts, over which it plans its rounds of halving (a search not
    /// told plans a few rounds and then keeps refining the last two
    /// moves). PUCT needs no plan.
    pub fn plan(&mut self, playouts: u32) {
        self.planned = Some((playouts, self.root_visits()));
        self.halving = None;
    }

    /// With `on` (the default) `capture_prior` shapes the root's priors as
    /// every node's; off, the root's children keep the evaluator's priors,
    /// restored at once if the root was expanded (as a child, shaped, when
    /// the tree was kept). Self-play turns it off for the searches whose
    /// visits become policy targets, so that the heuristic does not leak
    /// into what the network learns.
    pub fn set_root_capture_prior(&mut self, on: bool) {
        self.root_capture_prior = on;
        if self.nodes[ROOT as usize].state == NodeState::Expanded {
            let pos = *self.root_position();
            self.shape_priors(ROOT, &pos);
        }
    }

    /// With `on`, KataGo's forced playouts: a root move with prior P that PUCT
    /// has visited gets at least sqrt(k P N) of the root's N visits (k = 2), so
    /// that a move the noise lifted is looked at further even where the
    /// network's values would not look; [`Search::policy_target`] then prunes
    /// from every move but the best the visits its PUCT score did not earn.
    pub fn set_forced_playouts(&mut self, on: bool) {
        self.forced_playouts = on;
    }

    /// With `on`, every root capture gets one visit (the highest prior
    /// first) before PUCT chooses. A young network's priors on captures are
    /// tiny (a hundredth of a percent to a percent), so PUCT never looks at
    /// taking a hung piece and the policy never learns to; one visit shows
    /// the capture's value, and PUCT gives it more if that is good. As with
    /// forced playouts, [`Search::policy_target`] then counts a move left
    /// with its one visit as none.
    pub fn set_forced_captures(&mut self, on: bool) {
        self.forced_captures = on;
    }

    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    pub fn root_position(&self) -> &Position {
        self.history.last().expect("history holds the root")
    }

    /// Visits of the root so far (kept subtree included).
    pub fn root_visits(&self) -> u32 {
        self.nodes[ROOT as usize].visits
    }

    /// Evaluator calls made by this search.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }

    /// Nodes in the tree.
    pub fn tree_size(&self) -> usize {
        self.nodes.len()
    }

    /// Searches until the root has `visits` visits.
    pub fn run_until(&mut self, evaluator: &dyn Evaluator, visits: u32) -> Result<(), EvalError> {
        while self.root_visits() < visits {
            self.step(evaluator, (visits - self.root_visits()) as usize)?;
        }
        Ok(())
    }

    /// Adds `playouts` visits to the root (planned: see [`Search::plan`]).
    pub fn run(&mut self, evaluator: &dyn Evaluator, playouts: u32) -> Result<(), EvalError> {
        self.plan(playouts);
        let target = self.root_visits().saturating_add(playouts);
        self.run_until(evaluator, target)
    }

    /// One round: collect up to `leaves_in_flight` leaves (never more than
    /// `budget`), evaluate them together, back the values up.
    pub fn step(&mut self, evaluator: &dyn Evaluator, budget: usize) -> Result<(), EvalError> {
        let mut pending = Vec::new();
        let limit = self.config.leaves_in_flight.clamp(1, budget.max(1));
        let mut attempts = 0;
        while pending.len() < limit && attempts < limit * 2 {
            attempts += 1;
            match self.select() {
                Selection::Terminal(path, value) => {
                    self.backup(&path, value, if value == 0.0 { 1.0 } else { 0.0 }, 0.0);
                    if pending.is_empty() {
                        return Ok(());
                    }
                }
                Selection::Winning { path, moves, win } => {
                    // The side to move wins next move: the value is certain and
                    // the network is not asked.
                    let node = *path.last().expect("a path ends at its leaf");
                    let priors: Vec<f32> = (0..moves.len())
                        .map(|i| if i == win { 1.0 } else { 0.0 })
                        .collect();
                    self.expand(node, &moves, &priors);
                    self.nodes[node as usize].net_value = 1.0;
                    self.backup(&path, 1.0, 0.0, 1.0);
                    if pending.is_empty() {
                        return Ok(());
                    }
                }
                Selection::Leaf(leaf) => pending.push(leaf),
                Selection::Collision(path) => {
                    self.undo_in_flight(&path);
                    break;
                }
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        let requests: Vec<EvalRequest<'_>> = pending
            .iter()
            .map(|leaf| EvalRequest {
                history: &leaf.history,
                repetitions: leaf.repetitions,
                moves: &leaf.moves,
                moves_left: self.config.moves_left_effect > 0.0,
            })
            .collect();
        let result = evaluator.evaluate_batch(&requests);
        drop(requests);
        let evaluations = match result {
            Ok(evaluations) if evaluations.len() == pending.len() => evaluations,
            Ok(_) => {
                self.abandon(&pending);
                return Err(EvalError::Backend("wrong number of evaluations".into()));
            }
            Err(e) => {
                self.abandon(&pending);
                return Err(e);
            }
        };
        self.evaluations += pending.len() as u64;
        for (leaf, evaluation) in pending.into_iter().zip(evaluations) {
            let node = *leaf.path.last().expect("a path ends at its leaf");
            let pos = leaf.history.last().expect("a leaf's history ends at it");
            self.expand(node, &leaf.moves, &evaluation.policy);
            self.shape_priors(node, pos);
            let wdl = evaluation.wdl;
            self.nodes[node as usize].net_value = wdl.value();
            self.moves_left_known |= evaluation.moves_left.is_some();
            let moves_left = evaluation.moves_left.unwrap_or(0.0);
            self.backup(&leaf.path, wdl.value(), wdl.draw, moves_left);
        }
        Ok(())
    }

    /// A Gumbel root's halving, starting now: over the playouts planned
    /// and not yet made, or a default plan.
    fn start_halving(&self) -> Halving {
        let root = &self.nodes[ROOT as usize];
        let children = &self.nodes[root.children()];
        let considered = self.config.gumbel_considered.min(children.len()).max(1);
        let planned = match self.planned {
            Some((playouts, from)) => playouts.saturating_sub(root.visits - from).max(1),
            None => gumbel::default_plan(considered),
        };
        Halving {
            considered,
            planned,
            base: children.iter().map(|c| c.visits).collect(),
        }
    }

    /// Each root child's `logit + sigma(completed q)`: the improved policy's
    /// logits, and with the Gumbel draw the score halving ranks by.
    fn improved_logits(&self) -> Vec<f32> {
        let root = &self.nodes[ROOT as usize];
        let children = &self.nodes[root.children()];
        let views: Vec<gumbel::ChildView> = children
            .iter()
            .map(|c| gumbel::ChildView {
                prior: c.prior,
                visits: c.visits,
                q: c.q(self.config.draw_score).unwrap_or(0.0),
            })
            .collect();
        let sigma = gumbel::sigma(
            &views,
            root.net_value,
            self.config.gumbel_c_visit,
            self.config.gumbel_c_scale,
        );
        children
            .iter()
            .zip(sigma)
            .map(|(c, sigma)| gumbel::logit(c.prior) + sigma)
            .collect()
    }

    /// The Gumbel draw of root child `i` (0 without noise).
    fn noise(&self, i: usize) -> f32 {
        self.gumbel_noise.get(i).copied().unwrap_or(0.0)
    }

    /// The root child the next simulation of `halving` visits: of those
    /// with exactly the new visits (in flight included) the schedule asks
    /// for, the best score. The first round's are the Gumbel-top-k.
    fn halving_choice(&self, halving: &Halving) -> usize {
        let root = &self.nodes[ROOT as usize];
        let children = &self.nodes[root.children()];
        let new: Vec<u32> = children
            .iter()
            .zip(&halving.base)
            .map(|(c, &base)| (c.visits + c.in_flight).saturating_sub(base))
            .collect();
        let k = new.iter().sum();
        let wanted = gumbel::considered_visit(halving.considered, halving.planned, k);
        let logits = self.improved_logits();
        let score = |i: usize| self.noise(i) + logits[i];
        // Ties go to the earlier move, as in the ranking.
        let best = |candidates: &mut dyn Iterator<Item = usize>| {
            candidates.fold(None, |best: Option<usize>, i| match best {
                Some(b) if score(b) >= score(i) => Some(b),
                _ => Some(i),
            })
        };
        best(&mut (0..children.len()).filter(|&i| new[i] == wanted)).unwrap_or_else(|| {
            // Not reached while every root choice follows the schedule; kept
            // total so that a search never stalls.
            let fewest = new.iter().copied().min().unwrap_or(0);
            best(&mut (0..children.len()).filter(|&i| new[i] == fewest)).unwrap_or(0)
        })
    }

    /// Puts leaves whose evaluation failed back as they were.
    fn abandon(&mut self, pending: &[PendingLeaf]) {
        for leaf in pending {
            let node = *leaf.path.last().expect("a path ends at its leaf");
            self.nodes[node as usize].state = NodeState::Unexpanded;
            self.undo_in_flight(&leaf.path);
        }
    }

    fn undo_in_flight(&mut self, path: &[NodeId]) {
        for &id in path {
            self.nodes[id as usize].in_flight -= 1;
        }
    }

    fn c_puct(&self, parent_visits: f32) -> f32 {
        let c = &self.config;
        c.c_puct + c.c_puct_factor * ((parent_visits + c.c_puct_base + 1.0) / c.c_puct_base).ln()
    }

    /// The child with the highest PUCT score, virtual losses counted, draws
    /// worth `draw_score` to the side to move at `id`; at a root with forced
    /// playouts, first the visited child furthest below its forced count,
    /// if any is.
    fn best_child(&self, id: NodeId, draw_score: f32) -> NodeId {
        let parent = &self.nodes[id as usize];
        if id == ROOT {
            if let Some(halving) = &self.halving {
                return parent.first_child + self.halving_choice(halving) as NodeId;
            }
        }
        if id == ROOT && self.forced_captures {
            let pos = self.root_position();
            let unvisited = self.nodes[parent.children()]
                .iter()
                .enumerate()
                .filter(|(_, c)| c.visits + c.in_flight == 0)
                .filter(|(_, c)| pos.is_capture(c.mv.expect("children carry moves")))
                .max_by(|a, b| a.1.prior.total_cmp(&b.1.prior));
            if let Some((i, _)) = unvisited {
                return parent.first_child + i as NodeId;
            }
        }
        if id == ROOT && self.forced_playouts {
            let total = (parent.visits + parent.in_flight) as f32;
            let short = self.nodes[parent.children()]
                .iter()
                .enumerate()
                // As in KataGo, only a move PUCT has visited is forced: forcing
                // the unvisited too would spend a search of 48 playouts over 60
                // moves on one visit each, with nothing left for PUCT to choose.
                .filter(|(_, c)| c.visits + c.in_flight > 0)
                .map(|(i, c)| {
                    (
                        i,
                        forced_count(c.prior, total) - (c.visits + c.in_flight) as f32,
                    )
                })
                .filter(|&(_, deficit)| deficit > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((i, _)) = short {
                return parent.first_child + i as NodeId;
            }
        }
        let vl = self.config.virtual_loss;
        let parent_n = parent.visits as f32 + parent.in_flight as f32 * vl;
        // The parent's statistics are its mover's, whose draw score is the
        // other side's: the side to move at `id` sees that value turned.
        let parent_q = parent.q(-draw_score).map_or(0.0, |q| -q);
        let visited_prior: f32 = self.nodes[parent.children()]
            .iter()
            .filter(|c| c.visits + c.in_flight > 0)
            .map(|c| c.prior)
            .sum();
        let reduction = match id == ROOT && self.root_noised {
            true => self.config.noised_root_fpu_reduction,
            false => self.config.fpu_reduction,
        };
        let fpu = parent_q - reduction * visited_prior.sqrt();
        let explore = self.c_puct(parent_n) * parent_n.max(1.0).sqrt();
        let parent_moves_left =
            match self.config.moves_left_effect > 0.0 && self.moves_left_known && parent.visits > 0
            {
                true => Some(parent.moves_left_sum / parent.visits as f64),
                false => None,
            };
        let mut best = (f32::NEG_INFINITY, parent.first_child);
        for (i, child) in self.nodes[parent.children()].iter().enumerate() {
            let n = child.visits as f32 + child.in_flight as f32 * vl;
            let q = if n > 0.0 {
                (child.value_sum as f32 + draw_score * child.draw_sum as f32
                    - child.in_flight as f32 * vl)
                    / n
            } else {
                fpu
            };
            // An unvisited child, as in lc0, gets no moves-left utility.
            let utility = match parent_moves_left {
                Some(parent_m) if child.visits > 0 => {
                    let visits = child.visits as f64;
                    moves_left_utility(
                        (child.value_sum / visits) as f32,
                        (child.moves_left_sum / visits - parent_m) as f32,
                        self.config.moves_left_effect,
                        self.config.moves_left_slope,
                    )
                }
                _ => 0.0,
            };
            let score = q + explore * child.prior / (1.0 + n) + utility;
            if score > best.0 {
                best = (score, parent.first_child + i as NodeId);
            }
        }
        best.1
    }

    fn select(&mut self) -> Selection {
        let mut id = ROOT;
        let mut path = vec![ROOT];
        let mut pos = *self.root_position();
        let mut line: Vec<Position> = Vec::new();
        let mut keys: Vec<u64> = Vec::new();
        self.nodes[ROOT as usize].in_flight += 1;
        if self.config.root == RootSearch::Gumbel
            && self.halving.is_none()
            && self.nodes[ROOT as usize].state == NodeState::Expanded
        {
            self.halving = Some(self.start_halving());
        }
        loop {
            let node = &self.nodes[id as usize];
            match node.state {
                NodeState::Terminal(value) => return Selection::Terminal(path, value),
                NodeState::Pending => return Selection::Collision(path),
                NodeState::Unexpanded => break,
                NodeState::Expanded => {}
            }
            // The draw score is the root side's; it turns at every ply.
            let draw_score = match path.len() % 2 {
                1 => self.config.draw_score,
                _ => -self.config.draw_score,
            };
            id = self.best_child(id, draw_score);
            let mv = self.nodes[id as usize].mv.expect("children carry moves");
            pos = pos.after(mv);
            if pos.halfmove_clock() == 0 {
                keys.clear();
            }
            keys.push(pos.key());
            line.push(pos);
            path.push(id);
            self.nodes[id as usize].in_flight += 1;
        }

        let moves = pos.legal_moves();
        let repetitions = self.repetitions(&pos, &keys, line.len());
        let terminal = pos.outcome_with(!moves.is_empty(), repetitions);
        if let Some(outcome) = terminal {
            let value = match outcome.winner {
                None => 0.0,
                Some(w) if w == pos.side_to_move() => 1.0,
                Some(_) => -1.0,
            };
            self.nodes[id as usize].state = NodeState::Terminal(value);
            return Selection::Terminal(path, value);
        }
        let us = pos.side_to_move();
        let winning = self.config.win_check.then(|| {
            moves.iter().position(|&mv| {
                // Only a check or a rule 5 obligation can leave the opponent
                // lost without moves; testing them first spares most move
                // generations.
                let next = pos.after(mv);
                (next.in_check() || next.must_move_king(!us)) && !next.has_legal_moves()
            })
        });
        if let Some(win) = winning.flatten() {
            return Selection::Winning {
                path,
                moves: moves.to_vec(),
                win,
            };
        }
        self.nodes[id as usize].state = NodeState::Pending;
        let want = self.config.history.max(1);
        let from_line = line.len().min(want);
        let from_root = (want - from_line).min(self.history.len());
        let mut history = Vec::with_capacity(from_root + from_line);
        history.extend_from_slice(&self.history[self.history.len() - from_root..]);
        history.extend_from_slice(&line[line.len() - from_line..]);
        Selection::Leaf(PendingLeaf {
            path,
            history,
            repetitions: repetitions.min(2) as u8,
            moves: moves.to_vec(),
        })
    }

    /// Earlier occurrences of `pos` (whose key ends `path_keys`), in the game and on the path.
    fn repetitions(&self, pos: &Position, path_keys: &[u64], depth: usize) -> usize {
        let key = pos.key();
        let on_path = path_keys[..path_keys.len().saturating_sub(1)]
            .iter()
            .filter(|&&k| k == key)
            .count();
        // The game's keys count only while no irreversible move was made on the path.
        // At the root itself the game's last key is the position, not an earlier one.
        let game_keys = match depth {
            0 => &self.keys[..self.keys.len() - 1],
            _ if path_keys.len() == depth => &self.keys[..],
            _ => &[],
        };
        let in_game = game_keys.iter().filter(|&&k| k == key).count();
        on_path + in_game
    }

    /// Gives `id` a child per move with the evaluator's prior.
    fn expand(&mut self, id: NodeId, moves: &[Move], priors: &[f32]) {
        let first = self.nodes.len() as NodeId;
        self.nodes.extend(
            moves
                .iter()
                .zip(priors)
                .map(|(&mv, &prior)| Node::new(Some(mv), prior)),
        );
        let node = &mut self.nodes[id as usize];
        node.first_child = first;
        node.child_count = moves.len() as u32;
        node.state = NodeState::Expanded;
    }

    /// The priors PUCT uses for `id`'s children (moves in `pos`): the
    /// evaluator's at `policy_temperature`, with `capture_prior` of the mass
    /// moved onto the captures, evenly; a root kept free of the heuristic
    /// has no capture share (what a kept root had is undone).
    fn shape_priors(&mut self, id: NodeId, pos: &Position) {
        let share = match id == ROOT && !self.root_capture_prior {
            true => 0.0,
            false => self.config.capture_prior,
        };
        let exponent = 1.0 / self.config.policy_temperature;
        let range = self.nodes[id as usize].children();
        let children = &mut self.nodes[range];
        let is_capture = |c: &Node| pos.is_capture(c.mv.expect("children carry moves"));
        let captures = match share > 0.0 {
            true => children.iter().filter(|c| is_capture(c)).count(),
            false => 0,
        };
        let (share, bonus) = match captures {
            0 => (0.0, 0.0),
            n => (share, share / n as f32),
        };
        // Each child's prior before the capture share: at a temperature
        // other than 1 the evaluator's raised to 1 / T over their sum; at 1,
        // or if every prior vanished (a total of 0), the evaluator's.
        let total: f32 = match exponent == 1.0 {
            true => 0.0,
            false => children.iter().map(|c| c.net_prior.powf(exponent)).sum(),
        };
        for child in children.iter_mut() {
            let prior = match total > 0.0 {
                true => child.net_prior.powf(exponent) / total,
                false => child.net_prior,
            };
            let bonus = if bonus > 0.0 && is_capture(child) {
                bonus
            } else {
                0.0
            };
            child.prior = prior * (1.0 - share) + bonus;
        }
    }

    /// Backs up `value` (for the side to move at the leaf) and the plies
    /// left from the leaf along `path`.
    fn backup(&mut self, path: &[NodeId], value: f32, draw: f32, moves_left: f32) {
        let mut value = -value as f64;
        let mut moves_left = moves_left as f64;
        for &id in path.iter().rev() {
            let node = &mut self.nodes[id as usize];
            node.in_flight -= 1;
            node.visits += 1;
            node.value_sum += value;
            node.draw_sum += draw as f64;
            node.moves_left_sum += moves_left;
            value = -value;
            moves_left += 1.0;
        }
    }

    /// Mixes Dirichlet noise into the root priors (expanding the root
    /// first); a Gumbel root instead draws a Gumbel variable per move, which
    /// makes its choice of moves and of the move played a sample.
    pub fn add_root_noise(
        &mut self,
        evaluator: &dyn Evaluator,
        rng: &mut impl Rng,
    ) -> Result<(), EvalError> {
        if self.config.root == RootSearch::Gumbel {
            if self.nodes[ROOT as usize].state == NodeState::Unexpanded {
                self.run_until(evaluator, 1)?;
            }
            let moves = self.nodes[ROOT as usize].child_count;
            self.gumbel_noise = (0..moves)
                .map(|_| gumbel::gumbel(rng.random::<f64>()))
                .collect();
            self.halving = None;
            return Ok(());
        }
        if self.config.dirichlet_epsilon <= 0.0 {
            return Ok(());
        }
        if self.nodes[ROOT as usize].state == NodeState::Unexpanded {
            self.run_until(evaluator, 1)?;
        }
        let range = self.nodes[ROOT as usize].children();
        if range.len() < 2 {
            return Ok(());
        }
        let alpha = (self.config.dirichlet_alpha_total / range.len() as f32).max(1e-3);
        let gamma = Gamma::new(alpha as f64, 1.0).expect("positive concentration");
        let noise: Vec<f64> = range.clone().map(|_| gamma.sample(rng)).collect();
        let total: f64 = noise.iter().sum::<f64>().max(f64::MIN_POSITIVE);
        let eps = self.config.dirichlet_epsilon;
        for (node, n) in self.nodes[range].iter_mut().zip(noise) {
            node.prior = (1.0 - eps) * node.prior + eps * (n / total) as f32;
        }
        self.root_noised = true;
        Ok(())
    }

    /// Root moves with their statistics, in generation order.
    pub fn root_children(&self) -> Vec<ChildStats> {
        let root = &self.nodes[ROOT as usize];
        self.nodes[root.children()]
            .iter()
            .map(|c| ChildStats {
                mv: c.mv.expect("children carry moves"),
                visits: c.visits,
                prior: c.prior,
                q: c.q(self.config.draw_score).unwrap_or(f32::NAN),
            })
            .collect()
    }

    /// The most visited root move (ties: the better value, then the higher prior).
    pub fn best_move(&self) -> Option<Move> {
        self.best_move_among(|_| true)
    }

    /// [`Search::best_move`] among the root moves `allowed` accepts.
    pub fn best_move_among(&self, allowed: impl Fn(Move) -> bool) -> Option<Move> {
        self.ranked_root_children()
            .into_iter()
            .find(|c| allowed(c.mv))
            .map(|c| c.mv)
    }

    /// The root moves best first, in the order [`Search::best_move`] ranks
    /// them: visits, then value, then prior; after a Gumbel root's halving,
    /// the visits it gave, then its score `g + logit + sigma(q)` (so the
    /// survivor with the best score first).
    pub fn ranked_root_children(&self) -> Vec<ChildStats> {
        let children = self.root_children();
        let mut order: Vec<usize> = (0..children.len()).collect();
        match &self.halving {
            Some(halving) => {
                let logits = self.improved_logits();
                let new = |i: usize| children[i].visits.saturating_sub(halving.base[i]);
                let score = |i: usize| self.noise(i) + logits[i];
                order.sort_by(|&a, &b| new(b).cmp(&new(a)).then(score(b).total_cmp(&score(a))));
            }
            None => order.sort_by(|&a, &b| {
                let (a, b) = (&children[a], &children[b]);
                b.visits
                    .cmp(&a.visits)
                    .then(b.q.total_cmp(&a.q))
                    .then(b.prior.total_cmp(&a.prior))
            }),
        }
        order.into_iter().map(|i| children[i]).collect()
    }

    /// The policy target of each root move in generation order, as integer
    /// weights: PUCT's visits, with forced playouts and forced captures
    /// pruned as KataGo prunes (from each move but the most visited, as many
    /// visits, at most its forced ones, as leave its PUCT score below the
    /// best move's, and a move left with one visit counts none); a Gumbel
    /// root's improved policy `softmax(logit + sigma(completed q))` in units
    /// of 1/[`GUMBEL_TARGET_SCALE`].
    pub fn policy_target(&self) -> Vec<u32> {
        self.target_visits(&self.root_children())
    }

    fn target_visits(&self, children: &[ChildStats]) -> Vec<u32> {
        if self.config.root == RootSearch::Gumbel {
            return gumbel::softmax(&self.improved_logits())
                .iter()
                .map(|p| (p * GUMBEL_TARGET_SCALE).round() as u32)
                .collect();
        }
        let visits: Vec<u32> = children.iter().map(|c| c.visits).collect();
        let Some(best) = (0..children.len()).max_by_key(|&i| visits[i]) else {
            return visits;
        };
        if !(self.forced_playouts || self.forced_captures) || visits[best] <= 1 {
            return visits;
        }
        let total = self.nodes[ROOT as usize].visits as f32;
        let pos = self.root_position();
        // The visits each move may have been given without PUCT choosing them.
        let forced = |c: &ChildStats| {
            let playouts = match self.forced_playouts {
                true => forced_count(c.prior, total),
                false => 0.0,
            };
            let capture = (self.forced_captures && pos.is_capture(c.mv)) as u32 as f32;
            playouts + capture
        };
        let explore = self.c_puct(total) * total.max(1.0).sqrt();
        let puct = |c: &ChildStats, n: f32| c.q + explore * c.prior / (1.0 + n);
        let bar = puct(&children[best], visits[best] as f32);
        children
            .iter()
            .zip(&visits)
            .enumerate()
            .map(|(i, (c, &n))| {
                if i == best || n == 0 {
                    return n;
                }
                // The fewest visits at which the move's score stays at or
                // below the best's, no lower than its forced visits allow.
                let floor = (n as f32 - forced(c)).max(0.0);
                let earned = match bar > c.q {
                    true => (explore * c.prior / (bar - c.q) - 1.0).max(0.0),
                    false => n as f32,
                };
                let kept = earned.max(floor).ceil().min(n as f32) as u32;
                if kept <= 1 {
                    0
                } else {
                    kept
                }
            })
            .collect()
    }

    /// A root move drawn with probability proportional to its
    /// [`Search::policy_target`] weight ^ (1/temperature); temperature 0 is the
    /// best move.
    pub fn choose_move(&self, temperature: f32, rng: &mut impl Rng) -> Option<Move> {
        if temperature <= 1e-3 {
            return self.best_move();
        }
        let children = self.root_children();
        let target = self.target_visits(&children);
        let max = target.iter().copied().max()? as f64;
        if max == 0.0 {
            return self.best_move();
        }
        let weights: Vec<f64> = target
            .iter()
            .map(|&v| (v as f64 / max).powf(1.0 / temperature as f64))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut pick = rng.random::<f64>() * total;
        for (c, w) in children.iter().zip(&weights) {
            if pick < *w {
                return Some(c.mv);
            }
            pick -= w;
        }
        children.last().map(|c| c.mv)
    }

    /// Win/draw/loss estimate for the side to move at the root.
    pub fn root_wdl(&self) -> Wdl {
        let root = &self.nodes[ROOT as usize];
        if root.visits == 0 {
            return Wdl::DRAW;
        }
        let n = root.visits as f64;
        let value = -root.value_sum / n;
        let draw = (root.draw_sum / n).clamp(0.0, 1.0);
        let win = ((1.0 - draw + value) / 2.0).clamp(0.0, 1.0);
        Wdl {
            win: win as f32,
            draw: draw as f32,
            loss: (1.0 - draw - win).max(0.0) as f32,
        }
    }

    /// The principal variation: the best move, then the most visited children.
    pub fn pv(&self) -> Vec<Move> {
        let root = &self.nodes[ROOT as usize];
        let Some(best) = self.best_move() else {
            return Vec::new();
        };
        let mut id = match root.children().find(|&c| self.nodes[c].mv == Some(best)) {
            Some(c) if self.nodes[c].visits > 0 => c,
            _ => return Vec::new(),
        };
        let mut pv = vec![best];
        loop {
            let node = &self.nodes[id];
            let best = node
                .children()
                .filter(|&c| self.nodes[c].visits > 0)
                .max_by_key(|&c| self.nodes[c].visits);
            match best {
                Some(c) => {
                    pv.push(self.nodes[c].mv.expect("children carry moves"));
                    id = c;
                }
                None => return pv,
            }
        }
    }

    /// Plays `mv` at the root, keeping its subtree (or starting afresh when
    /// the move was not searched).
    pub fn advance(&mut self, mv: Move) {
        let pos = self.root_position().after(mv);
        let child = self.nodes[self.nodes[ROOT as usize].children()]
            .iter()
            .position(|c| c.mv == Some(mv))
            .map(|i| self.nodes[ROOT as usize].first_child as usize + i);
        let mut nodes = Vec::new();
        match child {
            Some(child) if self.nodes[child].state != NodeState::Pending => {
                let mut root = self.nodes[child].clone();
                root.mv = None;
                nodes.push(root);
                // Breadth-first copy keeps each node's children contiguous.
                let mut next = 0;
                while next < nodes.len() {
                    let range = nodes[next].children();
                    if !range.is_empty() {
                        let first = nodes.len() as NodeId;
                        nodes.extend(self.nodes[range].iter().cloned());
                        nodes[next].first_child = first;
                    }
                    next += 1;
                }
            }
            _ => nodes.push(Node::new(None, 1.0)),
        }
        self.nodes = nodes;
        self.root_noised = false;
        self.gumbel_noise.clear();
        self.planned = None;
        self.halving = None;
        if pos.halfmove_clock() == 0 {
            self.keys.clear();
        }
        self.keys.push(pos.key());
        self.history.push(pos);
        let keep = self.config.history.max(1);
        if self.history.len() > keep {
            self.history.remove(0);
        }
    }
}

/// A Gumbel root's policy target is its improved policy times this, rounded:
/// integer weights like visit counts, fine enough that a move with a
/// ten-thousandth of the weight keeps it.
pub const GUMBEL_TARGET_SCALE: f32 = 10_000.0;

/// lc0's moves-left utility of a child whose value for its mover is `q`
/// and whose game is expected to last `plies_longer` plies longer than its
/// parent's: the difference times `slope`, capped at `effect` either way,
/// against the sign of `q` (a winner prefers short games, a loser long
/// ones), and scaled by lc0's default `1.6521 |q| - 0.6521 q^2`, which is 0
/// for a level game and 1 for a sure result.
fn moves_left_utility(q: f32, plies_longer: f32, effect: f32, slope: f32) -> f32 {
    let m = (slope * plies_longer).clamp(-effect, effect);
    let sureness = 1.6521 * q.abs() - 0.6521 * q * q;
    -q.signum() * m * sureness
}

/// KataGo's forced playouts of a root move with prior `prior` after `total`
/// root visits: sqrt(k prior total), k = 2.
fn forced_count(prior: f32, total: f32) -> f32 {
    (2.0 * prior * total).sqrt()
}

enum Selection {
    Terminal(Vec<NodeId>, f32),
    /// A leaf whose side to move wins with `moves[win]`, found by `win_check`.
    Winning {
        path: Vec<NodeId>,
        moves: Vec<Move>,
        win: usize,
    },
    Leaf(PendingLeaf),
    Collision(Vec<NodeId>),
}

mod gumbel;
#[cfg(test)]
mod tests;
