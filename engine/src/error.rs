//! Typed errors for every parser and for illegal moves.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid square `{0}` (files a-k without j, ranks 1-10)")]
pub struct ParseSquareError(pub String);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FenError {
    #[error("FEN has {0} fields; expected 6, or 8 with the rule 5/6 extension")]
    FieldCount(usize),
    #[error("board has {0} ranks; expected 10")]
    RankCount(usize),
    #[error("rank {rank} describes {squares} squares; expected 10")]
    RankLength { rank: usize, squares: usize },
    #[error("unknown piece `{0}`")]
    UnknownPiece(char),
    #[error("{color} has {count} kings; expected exactly one")]
    KingCount { color: &'static str, count: u32 },
    #[error("pawn on {0}, on the first or last rank")]
    PawnOnBackRank(String),
    #[error("side to move `{0}`; expected `w` or `b`")]
    SideToMove(String),
    #[error("the side not to move is in check")]
    OpponentInCheck,
    #[error("castling field `{0}`; expected `-` or some of `KQkq`")]
    CastlingField(String),
    #[error("castling right `{0}` without king and rook on their home squares")]
    CastlingWithoutPieces(char),
    #[error("en passant field `{0}` is malformed")]
    EnPassantField(String),
    #[error("en passant field `{field}` is impossible: {why}")]
    ImpossibleEnPassant { field: String, why: &'static str },
    #[error("halfmove clock `{0}` is not a number from 0 to 10000")]
    HalfmoveClock(String),
    #[error("fullmove number `{0}` is not a number from 1 to 10000")]
    FullmoveNumber(String),
    #[error("king-move field `{0}`; expected `-` or some of `Kk`")]
    KingMoveField(String),
    #[error("rule 6 field `{0}`; expected `-` or piece letters with run lengths such as `N2p1`")]
    RunField(String),
    #[error("input is not printable ASCII")]
    NotAscii,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MoveError {
    #[error("malformed coordinate move `{0}` (expected e.g. e2e5, f1i1, e9e10q)")]
    Syntax(String),
    #[error("illegal move `{mv}` in {fen}")]
    Illegal { mv: String, fen: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SanError {
    #[error("malformed SAN `{0}`")]
    Syntax(String),
    #[error("SAN `{0}` matches no legal move")]
    Illegal(String),
    #[error("SAN `{0}` is ambiguous")]
    Ambiguous(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PgnError {
    #[error("line {line}: malformed tag pair")]
    Tag { line: usize },
    #[error("line {line}: unterminated {what}")]
    Unterminated { line: usize, what: &'static str },
    #[error("FEN tag: {0}")]
    Fen(#[from] FenError),
    #[error("move {ply}: {source}")]
    Move { ply: usize, source: SanError },
    #[error("line {line}: unexpected `{token}`")]
    Token { line: usize, token: String },
    #[error("line {line}: malformed eval in comment `{text}`")]
    Eval { line: usize, text: String },
    #[error("variant `{0}` is not Chess-mix")]
    Variant(String),
    #[error("no game found")]
    Empty,
}

/// A setting whose value is out of range: its key within its config
/// section, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key}: {why}")]
pub struct InvalidKey {
    pub key: &'static str,
    pub why: String,
}

impl InvalidKey {
    pub fn new(key: &'static str, why: impl Into<String>) -> InvalidKey {
        InvalidKey {
            key,
            why: why.into(),
        }
    }
}

/// `value` must be a finite number above 0.
pub fn positive<T: Into<f64> + Copy + std::fmt::Display>(
    key: &'static str,
    value: T,
) -> Result<(), InvalidKey> {
    let v = value.into();
    check(v > 0.0 && v.is_finite(), key, || {
        format!("{value} (expected a number > 0)")
    })
}

/// `value` must be a finite number of at least 0.
pub fn non_negative<T: Into<f64> + Copy + std::fmt::Display>(
    key: &'static str,
    value: T,
) -> Result<(), InvalidKey> {
    let v = value.into();
    check(v >= 0.0 && v.is_finite(), key, || {
        format!("{value} (expected a number >= 0)")
    })
}

/// `value` (a count) must be at least 1.
pub fn at_least_one<T: PartialOrd + From<u8>>(
    key: &'static str,
    value: T,
) -> Result<(), InvalidKey> {
    check(value >= T::from(1), key, || "must be at least 1".into())
}

/// `value` must lie in `lo..=hi`.
pub fn within<T: PartialOrd + Copy + std::fmt::Display>(
    key: &'static str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), InvalidKey> {
    check((lo..=hi).contains(&value), key, || {
        format!("{value} (expected {lo}..={hi})")
    })
}

/// `Err(InvalidKey)` for `key` unless `ok`.
pub fn check(ok: bool, key: &'static str, why: impl FnOnce() -> String) -> Result<(), InvalidKey> {
    match ok {
        true => Ok(()),
        false => Err(InvalidKey::new(key, why())),
    }
}
