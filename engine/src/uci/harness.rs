//! A scripted GUI for testing UCI engines: it drives [`run_uci`] on a thread
//! over in-memory pipes, or an engine binary over its stdin and stdout,
//! checks every `bestmove` against the rules, and plays seeded streams of
//! valid and malformed commands against a model of what the engine must do.
//!
//! This is test support, compiled only with the `uci-harness` feature: a
//! failed check panics with the transcript of the session, as `assert!`
//! does. Every wait is bounded by [`PATIENCE`], a hang guard far above any
//! reply time; nothing here asserts on how long a reply takes.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::{parse_command, run_uci, Command, GoParams, UciSearcher};
use crate::game::Game;
use crate::position::{parse_coordinate, Move, Position};
use crate::types::Kind;

/// The longest wait for any line from the engine before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Lines of transcript a random session keeps for its failure messages.
const TRANSCRIPT_TAIL: usize = 200;

/// The engine's end of the GUI-to-engine pipe.
struct PipeReader {
    chunks: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.chunks.recv() {
                Ok(chunk) => {
                    self.chunk = chunk;
                    self.at = 0;
                }
                // The GUI closed its end.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The GUI's end of the GUI-to-engine pipe.
struct PipeSender(Sender<Vec<u8>>);

impl Write for PipeSender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .send(buf.to_vec())
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The engine's end of the engine-to-GUI pipe: sends whole lines.
struct PipeWriter {
    partial: Vec<u8>,
    lines: Sender<String>,
}

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            // Output that is not UTF-8 fails the engine's write, and so the session.
            let line = String::from_utf8(line)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            self.lines
                .send(line.trim_end().to_string())
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A GUI talking to one engine, keeping a transcript (`> ` sent, `< `
/// received) for failure messages.
pub struct Gui {
    input: Option<Box<dyn Write + Send>>,
    output: Receiver<String>,
    engine: Option<JoinHandle<io::Result<()>>>,
    process: Option<Child>,
    transcript: Vec<String>,
}

impl Gui {
    /// `run_uci(searcher, ...)` on its own thread, over in-memory pipes.
    pub fn in_process<S: UciSearcher + 'static>(searcher: S) -> Gui {
        let (to_engine, chunks) = mpsc::channel::<Vec<u8>>();
        let (lines, output) = mpsc::channel();
        let reader = BufReader::new(PipeReader {
            chunks,
            chunk: Vec::new(),
            at: 0,
        });
        let writer = PipeWriter {
            partial: Vec::new(),
            lines,
        };
        let engine = thread::spawn(move || run_uci(searcher, reader, writer));
        Gui {
            input: Some(Box::new(PipeSender(to_engine))),
            output,
            engine: Some(engine),
            process: None,
            transcript: Vec::new(),
        }
    }

    /// Spawns `command` (an engine that speaks UCI on stdin and stdout;
    /// its stderr is inherited) and talks to it.
    pub fn binary(mut command: Process) -> io::Result<Gui> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(io::Error::other(
                "the engine's stdin or stdout is not piped",
            ));
        };
        let (lines, output) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Gui {
            input: Some(Box::new(stdin)),
            output,
            engine: None,
            process: Some(child),
            transcript: Vec::new(),
        })
    }

    /// Sends `bytes` and a newline. After the engine has quit, lines go nowhere.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.transcript
            .push(format!("> {}", String::from_utf8_lossy(bytes).trim_end()));
        let mut line = bytes.to_vec();
        line.push(b'\n');
        if let Some(input) = self.input.as_mut() {
            let _ = input.write_all(&line).and_then(|()| input.flush());
        }
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// The next line from the engine. Panics with the transcript after
    /// [`PATIENCE`] without one, or when the engine has exited.
    pub fn next_line(&mut self) -> String {
        self.next_line_by(Instant::now() + PATIENCE)
    }

    fn next_line_by(&mut self, deadline: Instant) -> String {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.output.recv_timeout(wait) {
            Ok(line) => {
                self.transcript.push(format!("< {line}"));
                line
            }
            Err(e) => panic!("no reply in time ({e:?}):\n{}", self.transcript()),
        }
    }

    /// Lines up to and including the first one that `stop_at` accepts.
    /// Panics unless that line comes within [`PATIENCE`], however many
    /// other lines (say, `info` of a search that never ends) come first.
    pub fn read_until(&mut self, stop_at: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut lines = Vec::new();
        loop {
            let line = self.next_line_by(deadline);
            let done = stop_at(&line);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// Sends `isready` and returns the lines before `readyok`: everything
    /// the engine wrote in reply to the lines sent before.
    pub fn sync(&mut self) -> Vec<String> {
        self.send("isready");
        let mut lines = self.read_until(|l| l == "readyok");
        lines.pop();
        lines
    }

    /// Sends `line` (a `go`) and waits for a `bestmove`: the lines before
    /// it, and the `bestmove` line.
    pub fn go(&mut self, line: &str) -> (Vec<String>, String) {
        self.send(line);
        let mut lines = self.read_until(|l| l.starts_with("bestmove"));
        let best = lines.pop().unwrap_or_default();
        (lines, best)
    }

    /// Sends a `position` line and returns the position it sets up. Panics
    /// unless it is a valid one.
    pub fn set_position(&mut self, line: &str) -> Position {
        self.send(line);
        *game_of(line).position()
    }

    /// `uci` until `uciok`: the `id` and `option` lines.
    pub fn hello(&mut self) -> Vec<String> {
        self.send("uci");
        let mut lines = self.read_until(|l| l == "uciok");
        lines.pop();
        lines
    }

    /// The session so far, one line each.
    pub fn transcript(&self) -> String {
        self.transcript.join("\n")
    }

    /// Closes the engine's input (EOF) and returns what it wrote until it
    /// exited. Panics unless it exits, and exits cleanly, within [`PATIENCE`].
    pub fn close(mut self) -> Vec<String> {
        self.input = None;
        let started = Instant::now();
        let mut rest = Vec::new();
        loop {
            match self.output.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    self.transcript.push(format!("< {line}"));
                    rest.push(line);
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if started.elapsed() > PATIENCE => {
                    panic!("the engine did not exit:\n{}", self.transcript());
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        if let Some(engine) = self.engine.take() {
            match engine.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("run_uci failed: {e}\n{}", self.transcript()),
                Err(_) => panic!("run_uci panicked\n{}", self.transcript()),
            }
        }
        if let Some(mut child) = self.process.take() {
            // Its stdout is closed: it has exited or is about to.
            let status = wait_for(&mut child)
                .unwrap_or_else(|| panic!("the engine did not exit:\n{}", self.transcript()));
            assert!(status.success(), "{status}\n{}", self.transcript());
        }
        rest
    }

    /// Keeps the last `n` lines of the transcript.
    fn keep_last(&mut self, n: usize) {
        let drop = self.transcript.len().saturating_sub(n);
        self.transcript.drain(..drop);
    }
}

/// The exit status of `child` within [`PATIENCE`], else `None` (and it is killed).
fn wait_for(child: &mut Child) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < PATIENCE {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

impl Drop for Gui {
    /// A test that failed midway leaves no engine process behind.
    fn drop(&mut self) {
        if let Some(child) = &mut self.process {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `info string error: ...` lines among `lines`.
pub fn errors(lines: &[String]) -> Vec<&String> {
    lines
        .iter()
        .filter(|l| l.starts_with("info string error: "))
        .collect()
}

/// The move of a `bestmove` line. Panics on any other line.
pub fn best_move(line: &str) -> &str {
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("bestmove"), "{line}");
    words
        .next()
        .unwrap_or_else(|| panic!("`{line}` names no move"))
}

/// Checks a `bestmove` line: its move is legal in `pos` and, unless
/// `searchmoves` is empty, one of them; a `ponder` move is legal after it.
/// `context` (say, the transcript) goes into the failure message.
pub fn assert_legal_answer(line: &str, pos: &Position, searchmoves: &[Move], context: &str) {
    let text = best_move(line);
    let mv = parse_coordinate(text).unwrap_or_else(|e| panic!("{e}: {line}\n{context}"));
    assert!(
        pos.is_legal(mv),
        "{line} is illegal in {}\n{context}",
        pos.fen()
    );
    assert!(
        searchmoves.is_empty() || searchmoves.contains(&mv),
        "{line} is not among {searchmoves:?}\n{context}"
    );
    if let Some(ponder) = line.split(" ponder ").nth(1) {
        let reply = parse_coordinate(ponder).unwrap_or_else(|e| panic!("{e}: {line}\n{context}"));
        assert!(pos.after(mv).is_legal(reply), "{line}\n{context}");
    }
}

/// Sends each `go` of `gos` in the current position `pos` and checks each
/// answer with [`assert_legal_answer`].
pub fn assert_legal_answers(gui: &mut Gui, pos: &Position, searchmoves: &[Move], gos: &[&str]) {
    for go in gos {
        let (_, best) = gui.go(go);
        assert_legal_answer(&best, pos, searchmoves, &gui.transcript());
    }
}

/// Sends `go` (a `ponder` or `infinite` search) in the current position
/// `pos`: no answer comes until `release` (`ponderhit` or `stop`), and then
/// one legal answer.
pub fn assert_held_until(gui: &mut Gui, pos: &Position, go: &str, release: &str) {
    gui.send(go);
    assert!(
        gui.sync().iter().all(|l| !l.starts_with("bestmove")),
        "{}",
        gui.transcript()
    );
    gui.send(release);
    let answer = gui.read_until(|l| l.starts_with("bestmove"));
    assert_legal_answer(answer.last().unwrap(), pos, &[], &gui.transcript());
}

/// Sends `position`, a line where the game is over, and `go`: the answer is
/// `bestmove 0000` after one line that gives the result (`over`, say
/// `1-0 by checkmate`).
pub fn assert_game_over_answer(gui: &mut Gui, position: &str, go: &str, over: &str) {
    gui.send(position);
    let (lines, best) = gui.go(go);
    assert_eq!(best, "bestmove 0000");
    assert_eq!(
        lines,
        [format!(
            "info string no legal move: the game is over ({over})"
        )]
    );
}

/// The game a `position ...` line sets up. Panics unless it is a valid one.
pub fn game_of(line: &str) -> Game {
    match parse_command(line) {
        Ok(Command::Position(game)) => *game,
        other => panic!("{line}: {other:?}"),
    }
}

/// `position` lines where rule 5 allows only king moves: nine moves each
/// without one from the start, and a rook that could take a queen.
pub const KING_MUST_MOVE: [&str; 2] = [
    "position startpos moves f2f4 f9f7 b1a3 b10a8 h2h3 h9h8 h1g3 h10g8 \
     k2k3 k9k8 c1d3 c10d8 b2b4 b9b7 a3c4 a8c7 e2e4 e9e7",
    "position fen 5k4/10/10/10/10/10/10/q9/10/R4K4 w - - 0 10",
];

/// Sends each of [`KING_MUST_MOVE`], then each `go` of `gos`, and checks
/// that every answer is a legal king move.
pub fn assert_king_moves(gui: &mut Gui, gos: &[&str]) {
    for setup in KING_MUST_MOVE {
        gui.send(setup);
        let game = game_of(setup);
        let pos = game.position();
        for go in gos {
            let (_, best) = gui.go(go);
            assert_legal_answer(&best, pos, &[], &gui.transcript());
            let mv = parse_coordinate(best_move(&best)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                pos.piece_at(mv.from).map(|p| p.kind),
                Some(Kind::King),
                "{setup}: {go}: {best}"
            );
        }
    }
}

/// Starts `go infinite` in the current position `pos`: the engine answers
/// `isready` but refuses another `go` and `busy_setoption` (a valid
/// `setoption` line) until `stop`, which brings one legal answer.
pub fn assert_infinite_until_stop(gui: &mut Gui, pos: &Position, busy_setoption: &str) {
    gui.send("go infinite");
    let meanwhile = gui.sync();
    assert!(
        !meanwhile.iter().any(|l| l.starts_with("bestmove")),
        "{}",
        gui.transcript()
    );
    gui.send("go depth 1");
    gui.send(busy_setoption);
    let refused = gui.sync();
    assert_eq!(
        errors(&refused),
        ["info string error: already searching: send `stop` first"; 2],
        "{}",
        gui.transcript()
    );
    gui.send("stop");
    let answer = gui.read_until(|l| l.starts_with("bestmove"));
    let best = answer.last().map_or("", String::as_str);
    assert_legal_answer(best, pos, &[], &gui.transcript());
    assert!(
        gui.sync().iter().all(|l| !l.starts_with("bestmove")),
        "{}",
        gui.transcript()
    );
}

/// Runs `go infinite` from the start in two fresh sessions of `new_gui`,
/// ended by `quit` and by EOF: each search still answers, once, legally,
/// and the engine exits cleanly.
pub fn assert_quit_and_eof_answer(mut new_gui: impl FnMut() -> Gui) {
    for ending in ["quit", ""] {
        let mut gui = new_gui();
        gui.send("position startpos");
        gui.send("go infinite");
        gui.sync();
        if !ending.is_empty() {
            gui.send(ending);
        }
        let context = gui.transcript();
        let rest = gui.close();
        let answers: Vec<&String> = rest.iter().filter(|l| l.starts_with("bestmove")).collect();
        assert_eq!(answers.len(), 1, "{rest:?}\n{context}");
        assert_legal_answer(answers[0], &Position::start(), &[], &context);
    }
}

/// Whether an engine accepts `setoption name <name> [value <value>]`,
/// given the name and the value.
pub type OptionAccepted = Box<dyn Fn(&str, Option<&str>) -> bool>;

/// The engine-specific part of a random command stream.
pub struct StreamConfig {
    /// `setoption` lines to send, accepted and refused ones.
    pub setoptions: Vec<String>,
    /// Which of them the engine accepts (with nothing running); a refusal
    /// must bring one error line.
    pub option_accepted: OptionAccepted,
    /// Most nodes a random `go nodes` asks for.
    pub max_nodes: u64,
}

/// What a random session did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamReport {
    /// Searches started, each answered by exactly one legal `bestmove`.
    pub searches: usize,
}

/// A searching `go` the test waits to see answered.
struct Pending {
    position: Position,
    searchmoves: Vec<Move>,
    /// Held back until `stop` (or `ponderhit` for `ponder`).
    held: bool,
    ponder: bool,
}

/// What the engine should have: its position and any search in progress.
struct Model {
    game: Game,
    pending: Option<Pending>,
    /// Accepted `go` commands and the answers checked.
    searches: usize,
    answers: usize,
}

impl Model {
    fn answer(&mut self, line: &str, context: &str) {
        let pending = self
            .pending
            .take()
            .unwrap_or_else(|| panic!("`{line}` answers no search\n{context}"));
        assert_legal_answer(line, &pending.position, &pending.searchmoves, context);
        self.answers += 1;
    }
}

/// Runs three seeded streams of 300 commands, each in a fresh session of
/// `new_gui`; each must have searched more than 20 times.
pub fn assert_random_sessions(mut new_gui: impl FnMut() -> Gui, config: &StreamConfig) {
    for seed in 0..3 {
        let report = run_random_session(new_gui(), config, seed, 300);
        assert!(
            report.searches > 20,
            "seed {seed}: only {} searches",
            report.searches
        );
    }
}

/// Sends `lines` random lines seeded by `seed` to the engine behind `gui`
/// (which has seen nothing yet): valid commands of every kind, malformed
/// ones and binary garbage, never `quit` nor an endless `go`. After each
/// line it syncs and checks the reply against a model: each refused line
/// brings exactly one `info string error`, each search exactly one legal
/// `bestmove` (respecting `searchmoves`), a finished game `bestmove 0000`.
/// Ends with `quit`, which must still answer a running search.
pub fn run_random_session(
    gui: Gui,
    config: &StreamConfig,
    seed: u64,
    lines: usize,
) -> StreamReport {
    let mut gui = gui;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model {
        game: Game::new(Position::start()),
        pending: None,
        searches: 0,
        answers: 0,
    };
    for _ in 0..lines {
        let line = random_line(&mut rng, &model, config);
        step(&mut gui, &mut model, config, &line);
        gui.keep_last(TRANSCRIPT_TAIL);
    }
    gui.send("quit");
    let pending = model.pending.is_some();
    let context = format!("seed {seed}\n{}", gui.transcript());
    let rest = gui.close();
    let answers: Vec<&String> = rest.iter().filter(|l| l.starts_with("bestmove")).collect();
    assert_eq!(answers.len(), usize::from(pending), "{rest:?}\n{context}");
    if let Some(line) = answers.first() {
        model.answer(line, &context);
    }
    assert_eq!(model.searches, model.answers, "{context}");
    StreamReport {
        searches: model.searches,
    }
}

const GARBAGE: [&str; 24] = [
    "foo",
    "Go",
    "UCI",
    "position2",
    "e2e5",
    "j2j4",
    "-1",
    "0",
    "9999999999999999999999",
    "name",
    "value",
    "moves",
    "fen",
    "startpos",
    "searchmoves",
    "depth",
    "wtime",
    "infinite",
    "ponder",
    "\u{00e9}t\u{00e9}",
    "\t",
    "on",
    "stop",
    "isready",
];

/// Picks one of `items`, which is not empty.
fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// A line of random garbage whose first word is never a command.
fn garbage(rng: &mut SmallRng) -> Vec<u8> {
    match rng.random_range(0..4) {
        0 => {
            let n = rng.random_range(1..200);
            (0..n)
                .map(|_| rng.random::<u8>())
                .filter(|&b| b != b'\n')
                .collect()
        }
        1 => Vec::new(),
        2 => "x".repeat(rng.random_range(1000..20_000)).into_bytes(),
        _ => {
            let mut words = vec!["bogus".to_string()];
            for _ in 0..rng.random_range(0..6) {
                words.push(pick(rng, &GARBAGE).to_string());
            }
            words.join(" ").into_bytes()
        }
    }
}

/// A token in place of a move: sometimes legal by chance.
fn random_move_text(rng: &mut SmallRng) -> String {
    let squares = [
        "a1", "e2", "e5", "f1", "i1", "k10", "e9", "e10", "j4", "a0", "f10",
    ];
    match rng.random_range(0..3) {
        0 => format!("{}{}", pick(rng, &squares), pick(rng, &squares)),
        1 => pick(rng, &["0000", "e2-e4", "e9e10q", "e2e5x", "Nf3", "a1a1"]).to_string(),
        _ => pick(rng, &GARBAGE).to_string(),
    }
}

/// Up to `plies` random legal moves from `game`.
fn random_walk(rng: &mut SmallRng, game: &Game, plies: usize) -> Vec<String> {
    let mut pos = *game.position();
    let mut texts = Vec::new();
    for _ in 0..plies {
        let legal = pos.legal_moves();
        let Some(&mv) = legal.choose(rng) else { break };
        texts.push(mv.to_string());
        pos = pos.after(mv);
    }
    texts
}

fn random_position(rng: &mut SmallRng, model: &Model) -> String {
    let mut line = if rng.random_bool(0.6) {
        let start = Game::new(Position::start());
        let plies = rng.random_range(0..40);
        let walk = random_walk(rng, &start, plies);
        format!("position startpos moves {}", walk.join(" "))
    } else {
        let plies = rng.random_range(0..6);
        let walk = random_walk(rng, &model.game, plies);
        format!(
            "position fen {} moves {}",
            model.game.position().fen(),
            walk.join(" ")
        )
    };
    if rng.random_bool(0.3) {
        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
        let i = rng.random_range(1..words.len());
        match rng.random_range(0..3) {
            0 => words[i] = random_move_text(rng),
            1 => {
                words.remove(i);
            }
            _ => words.push(random_move_text(rng)),
        }
        line = words.join(" ");
    }
    line
}

/// A `go` that ends by itself (or waits for `stop`/`ponderhit` after a
/// bounded search), sometimes malformed.
fn random_go(rng: &mut SmallRng, model: &Model, max_nodes: u64) -> String {
    let mut words = vec!["go".to_string()];
    let clock = |rng: &mut SmallRng| {
        format!(
            "wtime {} btime {} winc {} binc {}",
            rng.random_range(-50..400),
            rng.random_range(-50..400),
            rng.random_range(0..50),
            rng.random_range(0..50)
        )
    };
    match rng.random_range(0..7) {
        0 => words.push(format!("depth {}", rng.random_range(1..=3))),
        1 => words.push(format!("nodes {}", rng.random_range(0..=max_nodes))),
        2 => words.push(format!("movetime {}", rng.random_range(0..25))),
        3 => {
            words.push(clock(rng));
            if rng.random_bool(0.5) {
                words.push(format!("movestogo {}", rng.random_range(1..6)));
            }
        }
        4 => words.push(format!("mate {}", rng.random_range(1..=2))),
        5 => words.push(format!("infinite depth {}", rng.random_range(1..=2))),
        _ => words.push(format!(
            "ponder depth {} {}",
            rng.random_range(1..=2),
            clock(rng)
        )),
    }
    if rng.random_bool(0.25) {
        let legal = model.game.position().legal_moves();
        let n = rng.random_range(1..=3);
        let mut chosen: Vec<String> = legal
            .choose_multiple(rng, n)
            .map(|m| m.to_string())
            .collect();
        if chosen.is_empty() || rng.random_bool(0.2) {
            chosen.push(random_move_text(rng));
        }
        words.push(format!("searchmoves {}", chosen.join(" ")));
    }
    if rng.random_bool(0.1) {
        let malformed = [
            "depth x",
            "movestogo 0",
            "nodes",
            "fast",
            "searchmoves",
            "mate 0",
        ];
        words.push(pick(rng, &malformed).to_string());
    }
    words.join(" ")
}

fn random_line(rng: &mut SmallRng, model: &Model, config: &StreamConfig) -> Vec<u8> {
    let line = match rng.random_range(0..20) {
        0 => "isready".to_string(),
        1 => "uci".to_string(),
        2 => "ucinewgame".to_string(),
        3 => pick(rng, &["debug on", "debug off", "debug", "debug yes"]).to_string(),
        4..=6 => random_position(rng, model),
        7..=11 => random_go(rng, model, config.max_nodes),
        12 | 13 => "stop".to_string(),
        14 => "ponderhit".to_string(),
        // Malformed whatever the engine's options.
        15 if config.setoptions.is_empty() || rng.random_bool(0.2) => {
            pick(rng, &["setoption value 3", "setoption name", "setoption"]).to_string()
        }
        15 => pick(rng, &config.setoptions).clone(),
        _ => return garbage(rng),
    };
    line.into_bytes()
}

fn has_a_limit(go: &GoParams) -> bool {
    go.depth.is_some()
        || go.nodes.is_some()
        || go.movetime.is_some()
        || go.mate.is_some()
        || (go.wtime.is_some() && go.btime.is_some())
}

/// Sends `bytes`, then `isready`, and checks everything the engine wrote
/// before `readyok` against the model.
fn step(gui: &mut Gui, model: &mut Model, config: &StreamConfig, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let parsed = parse_command(&text);
    let busy = model.pending.as_ref().is_some_and(|p| p.held);
    // Wait for a search that ends by itself, so that whether the engine is
    // still busy never depends on timing.
    let needs_the_searcher = matches!(
        parsed,
        Ok(Command::Go(_) | Command::SetOption { .. } | Command::UciNewGame | Command::Uci)
    );
    if needs_the_searcher && !busy && model.pending.is_some() {
        let answer = gui.read_until(|l| l.starts_with("bestmove"));
        assert!(errors(&answer).is_empty(), "{}", gui.transcript());
        let best = answer.last().map_or("", String::as_str);
        model.answer(best, &gui.transcript());
    }
    let stopping = matches!(parsed, Ok(Command::Stop));
    let is_ready = matches!(parsed, Ok(Command::IsReady));
    let mut expected_errors = 0;
    let mut game_over = false;
    match parsed {
        _ if text.trim().is_empty() => {}
        Err(_) => expected_errors = 1,
        Ok(Command::Go(go)) => {
            assert!(
                has_a_limit(&go),
                "the generator made an endless `go`: {text}"
            );
            let pos = *model.game.position();
            if busy || go.searchmoves.iter().any(|&mv| !pos.is_legal(mv)) {
                expected_errors = 1;
            } else if !pos.has_legal_moves() {
                game_over = true;
            } else {
                model.searches += 1;
                model.pending = Some(Pending {
                    position: pos,
                    searchmoves: go.searchmoves,
                    held: go.infinite || go.ponder,
                    ponder: go.ponder,
                });
            }
        }
        Ok(Command::Position(game)) => model.game = *game,
        Ok(Command::UciNewGame) if busy => expected_errors = 1,
        Ok(Command::UciNewGame) => model.game = Game::new(Position::start()),
        Ok(Command::SetOption { name, value }) => {
            if busy || !(config.option_accepted)(&name, value.as_deref()) {
                expected_errors = 1;
            }
        }
        Ok(Command::Uci) if busy => expected_errors = 1,
        Ok(Command::Stop) => {
            if let Some(pending) = &mut model.pending {
                pending.held = false;
            }
        }
        Ok(Command::PonderHit) => match &mut model.pending {
            Some(pending) if pending.ponder => {
                pending.ponder = false;
                pending.held = false;
            }
            _ => expected_errors = 1,
        },
        Ok(Command::Quit) => panic!("the generator made a `quit`"),
        Ok(Command::Uci | Command::IsReady | Command::Debug(_)) => {}
    }
    gui.send_bytes(bytes);
    let mut lines = Vec::new();
    if is_ready {
        lines = gui.read_until(|l| l == "readyok");
        lines.pop();
    }
    lines.extend(gui.sync());
    let context = gui.transcript();
    for line in &lines {
        if line.starts_with("bestmove") {
            if game_over {
                assert_eq!(line, "bestmove 0000", "{context}");
                game_over = false;
            } else {
                model.answer(line, &context);
            }
        }
    }
    assert!(!game_over, "no `bestmove 0000`\n{context}");
    assert_eq!(errors(&lines).len(), expected_errors, "{context}");
    // `stop` waits for the answer.
    if stopping {
        assert!(model.pending.is_none(), "{context}");
    }
}
