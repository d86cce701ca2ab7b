//! A client for external UCI engines, so that `mixzero arena` can play them.
//!
//! The engine runs as a child process spoken to over stdin/stdout; a thread
//! reads its output into a channel so that every wait has a deadline. Any
//! failure (no answer in time, a crash, a move that is not legal under the
//! full rules) is returned as a [`EngineError`]: the arena scores it as a loss
//! for the engine and starts a fresh process for the next game.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use engine::{Game, Move};
use thiserror::Error;

/// Wait for `uciok` and `readyok`: engines may load large files at start.
const HANDSHAKE: Duration = Duration::from_secs(10);
const DEFAULT_MOVETIME_MS: u64 = 100;
/// Default grace with a node or depth limit, whose duration is unknown.
const DEFAULT_SEARCH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long each search may run, as sent with `go`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoLimit {
    Movetime(u64),
    Nodes(u64),
    Depth(u32),
}

/// A parsed `uci:COMMAND[;key=value...]` player spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UciConfig {
    /// For game records: `name=`, else the whole spec.
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    /// `setoption name NAME value VALUE` after the handshake, in order.
    pub options: Vec<(String, String)>,
    /// The engine calls the tenth file `j` (our `k`).
    pub j_files: bool,
    /// Send every legal move under the full rules with `searchmoves`, for
    /// engines that do not know rules 5 and 6.
    pub searchmoves: bool,
    pub limit: GoLimit,
    /// How long past the limit (or in all, with nodes or depth) to wait for
    /// `bestmove` before the engine loses on time.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UciSpecError {
    #[error("expected uci:COMMAND[;key=value...], got `{0}`")]
    NotUci(String),
    #[error("no command after `uci:`")]
    NoCommand,
    #[error("`{0}` is not key=value")]
    NotKeyValue(String),
    #[error("unknown key `{0}` (expected option.NAME, files, searchmoves, movetime, nodes, depth, timeout or name)")]
    UnknownKey(String),
    #[error("{key}: `{value}` is not a whole number >= 1")]
    Number { key: String, value: String },
    #[error("files: `{0}` is not j or k")]
    Files(String),
    #[error("searchmoves: `{0}` is not 0 or 1")]
    Flag(String),
    #[error("give only one of movetime, nodes and depth")]
    TwoLimits,
}

