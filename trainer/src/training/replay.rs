//! The replay buffer of recent self-play games and the training batches
//! drawn from it.

use std::collections::VecDeque;
use std::sync::Arc;

use engine::players::material_balance;
use engine::{check, within, Color, EvalRequest, Game, InvalidKey, Move, Position, Reason, Wdl};
use models::encoding::{encode, mirror_files, EncoderConfig};
use models::net::MOVES_LEFT_UNIT;
use models::policy::{mirror_index, move_index, POLICY_SIZE};
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::selfplay::bootstrap::IMPORTED;
use crate::selfplay::data::GameRecord;

/// The window of recent samples that training draws from. It grows with the
/// data as KataGo's does: samples of the first, weak networks leave it soon
/// while it is small, and it keeps growing, sublinearly, after that.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// The window holds every sample until there are this many.
    pub min_window: usize,
    /// Exponent of the growth.
    pub alpha: f64,
    /// Slope of the growth at `min_window`.
    pub beta: f64,
    /// Largest window.
    pub max_window: usize,
}

impl ReplayConfig {
    /// These bounds keep `total - window(total)` from ever decreasing, so a
    /// dropped game never belongs in the window again.
    pub fn validate(&self) -> Result<(), InvalidKey> {
        check(self.min_window >= 1, "min_window", || {
            "must be at least 1".into()
        })?;
        check(self.alpha > 0.0 && self.alpha <= 1.0, "alpha", || {
            format!("{} (expected 0 < alpha <= 1)", self.alpha)
        })?;
        within("beta", self.beta, 0.0, 1.0)?;
        check(self.max_window >= self.min_window, "max_window", || {
            format!(
                "{} is below min_window = {}",
                self.max_window, self.min_window
            )
        })
    }

    /// Samples in the window once `total` samples were ever produced:
    /// `min(total, max_window, max(min_window, min_window * (1 + beta *
    /// ((total / min_window)^alpha - 1) / alpha)))`.
    pub fn window(&self, total: u64) -> usize {
        let min = self.min_window as f64;
        let growth = ((total as f64 / min).powf(self.alpha) - 1.0) / self.alpha;
        let window = (min * (1.0 + self.beta * growth))
            .max(min)
            .min(self.max_window as f64) as u64;
        window.min(total) as usize
    }
}

/// A game in the buffer and where its samples sit in the stream of every
/// sample ever added.
struct Entry {
    game: Arc<GameRecord>,
    /// Stream index of the game's first sample.
    first: u64,
    /// Plies with a policy target.
    targets: Vec<u32>,
}

impl Entry {
    fn end(&self) -> u64 {
        self.first + self.targets.len() as u64
    }
}

/// The most recent games, enough to cover the window; older ones are dropped.
pub struct ReplayBuffer {
    config: ReplayConfig,
    games: VecDeque<Entry>,
    total: u64,
}

/// One training position with its targets.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingSample {
    /// Up to `history` positions, oldest first, the current one last.
    pub history: Vec<Position>,
    /// How many times the current position occurred before.
    pub repetitions: u8,
    /// The legal moves.
    pub moves: Vec<Move>,
    /// The root visits, normalised; one per move, same order.
    pub policy: Vec<f32>,
    /// The final result from the side to move's view: win, draw, loss.
    pub wdl: [f32; 3],
    /// Whether the game has a result to learn: not for a game stopped at
    /// the length cap, whose adjudicated result the position cannot tell.
    /// The same games have no moves-left target: they would have gone on
    /// for a number of plies nobody knows.
    pub result_known: bool,
    pub search_value: f32,
    /// For a self-play game stopped at the length cap: the root value of
    /// its last full search, from this position's side to move (what
    /// [`CappedValue::Search`] teaches). `None` for a game with a result and
    /// for imported games, which have no search values.
    pub capped_value: Option<f32>,
    /// The side to move's material balance in pawns some plies later (or at
    /// the game's end, if sooner): the auxiliary material head's target.
    pub material_later: f32,
    /// Plies from this position to the game's end, the move about to be
    /// played included: the moves-left head's target where `result_known`.
    pub plies_left: u32,
    /// The opponent's reply to the move played here, as policy indices in
    /// the opponent's frame (those the policy head gives its moves in the
    /// next position) with their probabilities: the next position's root
    /// visits when it was searched fully, else the reply played. Empty
    /// after the game's last move, which has no reply, and before a
    /// baseline player's reply, which is a heuristic's.
    pub reply: Vec<(usize, f32)>,
    /// Whether the batch encodes this sample mirrored left to right, its
    /// policy and reply targets with it.
    pub mirrored: bool,
}

/// What the training targets are made of. The value target is the game
/// result, with a share of the root search value (lc0's q ratio) if asked;
/// the material balance a few plies later, squashed, is the target of the
/// auxiliary material head, the plies left that of the moves-left head and
/// the opponent's reply that of the reply head: they shape the trunk without
/// feeding what the search uses (KataGo's auxiliary targets).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Targets {
    pub q_share: f32,
    /// What a game stopped at the length cap teaches the value.
    pub capped_value: CappedValue,
    /// How many plies later the material is read.
    pub material_plies: usize,
    /// Pawns ahead that count as tanh(1), about 0.76.
    pub material_scale: f32,
    /// Whether batches carry the reply head's targets (8,900 floats a
    /// sample, so only when that head is trained).
    pub reply: bool,
    /// Whether [`ReplayBuffer::batch`] mirrors half of the positions that
    /// can be mirrored ([`TrainingSample::mirrorable`]).
    pub mirror: bool,
}

/// What a game stopped at `[selfplay] max_plies` teaches the value. The cap
/// is no rule of the game, so the material verdict it ends with is not a
/// result the position could tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CappedValue {
    /// Nothing: only games the rules ended teach the value.
    None,
    /// The root value of the game's last full search stands in for the
    /// result the game would have had (partial-episode bootstrapping, Pardo
    /// et al., "Time Limits in Reinforcement Learning", ICML 2018), so that
    /// the many capped games of a young net teach the value too.
    Search,
    /// Each position's own full-search root value (lc0's q, all of it), so
    /// that every capped position teaches the value what its own search
    /// found rather than what the game's last search did, which in a
    /// shuffle near the cap says a draw for every position before it.
    Q,
    /// The verdict the game was adjudicated with (`[selfplay]
    /// adjudication`): a result the position tells once the encoder shows
    /// the plies played against the cap (`[encoder] ply_plane =
    /// max_plies`, which the config requires with it). Capped games are
    /// where a side far ahead failed to mate in time; without them the
    /// value never learns that material wins.
    Verdict,
}

