//! `mixzero uci` end to end: the real binary with a tiny random network,
//! driven by `engine::uci::harness` (scripted sessions, rule 5, a seeded
//! stream of valid and malformed commands, `quit` and EOF mid-search).

use std::path::{Path, PathBuf};
use std::process::Command;

use engine::uci::harness::{
    assert_game_over_answer, assert_held_until, assert_infinite_until_stop, assert_king_moves,
    assert_legal_answer, assert_legal_answers, assert_quit_and_eof_answer, assert_random_sessions,
    best_move, errors, Gui, StreamConfig,
};
use engine::{parse_coordinate, Move, Position};
use models::encoding::EncoderConfig;
use models::net::{Architecture, Net, NetConfig};
use tch::Device;
use tempfile::TempDir;

/// A tiny random network in a temporary directory (removed on drop).
struct Weights {
    dir: TempDir,
    path: PathBuf,
}

impl Weights {
    fn random() -> Weights {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("net.safetensors");
        let arch = Architecture {
            net: NetConfig::new(1, 8),
            encoder: EncoderConfig::default(),
        };
        models::weights::save(&Net::new(arch, Device::Cpu), &path).unwrap();
        Weights { dir, path }
    }

    /// A path in the same directory that does not exist.
    fn missing(&self) -> PathBuf {
        self.dir.path().join("missing.safetensors")
    }
}

fn mixzero(weights: &Path) -> Gui {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mixzero"));
    // One libtorch thread: tests run side by side on few cores.
    command
        .args(["uci", "--threads", "1", "--weights"])
        .arg(weights)
        .env("RUST_LOG", "warn");
    Gui::binary(command).expect("mixzero runs")
}

fn moves(texts: &[&str]) -> Vec<Move> {
    texts.iter().map(|t| parse_coordinate(t).unwrap()).collect()
}

