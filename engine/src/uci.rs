//! The UCI protocol for Chess-mix engines: command parsing, time management
//! and the protocol loop, generic over a [`UciSearcher`] so that the
//! alpha-beta baseline here and a network-driven MCTS elsewhere share it.
//!
//! Moves are coordinate moves (RULES.md §8: `e2e5`, `f1i1`, `e9e10q`);
//! positions are the project's FEN, rule 5/6 fields included.

use std::fmt;
use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::error::{FenError, MoveError};
use crate::eval::Wdl;
use crate::game::Game;
use crate::position::{parse_coordinate, Move, Position};
use crate::types::Color;

#[cfg(feature = "uci-harness")]
pub mod harness;

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

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionError {
    #[error("unknown option `{0}`")]
    Unknown(String),
    #[error("option `{name}`: `{value}` is not {expected}")]
    BadValue {
        name: String,
        value: String,
        expected: String,
    },
    #[error("option `{name}` needs a value")]
    MissingValue { name: String },
    #[error("option `{name}`: {message}")]
    Rejected { name: String, message: String },
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

/// Soft: an even share of the usable time over the moves to go plus most of
/// the increment. Hard: a few soft budgets, but never more than half the
/// usable time unless this is the last move before the time control.
fn clock_budget(
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
    fn wait_while_infinite(&self) {
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
}

impl fmt::Display for SearchInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "info depth {}", self.depth)?;
        if let Some(seldepth) = self.seldepth {
            write!(f, " seldepth {seldepth}")?;
        }
        let nps = self.nodes as f64 / self.time.as_secs_f64().max(1e-3);
        write!(
            f,
            " nodes {} nps {nps:.0} time {}",
            self.nodes,
            self.time.as_millis()
        )?;
        match self.score {
            Score::Centipawns(cp) => write!(f, " score cp {cp}")?,
            Score::Mate(moves) => write!(f, " score mate {moves}")?,
        }
        if let Some(wdl) = self.wdl {
            write!(f, " wdl {} {} {}", wdl.win, wdl.draw, wdl.loss)?;
        }
        if !self.pv.is_empty() {
            f.write_str(" pv")?;
            for mv in &self.pv {
                write!(f, " {mv}")?;
            }
        }
        Ok(())
    }
}

/// An option the engine announces after `uci`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UciOption {
    pub name: String,
    pub kind: OptionKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Check {
        default: bool,
    },
    Spin {
        default: i64,
        min: i64,
        max: i64,
    },
    Combo {
        default: String,
        choices: Vec<String>,
    },
    Button,
    String {
        default: String,
    },
}

/// A `setoption` value checked against its [`UciOption`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionValue {
    Check(bool),
    Spin(i64),
    /// One of the choices, spelled as the option spells it.
    Combo(String),
    Button,
    String(String),
}

impl UciOption {
    /// Checks `value` against the option's type (and range or choices).
    pub fn parse_value(&self, value: Option<&str>) -> Result<OptionValue, OptionError> {
        let bad = |value: &str, expected: String| OptionError::BadValue {
            name: self.name.clone(),
            value: value.to_string(),
            expected,
        };
        let required = || {
            value.ok_or_else(|| OptionError::MissingValue {
                name: self.name.clone(),
            })
        };
        match &self.kind {
            OptionKind::Check { .. } => match required()? {
                "true" => Ok(OptionValue::Check(true)),
                "false" => Ok(OptionValue::Check(false)),
                other => Err(bad(other, "`true` or `false`".to_string())),
            },
            OptionKind::Spin { min, max, .. } => {
                let text = required()?;
                text.parse::<i64>()
                    .ok()
                    .filter(|n| (*min..=*max).contains(n))
                    .map(OptionValue::Spin)
                    .ok_or_else(|| bad(text, format!("a whole number from {min} to {max}")))
            }
            OptionKind::Combo { choices, .. } => {
                let text = required()?;
                choices
                    .iter()
                    .find(|c| c.eq_ignore_ascii_case(text))
                    .map(|c| OptionValue::Combo(c.clone()))
                    .ok_or_else(|| bad(text, format!("one of {}", choices.join(", "))))
            }
            OptionKind::Button => match value {
                None => Ok(OptionValue::Button),
                Some(text) => Err(bad(text, "empty (a button takes no value)".to_string())),
            },
            // UCI writes an empty string as `<empty>`.
            OptionKind::String { .. } => Ok(OptionValue::String(match value {
                None | Some("<empty>") => String::new(),
                Some(text) => text.to_string(),
            })),
        }
    }
}

