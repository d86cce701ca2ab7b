//! The interface between search and a position evaluator (a network, or the
//! uniform stand-in). Implementations live elsewhere: `models` has the
//! libtorch one, so this crate stays free of libtorch.

use thiserror::Error;

use crate::position::{Move, Position};

/// One position to evaluate.
#[derive(Clone, Copy, Debug)]
pub struct EvalRequest<'a> {
    /// Recent positions, oldest first; the last one is the position to evaluate.
    pub history: &'a [Position],
    /// How many times the current position occurred before (0, 1, 2).
    pub repetitions: u8,
    /// The legal moves to score, in the order the policy comes back.
    pub moves: &'a [Move],
    /// Whether the answer should carry the plies left: only a search with
    /// the moves-left utility reads them, and a network's head costs time.
    pub moves_left: bool,
}

impl<'a> EvalRequest<'a> {
    /// A request for the last of `history`, not seen before.
    pub fn new(history: &'a [Position], moves: &'a [Move]) -> EvalRequest<'a> {
        EvalRequest {
            history,
            repetitions: 0,
            moves,
            moves_left: false,
        }
    }

    pub fn position(&self) -> &Position {
        self.history
            .last()
            .expect("a request holds at least its position")
    }
}

/// Win/draw/loss probabilities from the side to move's point of view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wdl {
    pub win: f32,
    pub draw: f32,
    pub loss: f32,
}

impl Wdl {
    pub const DRAW: Wdl = Wdl {
        win: 0.0,
        draw: 1.0,
        loss: 0.0,
    };

    /// The outcome with expected score `value` (clamped to [-1, 1]) and the
    /// largest draw share: never both a win and a loss share.
    pub fn from_value(value: f32) -> Wdl {
        let v = value.clamp(-1.0, 1.0);
        Wdl {
            win: v.max(0.0),
            draw: 1.0 - v.abs(),
            loss: (-v).max(0.0),
        }
    }

    /// Expected score in [-1, 1].
    pub fn value(&self) -> f32 {
        self.win - self.loss
    }

    /// The same outcome from the opponent's point of view.
    pub fn flipped(&self) -> Wdl {
        Wdl {
            win: self.loss,
            draw: self.draw,
            loss: self.win,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Prior probability of each requested move, summing to 1.
    pub policy: Vec<f32>,
    pub wdl: Wdl,
    /// Plies until the game ends, as the evaluator expects them (lc0's
    /// moves-left head); `None` from an evaluator without one, or where the
    /// request did not ask for them.
    pub moves_left: Option<f32>,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum EvalError {
    #[error("the evaluator has shut down")]
    Disconnected,
    #[error("evaluation failed: {0}")]
    Backend(String),
}

/// Scores positions for the search. Shared by many search threads.
pub trait Evaluator: Send + Sync {
    /// Evaluates several positions at once (one search keeps many leaves in flight).
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError>;

    fn evaluate(&self, request: &EvalRequest<'_>) -> Result<Evaluation, EvalError> {
        let mut out = self.evaluate_batch(std::slice::from_ref(request))?;
        out.pop()
            .ok_or_else(|| EvalError::Backend("empty reply".to_string()))
    }
}

/// Uniform priors and a drawn value: a network-free evaluator for tests and
/// for search driven by terminal values alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformEvaluator;

impl Evaluator for UniformEvaluator {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(requests
            .iter()
            .map(|r| Evaluation {
                policy: vec![1.0 / r.moves.len().max(1) as f32; r.moves.len()],
                wdl: Wdl::DRAW,
                moves_left: None,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_priors_sum_to_one() {
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest::new(&history, &moves);
        let eval = UniformEvaluator.evaluate(&request).unwrap();
        assert_eq!(eval.policy.len(), 38);
        assert!((eval.policy.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert_eq!(eval.wdl.value(), 0.0);
    }
}
