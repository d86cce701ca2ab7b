//! The search layer's side of time and limits, shared by every searcher and
//! by the protocols that drive them: time budgets from a clock, the stop
//! flag and deadlines of one search ([`SearchControl`]), its limits, and
//! what a search reports ([`SearchInfo`]). Nothing here speaks UCI.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::eval::Wdl;
use crate::position::Move;

/// How long a search may take: it starts no new work (iteration, batch)
/// after `soft` and stops by `hard`. `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeBudget {
    pub soft: Option<Duration>,
    pub hard: Option<Duration>,
}

/// Taken off `movetime` for the GUI's and the pipe's latency.
pub const MOVE_OVERHEAD: Duration = Duration::from_millis(10);
/// Never planned on a clock: at least this much, or [`SAFETY_DIVISOR`]th of it, stays.
pub const MIN_SAFETY_MARGIN: Duration = Duration::from_millis(30);
pub const SAFETY_DIVISOR: u32 = 20;
/// Moves left assumed in sudden death.
pub const SUDDEN_DEATH_MOVES: u32 = 30;
/// The hard budget is at most this many soft budgets.
pub const HARD_PER_SOFT: u32 = 4;

/// Soft: an even share of the usable time over the moves to go plus most of
/// the increment. Hard: a few soft budgets, but never more than half the
/// usable time unless this is the last move before the time control.
pub fn clock_budget(
    remaining: Duration,
    increment: Duration,
    movestogo: Option<u32>,
) -> (Duration, Duration) {
    let margin = MIN_SAFETY_MARGIN.max(remaining / SAFETY_DIVISOR);
    let usable = remaining.saturating_sub(margin);
    let moves = movestogo.unwrap_or(SUDDEN_DEATH_MOVES).max(1);
    let soft = (usable / moves)
        .saturating_add(increment.saturating_mul(3) / 4)
        .min(usable);
    let hard = soft.saturating_mul(HARD_PER_SOFT).min(usable / 2).max(soft);
    (soft, hard)
}

/// Deadlines in microseconds after the start; this one means none.
const NO_DEADLINE: u64 = u64::MAX;

/// The stop flag and deadlines of one search, shared by the protocol thread
/// (`stop`, `ponderhit`) and the searcher, which polls it.
#[derive(Debug)]
pub struct SearchControl {
    started: Instant,
    stop: AtomicBool,
    /// `go infinite` or `go ponder`: the answer waits for `stop` or `ponderhit`.
    infinite: AtomicBool,
    soft_us: AtomicU64,
    hard_us: AtomicU64,
    /// Changes of `stop` and `infinite` happen under this lock so that the
    /// thread holding back a `bestmove` wakes up.
    lock: Mutex<()>,
    changed: Condvar,
}

impl SearchControl {
    /// A search with `budget`, starting now.
    pub fn timed(budget: TimeBudget) -> SearchControl {
        let control = SearchControl {
            started: Instant::now(),
            stop: AtomicBool::new(false),
            infinite: AtomicBool::new(false),
            soft_us: AtomicU64::new(NO_DEADLINE),
            hard_us: AtomicU64::new(NO_DEADLINE),
            lock: Mutex::new(()),
            changed: Condvar::new(),
        };
        control.set_deadlines(budget);
        control
    }

    /// A search without deadlines that runs until [`SearchControl::stop`].
    pub fn infinite() -> SearchControl {
        let control = SearchControl::timed(TimeBudget::default());
        control.infinite.store(true, Ordering::Relaxed);
        control
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The search should go on until stopped, whatever its other limits say.
    pub fn is_infinite(&self) -> bool {
        self.infinite.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.stop.store(true, Ordering::Relaxed);
        self.changed.notify_all();
    }

    /// Stop now: asked to, or past the hard deadline.
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.passed(&self.hard_us)
    }

    /// The search has a time limit.
    pub fn has_deadline(&self) -> bool {
        self.hard_us.load(Ordering::Relaxed) != NO_DEADLINE
    }

    /// Past the soft deadline: start no new iteration.
    pub fn soft_deadline_passed(&self) -> bool {
        self.passed(&self.soft_us)
    }

