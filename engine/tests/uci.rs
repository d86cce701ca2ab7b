//! The UCI protocol end to end: scripted sessions through `run_uci` over
//! in-memory pipes, a seeded stream of valid and malformed commands, and
//! the `mixchess uci` binary.
//!
//! Every wait is bounded by [`PATIENCE`], a hang guard far above any reply
//! time; no test asserts on how long anything takes.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use engine::players::{AlphaBeta, MAX_DEPTH};
use engine::uci::{parse_command, run_uci, Command, GoParams};
use engine::{parse_coordinate, Game, Kind, Move, Position};

const PATIENCE: Duration = Duration::from_secs(120);

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
            let line = String::from_utf8(line).expect("UTF-8 output");
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

/// A GUI talking to an engine: `run_uci` on a thread, or the binary.
struct Gui {
    input: Option<Box<dyn Write + Send>>,
    output: Receiver<String>,
    engine: Option<JoinHandle<io::Result<()>>>,
    process: Option<Child>,
    transcript: Vec<String>,
}

impl Gui {
    fn in_process() -> Gui {
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
        let engine = thread::spawn(move || run_uci(AlphaBeta::new(MAX_DEPTH, 0), reader, writer));
        Gui {
            input: Some(Box::new(PipeSender(to_engine))),
            output,
            engine: Some(engine),
            process: None,
            transcript: Vec::new(),
        }
    }

    fn binary() -> Gui {
        let mut child = Process::new(env!("CARGO_BIN_EXE_mixchess"))
            .arg("uci")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("mixchess runs");
        let stdin: ChildStdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines, output) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Gui {
            input: Some(Box::new(stdin)),
            output,
            engine: None,
            process: Some(child),
            transcript: Vec::new(),
        }
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        self.transcript
            .push(format!("> {}", String::from_utf8_lossy(bytes).trim_end()));
        let mut line = bytes.to_vec();
        line.push(b'\n');
        let input = self.input.as_mut().expect("input is open");
        // The engine may have quit already; later lines then go nowhere.
        let _ = input.write_all(&line).and_then(|()| input.flush());
    }

    fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// The next line; fails the test (with the transcript) on a hang.
    fn next_line(&mut self) -> String {
        match self.output.recv_timeout(PATIENCE) {
            Ok(line) => {
                self.transcript.push(format!("< {line}"));
                line
            }
            Err(e) => panic!("no reply ({e:?}):\n{}", self.transcript()),
        }
    }

    /// Lines up to and including the first one that `stop_at` accepts.
    fn read_until(&mut self, stop_at: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.next_line();
            let done = stop_at(&line);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// Sends `isready`; the lines before `readyok`.
    fn sync(&mut self) -> Vec<String> {
        self.send("isready");
        let mut lines = self.read_until(|l| l == "readyok");
        lines.pop();
        lines
    }

    /// Sends `go ...` and waits for the search's `bestmove` line.
    fn go(&mut self, line: &str) -> (Vec<String>, String) {
        self.send(line);
        let mut lines = self.read_until(|l| l.starts_with("bestmove"));
        let best = lines.pop().unwrap();
        (lines, best)
    }

    fn transcript(&self) -> String {
        self.transcript.join("\n")
    }

    /// Closes the engine's input (EOF) and returns what it wrote until it exited.
    fn close(mut self) -> Vec<String> {
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
                    if let Some(child) = &mut self.process {
                        let _ = child.kill();
                    }
                    panic!("the engine did not exit:\n{}", self.transcript());
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        if let Some(engine) = self.engine.take() {
            engine.join().expect("no panic").expect("no I/O error");
        }
        if let Some(mut child) = self.process.take() {
            assert!(child.wait().unwrap().success(), "{}", self.transcript());
        }
        rest
    }
}

fn errors(lines: &[String]) -> Vec<&String> {
    lines
        .iter()
        .filter(|l| l.starts_with("info string error: "))
        .collect()
}

