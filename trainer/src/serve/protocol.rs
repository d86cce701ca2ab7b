//! The messages between the page and `mixzero serve`, typed, with the
//! validation every message from the page goes through: size, JSON shape
//! (unknown fields are errors), seat specs, FENs and moves, each refused
//! with a [`ProtocolError`] that becomes an HTTP status and a JSON
//! `{"error": ...}` answer.

use engine::players::{player_from_spec, PlayerSpecError};
use engine::{control_period, Color, FenError, Game, MoveError, Position, Rules};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Largest request body the server reads (commands are a few hundred bytes).
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;
/// Largest PGN text accepted by upload.
pub const MAX_PGN_BYTES: usize = 1024 * 1024;
/// Most playouts a page may ask a network for, and the longest move time:
/// one request must not hold a search slot for hours.
pub const MAX_PLAYOUTS: u32 = 100_000;
pub const MAX_MOVETIME_MS: u32 = 60_000;

#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("request body over {limit} bytes")]
    TooLarge { limit: usize },
    #[error("request body is not UTF-8")]
    NotUtf8,
    #[error("bad JSON: {0}")]
    BadJson(#[from] serde_json::Error),
    #[error("reading the request: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad query string: {0}")]
    BadQuery(String),
    #[error("no such session (expired or never created)")]
    UnknownSession,
    #[error("too many open sessions ({0}); close a tab and retry")]
    TooManySessions(usize),
    #[error("bad FEN: {0}")]
    BadFen(#[from] FenError),
    #[error("the FEN's position is already over ({0})")]
    FinishedStart(String),
    #[error("illegal or malformed move `{text}`: {source}")]
    BadMove { text: String, source: MoveError },
    #[error("the game is over")]
    GameOver,
    #[error("it is not a human's turn")]
    NotYourTurn,
    #[error("nothing to take back")]
    NothingToTakeBack,
    #[error("bad player `{spec}`: {why}")]
    BadSeat { spec: String, why: String },
    #[error("no network: start `mixzero serve` with --weights FILE or --run-dir DIR")]
    NoNetwork,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("not found: {0}")]
    NotFound(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("bad PGN: {0}")]
    BadPgn(String),
    #[error("the server is busy ({0}); retry in a moment")]
    Busy(String),
}

impl ProtocolError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ProtocolError::TooLarge { .. } => 413,
            ProtocolError::UnknownSession | ProtocolError::NotFound(_) => 404,
            ProtocolError::Forbidden(_) => 403,
            ProtocolError::MethodNotAllowed => 405,
            ProtocolError::TooManySessions(_) | ProtocolError::Busy(_) => 503,
            ProtocolError::NotYourTurn | ProtocolError::GameOver => 409,
            _ => 400,
        }
    }
}

/// The JSON body of every error answer.
#[derive(Serialize)]
pub struct ErrorReply {
    pub error: String,
}

/// `POST /api/command`: a command for one play session.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    pub session: String,
    pub command: Command,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// A new game from the start or `fen`, each side `human` or an engine spec.
    NewGame {
        white: String,
        black: String,
        #[serde(default)]
        fen: Option<String>,
    },
    /// A coordinate move (`e2e5`, `e9e10q`) by the human to move.
    Move {
        #[serde(rename = "move")]
        mv: String,
    },
    /// Takes back moves until a human is to move again (at least one).
    Takeback,
}

/// Decodes a command body, refusing oversized ones before parsing.
pub fn parse_command(body: &[u8]) -> Result<CommandRequest, ProtocolError> {
    if body.len() > MAX_COMMAND_BYTES {
        return Err(ProtocolError::TooLarge {
            limit: MAX_COMMAND_BYTES,
        });
    }
    Ok(serde_json::from_slice(body)?)
}

/// How long a network searches a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetBudget {
    Playouts(u32),
    MovetimeMs(u32),
}

