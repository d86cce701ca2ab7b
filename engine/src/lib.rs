//! Chess-mix: the rules of RULES.md, a legal move generator over
//! `Bitboard(u128)`, notation, perft, game outcomes and baseline players.
//! This crate never depends on libtorch.

pub mod attacks;
pub mod bitboard;
pub mod castles;
#[cfg(feature = "cli")]
pub mod cli;
pub mod error;
pub mod eval;
pub mod fen;
pub mod game;
pub mod mcts;
pub mod movegen;
pub mod perft;
pub mod pgn;
pub mod players;
pub mod position;
pub mod rules;
pub mod san;
pub mod search;
pub mod types;
pub mod uci;
mod zobrist;

pub use bitboard::Bitboard;
pub use castles::{Castles, CastlingSide};
pub use error::{
    at_least_one, check, non_negative, positive, within, FenError, InvalidKey, MoveError,
    ParseSquareError, PgnError, SanError,
};
pub use eval::{EvalError, EvalRequest, Evaluation, Evaluator, UniformEvaluator, Wdl};
pub use game::{Game, Outcome, Reason};
pub use movegen::{MoveList, PieceMoves, MAX_MOVES};
pub use perft::{divide, perft};
pub use pgn::{read_pgn, read_pgns, write_annotated_pgn, write_pgn, PgnGame};
pub use position::{parse_coordinate, Coverage, EnPassant, Move, Position, START_FEN};
pub use rules::{control_period, Period, Rules, Run};
pub use types::{Color, Kind, Piece, Square};
pub use zobrist::{mix64, splitmix64, GOLDEN_GAMMA};