/// The move of a `bestmove` line.
fn best_move(line: &str) -> &str {
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("bestmove"), "{line}");
    words.next().expect("a move")
}

/// Checks a `bestmove` line against the position and the allowed moves.
fn assert_legal_answer(line: &str, pos: &Position, searchmoves: &[Move], context: &str) {
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
        let reply = parse_coordinate(ponder).unwrap();
        assert!(pos.after(mv).is_legal(reply), "{line}\n{context}");
    }
}

fn game(line: &str) -> Game {
    match parse_command(line) {
        Ok(Command::Position(game)) => *game,
        other => panic!("{line}: {other:?}"),
    }
}

fn moves(texts: &[&str]) -> Vec<Move> {
    texts.iter().map(|t| parse_coordinate(t).unwrap()).collect()
}

#[test]
fn scripted_session() {
    let mut gui = Gui::in_process();
    gui.send("uci");
    let hello = gui.read_until(|l| l == "uciok");
    assert_eq!(hello[0], "id name mixchess alphabeta");
    assert!(hello[1].starts_with("id author "), "{hello:?}");
    assert!(hello.contains(&"option name Depth type spin default 16 min 1 max 16".to_string()));
    assert!(hello
        .iter()
        .any(|l| l.starts_with("option name Seed type spin")));
    assert!(gui.sync().is_empty());

    gui.send("ucinewgame");
    let opening = "position startpos moves e2e5 e9e7";
    gui.send(opening);
    let pos = *game(opening).position();
    let (info, best) = gui.go("go depth 2");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    assert!(info[0].starts_with("info depth 1 "), "{info:?}");
    assert!(info[1].starts_with("info depth 2 "), "{info:?}");
    assert!(info
        .iter()
        .all(|l| l.contains(" score ") && l.contains(" pv ")));

    let (_, best) = gui.go("go movetime 50");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    let (_, best) = gui.go("go wtime 300 btime 300 winc 10 binc 10");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    let (_, best) = gui.go("go btime 1 wtime 0");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    let (_, best) = gui.go("go nodes 500");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    // An infinite search answers only after `stop`, and meanwhile refuses
    // a second `go` and `setoption` but answers `isready`.
    gui.send("go infinite depth 2");
    let meanwhile = gui.sync();
    assert!(
        !meanwhile.iter().any(|l| l.starts_with("bestmove")),
        "{meanwhile:?}"
    );
    gui.send("go depth 1");
    gui.send("setoption name Depth value 3");
    let refused = gui.sync();
    assert_eq!(
        errors(&refused),
        ["info string error: already searching: send `stop` first"; 2]
    );
    gui.send("stop");
    let answer = gui.read_until(|l| l.starts_with("bestmove"));
    assert_legal_answer(answer.last().unwrap(), &pos, &[], &gui.transcript());
    assert!(gui.sync().iter().all(|l| !l.starts_with("bestmove")));

    // Pondering holds the answer until `ponderhit`.
    gui.send("go ponder depth 2");
    assert!(gui.sync().iter().all(|l| !l.starts_with("bestmove")));
    gui.send("ponderhit");
    let answer = gui.read_until(|l| l.starts_with("bestmove"));
    assert_legal_answer(answer.last().unwrap(), &pos, &[], &gui.transcript());
    gui.send("ponderhit");
    assert_eq!(
        errors(&gui.sync()),
        ["info string error: `ponderhit` without a pondering search"]
    );

    gui.send("setoption name Depth value 0");
    gui.send("setoption name Depth value deep");
    gui.send("setoption name Hash value 16");
    gui.send("setoption name Depth");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 4, "{refused:?}");
    assert!(refused[0].contains("`0` is not a whole number from 1 to 16"));
    assert!(refused[2].contains("unknown option `Hash`"));
    gui.send("setoption name depth value 2");
    gui.send("setoption name Seed value 12345");
    assert!(gui.sync().is_empty());

    // An illegal move leaves the previous position in force.
    gui.send("position startpos moves e2e5 e9e7 e5e8");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 1, "{refused:?}");
    assert!(refused[0].contains("move 3"), "{refused:?}");
    let (_, best) = gui.go("go depth 2");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    let allowed = moves(&["a2a3", "k2k4"]);
    let (_, best) = gui.go("go depth 3 searchmoves a2a3 k2k4");
    assert_legal_answer(&best, &pos, &allowed, &gui.transcript());
    gui.send("go depth 3 searchmoves a2a3 a2a6");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("searchmoves: illegal move `a2a6`"),
        "{refused:?}"
    );

    gui.send("debug on");
    let (lines, best) = gui.go("go movetime 20");
    assert!(lines
        .iter()
        .any(|l| l.starts_with("info string time budget: soft 10 ms")));
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    gui.send("frobnicate");
    gui.send("go depth x");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 2, "{refused:?}");

    gui.send("quit");
    assert!(gui.close().is_empty());
}

