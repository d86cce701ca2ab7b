//! UCI commands: parsing a line into a typed [`Command`], and the time
//! budget a `go` sets.

use std::time::Duration;

use thiserror::Error;

use super::options::OptionError;
use crate::error::{FenError, MoveError};
use crate::game::Game;
use crate::position::{parse_coordinate, Move, Position};
use crate::search::{clock_budget, TimeBudget, MOVE_OVERHEAD};
use crate::types::Color;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UciError {
    #[error("empty command")]
    Empty,
    #[error("unknown command `{0}`")]
    UnknownCommand(String),
    #[error("`{command}` takes no arguments (got `{rest}`)")]
    UnexpectedArguments { command: String, rest: String },
    #[error("`debug` takes `on` or `off`")]
    DebugSyntax,
    #[error("`setoption` needs `name <name> [value <value>]`")]
    SetOptionSyntax,
    #[error("`position` needs `startpos` or `fen <fields>`, then optionally `moves <moves>`")]
    PositionSyntax,
    #[error("position: invalid FEN: {0}")]
    Fen(#[from] FenError),
    #[error("position: move {index}: {source}")]
    Move { index: usize, source: MoveError },
    #[error("`go {0}` needs a value")]
    MissingValue(&'static str),
    #[error("`go {param}`: `{value}` is not {expected}")]
    BadValue {
        param: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("unknown `go` parameter `{0}`")]
    UnknownGoParameter(String),
    #[error("`go searchmoves` lists no move")]
    NoSearchMoves,
    #[error("searchmoves: {0}")]
    SearchMove(MoveError),
    #[error("already searching: send `stop` first")]
    Busy,
    #[error("`ponderhit` without a pondering search")]
    NotPondering,
    #[error(transparent)]
    Option(#[from] OptionError),
}

/// One line from the GUI.
#[derive(Clone, Debug)]
pub enum Command {
    Uci,
    Debug(bool),
    IsReady,
    SetOption {
        name: String,
        value: Option<String>,
    },
    UciNewGame,
    /// The game after `position ...`, every move checked under the full rules.
    Position(Box<Game>),
    Go(GoParams),
    Stop,
    PonderHit,
    Quit,
}

/// The arguments of `go`. Negative clock times (some GUIs send them) read as zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoParams {
    pub wtime: Option<Duration>,
    pub btime: Option<Duration>,
    pub winc: Option<Duration>,
    pub binc: Option<Duration>,
    /// At least 1.
    pub movestogo: Option<u32>,
    pub movetime: Option<Duration>,
    pub nodes: Option<u64>,
    pub depth: Option<u32>,
    /// Mate in this many moves: searched as a depth of `2 * mate - 1` plies. At least 1.
    pub mate: Option<u32>,
    pub infinite: bool,
    pub ponder: bool,
    /// Checked for syntax only; legality is checked against the position at `go`.
    pub searchmoves: Vec<Move>,
}

/// Parses one line of the UCI protocol (GUI to engine).
pub fn parse_command(line: &str) -> Result<Command, UciError> {
    let mut tokens = line.split_whitespace();
    let Some(command) = tokens.next() else {
        return Err(UciError::Empty);
    };
    let rest: Vec<&str> = tokens.collect();
    let no_arguments = |parsed: Command| {
        if rest.is_empty() {
            Ok(parsed)
        } else {
            Err(UciError::UnexpectedArguments {
                command: command.to_string(),
                rest: rest.join(" "),
            })
        }
    };
    match command {
        "uci" => no_arguments(Command::Uci),
        "isready" => no_arguments(Command::IsReady),
        "ucinewgame" => no_arguments(Command::UciNewGame),
        "stop" => no_arguments(Command::Stop),
        "ponderhit" => no_arguments(Command::PonderHit),
        "quit" => no_arguments(Command::Quit),
        "debug" => match rest[..] {
            ["on"] => Ok(Command::Debug(true)),
            ["off"] => Ok(Command::Debug(false)),
            _ => Err(UciError::DebugSyntax),
        },
        "setoption" => parse_setoption(&rest),
        "position" => parse_position(&rest),
        "go" => parse_go(&rest).map(Command::Go),
        other => Err(UciError::UnknownCommand(other.to_string())),
    }
}

/// `name <words...> [value <words...>]`: names and values may contain spaces.
fn parse_setoption(tokens: &[&str]) -> Result<Command, UciError> {
    let ["name", rest @ ..] = tokens else {
        return Err(UciError::SetOptionSyntax);
    };
    let (name, value) = match rest.iter().position(|&t| t == "value") {
        Some(i) => (&rest[..i], Some(rest[i + 1..].join(" "))),
        None => (rest, None),
    };
    if name.is_empty() {
        return Err(UciError::SetOptionSyntax);
    }
    Ok(Command::SetOption {
        name: name.join(" "),
        value,
    })
}

fn parse_position(tokens: &[&str]) -> Result<Command, UciError> {
    let moves_at = tokens.iter().position(|&t| t == "moves");
    let (setup, moves) = match moves_at {
        Some(i) => (&tokens[..i], &tokens[i + 1..]),
        None => (tokens, &[][..]),
    };
    let start = match setup {
        ["startpos"] => Position::start(),
        ["fen", fields @ ..] => Position::from_fen(&fields.join(" "))?,
        _ => return Err(UciError::PositionSyntax),
    };
    let mut game = Game::new(start);
    for (i, text) in moves.iter().enumerate() {
        let mv = game
            .position()
            .parse_move(text)
            .map_err(|source| UciError::Move {
                index: i + 1,
                source,
            })?;
        game.play_unchecked(mv);
    }
    Ok(Command::Position(Box::new(game)))
}

const GO_KEYWORDS: [&str; 12] = [
    "wtime",
    "btime",
    "winc",
    "binc",
    "movestogo",
    "movetime",
    "nodes",
    "depth",
    "mate",
    "infinite",
    "ponder",
    "searchmoves",
];

fn parse_go(tokens: &[&str]) -> Result<GoParams, UciError> {
    let mut go = GoParams::default();
    let mut i = 0;
    while i < tokens.len() {
        let keyword = GO_KEYWORDS
            .iter()
            .find(|&&k| k == tokens[i])
            .ok_or_else(|| UciError::UnknownGoParameter(tokens[i].to_string()))?;
        i += 1;
        match *keyword {
            "infinite" => go.infinite = true,
            "ponder" => go.ponder = true,
            "searchmoves" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| GO_KEYWORDS.contains(t))
                    .map_or(tokens.len(), |n| i + n);
                for text in &tokens[i..end] {
                    let mv = parse_coordinate(text).map_err(UciError::SearchMove)?;
                    if !go.searchmoves.contains(&mv) {
                        go.searchmoves.push(mv);
                    }
                }
                if end == i {
                    return Err(UciError::NoSearchMoves);
                }
                i = end;
            }
            param => {
                let value = tokens.get(i).ok_or(UciError::MissingValue(param))?;
                i += 1;
                let bad = |expected: &'static str| UciError::BadValue {
                    param,
                    value: value.to_string(),
                    expected,
                };
                let millis = || -> Result<Duration, UciError> {
                    let ms: i64 = value.parse().map_err(|_| bad("a number of milliseconds"))?;
                    Ok(Duration::from_millis(ms.max(0).unsigned_abs()))
                };
                let positive = || {
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad("a whole number from 1"))
                };
                match param {
                    "wtime" => go.wtime = Some(millis()?),
                    "btime" => go.btime = Some(millis()?),
                    "winc" => go.winc = Some(millis()?),
                    "binc" => go.binc = Some(millis()?),
                    "movetime" => go.movetime = Some(millis()?),
                    "movestogo" => go.movestogo = Some(positive()?),
                    "mate" => go.mate = Some(positive()?),
                    "depth" => go.depth = Some(positive()?),
                    _ => go.nodes = Some(value.parse().map_err(|_| bad("a node count"))?),
                }
            }
        }
    }
    Ok(go)
}

/// The time budget of a `go` for `side`, the side to move. With `movetime`
/// and a clock both given, the tighter limit wins; `infinite` has none.
pub fn time_budget(go: &GoParams, side: Color) -> TimeBudget {
    if go.infinite {
        return TimeBudget::default();
    }
    let (remaining, increment) = match side {
        Color::White => (go.wtime, go.winc),
        Color::Black => (go.btime, go.binc),
    };
    let from_movetime = go.movetime.map(|t| {
        let budget = t.saturating_sub(MOVE_OVERHEAD.min(t / 2));
        (budget, budget)
    });
    let from_clock = remaining
        .map(|remaining| clock_budget(remaining, increment.unwrap_or_default(), go.movestogo));
    let (soft, hard) = match (from_movetime, from_clock) {
        (Some((s1, h1)), Some((s2, h2))) => (Some(s1.min(s2)), Some(h1.min(h2))),
        (Some((s, h)), None) | (None, Some((s, h))) => (Some(s), Some(h)),
        (None, None) => (None, None),
    };
    TimeBudget { soft, hard }
}
