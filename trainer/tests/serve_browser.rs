//! `mixzero serve` in a real browser: headless Chromium driven over
//! WebDriver (chromedriver's HTTP JSON API). Plays against `alphabeta:1` by
//! clicking squares and by dragging, checks the move list and the rule 5/6
//! panel, an illegal click refused by the server, the promotion picker, a
//! take-back, a checkmate banner, a network's search on the board, a PGN
//! stepped through with the keyboard, an upload, the training plots and an
//! arena watched live; a screenshot of each view goes to
//! `target/serve-screenshots/`.
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium`, `chromium-driver`;
//! `.ci/run` installs them). Without them the tests say so loudly and skip.

mod serve_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use engine::players::{play_game, player_from_spec};
use engine::{write_pgn, Position};
use serde_json::Value;
use serve_common::*;

const WAIT: Duration = Duration::from_secs(30);

fn browser() -> Option<Browser> {
    let browser = Browser::start();
    if browser.is_none() {
        eprintln!(
            "\n\n*** SKIPPING the serve browser test: chromium and chromedriver are not \
             installed (Debian: apt-get install chromium chromium-driver; .ci/run does it) ***\n"
        );
    }
    browser
}

/// A run directory with a self-play PGN chunk and `logs/metrics.jsonl`:
/// `tests/fixtures/serve-run` (taken from a short real run with the tiny
/// config) copied beside games played here.
fn fixture_run(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve-run");
    std::fs::create_dir_all(run.join("pgn")).unwrap();
    std::fs::create_dir_all(run.join("logs")).unwrap();
    for rel in ["logs/metrics.jsonl", "pgn/00000001.pgn"] {
        std::fs::copy(fixture.join(rel), run.join(rel)).unwrap();
    }
    let mut pgn = String::new();
    for seed in 0..3 {
        let mut white = player_from_spec("alphabeta:2", seed).unwrap();
        let mut black = player_from_spec("greedy", seed).unwrap();
        let game = play_game(white.as_mut(), black.as_mut(), Position::start(), 120);
        let tags = [
            ("Event", "serve test".to_string()),
            ("White", "alphabeta:2".to_string()),
            ("Black", "greedy".to_string()),
        ];
        pgn.push_str(&write_pgn(&game, &tags));
        pgn.push('\n');
    }
    std::fs::write(run.join("pgn/00000002.pgn"), pgn).unwrap();
    run
}

/// The text of the move list, one entry per ply.
fn moves(b: &mut Browser, list: &str) -> Vec<String> {
    let script =
        format!("return [...document.querySelectorAll('#{list} .move')].map(e => e.textContent);");
    b.js(&script)
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn wait_plies(b: &mut Browser, n: usize) -> Vec<String> {
    b.wait_for(&format!("{n} plies in the move list"), WAIT, |b| {
        let list = moves(b, "play-moves");
        let idle = b.text("#status").contains("White to move");
        (list.len() == n && idle).then_some(list)
    })
}

fn square(name: &str) -> String {
    format!("#play-board rect[data-square='{name}']")
}

fn click_move(b: &mut Browser, from: &str, to: &str) {
    b.click(&square(from));
    b.click(&square(to));
}

/// Starts a game (from `fen`, the start when empty) and waits until its
/// move list is empty and White is to move.
fn new_game(b: &mut Browser, white: &str, black: &str, fen: &str) {
    b.type_into("#white", white);
    b.type_into("#black", black);
    b.type_into("#fen", fen);
    b.click("#new-game-button");
    wait_plies(b, 0);
}

/// A game from `fen` in which the clicks play both sides.
fn human_game(b: &mut Browser, fen: &str) {
    new_game(b, "human", "human", fen);
}

#[test]
fn play_watch_and_training_in_a_browser() {
    let Some(mut b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = fixture_run(dir.path());
    let weights = dir.path().join("tiny.safetensors");
    save_tiny_net(&weights);
    let server = Server::start(&[
        "serve",
        "--run-dir",
        run.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
    ]);
    let shots = screenshot_dir();
    b.goto(&server.url);
    b.wait_for("the board", WAIT, |b| {
        let n = b.js("return document.querySelectorAll('#play-board rect[data-square]').length;");
        (n == 100).then_some(())
    });
    assert!(b.text("#server-info").contains("tiny.safetensors"));

    // Against alpha-beta depth 1, by clicks.
    new_game(&mut b, "human", "alphabeta:1", "");
    assert_eq!(b.text("#play-rules-white-left"), "10");
    click_move(&mut b, "e2", "e4");
    let list = wait_plies(&mut b, 2);
    assert_eq!(list[0], "e4");
    // Rule 5: each side has played one move of its period 1-10.
    assert_eq!(b.text("#play-rules-white-period"), "1–10");
    assert_eq!(b.text("#play-rules-white-left"), "9");
    assert_eq!(b.text("#play-rules-black-left"), "9");
    assert!(b
        .text("#play-rules-white-banned")
        .starts_with("none (last: pawn x1)"));

    // A second pawn move: rule 6 bans a third.
    click_move(&mut b, "d2", "d4");
    let list = wait_plies(&mut b, 4);
    assert_eq!(list[2], "d4");
    assert!(b.text("#play-rules-white-banned").starts_with("pawn"));
    assert_eq!(b.text("#play-rules-white-left"), "8");

    // An illegal click: the page sends it, the server refuses it.
    click_move(&mut b, "a2", "a3");
    let refusal = b.wait_for("the refusal", WAIT, |b| {
        let m = b.text("#message");
        (!m.is_empty()).then_some(m)
    });
    assert!(refusal.contains("illegal"), "{refusal}");
    assert_eq!(moves(&mut b, "play-moves").len(), 4);

    // A drag: knight b1 to c3.
    b.drag(&square("b1"), &square("c3"));
    let list = wait_plies(&mut b, 6);
    assert_eq!(list[4], "Nc3");
    b.screenshot(&shots.join("play-alphabeta.png"));

    // Take back: to the human's turn before the knight move.
    b.click("#takeback");
    wait_plies(&mut b, 4);

    // Promotion picker, from a FEN, human against human.
    human_game(&mut b, "k9/4P5/10/10/10/10/10/10/10/5K4 w - - 0 1");
    click_move(&mut b, "e9", "e10");
    b.wait_for("the promotion picker", WAIT, |b| {
        (b.js("return document.getElementById('promotion').hidden;") == Value::Bool(false))
            .then_some(())
    });
    b.click("#promotion button[data-promo='q']");
    let list = b.wait_for("the promotion", WAIT, |b| {
        let list = moves(b, "play-moves");
        (list.len() == 1).then_some(list)
    });
    assert!(list[0].starts_with("e10=Q"), "{list:?}");

    // Checkmate and its banner.
    human_game(&mut b, "k9/10/2K7/10/10/10/10/1Q8/10/10 w - - 0 1");
    click_move(&mut b, "b3", "b9");
    let banner = b.wait_for("the banner", WAIT, |b| {
        let t = b.text("#play-banner");
        (!t.is_empty()).then_some(t)
    });
    assert!(banner.starts_with("Checkmate — White wins"), "{banner}");
    b.screenshot(&shots.join("play-checkmate.png"));

    // The network thinking, live: visits, Q, PV and arrows on the board.
    new_game(&mut b, "human", "net:movetime=5000", "");
    click_move(&mut b, "e2", "e4");
    b.wait_for("the search on the board", WAIT, |b| {
        let rows = b.js("return document.querySelectorAll('#top-moves .top-move').length;");
        let arrows = b.js("return document.querySelectorAll('#play-board .arrow').length;");
        (rows.as_u64() > Some(2) && arrows.as_u64() > Some(0)).then_some(())
    });
    assert!(b.text("#wdl-text").contains("playouts"));
    assert!(b.text("#pv").starts_with("PV: "));
    std::thread::sleep(Duration::from_millis(1500));
    b.screenshot(&shots.join("play-network.png"));
    wait_plies(&mut b, 2);

    // Watch: a PGN file of the run directory, stepped through with the keyboard.
    b.click("#tab-watch");
    b.wait_for("the file list", WAIT, |b| {
        let n = b.js("return document.querySelectorAll('#src-file option').length;");
        (n.as_u64() >= Some(3)).then_some(())
    });
    b.js("const s = document.getElementById('src-file'); \
          s.value = 'pgn/00000002.pgn'; \
          s.dispatchEvent(new Event('change'));");
    b.wait_for("the game list", WAIT, |b| {
        let n = b.js("return document.querySelectorAll('#w-games tr.game').length;");
        (n.as_u64() == Some(3)).then_some(())
    });
    b.click("#w-games tr.game[data-game='1']");
    // The file's first game may still be loading when the click lands: wait
    // for game 2 itself, not just any game at ply 0.
    b.wait_for("game 2 at ply 0", WAIT, |b| {
        let selected = b.js(
            "const r = document.querySelector('#w-games tr.game.selected'); \
             return r ? r.dataset.game : null;",
        );
        (selected == "1" && b.text("#w-ply").starts_with("ply 0 /")).then_some(())
    });
    let right = "\u{E014}";
    for _ in 0..3 {
        b.key(right);
    }
    assert!(b.text("#w-ply").starts_with("ply 3 /"));
    assert_eq!(
        b.js("return document.querySelector('#watch-moves .move.current').dataset.ply;"),
        "3"
    );
    b.key("\u{E012}"); // left
    assert!(b.text("#w-ply").starts_with("ply 2 /"));
    b.key("\u{E010}"); // end
    let banner = b.text("#watch-banner");
    assert!(
        !banner.is_empty(),
        "the end of a finished game has its banner"
    );
    b.key("\u{E011}"); // home
    assert!(b.text("#w-ply").starts_with("ply 0 /"));
    for _ in 0..6 {
        b.key(right);
    }
    b.screenshot(&shots.join("watch.png"));

    // Upload a PGN.
    let upload = dir.path().join("upload.pgn");
    std::fs::copy(run.join("pgn/00000002.pgn"), &upload).unwrap();
    b.type_into("#src-upload", upload.to_str().unwrap());
    b.wait_for("the uploaded games", WAIT, |b| {
        b.text("#w-source").contains("upload.pgn").then_some(())
    });
    assert_eq!(
        b.js("return document.querySelectorAll('#w-games tr.game').length;"),
        3
    );

    // Self-play, live: the newest chunk's games.
    b.click("#src-live");
    b.wait_for("the live tail", WAIT, |b| {
        b.text("#w-source")
            .contains("pgn/00000002.pgn")
            .then_some(())
    });

    // Training at a glance.
    b.click("#tab-training");
    b.wait_for("the charts", WAIT, |b| {
        let n = b.js("return document.querySelectorAll('#charts .chart').length;");
        (n.as_u64() == Some(4)).then_some(())
    });
    let titles = b.text("#charts");
    for title in [
        "Losses",
        "Ladder score",
        "Ladder Elo",
        "Self-play games per hour",
    ] {
        assert!(titles.contains(title), "{title}: {titles}");
    }
    let lines = b.js("return document.querySelectorAll('#charts polyline.series').length;");
    assert!(lines.as_u64() >= Some(7), "{lines}");
    b.screenshot(&shots.join("training.png"));
}

#[test]
fn an_arena_watched_live() {
    let Some(mut b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("tiny.safetensors");
    save_tiny_net(&weights);
    // The network searches for its whole movetime, so every game lasts some
    // seconds however fast the machine: the process ends with the match, and
    // a match of alpha-beta players alone could end (it did, in half a
    // second) before the page had looked twice.
    let net = format!("{}:movetime=150", weights.display());
    let mut server = Server::start_exactly(&[
        "arena",
        "--player",
        &net,
        "--player",
        "alphabeta:1",
        "--games",
        "3",
        "--concurrency",
        "1",
        "--max-plies",
        "60",
        "--serve",
        "127.0.0.1:0",
    ]);
    b.goto(&server.url);
    let first = b.wait_for("a live arena game", WAIT, |b| {
        let rows = b.js("return document.querySelectorAll('#w-games tr.game').length;");
        let ply = b.text("#w-ply");
        (rows.as_u64() >= Some(1) && !ply.starts_with('-')).then_some(ply)
    });
    // Following the newest move: the ply count grows while it plays.
    b.wait_for("the game to go on", WAIT, |b| {
        let ply = b.text("#w-ply");
        (ply != first || !b.text("#watch-banner").is_empty()).then_some(())
    });
    b.screenshot(&screenshot_dir().join("arena.png"));
    assert!(server.wait(Duration::from_secs(120)), "the arena ends");
}