#[test]
fn quit_and_eof_end_a_running_search_with_its_answer() {
    for ending in ["quit", ""] {
        let mut gui = Gui::in_process();
        gui.send("position startpos");
        gui.send("go infinite");
        gui.sync();
        if !ending.is_empty() {
            gui.send(ending);
        }
        let rest = gui.close();
        let answers: Vec<&String> = rest.iter().filter(|l| l.starts_with("bestmove")).collect();
        assert_eq!(answers.len(), 1, "{rest:?}");
        assert_legal_answer(answers[0], &Position::start(), &[], ending);
    }
}

#[test]
fn rule_5_forces_king_moves() {
    let mut gui = Gui::in_process();
    // Nine moves each without a king move: both kings must move on move 10.
    let nine_moves = "position startpos moves f2f4 f9f7 b1a3 b10a8 h2h3 h9h8 h1g3 h10g8 \
                      k2k3 k9k8 c1d3 c10d8 b2b4 b9b7 a3c4 a8c7 e2e4 e9e7";
    // The rook could take a queen, but White must move its king...
    let queen_en_prise = "position fen 5k4/10/10/10/10/10/10/q9/10/R4K4 w - - 0 10";
    // ...unless it has moved it in this period already (the FEN extension says so).
    let king_moved = "position fen 5k4/10/10/10/10/10/10/q9/10/R4K4 w - - 0 10 K -";
    for setup in [nine_moves, queen_en_prise] {
        gui.send(setup);
        let game = game(setup);
        let pos = game.position();
        for go in [
            "go depth 3",
            "go movetime 30",
            "go nodes 200",
            "go wtime 100 btime 100",
        ] {
            let (_, best) = gui.go(go);
            assert_legal_answer(&best, pos, &[], setup);
            let mv = parse_coordinate(best_move(&best)).unwrap();
            assert_eq!(
                pos.piece_at(mv.from).unwrap().kind,
                Kind::King,
                "{setup}: {best}"
            );
        }
    }
    gui.send(king_moved);
    assert_eq!(best_move(&gui.go("go depth 3").1), "a1a3");

    // Boxed in at the deadline: White has lost by king-quota, no move to give.
    gui.send(
        "position fen rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 10",
    );
    let (lines, best) = gui.go("go depth 2");
    assert_eq!(best, "bestmove 0000");
    assert_eq!(
        lines,
        ["info string no legal move: the game is over (0-1 by king-quota)"]
    );
    gui.send("quit");
    gui.close();
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
                words.push(GARBAGE.choose(rng).unwrap().to_string());
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
        0 => format!(
            "{}{}",
            squares.choose(rng).unwrap(),
            squares.choose(rng).unwrap()
        ),
        1 => ["0000", "e2-e4", "e9e10q", "e2e5x", "Nf3", "a1a1"]
            .choose(rng)
            .unwrap()
            .to_string(),
        _ => GARBAGE.choose(rng).unwrap().to_string(),
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
fn random_go(rng: &mut SmallRng, model: &Model) -> String {
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
        1 => words.push(format!("nodes {}", rng.random_range(0..3000))),
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
        words.push(malformed.choose(rng).unwrap().to_string());
    }
    words.join(" ")
}