/// Who plays one side, as the page names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeatSpec {
    Human,
    /// `random`, `greedy` or `alphabeta:D`.
    Builtin(String),
    /// `net`, `net:playouts=N` or `net:movetime=MS`: the served network.
    Network(NetBudget),
    /// A `uci:...` spec given to the server with `--engine`.
    Uci(String),
}

impl SeatSpec {
    /// Parses a seat. `engines` are the `uci:` specs the server was started
    /// with: the page may only pick among them, never run a command of its own.
    pub fn parse(spec: &str, engines: &[String]) -> Result<SeatSpec, ProtocolError> {
        let bad = |why: String| ProtocolError::BadSeat {
            spec: spec.chars().take(200).collect(),
            why,
        };
        if spec == "human" {
            return Ok(SeatSpec::Human);
        }
        if spec.starts_with("uci:") {
            return match engines.iter().any(|e| e == spec) {
                true => Ok(SeatSpec::Uci(spec.to_string())),
                false => Err(bad("not one of the engines given with --engine".into())),
            };
        }
        if let Some(rest) = spec.strip_prefix("net") {
            let budget = match rest.strip_prefix(':').map(|o| o.split_once('=')) {
                None if rest.is_empty() => NetBudget::Playouts(100),
                Some(Some(("playouts", n))) => NetBudget::Playouts(
                    n.parse()
                        .ok()
                        .filter(|n| (1..=MAX_PLAYOUTS).contains(n))
                        .ok_or_else(|| bad(format!("playouts: 1 to {MAX_PLAYOUTS}")))?,
                ),
                Some(Some(("movetime", ms))) => NetBudget::MovetimeMs(
                    ms.parse()
                        .ok()
                        .filter(|n| (1..=MAX_MOVETIME_MS).contains(n))
                        .ok_or_else(|| bad(format!("movetime: 1 to {MAX_MOVETIME_MS} ms")))?,
                ),
                _ => return Err(bad("expected net, net:playouts=N or net:movetime=MS".into())),
            };
            return Ok(SeatSpec::Network(budget));
        }
        match player_from_spec(spec, 0) {
            Ok(_) => Ok(SeatSpec::Builtin(spec.to_string())),
            Err(e @ PlayerSpecError::Depth(_)) => Err(bad(e.to_string())),
            Err(PlayerSpecError::Unknown(_)) => Err(bad(
                "expected human, random, greedy, alphabeta:D, net[:playouts=N|:movetime=MS] \
                 or an --engine spec"
                    .into(),
            )),
        }
    }
}

/// The start of a new game: the standard start or a FEN that parses and
/// is not already over.
pub fn start_position(fen: Option<&str>) -> Result<Position, ProtocolError> {
    let pos = match fen.map(str::trim).filter(|f| !f.is_empty()) {
        None => Position::start(),
        Some(fen) => Position::from_fen(fen)?,
    };
    if let Some(outcome) = pos.outcome() {
        return Err(ProtocolError::FinishedStart(outcome.reason.to_string()));
    }
    Ok(pos)
}

/// Rule 5 and rule 6 state of one side, as `mixchess show --json` reports it,
/// plus the moves left in the control period.
#[derive(Clone, Debug, Serialize)]
pub struct RuleState {
    pub next_move_number: u32,
    /// `[first, last]` full moves, or `null` outside a control period.
    pub control_period: Option<[u32; 2]>,
    /// Own moves left in the period, the next one included.
    pub moves_left: Option<u32>,
    pub king_moved_in_period: bool,
    pub must_move_king: bool,
    pub banned_kind: Option<&'static str>,
    pub last_kind: Option<&'static str>,
    pub run_length: u8,
}