impl UciConfig {
    /// Parses `uci:COMMAND[;key=value...]`; COMMAND is split on whitespace
    /// into the program and its arguments.
    pub fn parse(spec: &str) -> Result<UciConfig, UciSpecError> {
        let rest = spec
            .strip_prefix("uci:")
            .ok_or_else(|| UciSpecError::NotUci(spec.to_string()))?;
        let mut parts = rest.split(';');
        let mut words = parts.next().unwrap_or_default().split_whitespace();
        let program = words.next().ok_or(UciSpecError::NoCommand)?.to_string();
        let mut config = UciConfig {
            name: spec.to_string(),
            program,
            args: words.map(str::to_string).collect(),
            options: Vec::new(),
            j_files: false,
            searchmoves: false,
            limit: GoLimit::Movetime(DEFAULT_MOVETIME_MS),
            timeout: Duration::ZERO,
        };
        let mut limit = None;
        let mut timeout = None;
        for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| UciSpecError::NotKeyValue(part.to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let number = || {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| UciSpecError::Number {
                        key: key.to_string(),
                        value: value.to_string(),
                    })
            };
            let mut set_limit = |new: GoLimit| match limit.replace(new) {
                Some(_) => Err(UciSpecError::TwoLimits),
                None => Ok(()),
            };
            match key {
                "movetime" => set_limit(GoLimit::Movetime(number()?))?,
                "nodes" => set_limit(GoLimit::Nodes(number()?))?,
                "depth" => {
                    let depth = u32::try_from(number()?).map_err(|_| UciSpecError::Number {
                        key: key.to_string(),
                        value: value.to_string(),
                    })?;
                    set_limit(GoLimit::Depth(depth))?
                }
                "timeout" => timeout = Some(Duration::from_millis(number()?)),
                "name" => config.name = value.to_string(),
                "files" => {
                    config.j_files = match value {
                        "j" => true,
                        "k" => false,
                        _ => return Err(UciSpecError::Files(value.to_string())),
                    }
                }
                "searchmoves" => {
                    config.searchmoves = match value {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => return Err(UciSpecError::Flag(value.to_string())),
                    }
                }
                _ => match key.strip_prefix("option.") {
                    Some(name) if !name.is_empty() => {
                        config.options.push((name.to_string(), value.to_string()))
                    }
                    _ => return Err(UciSpecError::UnknownKey(key.to_string())),
                },
            }
        }
        config.limit = limit.unwrap_or(config.limit);
        config.timeout = timeout.unwrap_or(match config.limit {
            GoLimit::Movetime(ms) => Duration::from_millis(1000 + 2 * ms),
            GoLimit::Nodes(_) | GoLimit::Depth(_) => DEFAULT_SEARCH_TIMEOUT,
        });
        Ok(config)
    }

    /// The longest wait for `bestmove`.
    fn search_deadline(&self) -> Duration {
        match self.limit {
            GoLimit::Movetime(ms) => Duration::from_millis(ms) + self.timeout,
            GoLimit::Nodes(_) | GoLimit::Depth(_) => self.timeout,
        }
    }

    /// A move or square list in the engine's file letters.
    fn theirs(&self, text: &str) -> String {
        if self.j_files {
            text.replace('k', "j")
        } else {
            text.to_string()
        }
    }

    /// A FEN in the engine's file letters: only the en passant field names
    /// squares (`k` elsewhere is a black king).
    fn their_fen(&self, fen: &str) -> String {
        fen.split(' ')
            .enumerate()
            .map(|(i, field)| {
                if i == 3 {
                    self.theirs(field)
                } else {
                    field.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A move from the engine in our file letters, or `None` when it names
    /// a file the engine does not have.
    fn ours(&self, text: &str) -> Option<String> {
        if !self.j_files {
            return Some(text.to_string());
        }
        (!text.contains('k')).then(|| text.replace('j', "k"))
    }
}

/// Why an engine could not give a move; it loses the game.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("no `{expected}` within {} ms", waited.as_millis())]
    Timeout {
        expected: &'static str,
        waited: Duration,
    },
    #[error("the engine {how} while we waited for `{expected}`")]
    Crash { expected: &'static str, how: String },
    #[error("could not write to the engine: {0}")]
    Write(std::io::Error),
    #[error("bad bestmove: {0}")]
    Illegal(String),
}

impl EngineError {
    /// The PGN `Termination` value for a game lost this way.
    pub fn termination(&self) -> &'static str {
        match self {
            EngineError::Timeout { .. } => "time forfeit",
            EngineError::Illegal(_) => "rules infraction",
            EngineError::Spawn { .. } | EngineError::Crash { .. } | EngineError::Write(_) => {
                "abandoned"
            }
        }
    }
}

/// A running engine, ready for `position` and `go`. Dropping it ends the process.
pub struct UciEngine {
    config: UciConfig,
    child: Child,
    stdin: ChildStdin,
    /// Lines of the engine's stdout; disconnected when it closes.
    lines: Receiver<String>,
}

impl UciEngine {
    /// Starts the engine and runs the handshake: `uci`, the options, `isready`.
    pub fn start(config: &UciConfig) -> Result<UciEngine, EngineError> {
        let mut child = Command::new(&config.program)
            .args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| EngineError::Spawn {
                program: config.program.clone(),
                source,
            })?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => (stdin, stdout),
            _ => unreachable!("both pipes were requested"),
        };
        let (sender, lines) = mpsc::channel();
        // Not joined: it ends when the engine's stdout closes.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                if sender.send(text).is_err() {
                    return;
                }
                line.clear();
            }
        });
        let mut engine = UciEngine {
            config: config.clone(),
            child,
            stdin,
            lines,
        };
        engine.send("uci")?;
        engine.wait_for("uciok", HANDSHAKE)?;
        for (name, value) in &config.options {
            engine.send(&format!("setoption name {name} value {value}"))?;
        }
        engine.sync()?;
        Ok(engine)
    }

    /// Tells the engine that a new game starts.
    pub fn new_game(&mut self) -> Result<(), EngineError> {
        self.send("ucinewgame")?;
        self.sync()
    }

    /// The engine's move in the current position of `game`, checked legal
    /// under the full rules.
    pub fn best_move(&mut self, game: &Game) -> Result<Move, EngineError> {
        let moves: Vec<String> = game
            .moves()
            .iter()
            .map(|mv| self.config.theirs(&mv.to_string()))
            .collect();
        let mut position = format!(
            "position fen {}",
            self.config.their_fen(&game.start().fen())
        );
        if !moves.is_empty() {
            position.push_str(" moves ");
            position.push_str(&moves.join(" "));
        }
        let mut go = match self.config.limit {
            GoLimit::Movetime(ms) => format!("go movetime {ms}"),
            GoLimit::Nodes(n) => format!("go nodes {n}"),
            GoLimit::Depth(d) => format!("go depth {d}"),
        };
        if self.config.searchmoves {
            go.push_str(" searchmoves");
            for mv in game.position().legal_moves() {
                go.push(' ');
                go.push_str(&self.config.theirs(&mv.to_string()));
            }
        }
        // Output left over from an earlier command must not pass for the answer.
        while self.lines.try_recv().is_ok() {}
        self.send(&position)?;
        self.send(&go)?;
        let line = self.wait_for("bestmove", self.config.search_deadline())?;
        let text = line.split_whitespace().nth(1).unwrap_or_default();
        let ours = self.config.ours(text).ok_or_else(|| {
            EngineError::Illegal(format!("`{text}` names the k file, yet files=j"))
        })?;
        game.position()
            .parse_move(&ours)
            .map_err(|e| EngineError::Illegal(e.to_string()))
    }

    fn send(&mut self, line: &str) -> Result<(), EngineError> {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(EngineError::Write)
    }

    /// `isready`, then waits for `readyok`.
    fn sync(&mut self) -> Result<(), EngineError> {
        self.send("isready")?;
        self.wait_for("readyok", HANDSHAKE).map(drop)
    }

    /// The first line starting with `token`, skipping others (`info`, `id`...).
    fn wait_for(&mut self, token: &'static str, limit: Duration) -> Result<String, EngineError> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.split_whitespace().next() == Some(token) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(EngineError::Timeout {
                        expected: token,
                        waited: limit,
                    })
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(EngineError::Crash {
                        expected: token,
                        how: self.exit_status(),
                    })
                }
            }
        }
    }

    /// How the process ended, once its output has closed.
    fn exit_status(&mut self) -> String {
        // The exit follows the closed pipe closely; a bounded wait to reap it.
        for _ in 0..50 {
            match self.child.try_wait() {
                Ok(Some(status)) => return format!("exited ({status})"),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        "closed its output".to_string()
    }
}

impl Drop for UciEngine {
    fn drop(&mut self) {
        // A polite `quit` first; the kill covers engines that ignore it or hang.
        let _ = writeln!(self.stdin, "quit").and_then(|()| self.stdin.flush());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let config = UciConfig::parse(
            "uci:/bin/fsf --flag x; option.UCI_Variant=chess-mix ;option.Skill Level=3;\
             files=j;searchmoves=1;nodes=500;timeout=20;name=FSF",
        )
        .unwrap();
        assert_eq!(config.program, "/bin/fsf");
        assert_eq!(config.args, ["--flag", "x"]);
        assert_eq!(
            config.options,
            [
                ("UCI_Variant".to_string(), "chess-mix".to_string()),
                ("Skill Level".to_string(), "3".to_string())
            ]
        );
        assert!(config.j_files && config.searchmoves);
        assert_eq!(config.limit, GoLimit::Nodes(500));
        assert_eq!(config.timeout, Duration::from_millis(20));
        assert_eq!(config.name, "FSF");

        let plain = UciConfig::parse("uci:engine").unwrap();
        assert_eq!(plain.name, "uci:engine");
        assert_eq!(plain.limit, GoLimit::Movetime(100));
        assert_eq!(plain.timeout, Duration::from_millis(1200));
        assert_eq!(plain.search_deadline(), Duration::from_millis(1300));
        assert!(!plain.j_files && !plain.searchmoves && plain.args.is_empty());
        let depth = UciConfig::parse("uci:engine;depth=4").unwrap();
        assert_eq!(depth.limit, GoLimit::Depth(4));
        assert_eq!(depth.search_deadline(), DEFAULT_SEARCH_TIMEOUT);
    }

    #[test]
    fn bad_specs_say_why() {
        for (spec, expected) in [
            ("engine", "expected uci:COMMAND"),
            ("uci:", "no command"),
            ("uci:  ;movetime=5", "no command"),
            ("uci:e;movetime", "not key=value"),
            ("uci:e;speed=3", "unknown key `speed`"),
            ("uci:e;option.=3", "unknown key `option.`"),
            ("uci:e;movetime=0", "movetime: `0`"),
            ("uci:e;nodes=x", "nodes: `x`"),
            ("uci:e;depth=99999999999", "depth"),
            ("uci:e;files=z", "files: `z`"),
            ("uci:e;searchmoves=yes", "searchmoves: `yes`"),
            ("uci:e;movetime=5;depth=3", "only one"),
        ] {
            let err = UciConfig::parse(spec).unwrap_err().to_string();
            assert!(err.contains(expected), "{spec}: {err}");
        }
    }

    #[test]
    fn j_files_map_moves_and_the_en_passant_field_only() {
        let config = UciConfig::parse("uci:e;files=j").unwrap();
        assert_eq!(config.theirs("k2k4"), "j2j4");
        assert_eq!(config.ours("j9j7").as_deref(), Some("k9k7"));
        assert_eq!(config.ours("k9k7"), None);
        assert_eq!(
            config.their_fen(
                "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR b KQkq k3k4 0 1"
            ),
            "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR b KQkq j3j4 0 1"
        );
        let plain = UciConfig::parse("uci:e").unwrap();
        assert_eq!(plain.theirs("k2k4"), "k2k4");
        assert_eq!(plain.ours("k9k7").as_deref(), Some("k9k7"));
    }

    #[test]
    fn a_missing_program_fails_to_start() {
        let config = UciConfig::parse("uci:/nonexistent/mixzero-test-engine").unwrap();
        let err = UciEngine::start(&config).err().expect("no such program");
        assert!(matches!(err, EngineError::Spawn { .. }), "{err}");
        assert_eq!(err.termination(), "abandoned");
    }
}