impl ReplayBuffer {
    pub fn new(config: ReplayConfig) -> ReplayBuffer {
        ReplayBuffer {
            config,
            games: VecDeque::new(),
            total: 0,
        }
    }

    pub fn config(&self) -> &ReplayConfig {
        &self.config
    }

    /// Adds a game and drops the games that fell out of the window. A game
    /// with no policy target adds no sample and is not kept.
    pub fn add(&mut self, game: Arc<GameRecord>) {
        let targets: Vec<u32> = (0..game.moves.len() as u32)
            .filter(|&ply| !game.moves[ply as usize].visits.is_empty())
            .collect();
        if targets.is_empty() {
            return;
        }
        let first = self.total;
        self.total += targets.len() as u64;
        self.games.push_back(Entry {
            game,
            first,
            targets,
        });
        let start = self.window_start();
        while self.games.front().is_some_and(|e| e.end() <= start) {
            self.games.pop_front();
        }
    }

    /// A buffer rebuilt from a run's chunks, oldest first, as if their games
    /// had been added in order: `samples[i]` is chunk `i`'s sample count (from
    /// its header), and `read(i)` its games, or `None` if it turns out
    /// damaged (its samples then do not count). Only the newest chunks that
    /// cover the window are read; the older ones count through their headers.
    pub fn rebuild<E>(
        config: &ReplayConfig,
        samples: &[u64],
        mut read: impl FnMut(usize) -> Result<Option<Vec<GameRecord>>, E>,
    ) -> Result<ReplayBuffer, E> {
        let mut total: u64 = samples.iter().sum();
        let mut loaded = Vec::new();
        let mut covered = 0;
        for (index, &count) in samples.iter().enumerate().rev() {
            if covered >= config.window(total) as u64 {
                break;
            }
            match read(index)? {
                Some(games) => {
                    covered += count;
                    loaded.push(games);
                }
                None => total -= count,
            }
        }
        let mut buffer = ReplayBuffer::new(*config);
        buffer.total = total - covered;
        for game in loaded.into_iter().rev().flatten() {
            buffer.add(Arc::new(game));
        }
        Ok(buffer)
    }

    /// Samples ever added, dropped ones included.
    pub fn total_samples_ever(&self) -> u64 {
        self.total
    }

    pub fn samples_in_window(&self) -> usize {
        self.config.window(self.total)
    }

    /// Games with a sample in the window (the oldest may be partly outside).
    pub fn games_in_window(&self) -> usize {
        self.games.len()
    }

    /// Stream index of the oldest sample in the window.
    fn window_start(&self) -> u64 {
        self.total - self.samples_in_window() as u64
    }

    /// A training batch of `batch_size` samples drawn by [`ReplayBuffer::sample`]
    /// and encoded with their targets.
    pub fn batch<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        batch_size: usize,
        encoder: &EncoderConfig,
        targets: &Targets,
    ) -> Batch {
        let mut samples = self.sample(rng, batch_size, encoder.history, targets.material_plies);
        if targets.mirror {
            for sample in &mut samples {
                sample.mirrored = sample.mirrorable() && rng.random_bool(0.5);
            }
        }
        build_batch(&samples, encoder, targets)
    }

    /// Draws `n` samples uniformly, with replacement, from the window, each
    /// with up to `history` positions and the material `material_plies`
    /// later; none from an empty buffer.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        n: usize,
        history: usize,
        material_plies: usize,
    ) -> Vec<TrainingSample> {
        if self.total == 0 {
            return Vec::new();
        }
        let start = self.window_start();
        let picks: Vec<(&Entry, u32)> = (0..n)
            .map(|_| {
                let at = rng.random_range(start..self.total);
                let entry = &self.games[self.games.partition_point(|e| e.end() <= at)];
                (entry, entry.targets[(at - entry.first) as usize])
            })
            .collect();
        picks
            .into_par_iter()
            .map(|(entry, ply)| training_sample(&entry.game, ply as usize, history, material_plies))
            .collect()
    }
}

/// The sample at `ply` of `game` (a policy-target ply), with up to
/// `history` positions and the material `material_plies` later. It replays
/// the game from its start so that the repetition count is right.
pub fn training_sample(
    game: &GameRecord,
    ply: usize,
    history: usize,
    material_plies: usize,
) -> TrainingSample {
    let mut replay = Game::new(game.start);
    let mut past = VecDeque::with_capacity(history + 1);
    past.push_back(game.start);
    for record in &game.moves[..ply] {
        replay.play_unchecked(record.mv);
        past.push_back(*replay.position());
        if past.len() > history {
            past.pop_front();
        }
    }
    let pos = *replay.position();
    let record = &game.moves[ply];
    let total: f64 = record.visits.iter().map(|&v| v as f64).sum();
    let result_known = game.outcome.reason != Reason::Adjudication;
    TrainingSample {
        history: past.into(),
        repetitions: replay.repetitions().min(u8::MAX as usize) as u8,
        moves: pos.legal_moves().to_vec(),
        policy: record
            .visits
            .iter()
            .map(|&v| (v as f64 / total) as f32)
            .collect(),
        wdl: wdl_for(game.outcome.winner, pos.side_to_move()),
        result_known,
        search_value: record.search_value,
        capped_value: if result_known || game.network == IMPORTED {
            None
        } else {
            last_search_value(game, ply)
        },
        material_later: material_later(game, ply, pos, material_plies),
        plies_left: (game.moves.len() - ply) as u32,
        reply: reply_target(game, ply, pos),
        mirrored: false,
    }
}

/// The root value of `game`'s last full search, from the view of the side
/// to move at `ply` (the same side every other ply). `None` if no move of
/// the game was searched fully.
fn last_search_value(game: &GameRecord, ply: usize) -> Option<f32> {
    let last = game.moves.iter().rposition(|m| !m.visits.is_empty())?;
    let value = game.moves[last].search_value;
    Some(if (last - ply) % 2 == 0 { value } else { -value })
}

/// The reply to the move at `ply` of `game` (played from `pos`): see
/// [`TrainingSample::reply`]. The indices are in the replying side's frame,
/// as the policy head of the next position would give them; the reply head
/// flips its output to match (`models::net`).
fn reply_target(game: &GameRecord, ply: usize, pos: Position) -> Vec<(usize, f32)> {
    let Some(reply) = game.moves.get(ply + 1) else {
        return Vec::new();
    };
    if game.by_baseline(ply + 1) {
        return Vec::new();
    }
    let next = pos.after(game.moves[ply].mv);
    let them = next.side_to_move();
    let index = |mv| move_index(them, mv).expect("a legal move has a policy index");
    if reply.visits.is_empty() {
        return vec![(index(reply.mv), 1.0)];
    }
    let total: f64 = reply.visits.iter().map(|&v| v as f64).sum();
    next.legal_moves()
        .iter()
        .zip(&reply.visits)
        .filter(|&(_, &visits)| visits > 0)
        .map(|(&mv, &visits)| (index(mv), (visits as f64 / total) as f32))
        .collect()
}