#[test]
fn scripted_session() {
    let weights = Weights::random();
    let path = weights.path.display().to_string();
    let mut gui = mixzero(&weights.path);
    let hello = gui.hello();
    assert!(hello[0].starts_with("id name mixzero "), "{hello:?}");
    assert!(hello[1].starts_with("id author "), "{hello:?}");
    for option in [
        format!("option name Weights type string default {path}"),
        "option name Threads type spin default 1 min 0 max 256".to_string(),
        "option name BatchSize type spin default 8 min 1 max 1024".to_string(),
        "option name Playouts type spin default 0 min 0 max 1000000000".to_string(),
        "option name RootSearch type combo default gumbel var puct var gumbel".to_string(),
    ] {
        assert!(hello.contains(&option), "{option}: {hello:?}");
    }
    assert!(
        hello
            .iter()
            .any(|l| l.starts_with("option name CPuct type string default ")),
        "{hello:?}"
    );
    assert!(gui.sync().is_empty());

    gui.send("ucinewgame");
    let pos = gui.set_position("position startpos moves e2e5 e9e7");
    let (info, best) = gui.go("go nodes 50");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    assert!(!info.is_empty(), "{}", gui.transcript());
    for line in &info {
        assert!(line.starts_with("info depth "), "{line}");
        assert!(line.contains(" score cp "), "{line}");
        assert!(line.contains(" wdl "), "{line}");
    }
    assert_legal_answers(
        &mut gui,
        &pos,
        &[],
        &[
            "go movetime 100",
            "go wtime 2000 btime 2000 winc 10 binc 10",
            "go depth 2",
            "go btime 1 wtime 0",
        ],
    );
    assert_infinite_until_stop(&mut gui, &pos, "setoption name Playouts value 100");

    // Pondering holds the answer until `ponderhit`.
    let ponder = "go ponder nodes 50 wtime 2000 btime 2000";
    assert_held_until(&mut gui, &pos, ponder, "ponderhit");

    let allowed = moves(&["a2a3", "k2k4"]);
    assert_legal_answers(
        &mut gui,
        &pos,
        &allowed,
        &[
            "go nodes 50 searchmoves a2a3 k2k4",
            "go movetime 50 searchmoves a2a3 k2k4",
        ],
    );
    let (_, best) = gui.go("go nodes 50 searchmoves k2k4");
    assert_eq!(best_move(&best), "k2k4");

    // Refused settings leave the engine as it was, old weights included.
    let missing = weights.missing();
    gui.send("setoption name Hash value 16");
    gui.send("setoption name CPuct value abc");
    gui.send("setoption name CPuct value -1");
    gui.send("setoption name BatchSize value 0");
    gui.send(&format!(
        "setoption name Weights value {}",
        missing.display()
    ));
    gui.send("setoption name CapturePrior value 1");
    gui.send("setoption name RootSearch value alphazero");
    gui.send("setoption name PolicyTemperature value 0");
    gui.send("setoption name MovesLeftEffect value 2");
    gui.send("setoption name DrawScore value -1.5");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 10, "{refused:?}");
    assert!(refused[9].contains("DrawScore `-1.5`"), "{refused:?}");
    assert!(refused[8].contains("MovesLeftEffect `2`"), "{refused:?}");
    assert!(refused[7].contains("PolicyTemperature `0`"), "{refused:?}");
    assert!(refused[5].contains("CapturePrior `1`"), "{refused:?}");
    assert!(refused[0].contains("unknown option `Hash`"), "{refused:?}");
    assert!(
        refused[1].contains("option `CPuct`: CPuct `abc` is not a positive number"),
        "{refused:?}"
    );
    assert!(refused[4].contains("option `Weights`"), "{refused:?}");
    assert!(
        refused[4].contains(&missing.display().to_string()),
        "{refused:?}"
    );
    let hello = gui.hello();
    assert!(
        hello.contains(&format!("option name Weights type string default {path}")),
        "{hello:?}"
    );
    let (_, best) = gui.go("go nodes 50");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    gui.send("setoption name cpuct value 2.5");
    gui.send("setoption name PolicyTemperature value 1.6");
    gui.send("setoption name BatchSize value 4");
    gui.send("setoption name Threads value 1");
    gui.send("setoption name Playouts value 40");
    gui.send(&format!("setoption name Weights value {path}"));
    assert!(gui.sync().is_empty(), "{}", gui.transcript());
    // `Playouts` caps a search that names no limit of its own.
    let (_, best) = gui.go("go");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    // The network and search alone, with a Gumbel root.
    gui.send("setoption name CapturePrior value 0");
    gui.send("setoption name MovesLeftEffect value 0.0345");
    gui.send("setoption name DrawScore value -0.3");
    gui.send("setoption name RootSearch value gumbel");
    assert!(gui.sync().is_empty(), "{}", gui.transcript());
    let (_, best) = gui.go("go");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    assert_legal_answers(
        &mut gui,
        &pos,
        &allowed,
        &["go nodes 30 searchmoves a2a3 k2k4"],
    );

    // Each root move's statistics after the search, best first.
    gui.send("setoption name VerboseMoveStats value true");
    assert!(gui.sync().is_empty(), "{}", gui.transcript());
    let (info, best) = gui.go("go nodes 40");
    assert_verbose_move_stats(&info, &best, &pos, &gui.transcript());
    gui.send("setoption name VerboseMoveStats value false");
    let (info, _) = gui.go("go nodes 40");
    assert!(
        info.iter().all(|l| l.starts_with("info depth ")),
        "{info:?}"
    );

    // Black is mated: nothing to search.
    assert_game_over_answer(
        &mut gui,
        "position fen R4k4/4ppp3/10/10/10/10/10/10/10/5K4 b - - 1 17",
        "go nodes 50",
        "1-0 by checkmate",
    );

    gui.send("quit");
    assert!(gui.close().is_empty());
}

