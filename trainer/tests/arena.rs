//! `mixzero arena` end to end, through the real binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use models::encoding::EncoderConfig;
use models::net::{Architecture, Net, NetConfig};
use tch::Device;

fn arena(args: &[&str]) -> Output {
    common::mixzero("arena", args)
}

/// The JSON summary of four games of `spec` against greedy, written to `pgn`.
fn four_games_against_greedy(
    spec: &str,
    concurrency: usize,
    max_plies: usize,
    pgn: &Path,
) -> serde_json::Value {
    let (concurrency, max_plies) = (concurrency.to_string(), max_plies.to_string());
    last_json(&arena(&[
        "--player",
        spec,
        "--player",
        "greedy",
        "--games",
        "4",
        "--concurrency",
        &concurrency,
        "--max-plies",
        &max_plies,
        "--json",
        "--pgn-out",
        pgn.to_str().unwrap(),
    ]))
}

fn last_json(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"))
}

fn total(summary: &serde_json::Value) -> u64 {
    ["wins", "draws", "losses"]
        .iter()
        .map(|k| summary[k].as_u64().unwrap())
        .sum()
}

fn save_random_net(path: &Path) {
    let arch = Architecture {
        net: NetConfig::new(1, 8),
        encoder: EncoderConfig::default(),
    };
    models::weights::save(&Net::new(arch, Device::Cpu), path).unwrap();
}

#[test]
fn greedy_against_random_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("games.pgn");
    let output = arena(&[
        "--player",
        "greedy",
        "--player",
        "random",
        "--games",
        "6",
        "--concurrency",
        "3",
        "--json",
        "--pgn-out",
        pgn.to_str().unwrap(),
    ]);
    let summary = last_json(&output);
    assert_eq!(summary["games"], 6);
    assert_eq!(total(&summary), 6);
    // stdout is the summary alone; the games went to stderr as progress.
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let game_lines = stderr.lines().filter(|l| l.starts_with("game ")).count();
    assert_eq!(game_lines, 6, "{stderr}");
    // The endings count every game once, in its result, under its reason.
    for (result, reasons) in summary["endings"].as_object().unwrap() {
        let counted: u64 = reasons
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(
            counted,
            summary[result.as_str()].as_u64().unwrap(),
            "{summary}"
        );
    }
    for line in stderr.lines().filter(|l| l.starts_with("game ")) {
        let reason = line.split_whitespace().nth(6).unwrap();
        let listed = ["wins", "draws", "losses"]
            .iter()
            .any(|result| summary["endings"][result].get(reason).is_some());
        assert!(listed, "{reason} of `{line}` is not in {summary}");
    }
    assert_eq!(summary["player1"], "greedy");
    assert_eq!(summary["player2"], "random");
    assert_eq!(summary["forfeits"], 0);
    assert!(summary.get("sprt").is_none(), "no --sprt: {summary}");
    let score = summary["score"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&score));
    let ci = summary["elo_ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= summary["elo"].as_f64().unwrap());
    assert!(ci[1].as_f64().unwrap() >= summary["elo"].as_f64().unwrap());

    let games = engine::read_pgns(&std::fs::read_to_string(&pgn).unwrap()).unwrap();
    assert_eq!(games.len(), 6);
    for (i, game) in games.iter().enumerate() {
        assert_eq!(game.tag("Round"), Some((i + 1).to_string().as_str()));
        let (white, black) = if i % 2 == 0 {
            ("greedy", "random")
        } else {
            ("random", "greedy")
        };
        assert_eq!(game.tag("White"), Some(white));
        assert_eq!(game.tag("Black"), Some(black));
        assert!(game.tag("Termination").is_some());
        assert!(game.game.outcome().is_some() || game.tag("Result").is_some());
    }
    // Each pair of games starts from the same book line, pairs from different ones.
    let opening = |i: usize| games[i].game.moves()[..4].to_vec();
    assert_eq!(games[0].game.start(), &engine::Position::start());
    assert_eq!(opening(0), opening(1));
    assert_ne!(opening(0), opening(2));
}