impl fmt::Display for UciOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "option name {} type ", self.name)?;
        match &self.kind {
            OptionKind::Check { default } => write!(f, "check default {default}"),
            OptionKind::Spin { default, min, max } => {
                write!(f, "spin default {default} min {min} max {max}")
            }
            OptionKind::Combo { default, choices } => {
                write!(f, "combo default {default}")?;
                for choice in choices {
                    write!(f, " var {choice}")?;
                }
                Ok(())
            }
            OptionKind::Button => f.write_str("button"),
            OptionKind::String { default } if default.is_empty() => {
                f.write_str("string default <empty>")
            }
            OptionKind::String { default } => write!(f, "string default {default}"),
        }
    }
}

/// A search engine that [`run_uci`] can drive.
pub trait UciSearcher: Send {
    fn id_name(&self) -> String;
    fn id_author(&self) -> String;
    fn options(&self) -> Vec<UciOption>;
    /// Sets the option `name` (as [`UciSearcher::options`] spells it) to a
    /// value already checked against its type; `Err` says why it was refused.
    fn set_option(&mut self, name: &str, value: &OptionValue) -> Result<(), String>;
    /// Forget what was learnt about the previous game.
    fn new_game(&mut self);
    /// A move for the current position of `game`, which has a legal move.
    /// Polls `limits.control` and returns soon after it says stop; calls
    /// `info` with progress. The move must be legal and, when
    /// `limits.searchmoves` is not empty, one of them.
    fn search(
        &mut self,
        game: &Game,
        limits: &SearchLimits,
        info: &mut dyn FnMut(&SearchInfo),
    ) -> Move;
}

/// Runs the UCI protocol until `quit` or the end of `input`. Searches run on
/// their own thread, so `isready`, `stop` and `quit` are answered during a
/// search. Every accepted `go` gets exactly one `bestmove`; a refused
/// command gets an `info string error: ...` line and the engine carries on.
/// Returns when `output` fails or `input` cannot be read.
pub fn run_uci<S, R, W>(searcher: S, mut input: R, output: W) -> io::Result<()>
where
    S: UciSearcher + 'static,
    R: BufRead,
    W: Write + Send + 'static,
{
    let mut session = Session {
        searcher: Some(searcher),
        search: None,
        game: Game::new(Position::start()),
        out: Output(Arc::new(Mutex::new(Box::new(output)))),
        debug: false,
    };
    let mut line = Vec::new();
    let result = loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        // Bytes that are not UTF-8 become U+FFFD and then an unknown command.
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let (handled, quit) = match parse_command(&text) {
            Ok(command) => {
                let quit = matches!(command, Command::Quit);
                (session.handle(command), quit)
            }
            Err(e) => (session.error(&e), false),
        };
        if handled.is_err() || quit {
            break handled;
        }
    };
    let stopped = session.stop_search();
    result.and(stopped)
}

/// Lines to the GUI, from the protocol thread and the search thread.
#[derive(Clone)]
struct Output(Arc<Mutex<Box<dyn Write + Send>>>);

impl Output {
    fn line(&self, text: &str) -> io::Result<()> {
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        writeln!(out, "{text}")?;
        out.flush()
    }
}

struct RunningSearch<S> {
    /// Gives the searcher back.
    handle: JoinHandle<S>,
    control: Arc<SearchControl>,
    /// Set just before `bestmove` is written: from then on a new `go` may come.
    answered: Arc<AtomicBool>,
    /// What `ponderhit` gives a pondering search.
    ponder_budget: Option<TimeBudget>,
}

/// The protocol state. The searcher lives either in `searcher` or, during a
/// search, on the search thread.
struct Session<S> {
    searcher: Option<S>,
    search: Option<RunningSearch<S>>,
    game: Game,
    out: Output,
    debug: bool,
}