/// The balance, in pawns for the side to move at `ply`, `plies` later or at
/// the end of the game.
fn material_later(game: &GameRecord, ply: usize, pos: Position, plies: usize) -> f32 {
    let end = (ply + plies).min(game.moves.len());
    let later = game.moves[ply..end]
        .iter()
        .fold(pos, |later, record| later.after(record.mv));
    material_balance(&later, pos.side_to_move()) as f32 / 100.0
}

fn wdl_for(winner: Option<Color>, us: Color) -> [f32; 3] {
    match winner {
        Some(w) if w == us => [1.0, 0.0, 0.0],
        Some(_) => [0.0, 0.0, 1.0],
        None => [0.0, 1.0, 0.0],
    }
}

/// A training batch, row-major, one row per sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// `n * input_len` encoded planes.
    pub inputs: Vec<f32>,
    /// `n * POLICY_SIZE` policy targets.
    pub policy: Vec<f32>,
    /// `n * POLICY_SIZE`: 1 where the move is legal, else 0.
    pub legal: Vec<f32>,
    /// `n * 3` win, draw, loss targets.
    pub wdl: Vec<f32>,
    /// `n`: 1 where the sample teaches the value
    /// ([`TrainingSample::teaches_value`]), else 0.
    pub value_mask: Vec<f32>,
    /// `n`: 1 where the sample's game has a result (an end to count the
    /// moves left to), else 0.
    pub result_mask: Vec<f32>,
    /// `n` material targets in (-1, 1).
    pub material: Vec<f32>,
    /// `n` moves-left targets, plies left / [`MOVES_LEFT_UNIT`], learned
    /// where `result_mask` is 1.
    pub moves_left: Vec<f32>,
    /// `n * POLICY_SIZE` reply targets; empty unless [`Targets::reply`].
    pub reply: Vec<f32>,
    /// `n`: 1 where the sample has a reply target, else 0; empty unless
    /// [`Targets::reply`].
    pub reply_mask: Vec<f32>,
    pub n: usize,
    /// Samples that `[training] mirror` may mirror
    /// ([`TrainingSample::mirrorable`]), whether or not it is on.
    pub mirrorable: usize,
}

impl TrainingSample {
    /// Whether the position can be trained mirrored left to right: the
    /// rules are symmetric once neither side can castle (castling is not:
    /// the king starts on the f file). Its history's positions are only
    /// pieces on squares, whatever their rights were.
    pub fn mirrorable(&self) -> bool {
        self.history
            .last()
            .is_some_and(|pos| pos.castling_rights().is_empty())
    }

    /// The value target: the result, with `targets.q_share` of the search
    /// value (entered as win/draw/loss with the same mean); learned only
    /// where [`Self::teaches_value`].
    pub fn value_target(&self, targets: &Targets) -> [f32; 3] {
        let result = self.result(targets).unwrap_or(self.wdl);
        let from_q = spread(self.search_value);
        std::array::from_fn(|i| (1.0 - targets.q_share) * result[i] + targets.q_share * from_q[i])
    }

    /// Whether the value learns from this sample: where its game has a
    /// result, or a capped value that `targets` takes.
    pub fn teaches_value(&self, targets: &Targets) -> bool {
        self.result(targets).is_some()
    }

    /// The result the value learns: the game's, or in a game stopped at the
    /// length cap its capped value if `targets.capped_value` asks for it.
    fn result(&self, targets: &Targets) -> Option<[f32; 3]> {
        match (self.result_known, targets.capped_value) {
            (true, _) => Some(self.wdl),
            (false, CappedValue::Search) => self.capped_value.map(spread),
            // `capped_value` is there exactly for self-play's capped games:
            // an imported game's search value may be its adjudicated result.
            (false, CappedValue::Q) => self.capped_value.map(|_| spread(self.search_value)),
            (false, CappedValue::Verdict) => self.capped_value.map(|_| self.wdl),
            (false, CappedValue::None) => None,
        }
    }

    /// Where the batch puts policy index `index` of this sample: mirrored
    /// with the position if [`Self::mirrored`].
    fn policy_index(&self, index: usize) -> usize {
        if self.mirrored {
            mirror_index(index)
        } else {
            index
        }
    }

    /// The material head's target: tanh(pawns ahead / scale).
    pub fn material_target(&self, targets: &Targets) -> f32 {
        (self.material_later / targets.material_scale).tanh()
    }

    /// The moves-left head's target: plies left / [`MOVES_LEFT_UNIT`].
    pub fn moves_left_target(&self) -> f32 {
        (self.plies_left as f64 / MOVES_LEFT_UNIT) as f32
    }
}

/// [`Wdl::from_value`] as a target row.
fn spread(value: f32) -> [f32; 3] {
    let wdl = Wdl::from_value(value);
    [wdl.win, wdl.draw, wdl.loss]
}

/// Encodes `samples`, in parallel, with their targets.
pub fn build_batch(
    samples: &[TrainingSample],
    encoder: &EncoderConfig,
    targets: &Targets,
) -> Batch {
    let n = samples.len();
    let input_len = encoder.input_len();
    let mut batch = Batch {
        inputs: vec![0.0; n * input_len],
        policy: vec![0.0; n * POLICY_SIZE],
        legal: vec![0.0; n * POLICY_SIZE],
        wdl: vec![0.0; n * 3],
        value_mask: samples
            .iter()
            .map(|s| s.teaches_value(targets) as u8 as f32)
            .collect(),
        result_mask: samples
            .iter()
            .map(|s| s.result_known as u8 as f32)
            .collect(),
        material: samples.iter().map(|s| s.material_target(targets)).collect(),
        moves_left: samples
            .iter()
            .map(TrainingSample::moves_left_target)
            .collect(),
        reply: Vec::new(),
        reply_mask: Vec::new(),
        n,
        mirrorable: samples.iter().filter(|s| s.mirrorable()).count(),
    };
    batch
        .inputs
        .par_chunks_mut(input_len)
        .zip(batch.policy.par_chunks_mut(POLICY_SIZE))
        .zip(batch.legal.par_chunks_mut(POLICY_SIZE))
        .zip(batch.wdl.par_chunks_mut(3))
        .zip(samples.par_iter())
        .for_each(|((((input, policy), legal), wdl), sample)| {
            let request = EvalRequest {
                repetitions: sample.repetitions,
                ..EvalRequest::new(&sample.history, &sample.moves)
            };
            encode(encoder, &request, input);
            if sample.mirrored {
                mirror_files(input);
            }
            let side = request.position().side_to_move();
            for (&mv, &p) in sample.moves.iter().zip(&sample.policy) {
                let index = move_index(side, mv).expect("a legal move has a policy index");
                let index = sample.policy_index(index);
                policy[index] = p;
                legal[index] = 1.0;
            }
            wdl.copy_from_slice(&sample.value_target(targets));
        });
    if targets.reply {
        batch.reply = vec![0.0; n * POLICY_SIZE];
        batch
            .reply
            .par_chunks_mut(POLICY_SIZE)
            .zip(samples.par_iter())
            .for_each(|(row, sample)| {
                for &(index, p) in &sample.reply {
                    row[sample.policy_index(index)] = p;
                }
            });
        batch.reply_mask = samples
            .iter()
            .map(|s| !s.reply.is_empty() as u8 as f32)
            .collect();
    }
    batch
}