#[test]
fn plain_output_has_a_line_per_game_and_a_summary() {
    let output = arena(&[
        "--player",
        "random",
        "--player",
        "random",
        "--games",
        "3",
        "--max-plies",
        "20",
    ]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(lines[..3].iter().all(|l| l.starts_with("game")), "{stdout}");
    assert!(lines[3].contains("Elo"), "{stdout}");
    let endings = lines[4];
    assert!(
        endings.starts_with("random: wins ")
            && endings.contains("; draws ")
            && endings.contains("; losses "),
        "{stdout}"
    );
}

#[test]
fn a_network_player_finishes_its_games() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    std::fs::create_dir_all(&checkpoints).unwrap();
    save_random_net(&checkpoints.join("000003.weights.safetensors"));
    std::fs::write(checkpoints.join("latest"), "000003\n").unwrap();
    // The run directory resolves through checkpoints/latest; the second
    // player searches the same net for a time per move instead.
    let spec = format!("{}:playouts=4", dir.path().display());
    let timed = format!("{}:movetime=10", dir.path().display());
    let summary = last_json(&arena(&[
        "--player",
        &spec,
        "--player",
        &timed,
        "--games",
        "2",
        "--max-plies",
        "60",
        "--json",
    ]));
    assert_eq!(summary["games"], 2);
    assert_eq!(total(&summary), 2);
    assert_eq!(summary["eval_failures"], 0);
}

#[test]
fn precision_picks_the_networks_number_format() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("net.safetensors");
    save_random_net(&weights);
    let spec = format!("{}:playouts=4", weights.display());
    for (precision, kind) in [("fp32", "precision=Float"), ("bf16", "precision=BFloat16")] {
        let args = [
            "--player",
            &spec,
            "--player",
            "random",
            "--games",
            "2",
            "--max-plies",
            "20",
            "--json",
            "--precision",
            precision,
        ];
        // At the info level, where the `arena` line names the format.
        let output = common::mixzero_logging("arena", &args, "info");
        let summary = last_json(&output);
        assert_eq!(total(&summary), 2);
        assert_eq!(summary["eval_failures"], 0);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(kind), "{precision}: {stderr}");
    }
    let output = arena(&[
        "--player",
        &spec,
        "--player",
        "random",
        "--precision",
        "fp8",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid value 'fp8'"), "{stderr}");
}

#[test]
fn bad_specs_fail_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("net.safetensors");
    save_random_net(&weights);
    let weights = weights.to_str().unwrap();
    let cases = [
        ("minimax".to_string(), "unknown player `minimax`"),
        ("alphabeta:0".to_string(), "depth"),
        (
            format!("{}/missing.safetensors", dir.path().display()),
            "no weights file or run directory",
        ),
        (format!("{weights}:playouts=0"), "playouts `0`"),
        (format!("{weights}:playouts=many"), "playouts `many`"),
        (format!("{weights}:visits=5"), "unknown option `visits=5`"),
        (
            dir.path().display().to_string(),
            "without checkpoints/latest",
        ),
    ];
    for (spec, expected) in cases {
        let output = arena(&["--player", &spec, "--player", "random", "--games", "1"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{spec}");
        assert!(stderr.contains(expected), "{spec}: {stderr}");
        assert!(!stderr.contains("panicked"), "{spec}: {stderr}");
    }
    let output = arena(&["--player", "random", "--games", "1"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("exactly twice"));
}

/// A fake UCI engine: it plays the first move offered with `searchmoves`
/// (so it needs `searchmoves=1`), and counts games in `$2`: in game 1 it
/// exits at its first `go`, in game 2 it answers an illegal move, in game 3
/// it never answers; later games it plays through.
const FAKE_ENGINE: &str = r#"#!/bin/sh
state=$1
set -f
game=0
while IFS= read -r line; do
    set -- $line
    case "$1" in
    uci) echo "id name fake"; echo "uciok" ;;
    isready) echo "readyok" ;;
    ucinewgame)
        game=$(( $(cat "$state" 2>/dev/null || echo 0) + 1 ))
        echo "$game" > "$state" ;;
    go)
        case "$game" in
        1) exit 3 ;;
        2) echo "bestmove a1a1"; continue ;;
        3) continue ;;
        esac
        found=""
        while [ $# -gt 0 ]; do
            if [ "$1" = searchmoves ]; then found=$2; break; fi
            shift
        done
        echo "info depth 1 score cp 0"
        echo "bestmove $found" ;;
    quit) exit 0 ;;
    esac
done
"#;

fn write_fake_engine(dir: &Path) -> PathBuf {
    let script = dir.join("fake-engine.sh");
    std::fs::write(&script, FAKE_ENGINE).unwrap();
    script
}