impl<S: UciSearcher + 'static> Session<S> {
    fn handle(&mut self, command: Command) -> io::Result<()> {
        match command {
            Command::Uci => {
                let Some(searcher) = self.idle_searcher()? else {
                    return self.error(&UciError::Busy);
                };
                let mut lines = vec![
                    format!("id name {}", searcher.id_name()),
                    format!("id author {}", searcher.id_author()),
                ];
                lines.extend(searcher.options().iter().map(UciOption::to_string));
                lines.push("uciok".to_string());
                lines.iter().try_for_each(|line| self.out.line(line))
            }
            Command::Debug(on) => {
                self.debug = on;
                Ok(())
            }
            Command::IsReady => self.out.line("readyok"),
            Command::SetOption { name, value } => self.set_option(&name, value.as_deref()),
            Command::UciNewGame => match self.idle_searcher()? {
                Some(searcher) => {
                    searcher.new_game();
                    self.game = Game::new(Position::start());
                    Ok(())
                }
                None => self.error(&UciError::Busy),
            },
            // A running search has its own copy of the game.
            Command::Position(game) => {
                self.game = *game;
                Ok(())
            }
            Command::Go(go) => self.go(go),
            Command::Stop => self.stop_search(),
            Command::PonderHit => {
                let pondering = self
                    .search
                    .as_mut()
                    .filter(|s| !s.answered.load(Ordering::SeqCst))
                    .and_then(|s| Some((Arc::clone(&s.control), s.ponder_budget.take()?)));
                match pondering {
                    Some((control, budget)) => {
                        control.ponderhit(budget);
                        Ok(())
                    }
                    None => self.error(&UciError::NotPondering),
                }
            }
            Command::Quit => self.stop_search(),
        }
    }

    fn error(&self, error: &UciError) -> io::Result<()> {
        self.out.line(&format!("info string error: {error}"))
    }

    /// The searcher when no search runs, taking it back from a search
    /// that has answered; `None` while a search runs.
    fn idle_searcher(&mut self) -> io::Result<Option<&mut S>> {
        if self
            .search
            .as_ref()
            .is_some_and(|s| s.answered.load(Ordering::SeqCst))
        {
            self.join_search()?;
        }
        Ok(self.searcher.as_mut())
    }

    /// Stops a running search and waits for its `bestmove`.
    fn stop_search(&mut self) -> io::Result<()> {
        if let Some(search) = &self.search {
            search.control.stop();
            self.join_search()?;
        }
        Ok(())
    }

    fn join_search(&mut self) -> io::Result<()> {
        if let Some(search) = self.search.take() {
            let searcher = search
                .handle
                .join()
                .map_err(|_| io::Error::other("the search thread panicked"))?;
            self.searcher = Some(searcher);
        }
        Ok(())
    }

    fn set_option(&mut self, name: &str, value: Option<&str>) -> io::Result<()> {
        let Some(searcher) = self.idle_searcher()? else {
            return self.error(&UciError::Busy);
        };
        let result = searcher
            .options()
            .into_iter()
            .find(|o| o.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| OptionError::Unknown(name.to_string()))
            .and_then(|option| {
                let value = option.parse_value(value)?;
                searcher
                    .set_option(&option.name, &value)
                    .map_err(|message| OptionError::Rejected {
                        name: option.name.clone(),
                        message,
                    })
            });
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.error(&e.into()),
        }
    }

    fn go(&mut self, go: GoParams) -> io::Result<()> {
        if self.idle_searcher()?.is_none() {
            return self.error(&UciError::Busy);
        }
        let pos = *self.game.position();
        if let Some(&mv) = go.searchmoves.iter().find(|&&mv| !pos.is_legal(mv)) {
            let illegal = MoveError::Illegal {
                mv: mv.to_string(),
                fen: pos.fen(),
            };
            return self.error(&UciError::SearchMove(illegal));
        }
        if let Some(outcome) = pos.outcome_without_moves() {
            self.out.line(&format!(
                "info string no legal move: the game is over ({} by {})",
                outcome.result(),
                outcome.reason
            ))?;
            return self.out.line("bestmove 0000");
        }
        let budget = time_budget(&go, pos.side_to_move());
        if self.debug {
            let ms =
                |d: Option<Duration>| d.map_or("none".to_string(), |d| d.as_millis().to_string());
            self.out.line(&format!(
                "info string time budget: soft {} ms, hard {} ms",
                ms(budget.soft),
                ms(budget.hard)
            ))?;
        }
        let control = Arc::new(if go.infinite || go.ponder {
            SearchControl::infinite()
        } else {
            SearchControl::timed(budget)
        });
        let mate_depth = go.mate.map(|m| m.saturating_mul(2) - 1);
        let limits = SearchLimits {
            depth: match (go.depth, mate_depth) {
                (Some(d), Some(m)) => Some(d.min(m)),
                (d, m) => d.or(m),
            },
            nodes: go.nodes,
            searchmoves: go.searchmoves,
            control: Arc::clone(&control),
        };
        let Some(searcher) = self.searcher.take() else {
            return self.error(&UciError::Busy);
        };
        let answered = Arc::new(AtomicBool::new(false));
        let job = SearchJob {
            game: self.game.clone(),
            limits,
            out: self.out.clone(),
            answered: Arc::clone(&answered),
        };
        self.search = Some(RunningSearch {
            handle: thread::spawn(move || job.run(searcher)),
            control,
            answered,
            ponder_budget: go.ponder.then_some(budget),
        });
        Ok(())
    }
}