    /// The opponent played the move pondered on: from now on the search has
    /// `budget` and ends by itself.
    pub fn ponderhit(&self, budget: TimeBudget) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.set_deadlines(budget);
        self.infinite.store(false, Ordering::Relaxed);
        self.changed.notify_all();
    }

    /// Blocks while the search is infinite and not stopped.
    pub(crate) fn wait_while_infinite(&self) {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.is_infinite() && !self.stop.load(Ordering::Relaxed) {
            guard = self
                .changed
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Deadlines `budget` from now.
    fn set_deadlines(&self, budget: TimeBudget) {
        let now = self.elapsed();
        let micros = |limit: Option<Duration>| {
            limit.map_or(NO_DEADLINE, |d| {
                let us = now.saturating_add(d).as_micros();
                u64::try_from(us)
                    .unwrap_or(NO_DEADLINE - 1)
                    .min(NO_DEADLINE - 1)
            })
        };
        self.soft_us.store(micros(budget.soft), Ordering::Relaxed);
        self.hard_us.store(micros(budget.hard), Ordering::Relaxed);
    }

    fn passed(&self, deadline: &AtomicU64) -> bool {
        let deadline = deadline.load(Ordering::Relaxed);
        deadline != NO_DEADLINE && self.elapsed().as_micros() >= u128::from(deadline)
    }
}

impl Default for SearchControl {
    fn default() -> SearchControl {
        SearchControl::timed(TimeBudget::default())
    }
}

/// What one search may do. Clones share `control`.
#[derive(Clone, Debug, Default)]
pub struct SearchLimits {
    /// Deepest iteration (an MCTS searcher may read it as an average depth).
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    /// Legal root moves to choose from; empty for all.
    pub searchmoves: Vec<Move>,
    pub control: Arc<SearchControl>,
}

/// A score from the side to move's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Score {
    Centipawns(i32),
    /// Mate in this many moves; negative when the side to move gets mated.
    Mate(i32),
}

/// lc0's scale between an expected score q in (-1, 1) and centipawns:
/// `cp = CP_SCALE * tan(Q_SCALE * q)`. One scale both ways, so a network's
/// value and an alpha-beta score read alike (a pawn is about q = 0.54).
const CP_SCALE: f32 = 90.0;
const Q_SCALE: f32 = 1.563_754_2;

impl Score {
    /// The score of an expected result `q` (win 1, loss -1), in centipawns.
    pub fn from_value(q: f32) -> Score {
        Score::Centipawns((CP_SCALE * (Q_SCALE * q.clamp(-0.999, 0.999)).tan()).round() as i32)
    }

    /// The expected result, in (-1, 1) for centipawns; a mate is 1 or -1.
    pub fn value(self) -> f32 {
        match self {
            Score::Centipawns(cp) => (cp as f32 / CP_SCALE).atan() / Q_SCALE,
            Score::Mate(moves) if moves > 0 => 1.0,
            Score::Mate(_) => -1.0,
        }
    }

    /// The same score from the other side's point of view.
    pub fn flipped(self) -> Score {
        match self {
            Score::Centipawns(cp) => Score::Centipawns(-cp),
            Score::Mate(moves) => Score::Mate(-moves),
        }
    }
}

/// Win, draw and loss chances in permille, summing to 1000.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WdlPermille {
    pub win: u32,
    pub draw: u32,
    pub loss: u32,
}

impl From<Wdl> for WdlPermille {
    fn from(wdl: Wdl) -> WdlPermille {
        let permille = |p: f32| (p.clamp(0.0, 1.0) * 1000.0).round() as u32;
        let win = permille(wdl.win);
        let loss = permille(wdl.loss).min(1000 - win);
        WdlPermille {
            win,
            draw: 1000 - win - loss,
            loss,
        }
    }
}

/// Progress of a search, printed as an `info` line.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchInfo {
    pub depth: u32,
    pub seldepth: Option<u32>,
    pub nodes: u64,
    pub time: Duration,
    pub score: Score,
    pub wdl: Option<WdlPermille>,
    pub pv: Vec<Move>,
    /// Each root move's statistics, best first, for a searcher asked for
    /// them (lc0's `VerboseMoveStats`); each becomes an `info string` line.
    pub moves: Vec<MoveStats>,
}

/// What a tree search knows of one root move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoveStats {
    pub mv: Move,
    pub visits: u32,
    /// The evaluator's prior as the search used it (shaped, if it shapes
    /// priors), in [0, 1].
    pub prior: f32,
    /// The mean value of its visits for the side to move, in [-1, 1]
    /// (`None` before a visit).
    pub q: Option<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_and_values_share_one_scale() {
        assert_eq!(Score::from_value(0.0), Score::Centipawns(0));
        // A pawn ahead is about q = 0.54 on lc0's scale, and back again.
        let pawn = Score::Centipawns(100).value();
        assert!((0.53..0.55).contains(&pawn), "{pawn}");
        for cp in [-2500, -300, -1, 0, 7, 100, 900] {
            assert_eq!(
                Score::from_value(Score::Centipawns(cp).value()),
                Score::Centipawns(cp)
            );
        }
        assert_eq!(Score::Centipawns(-100).value(), -pawn);
        assert_eq!(Score::Mate(3).value(), 1.0);
        assert_eq!(Score::Mate(-2).value(), -1.0);
        assert_eq!(Score::Mate(3).flipped(), Score::Mate(-3));
        assert_eq!(Score::Centipawns(40).flipped(), Score::Centipawns(-40));
        // Certain results stay finite.
        assert!(matches!(Score::from_value(1.0), Score::Centipawns(cp) if cp > 5000));
    }
}