/// One `info string` line per legal move after the last `info depth`
/// line, the best move first, priors summing to one and visits to at least
/// the playouts searched.
fn assert_verbose_move_stats(info: &[String], best: &str, pos: &Position, transcript: &str) {
    let start = info
        .iter()
        .position(|l| l.starts_with("info string "))
        .unwrap_or_else(|| panic!("no move statistics:\n{transcript}"));
    assert!(
        start > 0 && info[start - 1].starts_with("info depth "),
        "{transcript}"
    );
    let stats = &info[start..];
    let legal: Vec<String> = pos.legal_moves().iter().map(Move::to_string).collect();
    assert_eq!(stats.len(), legal.len(), "{transcript}");
    let (mut visits, mut prior) = (0, 0.0);
    for (i, line) in stats.iter().enumerate() {
        // info string e2e5 N: 12 (P: 3.10%) (Q: +0.1234)
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.len(), 9, "{line}");
        assert!(legal.contains(&words[2].to_string()), "{line}");
        if i == 0 {
            assert_eq!(best_move(best), words[2], "{transcript}");
        }
        let n: u32 = words[4].parse().expect(line);
        visits += n;
        prior += words[6].trim_end_matches("%)").parse::<f32>().expect(line) / 100.0;
        let q = words[8].trim_end_matches(')');
        match q.parse::<f32>() {
            Ok(q) => assert!(n > 0 && (-1.0..=1.0).contains(&q), "{line}"),
            Err(_) => assert!(n == 0 && q == "-", "{line}"),
        }
    }
    assert!(visits >= 40, "{transcript}");
    assert!((prior - 1.0).abs() < 0.01, "{prior}: {transcript}");
}

#[test]
fn depth_limits_end_when_the_line_ends_the_game() {
    // White mates in one (k1k10): the principal variation can never grow
    // past the mate, so `go depth 3` must stop there rather than search on.
    let weights = Weights::random();
    let mut gui = mixzero(&weights.path);
    let pos = gui.set_position("position fen k9/pp8/10/10/10/10/10/10/10/5K3R w - - 0 17");
    for go in ["go depth 3", "go mate 2", "go depth 3 searchmoves k1k10"] {
        let (_, best) = gui.go(go);
        assert_legal_answer(&best, &pos, &[], &gui.transcript());
        assert_eq!(best_move(&best), "k1k10", "{}", gui.transcript());
    }
    gui.send("quit");
    gui.close();
}

#[test]
fn rule_5_forces_king_moves() {
    let weights = Weights::random();
    let mut gui = mixzero(&weights.path);
    assert_king_moves(
        &mut gui,
        &[
            "go nodes 50",
            "go depth 2",
            "go movetime 50",
            "go wtime 200 btime 200",
        ],
    );
    gui.send("quit");
    gui.close();
}

#[test]
fn quit_and_eof_end_a_running_search_with_its_answer() {
    let weights = Weights::random();
    assert_quit_and_eof_answer(|| mixzero(&weights.path));
}

/// `mixzero uci`'s options, as the random stream sets them.
fn mixzero_options(weights: &Weights) -> StreamConfig {
    let valid = weights.path.display().to_string();
    let missing = weights.missing().display().to_string();
    let setoptions = [
        "setoption name Playouts value 0".to_string(),
        "setoption name playouts value 200".to_string(),
        "setoption name Playouts value -1".to_string(),
        "setoption name CPuct value 1.5".to_string(),
        "setoption name CPuct value abc".to_string(),
        "setoption name CPuct value 0".to_string(),
        "setoption name CPuct".to_string(),
        "setoption name BatchSize value 4".to_string(),
        "setoption name BatchSize value 0".to_string(),
        "setoption name Threads value 1".to_string(),
        "setoption name Hash value 16".to_string(),
        format!("setoption name Weights value {valid}"),
        format!("setoption name Weights value {missing}"),
    ];
    StreamConfig {
        setoptions: setoptions.to_vec(),
        option_accepted: Box::new(move |name, value| {
            let Some(value) = value else { return false };
            let int = value.parse::<i64>().ok();
            match name.to_ascii_lowercase().as_str() {
                "playouts" => int.is_some_and(|n| (0..=1_000_000_000).contains(&n)),
                "batchsize" => int.is_some_and(|n| (1..=1024).contains(&n)),
                "threads" => int.is_some_and(|n| (0..=256).contains(&n)),
                "cpuct" => value.parse::<f32>().is_ok_and(|c| c.is_finite() && c > 0.0),
                "weights" => value == valid,
                _ => false,
            }
        }),
        max_nodes: 300,
    }
}

#[test]
fn random_and_malformed_command_streams() {
    let weights = Weights::random();
    assert_random_sessions(|| mixzero(&weights.path), &mixzero_options(&weights));
}