fn random_line(rng: &mut SmallRng, model: &Model) -> Vec<u8> {
    let line = match rng.random_range(0..20) {
        0 => "isready".to_string(),
        1 => "uci".to_string(),
        2 => "ucinewgame".to_string(),
        3 => ["debug on", "debug off", "debug", "debug yes"]
            .choose(rng)
            .unwrap()
            .to_string(),
        4..=6 => random_position(rng, model),
        7..=11 => random_go(rng, model),
        12 | 13 => "stop".to_string(),
        14 => "ponderhit".to_string(),
        15 => [
            "setoption name Depth value 2",
            "setoption name depth value 3",
            "setoption name Seed value 9",
            "setoption name Depth value 17",
            "setoption name Depth value two",
            "setoption name Hash value 16",
            "setoption name Seed",
            "setoption value 3",
        ]
        .choose(rng)
        .unwrap()
        .to_string(),
        _ => return garbage(rng),
    };
    line.into_bytes()
}

fn option_accepted(name: &str, value: Option<&str>) -> bool {
    let value = value.and_then(|v| v.parse::<i64>().ok());
    match name.to_ascii_lowercase().as_str() {
        "depth" => value.is_some_and(|v| (1..=i64::from(MAX_DEPTH)).contains(&v)),
        "seed" => value.is_some_and(|v| v >= 0),
        _ => false,
    }
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
fn step(gui: &mut Gui, model: &mut Model, bytes: &[u8]) {
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
        model.answer(answer.last().unwrap(), &gui.transcript());
    }
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
            if busy || !option_accepted(&name, value.as_deref()) {
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
    let stopping = matches!(parse_command(&text), Ok(Command::Stop));
    let is_ready = matches!(parse_command(&text), Ok(Command::IsReady));
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

#[test]
fn random_and_malformed_command_streams() {
    for seed in 0..3 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut gui = Gui::in_process();
        let mut model = Model {
            game: Game::new(Position::start()),
            pending: None,
            searches: 0,
            answers: 0,
        };
        for _ in 0..300 {
            let line = random_line(&mut rng, &model);
            step(&mut gui, &mut model, &line);
            // Keep only the last exchanges for failure messages.
            let keep = gui.transcript.len().saturating_sub(200);
            gui.transcript.drain(..keep);
        }
        gui.send("quit");
        let pending = model.pending.is_some();
        let context = gui.transcript();
        let rest = gui.close();
        let answers: Vec<&String> = rest.iter().filter(|l| l.starts_with("bestmove")).collect();
        assert_eq!(answers.len(), usize::from(pending), "{rest:?}\n{context}");
        if let Some(line) = answers.first() {
            model.answer(line, &context);
        }
        assert_eq!(model.searches, model.answers);
        assert!(
            model.searches > 20,
            "seed {seed}: only {} searches",
            model.searches
        );
    }
}

#[test]
fn the_binary_speaks_uci() {
    let mut gui = Gui::binary();
    gui.send("uci");
    let hello = gui.read_until(|l| l == "uciok");
    assert_eq!(hello[0], "id name mixchess alphabeta");
    assert!(gui.sync().is_empty());
    let setup = "position startpos moves e2e5 e9e7 f1e2";
    gui.send(setup);
    let pos = *game(setup).position();
    let (info, best) = gui.go("go depth 3");
    assert_eq!(info.len(), 3, "{info:?}");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    gui.send("go infinite");
    assert!(gui.sync().iter().all(|l| !l.starts_with("bestmove")));
    gui.send("stop");
    let answer = gui.read_until(|l| l.starts_with("bestmove"));
    assert_legal_answer(answer.last().unwrap(), &pos, &[], &gui.transcript());
    gui.send("position startpos moves e2e5 e2e5");
    assert_eq!(errors(&gui.sync()).len(), 1);
    gui.send("quit");
    assert!(gui.close().is_empty());
}