impl RuleState {
    pub fn of(pos: &Position, color: Color) -> RuleState {
        let next = pos.next_move_number(color);
        let period = match pos.rules() {
            Rules::Full => control_period(color, next),
            Rules::Base => None,
        };
        let run = pos.run(color);
        RuleState {
            next_move_number: next,
            control_period: period.map(|p| [p.first, p.last]),
            moves_left: period.map(|p| p.last + 1 - next),
            king_moved_in_period: pos.king_moved_in_period(color),
            must_move_king: pos.must_move_king(color),
            banned_kind: pos.banned_kind(color).map(|k| k.name()),
            last_kind: run.kind.map(|k| k.name()),
            run_length: run.length,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Rules56 {
    pub white: RuleState,
    pub black: RuleState,
}

impl Rules56 {
    pub fn of(pos: &Position) -> Rules56 {
        Rules56 {
            white: RuleState::of(pos, Color::White),
            black: RuleState::of(pos, Color::Black),
        }
    }
}

/// A move in both notations.
#[derive(Clone, Debug, Serialize)]
pub struct MoveText {
    pub uci: String,
    pub san: String,
}

/// How a game ended.
#[derive(Clone, Debug, Serialize)]
pub struct OutcomeView {
    /// `1-0`, `0-1`, `1/2-1/2`.
    pub result: &'static str,
    /// `checkmate`, `king-quota`, `stalemate`, `threefold`, `fifty-move`,
    /// `dead-position`, `adjudication`.
    pub reason: &'static str,
    /// `white`, `black` or `null` for a draw.
    pub winner: Option<&'static str>,
}

impl OutcomeView {
    pub fn of(game: &Game) -> Option<OutcomeView> {
        game.outcome().map(|o| OutcomeView {
            result: o.result(),
            reason: o.reason.as_str(),
            winner: o.winner.map(|c| c.name()),
        })
    }
}

/// The moves of `game` in both notations.
pub fn move_texts(game: &Game) -> Vec<MoveText> {
    let mut pos = *game.start();
    game.moves()
        .iter()
        .map(|&mv| {
            let text = MoveText {
                uci: mv.to_string(),
                san: pos.san(mv),
            };
            pos = pos.after(mv);
            text
        })
        .collect()
}

/// The legal moves of the current position (none once the game is over).
pub fn legal_texts(game: &Game) -> Vec<MoveText> {
    if game.outcome().is_some() {
        return Vec::new();
    }
    let pos = game.position();
    pos.legal_moves()
        .iter()
        .map(|&mv| MoveText {
            uci: mv.to_string(),
            san: pos.san(mv),
        })
        .collect()
}

/// Everything the page draws of a play session, sent after each change.
#[derive(Clone, Debug, Serialize)]
pub struct StateMsg {
    /// Grows with every change, so the page can drop stale messages.
    pub version: u64,
    pub start_fen: String,
    pub fen: String,
    pub side: &'static str,
    pub in_check: bool,
    pub legal: Vec<MoveText>,
    pub moves: Vec<MoveText>,
    pub outcome: Option<OutcomeView>,
    pub rules: Rules56,
    /// Seat specs, White then Black.
    pub players: [String; 2],
    /// An engine is searching for the side to move.
    pub thinking: bool,
    /// The engine to move waits for a free search slot.
    pub waiting: bool,
    /// Something went wrong on the engine side (a failed UCI engine).
    pub note: Option<String>,
}

/// One root move of a search.
#[derive(Clone, Debug, Serialize)]
pub struct TopMove {
    pub uci: String,
    pub san: String,
    pub visits: u32,
    /// Mean value for the side to move, in [-1, 1]; `null` when unvisited.
    pub q: Option<f32>,
    pub prior: f32,
}

/// What the engine to move thinks, sent while it searches.
#[derive(Clone, Debug, Serialize)]
pub struct ThinkingMsg {
    /// The position searched.
    pub fen: String,
    pub engine: String,
    /// Playouts (MCTS) or nodes (alpha-beta) so far.
    pub nodes: u64,
    /// Completed alpha-beta depth; `null` for MCTS.
    pub depth: Option<u32>,
    /// Centipawns for the side to move (alpha-beta).
    pub score_cp: Option<i32>,
    /// Win, draw and loss for White, summing to 1.
    pub white_wdl: [f32; 3],
    /// Best moves first, at most 8.
    pub top: Vec<TopMove>,
    /// The principal variation in SAN and coordinates.
    pub pv_san: Vec<String>,
    pub pv: Vec<String>,
    /// The search has ended (the move follows in the next state).
    pub done: bool,
}

/// `GET /api/info`: what the server offers.
#[derive(Debug, Serialize)]
pub struct InfoMsg {
    pub version: &'static str,
    /// A network is loaded (the `net` seats work).
    pub network: Option<String>,
    /// `uci:` specs given with `--engine`.
    pub engines: Vec<String>,
    /// Watch and training views have a run directory to read.
    pub run_dir: bool,
    /// This process is an arena with live games.
    pub arena: bool,
    pub max_searches: usize,
}

/// Parses `a=1&b=x%2Fy` into pairs, decoding `%XX` and `+`.
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, ProtocolError> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(text: &str) -> Result<String, ProtocolError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| ProtocolError::BadQuery(format!("bad escape in `{text}`")))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ProtocolError::BadQuery("not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_unknown_fields_are_refused() {
        let ok = br#"{"session":"s","command":{"type":"move","move":"e2e5"}}"#;
        match parse_command(ok).unwrap().command {
            Command::Move { mv } => assert_eq!(mv, "e2e5"),
            other => panic!("{other:?}"),
        }
        let extra = br#"{"session":"s","command":{"type":"move","move":"e2e5","x":1}}"#;
        assert!(matches!(
            parse_command(extra),
            Err(ProtocolError::BadJson(_))
        ));
        let unknown = br#"{"session":"s","command":{"type":"resign"}}"#;
        assert!(parse_command(unknown).is_err());
        let huge = vec![b' '; MAX_COMMAND_BYTES + 1];
        assert_eq!(parse_command(&huge).unwrap_err().status(), 413);
    }

    #[test]
    fn seats_are_validated() {
        let engines = ["uci:/bin/engine".to_string()];
        let parse = |s: &str| SeatSpec::parse(s, &engines);
        assert_eq!(parse("human").unwrap(), SeatSpec::Human);
        assert_eq!(
            parse("alphabeta:2").unwrap(),
            SeatSpec::Builtin("alphabeta:2".into())
        );
        assert_eq!(
            parse("net:movetime=250").unwrap(),
            SeatSpec::Network(NetBudget::MovetimeMs(250))
        );
        assert_eq!(
            parse("net").unwrap(),
            SeatSpec::Network(NetBudget::Playouts(100))
        );
        assert_eq!(
            parse("uci:/bin/engine").unwrap(),
            SeatSpec::Uci("uci:/bin/engine".into())
        );
        for bad in [
            "alphabeta:99",
            "uci:/bin/sh -c reboot",
            "net:playouts=0",
            "net:playouts=1000000",
            "net:foo=1",
            "netx",
            "",
            "../weights",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn start_positions_are_checked() {
        assert!(start_position(None).is_ok());
        assert!(start_position(Some("not a fen")).is_err());
        // Bare kings: a dead position, already over.
        let dead = "k9/10/10/10/10/10/10/10/10/9K w - - 0 1";
        assert!(matches!(
            start_position(Some(dead)),
            Err(ProtocolError::FinishedStart(_))
        ));
    }

    #[test]
    fn rule_state_counts_moves_left() {
        let state = RuleState::of(&Position::start(), Color::White);
        assert_eq!(state.control_period, Some([1, 10]));
        assert_eq!(state.moves_left, Some(10));
        assert!(!state.must_move_king);
    }

    #[test]
    fn queries_decode() {
        let q = parse_query("path=games%2Fa.pgn&game=3&x=a+b").unwrap();
        assert_eq!(q[0], ("path".into(), "games/a.pgn".into()));
        assert_eq!(q[2].1, "a b");
        assert!(parse_query("path=%zz").is_err());
        assert!(parse_query("path=%ff").is_err());
    }
}