/// Caps how often, on average, each new sample is trained on: steps are
/// allowed while `steps * batch_size <= new_samples * max_reuse`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReuseLimiter {
    pub max_reuse: f64,
}

impl ReuseLimiter {
    /// Training steps allowed now beyond the `steps_done` already taken.
    pub fn allowed_steps(
        &self,
        new_samples_since_start: u64,
        batch_size: usize,
        steps_done: u64,
    ) -> u64 {
        if batch_size == 0 {
            return 0;
        }
        // The cast saturates: a negative or NaN budget allows nothing.
        let budget =
            (new_samples_since_start as f64 * self.max_reuse / batch_size as f64).floor() as u64;
        budget.saturating_sub(steps_done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfplay::data::tests::random_game;
    use crate::selfplay::data::MoveRecord;
    use engine::{Outcome, Reason};
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// The game result alone.
    const RESULT_ONLY: Targets = Targets {
        q_share: 0.0,
        capped_value: CappedValue::None,
        material_plies: 1,
        material_scale: 1.0,
        reply: false,
        mirror: false,
    };

    fn config(min_window: usize, max_window: usize) -> ReplayConfig {
        ReplayConfig {
            min_window,
            max_window,
            ..FORMULA
        }
    }

    /// The window the formula test works through.
    const FORMULA: ReplayConfig = ReplayConfig {
        min_window: 20_000,
        alpha: 0.75,
        beta: 0.4,
        max_window: 2_000_000,
    };

    /// A game whose every ply is a policy target, `plies` long.
    fn full_game(rng: &mut SmallRng, plies: usize, outcome: Outcome) -> GameRecord {
        let mut game = random_game(rng, Position::start(), plies, outcome);
        let mut pos = game.start;
        for record in &mut game.moves {
            record.visits = (1..=pos.legal_moves().len() as u32).collect();
            pos = pos.after(record.mv);
        }
        game
    }

    #[test]
    fn window_formula() {
        let c = FORMULA;
        c.validate().unwrap();
        assert_eq!(c.window(0), 0);
        assert_eq!(c.window(5_000), 5_000);
        assert_eq!(c.window(20_000), 20_000);
        // min * (1 + 0.4 * (10^0.75 - 1) / 0.75) at ten times min_window.
        let expected = 20_000.0 * (1.0 + 0.4 * (10f64.powf(0.75) - 1.0) / 0.75);
        assert_eq!(c.window(200_000), expected as usize);
        assert_eq!(c.window(u64::MAX / 2), 2_000_000);
        // The window grows, and so does its start.
        let (mut last, mut last_start) = (0, 0);
        for total in (0..50_000_000).step_by(99_991) {
            let w = c.window(total);
            assert!(w >= last && w as u64 <= total, "window({total}) = {w}");
            assert!(total - w as u64 >= last_start, "window({total}) = {w}");
            (last, last_start) = (w, total - w as u64);
        }
        assert!(ReplayConfig { alpha: 1.5, ..c }.validate().is_err());
        assert!(ReplayConfig { min_window: 0, ..c }.validate().is_err());
        assert!(ReplayConfig {
            max_window: 10,
            ..c
        }
        .validate()
        .is_err());
    }

    #[test]
    fn old_games_leave_the_window() {
        let mut rng = SmallRng::seed_from_u64(10);
        let mut buffer = ReplayBuffer::new(config(50, 80));
        let mut added = Vec::new();
        for _ in 0..40 {
            let game = Arc::new(full_game(&mut rng, 10, Outcome::draw(Reason::Adjudication)));
            buffer.add(game.clone());
            added.push(game);
            let total = buffer.total_samples_ever();
            let window = buffer.samples_in_window() as u64;
            assert_eq!(window as usize, buffer.config().window(total));
            // The held games cover the window and the oldest is needed.
            let held: u64 = buffer.games.iter().map(|e| e.targets.len() as u64).sum();
            assert!(held >= window);
            assert!(held - buffer.games[0].targets.len() as u64 <= window);
            assert!(Arc::ptr_eq(
                &buffer.games.back().unwrap().game,
                added.last().unwrap()
            ));
        }
        assert_eq!(buffer.total_samples_ever(), 400);
        assert_eq!(buffer.samples_in_window(), 80);
        assert_eq!(buffer.games_in_window(), 8);
        // Dropped games are freed: only the buffer held the others.
        assert_eq!(
            added.iter().filter(|g| Arc::strong_count(g) == 2).count(),
            8
        );
    }

    #[test]
    fn samples_come_from_policy_targets_in_the_window() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut buffer = ReplayBuffer::new(config(30, 30));
        assert!(buffer.sample(&mut rng, 4, 4, 8).is_empty());
        // A game with no policy target adds nothing.
        let mut fast = random_game(
            &mut rng,
            Position::start(),
            6,
            Outcome::draw(Reason::Threefold),
        );
        fast.moves.iter_mut().for_each(|m| m.visits.clear());
        buffer.add(Arc::new(fast));
        assert_eq!(
            (buffer.total_samples_ever(), buffer.games_in_window()),
            (0, 0)
        );

        let mut games = Vec::new();
        for i in 0..8 {
            // Network numbers tell games apart; only odd plies are targets.
            let mut game = full_game(&mut rng, 8, Outcome::win(Color::White, Reason::Checkmate));
            game.network = i;
            for (ply, record) in game.moves.iter_mut().enumerate() {
                if ply % 2 == 0 {
                    record.visits.clear();
                }
            }
            buffer.add(Arc::new(game.clone()));
            games.push(game);
        }
        // 32 samples, the window holds the last 30: the two oldest of game 0 are out.
        assert_eq!(buffer.total_samples_ever(), 32);
        // Search values are random: they tell each (game, ply) apart.
        let by_value: std::collections::HashMap<u32, (usize, usize)> = games
            .iter()
            .enumerate()
            .flat_map(|(g, game)| {
                let plies = game.moves.iter().enumerate();
                plies.map(move |(ply, m)| (m.search_value.to_bits(), (g, ply)))
            })
            .collect();
        assert_eq!(by_value.len(), 64);
        let samples = buffer.sample(&mut rng, 2000, 3, 5);
        assert_eq!(samples.len(), 2000);
        let mut seen = std::collections::HashSet::new();
        for sample in &samples {
            let (game, ply) = by_value[&sample.search_value.to_bits()];
            assert_eq!(*sample, training_sample(&games[game], ply, 3, 5));
            assert_eq!(ply % 2, 1, "only policy-target plies are sampled");
            assert!(
                game > 0 || ply >= 5,
                "game 0 ply {ply} is outside the window"
            );
            seen.insert((game, ply));
        }
        assert_eq!(seen.len(), 30, "every sample in the window is drawn");
    }

    #[test]
    fn targets_line_up_with_the_game() {
        let mut rng = SmallRng::seed_from_u64(12);
        for winner in [Some(Color::White), Some(Color::Black), None] {
            let outcome = Outcome {
                winner,
                reason: Reason::Adjudication,
            };
            let game = full_game(&mut rng, 12, outcome);
            for ply in 0..game.moves.len() {
                let sample = training_sample(&game, ply, 4, 3);
                let mut positions = vec![game.start];
                for record in &game.moves[..ply] {
                    positions.push(positions.last().unwrap().after(record.mv));
                }
                let keep = positions.len().min(4);
                assert_eq!(sample.history, positions[positions.len() - keep..]);
                let pos = *positions.last().unwrap();
                assert_eq!(sample.moves, pos.legal_moves().to_vec());
                assert!(sample.moves.contains(&game.moves[ply].mv));
                assert_eq!(sample.policy.len(), sample.moves.len());
                assert!((sample.policy.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                // Visits 1..=n: the last move has the largest share.
                let n = sample.moves.len() as f32;
                let last = *sample.policy.last().unwrap();
                assert!((last - n / (n * (n + 1.0) / 2.0)).abs() < 1e-6);
                assert_eq!(sample.search_value, game.moves[ply].search_value);
                let expected = match winner {
                    None => [0.0, 1.0, 0.0],
                    Some(w) if w == pos.side_to_move() => [1.0, 0.0, 0.0],
                    Some(_) => [0.0, 0.0, 1.0],
                };
                assert_eq!(sample.wdl, expected, "ply {ply} winner {winner:?}");
            }
        }
    }

    #[test]
    fn repetitions_come_from_the_replay() {
        // Kings step out and back: positions recur.
        let start = Position::from_fen("4k5/p9/10/10/10/10/10/10/P9/4K5 w - - 0 11").unwrap();
        let mut replay = Game::new(start);
        let mut moves = Vec::new();
        let mut expected = Vec::new();
        for text in ["e1e2", "e10e9", "e2e1", "e9e10"].iter().cycle().take(9) {
            let pos = *replay.position();
            let mv = pos.parse_move(text).unwrap();
            expected.push(replay.repetitions() as u8);
            moves.push(MoveRecord {
                mv,
                visits: vec![1; pos.legal_moves().len()],
                search_value: 0.0,
            });
            replay.play(mv).unwrap();
        }
        assert!(expected.iter().any(|&r| r >= 1), "{expected:?}");
        let game = GameRecord {
            start,
            moves,
            outcome: Outcome::draw(Reason::Threefold),
            network: 0,
            baseline: None,
        };
        let found: Vec<u8> = (0..9)
            .map(|ply| training_sample(&game, ply, 2, 1).repetitions)
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn batch_layout() {
        let mut rng = SmallRng::seed_from_u64(13);
        let mut buffer = ReplayBuffer::new(config(100, 100));
        for _ in 0..5 {
            buffer.add(Arc::new(random_game(
                &mut rng,
                Position::start(),
                30,
                Outcome::win(Color::Black, Reason::KingQuota),
            )));
        }
        let encoder = EncoderConfig {
            history: 2,
            ..EncoderConfig::default()
        };
        let samples = buffer.sample(&mut rng, 16, encoder.history, 4);
        let without_reply = build_batch(&samples, &encoder, &RESULT_ONLY);
        assert!(without_reply.reply.is_empty() && without_reply.reply_mask.is_empty());
        let targets = Targets {
            reply: true,
            ..RESULT_ONLY
        };
        let batch = build_batch(&samples, &encoder, &targets);
        assert_eq!(
            Batch {
                reply: Vec::new(),
                reply_mask: Vec::new(),
                ..batch.clone()
            },
            without_reply
        );
        assert_eq!(batch.n, 16);
        assert_eq!(batch.inputs.len(), 16 * encoder.input_len());
        assert_eq!(batch.policy.len(), 16 * POLICY_SIZE);
        assert_eq!(batch.legal.len(), 16 * POLICY_SIZE);
        assert_eq!(batch.wdl.len(), 16 * 3);
        // King-quota wins are results to learn.
        assert_eq!(batch.value_mask, vec![1.0; 16]);
        assert_eq!(batch.material.len(), 16);
        assert_eq!(batch.reply.len(), 16 * POLICY_SIZE);
        for (i, sample) in samples.iter().enumerate() {
            assert_eq!(batch.material[i], sample.material_target(&RESULT_ONLY));
            assert_eq!(batch.moves_left[i], sample.moves_left_target());
            let reply = &batch.reply[i * POLICY_SIZE..(i + 1) * POLICY_SIZE];
            let has_reply = !sample.reply.is_empty();
            assert_eq!(batch.reply_mask[i], has_reply as u8 as f32);
            assert_eq!(
                reply.iter().filter(|&&p| p != 0.0).count(),
                sample.reply.len()
            );
            for &(index, p) in &sample.reply {
                assert_eq!(reply[index], p);
            }
            let rows = i * POLICY_SIZE..(i + 1) * POLICY_SIZE;
            let (policy, legal) = (&batch.policy[rows.clone()], &batch.legal[rows]);
            assert_eq!(
                legal.iter().filter(|&&l| l == 1.0).count(),
                sample.moves.len()
            );
            assert_eq!(
                legal.iter().filter(|&&l| l != 0.0).count(),
                sample.moves.len()
            );
            assert!(policy
                .iter()
                .zip(legal)
                .all(|(&p, &l)| p == 0.0 || l == 1.0));
            assert!((policy.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            let side = sample.history.last().unwrap().side_to_move();
            for (&mv, &p) in sample.moves.iter().zip(&sample.policy) {
                assert_eq!(policy[move_index(side, mv).unwrap()], p);
            }
            assert_eq!(batch.wdl[i * 3..i * 3 + 3], sample.wdl);
            let mut input = vec![0.0; encoder.input_len()];
            let request = EvalRequest {
                repetitions: sample.repetitions,
                ..EvalRequest::new(&sample.history, &sample.moves)
            };
            encode(&encoder, &request, &mut input);
            let row = i * encoder.input_len()..(i + 1) * encoder.input_len();
            assert_eq!(batch.inputs[row], input[..]);
        }
        assert_eq!(build_batch(&[], &encoder, &RESULT_ONLY).n, 0);
    }

    #[test]
    fn value_target_mixes_result_and_search_value() {
        let mut sample = TrainingSample {
            history: vec![Position::start()],
            repetitions: 0,
            moves: Position::start().legal_moves().to_vec(),
            policy: Vec::new(),
            wdl: [0.0, 0.0, 1.0],
            result_known: true,
            search_value: 0.5,
            capped_value: None,
            material_later: 3.0,
            plies_left: 10,
            reply: Vec::new(),
            mirrored: false,
        };
        let mix = |q_share| Targets {
            q_share,
            capped_value: CappedValue::None,
            material_plies: 8,
            material_scale: 3.0,
            reply: false,
            mirror: false,
        };
        assert_eq!(sample.value_target(&RESULT_ONLY), [0.0, 0.0, 1.0]);
        assert_eq!(sample.value_target(&mix(1.0)), [0.5, 0.5, 0.0]);
        assert_eq!(sample.value_target(&mix(0.5)), [0.25, 0.25, 0.5]);
        // Material is no part of the value target, only of its own head's:
        // three pawns up at scale 3 is tanh(1).
        assert_eq!(sample.value_target(&mix(0.0)), [0.0, 0.0, 1.0]);
        assert!((sample.material_target(&mix(0.0)) - 1f32.tanh()).abs() < 1e-6);
        sample.material_later = -300.0;
        assert!((sample.material_target(&mix(0.0)) + 1.0).abs() < 1e-6);
        sample.search_value = -1.0;
        assert_eq!(sample.value_target(&mix(1.0)), [0.0, 0.0, 1.0]);
    }

    /// A game from `fen` through `moves`, every ply a policy target.
    fn scripted_game(fen: &str, moves: &[&str], outcome: Outcome) -> GameRecord {
        let mut pos = Position::from_fen(fen).unwrap();
        let start = pos;
        let moves = moves
            .iter()
            .map(|text| {
                let mv = pos.parse_move(text).unwrap();
                let record = MoveRecord {
                    mv,
                    visits: vec![1; pos.legal_moves().len()],
                    search_value: 0.0,
                };
                pos = pos.after(mv);
                record
            })
            .collect();
        GameRecord {
            start,
            moves,
            outcome,
            network: 0,
            baseline: None,
        }
    }

    #[test]
    fn material_later_follows_the_game() {
        // White's knight takes a pawn, Black's queen takes the knight back.
        let fen = "4qk4/10/10/10/4p5/10/3N6/10/10/5K4 w - - 0 11";
        let moves = ["d4e6", "e10e6", "f1g1", "e6e5"];
        let adjudicated = scripted_game(fen, &moves, Outcome::draw(Reason::Adjudication));
        let later =
            |game: &GameRecord, ply, plies| training_sample(game, ply, 1, plies).material_later;
        // A knight against a queen and a pawn: -7 for White at the start.
        assert_eq!(later(&adjudicated, 0, 1), -6.0);
        assert_eq!(later(&adjudicated, 0, 2), -9.0);
        assert_eq!(later(&adjudicated, 1, 1), 9.0, "Black's view");
        // Past the end of the game: its last position.
        assert_eq!(later(&adjudicated, 2, 8), -9.0);
        assert_eq!(later(&adjudicated, 3, 1), 9.0);
        // An adjudicated (capped) game has no result to learn; one the
        // rules ended has.
        assert!(!training_sample(&adjudicated, 0, 1, 1).result_known);
        let stalemate = scripted_game(fen, &moves, Outcome::draw(Reason::Stalemate));
        assert!(training_sample(&stalemate, 0, 1, 1).result_known);
        let resigned = scripted_game(fen, &moves, Outcome::win(Color::White, Reason::Resignation));
        assert!(training_sample(&resigned, 0, 1, 1).result_known);
        assert_eq!(later(&stalemate, 0, 4), -9.0);
    }

    #[test]
    fn capped_games_teach_their_last_search_value_when_asked() {
        let fen = "4qk4/10/10/10/4p5/10/3N6/10/10/5K4 w - - 0 11";
        let moves = ["d4e6", "e10e6", "f1g1", "e6e5"];
        let mut game = scripted_game(fen, &moves, Outcome::draw(Reason::Adjudication));
        // Black's full search at ply 1 is the last: plies 2 and 3 were fast.
        game.moves[1].search_value = 0.6;
        game.moves[3].search_value = -0.9;
        game.moves[2].visits.clear();
        game.moves[3].visits.clear();
        let encoder = EncoderConfig {
            history: 1,
            ..EncoderConfig::default()
        };
        let samples: Vec<TrainingSample> = (0..2)
            .map(|ply| training_sample(&game, ply, 1, 1))
            .collect();
        let capped: Vec<Option<f32>> = samples.iter().map(|s| s.capped_value).collect();
        assert_eq!(capped, [Some(-0.6), Some(0.6)], "each side's view");

        let search = Targets {
            capped_value: CappedValue::Search,
            ..RESULT_ONLY
        };
        let batch = build_batch(&samples, &encoder, &search);
        assert_eq!(batch.value_mask, [1.0; 2]);
        assert_eq!(batch.result_mask, [0.0; 2], "still no moves-left target");
        let close =
            |got: &[f32], want: [f32; 3]| got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6);
        assert!(close(&batch.wdl[..3], [0.0, 0.4, 0.6]), "{:?}", batch.wdl);
        assert!(close(&batch.wdl[3..6], [0.6, 0.4, 0.0]), "{:?}", batch.wdl);
        // "q": each position its own search's value (ply 0's is the scripted
        // game's 0.0), whatever q_share says: the result it would blend is
        // that value too.
        let own = Targets {
            capped_value: CappedValue::Q,
            q_share: 0.5,
            ..RESULT_ONLY
        };
        let batch = build_batch(&samples, &encoder, &own);
        assert_eq!(batch.value_mask, [1.0; 2]);
        assert!(close(&batch.wdl[..3], [0.0, 1.0, 0.0]), "{:?}", batch.wdl);
        assert!(close(&batch.wdl[3..6], [0.6, 0.4, 0.0]), "{:?}", batch.wdl);
        // "verdict": the adjudication, here a draw, from each side's view.
        let mut won = game.clone();
        won.outcome = Outcome::win(Color::White, Reason::Adjudication);
        let won: Vec<TrainingSample> = (0..2).map(|ply| training_sample(&won, ply, 1, 1)).collect();
        let verdict = Targets {
            capped_value: CappedValue::Verdict,
            ..RESULT_ONLY
        };
        let batch = build_batch(&samples, &encoder, &verdict);
        assert_eq!(batch.value_mask, [1.0; 2]);
        assert_eq!(batch.wdl, [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]);
        let batch = build_batch(&won, &encoder, &verdict);
        assert_eq!(
            batch.wdl,
            [1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            "White won on material"
        );
        // Off, the capped game teaches no value.
        let batch = build_batch(&samples, &encoder, &RESULT_ONLY);
        assert_eq!(batch.value_mask, [0.0; 2]);

        // A game with a result keeps it: the capped value is only for the cap.
        game.outcome = Outcome::win(Color::White, Reason::Resignation);
        let sample = training_sample(&game, 1, 1, 1);
        assert_eq!(sample.capped_value, None);
        assert_eq!(sample.value_target(&search), [0.0, 0.0, 1.0]);
        assert!(sample.teaches_value(&search));
        // Imported games have no search values to stand in.
        game.outcome = Outcome::draw(Reason::Adjudication);
        game.network = IMPORTED;
        let sample = training_sample(&game, 1, 1, 1);
        assert_eq!(sample.capped_value, None);
        assert!(!sample.teaches_value(&search));
        assert!(!sample.teaches_value(&own));
    }

    #[test]
    fn a_mirrored_sample_is_the_mirrored_games_sample() {
        // No castling rights: the rules are symmetric left to right. Each
        // side's full search spreads its visits unevenly, so that a policy
        // put back unmirrored would show.
        let fen = "4qk4/10/10/10/4p5/10/3N6/10/10/5K4 w - - 0 11";
        let moves = ["d4e6", "e10e6", "f1g1", "e6e5"];
        let twin_fen = "4kq4/10/10/10/5p4/10/6N3/10/10/4K5 w - - 0 11";
        let twin_moves = ["g4f6", "f10f6", "e1d1", "f6f5"];
        let outcome = Outcome::win(Color::Black, Reason::Resignation);
        let mut game = scripted_game(fen, &moves, outcome);
        let mut twin = scripted_game(twin_fen, &twin_moves, outcome);
        for record in &mut game.moves {
            record.visits = (1..=record.visits.len() as u32).collect();
        }
        // The twin's visits: each mirrored move gets its original's count.
        let mut pos = game.start;
        let mut twin_pos = twin.start;
        for (record, twin_record) in game.moves.iter().zip(&mut twin.moves) {
            let side = pos.side_to_move();
            twin_record.visits = twin_pos
                .legal_moves()
                .iter()
                .map(|&mv| {
                    let index = mirror_index(move_index(side, mv).unwrap());
                    let original = pos
                        .legal_moves()
                        .iter()
                        .position(|&m| move_index(side, m) == Some(index))
                        .unwrap();
                    record.visits[original]
                })
                .collect();
            pos = pos.after(record.mv);
            twin_pos = twin_pos.after(twin_record.mv);
        }
        let encoder = EncoderConfig {
            history: 2,
            ..EncoderConfig::default()
        };
        let targets = Targets {
            reply: true,
            ..RESULT_ONLY
        };
        let mut mirrored: Vec<TrainingSample> = (0..4)
            .map(|ply| training_sample(&game, ply, 2, 1))
            .collect();
        assert!(mirrored.iter().all(TrainingSample::mirrorable));
        for sample in &mut mirrored {
            sample.mirrored = true;
        }
        let plain: Vec<TrainingSample> = (0..4)
            .map(|ply| training_sample(&twin, ply, 2, 1))
            .collect();
        let a = build_batch(&mirrored, &encoder, &targets);
        let b = build_batch(&plain, &encoder, &targets);
        assert_eq!(a, b);
        assert_eq!(a.mirrorable, 4);
        for sample in &mut mirrored {
            sample.mirrored = false;
        }
        let unmirrored = build_batch(&mirrored, &encoder, &targets);
        assert_ne!(unmirrored.inputs, b.inputs);
        assert_ne!(unmirrored.policy, b.policy);
        assert_ne!(unmirrored.reply, b.reply);

        // Castling rights forbid it, and a batch mirrors only when asked.
        let start = scripted_game(engine::START_FEN, &["e2e4"], outcome);
        assert!(!training_sample(&start, 0, 1, 1).mirrorable());
        let mut replay = ReplayBuffer::new(config(100, 1000));
        replay.add(Arc::new(game));
        let mut rng = SmallRng::seed_from_u64(5);
        let batch = |replay: &ReplayBuffer, rng: &mut SmallRng, mirror| {
            let targets = Targets { mirror, ..targets };
            replay.batch(rng, 64, &encoder, &targets)
        };
        let on = batch(&replay, &mut rng, true);
        let off = batch(&replay, &mut rng, false);
        let rows = |b: &Batch| -> std::collections::HashSet<Vec<u32>> {
            b.policy
                .chunks(POLICY_SIZE)
                .map(|row| row.iter().map(|p| p.to_bits()).collect())
                .collect()
        };
        assert_eq!(rows(&off).len(), 4, "four plies, unmirrored");
        assert_eq!(rows(&on).len(), 8, "each ply both ways");
    }

    #[test]
    fn moves_left_and_reply_targets_follow_the_game() {
        let fen = "4qk4/10/10/10/4p5/10/3N6/10/10/5K4 w - - 0 11";
        let moves = ["d4e6", "e10e6", "f1g1", "e6e5"];
        let mut game = scripted_game(fen, &moves, Outcome::win(Color::Black, Reason::Resignation));
        // Ply 1 was a fast search (no policy target); ply 2 a full one whose
        // visits grow with the move's place in the list (the first gets none).
        game.moves[1].visits.clear();
        let legal = game.moves[2].visits.len() as u32;
        game.moves[2].visits = (0..legal).collect();
        let mut positions = vec![game.start];
        for record in &game.moves {
            positions.push(positions.last().unwrap().after(record.mv));
        }
        let sample = |ply| training_sample(&game, ply, 1, 1);

        // Plies left, the move about to be played included.
        let left: Vec<u32> = (0..4).map(|ply| sample(ply).plies_left).collect();
        assert_eq!(left, [4, 3, 2, 1]);
        assert!((sample(0).moves_left_target() - 0.04).abs() < 1e-7);

        // After ply 0 Black replies with a fast search: one-hot on its move,
        // indexed in Black's frame (the index Black's own policy has for it).
        let black_reply = game.moves[1].mv;
        let index = move_index(Color::Black, black_reply).unwrap();
        assert_eq!(sample(0).reply, [(index, 1.0)]);
        assert_eq!(
            models::policy::decode(&positions[1], index),
            Some(black_reply)
        );
        assert_ne!(Some(index), move_index(Color::White, black_reply));

        // After ply 1 White's reply was a full search: its visits.
        let reply = sample(1).reply;
        let total = (legal * (legal - 1) / 2) as f64;
        let expected: Vec<(usize, f32)> = positions[2]
            .legal_moves()
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, &mv)| {
                let p = (i as f64 / total) as f32;
                (move_index(Color::White, mv).unwrap(), p)
            })
            .collect();
        assert_eq!(reply, expected);
        assert!((reply.iter().map(|r| r.1).sum::<f32>() - 1.0).abs() < 1e-5);
        // Ply 3 was a full search with a visit on every move: uniform.
        let uniform = sample(2).reply;
        let n = positions[3].legal_moves().len();
        assert_eq!(uniform.len(), n);
        assert!(uniform.iter().all(|&(_, p)| p == (1.0 / n as f64) as f32));
        // The last move has no reply.
        assert!(sample(3).reply.is_empty());
        // With a baseline playing Black, Black's replies teach nothing.
        let mut against = game.clone();
        against.baseline = Some(crate::selfplay::data::Baseline {
            side: Color::Black,
            spec: "greedy".into(),
        });
        assert!(training_sample(&against, 0, 1, 1).reply.is_empty());
        assert!(training_sample(&against, 2, 1, 1).reply.is_empty());
        assert_eq!(training_sample(&against, 1, 1, 1).reply, expected);

        // A game stopped at the length cap teaches no moves left (nor value);
        // its replies were still played and teach the reply head.
        game.outcome = Outcome::draw(Reason::Adjudication);
        let samples: Vec<TrainingSample> = (0..4)
            .map(|ply| training_sample(&game, ply, 1, 1))
            .collect();
        let targets = Targets {
            reply: true,
            ..RESULT_ONLY
        };
        let batch = build_batch(
            &samples,
            &EncoderConfig {
                history: 1,
                ..EncoderConfig::default()
            },
            &targets,
        );
        assert_eq!(batch.value_mask, [0.0; 4]);
        assert_eq!(batch.result_mask, [0.0; 4]);
        let expected = [0.04, 0.03, 0.02, 0.01];
        assert!(batch
            .moves_left
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() < 1e-7));
        assert_eq!(batch.reply_mask, [1.0, 1.0, 1.0, 0.0]);
        assert_eq!(batch.reply[index], 1.0);
    }

    #[test]
    fn rebuild_matches_adding_and_skips_damage() {
        let mut rng = SmallRng::seed_from_u64(14);
        let config = config(40, 60);
        let mut expected = ReplayBuffer::new(config);
        let chunks: Vec<Vec<GameRecord>> = (0..6)
            .map(|_| {
                (0..3)
                    .map(|_| {
                        random_game(
                            &mut rng,
                            Position::start(),
                            20,
                            Outcome::draw(Reason::FiftyMove),
                        )
                    })
                    .collect()
            })
            .collect();
        for game in chunks.iter().flatten() {
            expected.add(Arc::new(game.clone()));
        }
        let samples: Vec<u64> = chunks
            .iter()
            .map(|games| games.iter().map(|g| g.samples() as u64).sum())
            .collect();
        let mut read = Vec::new();
        let buffer = ReplayBuffer::rebuild(&config, &samples, |i| {
            read.push(i);
            Ok::<_, ()>(Some(chunks[i].clone()))
        })
        .unwrap();
        assert_eq!(buffer.total_samples_ever(), expected.total_samples_ever());
        assert_eq!(buffer.games_in_window(), expected.games_in_window());
        for (a, b) in buffer.games.iter().zip(&expected.games) {
            assert_eq!(
                (a.first, &a.targets, &*a.game),
                (b.first, &b.targets, &*b.game)
            );
        }
        // Newest first, and only as far back as the window reaches.
        let window = config.window(expected.total_samples_ever()) as u64;
        let needed = samples.iter().rev().scan(0, |sum, &n| {
            let before = *sum;
            *sum += n;
            Some(before)
        });
        let needed = needed.take_while(|&before| before < window).count();
        assert!(
            needed < chunks.len(),
            "the test should leave a chunk unread"
        );
        let newest_first: Vec<usize> = (chunks.len() - needed..chunks.len()).rev().collect();
        assert_eq!(read, newest_first);

        // The newest chunk turns out damaged: its samples do not count.
        let buffer = ReplayBuffer::rebuild(&config, &samples, |i| {
            Ok::<_, ()>((i != chunks.len() - 1).then(|| chunks[i].clone()))
        })
        .unwrap();
        let lost = samples[chunks.len() - 1];
        assert_eq!(
            buffer.total_samples_ever(),
            expected.total_samples_ever() - lost
        );
        assert!(buffer.games_in_window() > 0);
        // A failed read ends the rebuild with its error.
        assert_eq!(
            ReplayBuffer::rebuild(&config, &samples, |_| Err("offline")).err(),
            Some("offline")
        );
        let empty = ReplayBuffer::rebuild(&config, &[], |_| Ok::<_, ()>(None)).unwrap();
        assert_eq!(empty.total_samples_ever(), 0);
    }

    #[test]
    fn reuse_limiter() {
        let limiter = ReuseLimiter { max_reuse: 4.0 };
        assert_eq!(limiter.allowed_steps(0, 256, 0), 0);
        assert_eq!(limiter.allowed_steps(63, 256, 0), 0);
        assert_eq!(limiter.allowed_steps(64, 256, 0), 1);
        assert_eq!(limiter.allowed_steps(1000, 256, 0), 15);
        assert_eq!(limiter.allowed_steps(1000, 256, 10), 5);
        assert_eq!(limiter.allowed_steps(1000, 256, 20), 0);
        assert_eq!(limiter.allowed_steps(1000, 0, 0), 0);
        assert_eq!(
            ReuseLimiter { max_reuse: 0.5 }.allowed_steps(1024, 256, 1),
            1
        );
        assert_eq!(
            ReuseLimiter { max_reuse: -1.0 }.allowed_steps(1024, 256, 0),
            0
        );
    }
}