/// One search on its own thread.
struct SearchJob {
    game: Game,
    limits: SearchLimits,
    out: Output,
    answered: Arc<AtomicBool>,
}

impl SearchJob {
    /// Searches, then writes exactly one `bestmove`; gives the searcher back.
    fn run<S: UciSearcher>(self, mut searcher: S) -> S {
        let pos = *self.game.position();
        let allowed: Vec<Move> = pos
            .legal_moves()
            .into_iter()
            .filter(|mv| self.limits.searchmoves.is_empty() || self.limits.searchmoves.contains(mv))
            .collect();
        let mut pv = Vec::new();
        let searched = panic::catch_unwind(AssertUnwindSafe(|| {
            searcher.search(&self.game, &self.limits, &mut |info| {
                pv.clone_from(&info.pv);
                // Nobody reads the answer any more: stop early.
                if self.out.line(&info.to_string()).is_err() {
                    self.limits.control.stop();
                }
            })
        }));
        // A faulty searcher must not leave the GUI without a legal answer.
        let best = match searched {
            Ok(mv) if allowed.contains(&mv) => mv,
            Ok(mv) => {
                self.report_error(&format!("the searcher chose `{mv}`, which is not allowed"));
                allowed[0]
            }
            Err(_) => {
                self.report_error("the search failed");
                allowed[0]
            }
        };
        self.limits.control.wait_while_infinite();
        let ponder = match pv[..] {
            [first, reply, ..] if first == best && pos.after(best).is_legal(reply) => {
                format!(" ponder {reply}")
            }
            _ => String::new(),
        };
        self.answered.store(true, Ordering::SeqCst);
        // A failed write shows up on the protocol thread's next write too.
        let _ = self.out.line(&format!("bestmove {best}{ponder}"));
        searcher
    }

