//! Drives the `mixchess` binary: outputs that scripts rely on, and clean
//! errors (never a panic) on bad input.

use std::process::{Command, Output};

use engine::Color;
use serde_json::Value;

/// Kings out and back: the position after ply 4 (castling rights already
/// gone) comes back after plies 8 and 12, a threefold repetition.
const SHUFFLE: &str = "e2e3 e9e8 f1e2 f10e9 e2f1 e9f10 f1e2 f10e9 e2f1 e9f10 f1e2 f10e9";

fn mixchess(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mixchess"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn succeeds(args: &[&str]) -> String {
    let output = mixchess(args);
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(&output)
}

/// The command fails with a message on stderr containing `needle`, and no panic.
fn fails(args: &[&str], needle: &str) {
    let output = mixchess(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: stderr lacks `{needle}`: {stderr}"
    );
}

fn last_line(text: &str) -> &str {
    text.lines().last().expect("some output")
}

#[test]
fn perft_ends_with_the_node_count() {
    assert_eq!(last_line(&succeeds(&["perft", "--depth", "2"])), "1444");
    assert_eq!(
        last_line(&succeeds(&["perft", "--depth", "2", "--base-rules"])),
        "1444"
    );
    assert_eq!(last_line(&succeeds(&["perft", "--depth", "3"])), "57002");
    let after = succeeds(&["perft", "--depth", "1", "--moves", "e2e5 e9e7"]);
    assert_eq!(after.lines().count(), 1);
}

#[test]
fn perft_divide_lists_root_moves_then_the_total() {
    let out = succeeds(&["perft", "--depth", "2", "--divide"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 39);
    let sum: u64 = lines[..38]
        .iter()
        .map(|l| {
            let (mv, n) = l.split_once(": ").expect("`move: count`");
            assert!(mv.len() >= 4, "{l}");
            n.parse::<u64>().expect("a count")
        })
        .sum();
    assert_eq!(sum, 1444);
    assert_eq!(lines[38], "1444");
}

#[test]
fn show_json_has_the_documented_keys() {
    let out = succeeds(&["show", "--json", "--moves", "e2e5 e9e7"]);
    assert_eq!(out.lines().count(), 1);
    let v: Value = serde_json::from_str(&out).expect("JSON");
    for key in ["fen", "side", "legal", "san", "outcome", "rules"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["side"], "white");
    assert!(v["outcome"].is_null());
    let legal = v["legal"].as_array().unwrap();
    assert_eq!(legal.len(), v["san"].as_array().unwrap().len());
    assert!(legal.iter().any(|m| m == "f1e2"), "{v}");
    assert!(
        v["san"].as_array().unwrap().iter().any(|m| m == "Ke2"),
        "{v}"
    );
    assert_eq!(v["rules"]["white"]["next_move_number"], 2);
    assert_eq!(v["rules"]["black"]["must_move_king"], false);
    assert_eq!(v["rules"]["white"]["last_kind"], "pawn");
}

#[test]
fn show_reports_outcomes() {
    // Black to move is mated on the back rank.
    let mate = "R4k4/4ppp3/10/10/10/10/10/10/10/5K4 b - - 1 17";
    let v: Value = serde_json::from_str(&succeeds(&["show", "--json", "--fen", mate])).unwrap();
    assert_eq!(v["outcome"]["result"], "1-0");
    assert_eq!(v["outcome"]["reason"], "checkmate");
    assert_eq!(v["legal"].as_array().unwrap().len(), 0);

    let v: Value =
        serde_json::from_str(&succeeds(&["show", "--json", "--moves", SHUFFLE])).unwrap();
    assert_eq!(v["outcome"]["result"], "1/2-1/2");
    assert_eq!(v["outcome"]["reason"], "threefold");

    let text = succeeds(&["show", "--fen", mate]);
    assert!(text.contains("outcome: 1-0 checkmate"), "{text}");
    assert!(text.contains("must move king now"), "{text}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    fails(&["perft", "--depth", "1", "--fen", "not a fen"], "FEN");
    fails(&["show", "--fen", "10/10 w - - 0 1"], "FEN");
    fails(&["show", "--moves", "e2e5 e9e7 e5e8"], "move 3 of --moves");
    fails(&["show", "--moves", "e2e5 zz"], "move 2 of --moves");
    fails(
        &["perft", "--depth", "1", "--moves", "j2j4"],
        "move 1 of --moves",
    );
    fails(&["perft", "--depht", "1"], "--depht");
    fails(&["perft"], "--depth");
    fails(&["perft", "--depth", "x"], "--depth");
    fails(&["frobnicate"], "frobnicate");
    fails(
        &["play", "--white", "stockfish", "--black", "random"],
        "stockfish",
    );
    fails(
        &["play", "--white", "random", "--black", "alphabeta:0"],
        "--black",
    );
    let past_the_end = format!("{SHUFFLE} e3e4");
    fails(&["show", "--moves", &past_the_end], "move 13 of --moves");
    fails(&["show", "--moves", &past_the_end], "already over");
}

#[test]
fn play_prints_pgns_and_a_score() {
    let out = succeeds(&[
        "play", "--white", "random", "--black", "greedy", "--games", "2", "--seed", "1",
    ]);
    assert_eq!(out.matches("[Variant \"Chess-mix\"]").count(), 2, "{out}");
    assert!(out.contains("[White \"random\"]"), "{out}");
    assert!(out.contains("[Black \"greedy\"]"), "{out}");
    let score = last_line(&out);
    assert!(score.starts_with("score: random "), "{score}");
    assert!(
        score.ends_with(')') && score.contains(" greedy (W "),
        "{score}"
    );
    // Same seed, same games.
    let again = succeeds(&[
        "play", "--white", "random", "--black", "greedy", "--games", "2", "--seed", "1",
    ]);
    assert_eq!(out, again);
}

#[test]
fn play_alternates_and_writes_pgn_files() {
    let dir = std::env::temp_dir().join(format!("mixchess-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("games.pgn");
    let out = succeeds(&[
        "play",
        "--white",
        "alphabeta:1",
        "--black",
        "random",
        "--games",
        "2",
        "--alternate",
        "--max-plies",
        "20",
        "--pgn-out",
        path.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("game 1: alphabeta:1 - random "),
        "{out}"
    );
    assert!(
        lines[1].starts_with("game 2: random - alphabeta:1 "),
        "{out}"
    );
    assert!(lines[2].starts_with("score: alphabeta:1 "), "{out}");
    let pgn = std::fs::read_to_string(&path).unwrap();
    assert_eq!(pgn.matches("[Variant \"Chess-mix\"]").count(), 2);
    // Alpha-beta's moves carry its score; random's none.
    let games = engine::read_pgns(&pgn).unwrap();
    for (g, game) in games.iter().enumerate() {
        let searcher = if g == 0 { Color::White } else { Color::Black };
        let mut pos = *game.game.start();
        for (&mv, eval) in game.game.moves().iter().zip(&game.evals) {
            assert_eq!(eval.is_some(), pos.side_to_move() == searcher, "{pgn}");
            pos = pos.after(mv);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