#[test]
fn engine_failures_lose_their_game_and_the_match_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_fake_engine(dir.path());
    let state = dir.path().join("games");
    let pgn = dir.path().join("games.pgn");
    // files=j: the engine sees and answers the tenth file as `j`.
    let spec = format!(
        "uci:sh {} {};searchmoves=1;files=j;movetime=20;timeout=300;name=fake",
        script.display(),
        state.display()
    );
    let summary = four_games_against_greedy(&spec, 1, 40, &pgn);
    assert_eq!(summary["player1"], "fake");
    assert_eq!(summary["games"], 4);
    assert_eq!(summary["forfeits"], 3);
    assert!(summary["losses"].as_u64().unwrap() >= 3);

    let text = std::fs::read_to_string(&pgn).unwrap();
    let games = engine::read_pgns(&text).unwrap();
    assert_eq!(games.len(), 4);
    let terminations: Vec<_> = games
        .iter()
        .map(|g| g.tag("Termination").unwrap())
        .collect();
    assert_eq!(
        terminations[..3],
        ["abandoned", "rules infraction", "time forfeit"]
    );
    // The forfeiting side is the engine: White in odd rounds, Black in even ones.
    assert_eq!(games[0].tag("Result"), Some("0-1"));
    assert_eq!(games[1].tag("Result"), Some("1-0"));
    assert_eq!(games[2].tag("Result"), Some("0-1"));
    for note in [
        "White (fake) forfeits: the engine exited",
        "Black (fake) forfeits: bad bestmove: illegal move `a1a1`",
        "White (fake) forfeits: no `bestmove` within 320 ms",
    ] {
        assert!(text.contains(note), "{note}\n{text}");
    }
    // Game 4 is played out to the cap with moves the engine chose.
    assert_eq!(games[3].game.moves().len(), 40);
    assert_eq!(std::fs::read_to_string(&state).unwrap().trim(), "4");
}

#[test]
fn an_engine_that_does_not_start_fails_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("uci:{}/no-such-engine", dir.path().display());
    let output = arena(&["--player", &missing, "--player", "random", "--games", "1"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("the engine did not start"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let output = arena(&["--player", "uci:e;speed=1", "--player", "random"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown key `speed`"), "{stderr}");
}

/// `mixchess` from the engine crate, built into this test's target directory
/// when it is not there yet.
fn mixchess() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/<this test>
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let binary = profile_dir.join(format!("mixchess{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
        let mut build = Command::new(cargo);
        build
            .args(["build", "-p", "engine", "--bin", "mixchess", "--target-dir"])
            .arg(target_dir);
        if profile_dir.file_name() == Some("release".as_ref()) {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo");
        assert!(status.success(), "building mixchess failed");
    }
    binary
}

#[test]
fn a_uci_match_between_baselines_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("games.pgn");
    let spec = format!("uci:{} uci;searchmoves=1;movetime=50", mixchess().display());
    let summary = four_games_against_greedy(&spec, 2, 60, &pgn);
    assert_eq!(summary["games"], 4);
    assert_eq!(total(&summary), 4);
    assert_eq!(summary["forfeits"], 0);
    let games = engine::read_pgns(&std::fs::read_to_string(&pgn).unwrap()).unwrap();
    assert_eq!(games.len(), 4);
    for game in &games {
        // Legal throughout: the reader replays every move.
        assert!(game.game.moves().len() > 4);
    }
}

#[test]
fn sprt_stops_a_lopsided_match_early() {
    let output = arena(&[
        "--player",
        "alphabeta:2",
        "--player",
        "random",
        "--games",
        "60",
        "--concurrency",
        "2",
        "--sprt",
        "0,200",
        "--json",
    ]);
    let summary = last_json(&output);
    let games = summary["games"].as_u64().unwrap();
    assert!(games < 60, "{summary}");
    let sprt = &summary["sprt"];
    assert_eq!(sprt["result"], "H1", "{summary}");
    // Over every game: the game still in flight at the decision may pull it back a little.
    assert!(sprt["llr"].as_f64().unwrap() > 0.0, "{summary}");
    assert!((sprt["upper"].as_f64().unwrap() - 19f64.ln()).abs() < 1e-9);
    assert!((sprt["lower"].as_f64().unwrap() + 19f64.ln()).abs() < 1e-9);

    // Bad parameters are refused.
    let output = arena(&["--player", "random", "--player", "random", "--sprt", "10,0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("must be below"), "{stderr}");
}