    fn report_error(&self, message: &str) {
        let _ = self.out.line(&format!("info string error: {message}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Square;

    fn mv(text: &str) -> Move {
        parse_coordinate(text).unwrap()
    }

    fn go(line: &str) -> GoParams {
        match parse_command(line) {
            Ok(Command::Go(go)) => go,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn simple_commands_parse() {
        assert!(matches!(parse_command("uci"), Ok(Command::Uci)));
        assert!(matches!(
            parse_command("  isready \r\n"),
            Ok(Command::IsReady)
        ));
        assert!(matches!(
            parse_command("ucinewgame"),
            Ok(Command::UciNewGame)
        ));
        assert!(matches!(parse_command("stop"), Ok(Command::Stop)));
        assert!(matches!(parse_command("ponderhit"), Ok(Command::PonderHit)));
        assert!(matches!(parse_command("quit"), Ok(Command::Quit)));
        assert!(matches!(
            parse_command("debug on"),
            Ok(Command::Debug(true))
        ));
        assert!(matches!(
            parse_command("debug off"),
            Ok(Command::Debug(false))
        ));
    }

    #[test]
    fn bad_commands_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err(""), UciError::Empty);
        assert_eq!(err("   "), UciError::Empty);
        assert_eq!(
            err("frobnicate"),
            UciError::UnknownCommand("frobnicate".into())
        );
        assert_eq!(err("UCI"), UciError::UnknownCommand("UCI".into()));
        assert!(matches!(
            err("isready now"),
            UciError::UnexpectedArguments { .. }
        ));
        assert_eq!(err("debug"), UciError::DebugSyntax);
        assert_eq!(err("debug maybe"), UciError::DebugSyntax);
        assert_eq!(err("setoption"), UciError::SetOptionSyntax);
        assert_eq!(err("setoption value 3"), UciError::SetOptionSyntax);
        assert_eq!(err("setoption name value 3"), UciError::SetOptionSyntax);
    }

    #[test]
    fn setoption_names_and_values_may_have_spaces() {
        let Ok(Command::SetOption { name, value }) =
            parse_command("setoption name Weights File value /tmp/my net.safetensors")
        else {
            panic!()
        };
        assert_eq!(name, "Weights File");
        assert_eq!(value.as_deref(), Some("/tmp/my net.safetensors"));
        let Ok(Command::SetOption { name, value }) = parse_command("setoption name Clear Hash")
        else {
            panic!()
        };
        assert_eq!(name, "Clear Hash");
        assert_eq!(value, None);
    }

    fn position(line: &str) -> Game {
        match parse_command(line) {
            Ok(Command::Position(game)) => *game,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn positions_parse_with_moves() {
        let game = position("position startpos");
        assert_eq!(game.position(), &Position::start());
        let game = position("position startpos moves e2e5 e9e7 f1e2");
        assert_eq!(game.moves().len(), 3);
        assert_eq!(
            game.position()
                .piece_at("e2".parse::<Square>().unwrap())
                .map(|p| p.kind),
            Some(crate::Kind::King)
        );
        let fen = "5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17";
        let game = position(&format!("position fen {fen} moves a1a10"));
        assert_eq!(game.start().fen(), fen);
        assert_eq!(game.moves(), &[mv("a1a10")]);
        // The rule 5/6 extension fields are read.
        let game = position("position fen 5k4/10/10/10/10/10/10/10/10/R4K4 w - - 0 10 K -");
        assert!(game.position().king_moved_in_period(Color::White));
        assert!(!game.position().must_move_king(Color::White));
        assert_eq!(game.position().banned_kind(Color::White), None);
        let game = position("position fen 5k4/10/10/10/10/10/10/10/10/R4K4 w - - 0 12 - R2");
        assert_eq!(
            game.position().banned_kind(Color::White),
            Some(crate::Kind::Rook)
        );
        assert_eq!(position("position startpos moves").moves().len(), 0);
    }

    #[test]
    fn bad_positions_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err("position"), UciError::PositionSyntax);
        assert_eq!(err("position startpos e2e5"), UciError::PositionSyntax);
        assert_eq!(err("position moves e2e5"), UciError::PositionSyntax);
        assert!(matches!(
            err("position fen"),
            UciError::Fen(FenError::FieldCount(0))
        ));
        assert!(matches!(
            err("position fen 10/10 w - - 0 1"),
            UciError::Fen(FenError::RankCount(2))
        ));
        assert!(matches!(
            err("position startpos moves e2e5 e9e7 e5e8"),
            UciError::Move {
                index: 3,
                source: MoveError::Illegal { .. }
            }
        ));
        assert!(matches!(
            err("position startpos moves j2j4"),
            UciError::Move {
                index: 1,
                source: MoveError::Syntax(_)
            }
        ));
        // Rule 6: a third knight move in a row is illegal.
        assert!(matches!(
            err("position startpos moves b1a3 b10a8 h1g3 h10g8 c1d3"),
            UciError::Move { index: 5, .. }
        ));
    }

    #[test]
    fn go_parameters_parse() {
        let g = go("go wtime 60000 btime -20 winc 500 binc 0 movestogo 12");
        assert_eq!(g.wtime, Some(ms(60_000)));
        assert_eq!(g.btime, Some(Duration::ZERO));
        assert_eq!(g.winc, Some(ms(500)));
        assert_eq!(g.binc, Some(Duration::ZERO));
        assert_eq!(g.movestogo, Some(12));
        let g = go("go movetime 250 nodes 10000 depth 7 mate 3");
        assert_eq!(g.movetime, Some(ms(250)));
        assert_eq!((g.nodes, g.depth, g.mate), (Some(10_000), Some(7), Some(3)));
        let g = go("go infinite searchmoves e2e5 f1i1 e2e5 ponder");
        assert!(g.infinite && g.ponder);
        assert_eq!(g.searchmoves, vec![mv("e2e5"), mv("f1i1")]);
        let g = go("go searchmoves e9e10q depth 2");
        assert_eq!(g.searchmoves, vec![mv("e9e10q")]);
        assert_eq!(g.depth, Some(2));
        assert_eq!(go("go"), GoParams::default());
    }

    #[test]
    fn bad_go_parameters_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err("go depth"), UciError::MissingValue("depth"));
        assert!(matches!(
            err("go depth x"),
            UciError::BadValue { param: "depth", .. }
        ));
        assert!(matches!(err("go depth 0"), UciError::BadValue { .. }));
        assert!(matches!(err("go movestogo 0"), UciError::BadValue { .. }));
        assert!(matches!(err("go nodes -1"), UciError::BadValue { .. }));
        assert!(matches!(err("go wtime 1.5"), UciError::BadValue { .. }));
        assert!(matches!(
            err("go wtime 99999999999999999999"),
            UciError::BadValue { .. }
        ));
        assert_eq!(err("go fast"), UciError::UnknownGoParameter("fast".into()));
        assert_eq!(err("go searchmoves"), UciError::NoSearchMoves);
        assert_eq!(err("go searchmoves depth 3"), UciError::NoSearchMoves);
        assert!(matches!(
            err("go searchmoves e2e5 j2j4"),
            UciError::SearchMove(MoveError::Syntax(_))
        ));
    }

    fn budget(line: &str, side: Color) -> (Option<Duration>, Option<Duration>) {
        let b = time_budget(&go(line), side);
        (b.soft, b.hard)
    }

    #[test]
    fn no_clock_means_no_deadline() {
        assert_eq!(budget("go depth 5", Color::White), (None, None));
        assert_eq!(budget("go infinite wtime 1000", Color::White), (None, None));
        // Only the other side's clock.
        assert_eq!(budget("go btime 1000", Color::White), (None, None));
    }

    #[test]
    fn movetime_keeps_an_overhead() {
        assert_eq!(
            budget("go movetime 1000", Color::White),
            (Some(ms(990)), Some(ms(990)))
        );
        assert_eq!(
            budget("go movetime 50", Color::Black),
            (Some(ms(40)), Some(ms(40)))
        );
        assert_eq!(
            budget("go movetime 6", Color::White),
            (Some(ms(3)), Some(ms(3)))
        );
        assert_eq!(
            budget("go movetime 0", Color::White),
            (Some(ms(0)), Some(ms(0)))
        );
        // A clock that is tighter than movetime wins.
        assert_eq!(
            budget("go movetime 5000 wtime 1000", Color::White).1,
            budget("go wtime 1000", Color::White).1
        );
    }

    #[test]
    fn sudden_death_budgets() {
        // 60 s: 3 s margin, 57 s usable, /30 moves.
        assert_eq!(
            budget("go wtime 60000 btime 1", Color::White),
            (Some(ms(1900)), Some(ms(7600)))
        );
        assert_eq!(
            budget("go wtime 1 btime 60000", Color::Black),
            (Some(ms(1900)), Some(ms(7600)))
        );
        // 1 s: a 50 ms margin (5%), 950 ms usable.
        assert_eq!(
            budget("go wtime 1000", Color::White),
            (Some(ms(950) / 30), Some(ms(950) / 30 * 4))
        );
        // Below the margin there is nothing to spend: the searcher answers at once.
        assert_eq!(
            budget("go wtime 20", Color::White),
            (Some(ms(0)), Some(ms(0)))
        );
        assert_eq!(
            budget("go wtime 0 winc 1000", Color::White),
            (Some(ms(0)), Some(ms(0)))
        );
    }

    #[test]
    fn increments_are_mostly_spent() {
        // 10 s + 1 s: 9.5 s usable, 316 ms share plus 750 ms of the increment.
        let (soft, hard) = budget("go wtime 10000 winc 1000", Color::White);
        let share = ms(9500) / 30 + ms(750);
        assert_eq!((soft, hard), (Some(share), Some(share * 4)));
        // A small clock with a big increment: still within the clock.
        let (soft, hard) = budget("go wtime 200 winc 5000", Color::White);
        assert_eq!((soft, hard), (Some(ms(170)), Some(ms(170))));
    }

    #[test]
    fn moves_to_go_divides_the_clock() {
        // 10 moves in 20 s: 19 s usable.
        let (soft, hard) = budget("go wtime 20000 movestogo 10", Color::White);
        assert_eq!((soft, hard), (Some(ms(1900)), Some(ms(7600))));
        // The last move before the control may use all the usable time.
        let (soft, hard) = budget("go btime 20000 movestogo 1", Color::Black);
        assert_eq!((soft, hard), (Some(ms(19_000)), Some(ms(19_000))));
        let (soft, hard) = budget("go wtime 20000 movestogo 2", Color::White);
        assert_eq!((soft, hard), (Some(ms(9_500)), Some(ms(9_500))));
    }

    #[test]
    fn hard_budget_never_reaches_the_flag() {
        for remaining in [
            0, 1, 10, 29, 30, 31, 100, 1_000, 10_000, 600_000, 10_800_000,
        ] {
            for inc in [0, 10, 100, 2_000, 30_000] {
                for mtg in ["", " movestogo 1", " movestogo 2", " movestogo 40"] {
                    for side in Color::ALL {
                        let line = format!(
                            "go wtime {remaining} btime {remaining} winc {inc} binc {inc}{mtg}"
                        );
                        let (soft, hard) = budget(&line, side);
                        let (soft, hard) = (soft.unwrap(), hard.unwrap());
                        let remaining = ms(remaining);
                        let margin = MIN_SAFETY_MARGIN.max(remaining / SAFETY_DIVISOR);
                        assert!(soft <= hard, "{line}");
                        assert!(hard <= remaining.saturating_sub(margin), "{line}");
                        assert!(hard <= soft * HARD_PER_SOFT, "{line}");
                    }
                }
            }
        }
    }

    #[test]
    fn control_deadlines_and_stop() {
        let control = SearchControl::timed(TimeBudget::default());
        assert!(!control.should_stop() && !control.soft_deadline_passed());
        control.stop();
        assert!(control.should_stop());

        let control = SearchControl::timed(TimeBudget {
            soft: Some(Duration::ZERO),
            hard: Some(Duration::ZERO),
        });
        assert!(control.should_stop() && control.soft_deadline_passed());

        let control = SearchControl::timed(TimeBudget {
            soft: Some(Duration::MAX),
            hard: Some(Duration::MAX),
        });
        assert!(!control.should_stop() && !control.soft_deadline_passed());

        let control = SearchControl::infinite();
        assert!(control.is_infinite() && !control.should_stop());
        control.ponderhit(TimeBudget {
            soft: Some(Duration::ZERO),
            hard: None,
        });
        assert!(!control.is_infinite());
        assert!(control.soft_deadline_passed() && !control.should_stop());
        control.wait_while_infinite();
    }

    #[test]
    fn info_lines_follow_uci() {
        let info = SearchInfo {
            depth: 3,
            seldepth: Some(7),
            nodes: 5000,
            time: ms(250),
            score: Score::Centipawns(-35),
            wdl: Some(WdlPermille {
                win: 200,
                draw: 500,
                loss: 300,
            }),
            pv: vec![mv("e2e5"), mv("e9e7")],
        };
        assert_eq!(
            info.to_string(),
            "info depth 3 seldepth 7 nodes 5000 nps 20000 time 250 score cp -35 \
             wdl 200 500 300 pv e2e5 e9e7"
        );
        let info = SearchInfo {
            seldepth: None,
            time: Duration::ZERO,
            score: Score::Mate(-2),
            wdl: None,
            pv: Vec::new(),
            ..info
        };
        assert_eq!(
            info.to_string(),
            "info depth 3 nodes 5000 nps 5000000 time 0 score mate -2"
        );
    }

    #[test]
    fn wdl_permille_sums_to_a_thousand() {
        let wdl = WdlPermille::from(Wdl {
            win: 0.3336,
            draw: 0.3336,
            loss: 0.3328,
        });
        assert_eq!((wdl.win, wdl.draw, wdl.loss), (334, 333, 333));
        let wdl = WdlPermille::from(Wdl {
            win: 0.9,
            draw: 0.0,
            loss: 0.9,
        });
        assert_eq!(wdl.win + wdl.draw + wdl.loss, 1000);
    }

    #[test]
    fn options_print_and_check_values() {
        let spin = UciOption {
            name: "Depth".into(),
            kind: OptionKind::Spin {
                default: 16,
                min: 1,
                max: 16,
            },
        };
        assert_eq!(
            spin.to_string(),
            "option name Depth type spin default 16 min 1 max 16"
        );
        assert_eq!(spin.parse_value(Some("4")), Ok(OptionValue::Spin(4)));
        for bad in ["0", "17", "x", ""] {
            assert!(matches!(
                spin.parse_value(Some(bad)),
                Err(OptionError::BadValue { .. })
            ));
        }
        assert!(matches!(
            spin.parse_value(None),
            Err(OptionError::MissingValue { .. })
        ));

        let check = UciOption {
            name: "Ponder".into(),
            kind: OptionKind::Check { default: false },
        };
        assert_eq!(
            check.to_string(),
            "option name Ponder type check default false"
        );
        assert_eq!(
            check.parse_value(Some("true")),
            Ok(OptionValue::Check(true))
        );
        assert!(check.parse_value(Some("yes")).is_err());

        let combo = UciOption {
            name: "Style".into(),
            kind: OptionKind::Combo {
                default: "Normal".into(),
                choices: vec!["Solid".into(), "Normal".into()],
            },
        };
        assert_eq!(
            combo.to_string(),
            "option name Style type combo default Normal var Solid var Normal"
        );
        assert_eq!(
            combo.parse_value(Some("solid")),
            Ok(OptionValue::Combo("Solid".into()))
        );
        assert!(combo.parse_value(Some("Wild")).is_err());

        let button = UciOption {
            name: "Clear Hash".into(),
            kind: OptionKind::Button,
        };
        assert_eq!(button.to_string(), "option name Clear Hash type button");
        assert_eq!(button.parse_value(None), Ok(OptionValue::Button));
        assert!(button.parse_value(Some("now")).is_err());

        let string = UciOption {
            name: "Weights".into(),
            kind: OptionKind::String {
                default: String::new(),
            },
        };
        assert_eq!(
            string.to_string(),
            "option name Weights type string default <empty>"
        );
        assert_eq!(
            string.parse_value(Some("a b")),
            Ok(OptionValue::String("a b".into()))
        );
        assert_eq!(
            string.parse_value(Some("<empty>")),
            Ok(OptionValue::String(String::new()))
        );
    }

    /// Output that the test reads back after `run_uci` returns.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A searcher that misbehaves: panics, or answers `e2e5` whatever the position.
    struct Faulty {
        panics: bool,
    }

    impl UciSearcher for Faulty {
        fn id_name(&self) -> String {
            "faulty".into()
        }
        fn id_author(&self) -> String {
            "tests".into()
        }
        fn options(&self) -> Vec<UciOption> {
            vec![UciOption {
                name: "Fussy".into(),
                kind: OptionKind::Check { default: false },
            }]
        }
        fn set_option(&mut self, _: &str, _: &OptionValue) -> Result<(), String> {
            Err("never happy".into())
        }
        fn new_game(&mut self) {}
        fn search(&mut self, _: &Game, _: &SearchLimits, _: &mut dyn FnMut(&SearchInfo)) -> Move {
            assert!(!self.panics, "a searcher bug");
            mv("e2e5")
        }
    }

    fn session(searcher: Faulty, input: &str) -> String {
        let out = Captured::default();
        run_uci(searcher, io::Cursor::new(input.to_string()), out.clone()).unwrap();
        out.text()
    }

    #[test]
    fn faulty_searchers_still_answer_legally() {
        let text = session(
            Faulty { panics: true },
            "position startpos moves e2e5\ngo depth 1\nquit\n",
        );
        assert!(
            text.contains("info string error: the search failed"),
            "{text}"
        );
        let best = text
            .lines()
            .last()
            .unwrap()
            .strip_prefix("bestmove ")
            .unwrap();
        let pos = Position::start().after(mv("e2e5"));
        assert!(pos.is_legal(mv(best)), "{text}");

        let text = session(
            Faulty { panics: false },
            "position startpos moves e2e5\ngo searchmoves e9e8\n",
        );
        assert!(text.contains("not allowed"), "{text}");
        assert_eq!(text.lines().last(), Some("bestmove e9e8"));
    }

    #[test]
    fn rejected_option_values_are_reported() {
        let text = session(
            Faulty { panics: false },
            "setoption name fussy value true\nsetoption name Fussy value 3\nsetoption name Nope\n",
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "info string error: option `Fussy`: never happy",
                "info string error: option `Fussy`: `3` is not `true` or `false`",
                "info string error: unknown option `Nope`",
            ]
        );
    }

    #[test]
    fn game_over_answers_the_null_move() {
        // Black is mated.
        let text = session(
            Faulty { panics: true },
            "position fen R4k4/4ppp3/10/10/10/10/10/10/10/5K4 b - - 1 17\ngo depth 1\n",
        );
        assert!(text.contains("info string no legal move"), "{text}");
        assert!(text.contains("1-0 by checkmate"), "{text}");
        assert_eq!(text.lines().last(), Some("bestmove 0000"));
    }
}
