//! `mixzero arena` end to end, through the real binary.

use std::path::Path;
use std::process::{Command, Output};

use models::encoding::EncoderConfig;
use models::net::{Architecture, Net, NetConfig};
use tch::Device;

fn arena(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .arg("arena")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running mixzero")
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
    assert_eq!(summary["player1"], "greedy");
    assert_eq!(summary["player2"], "random");
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
    // Each pair of games starts from the same opening.
    assert_eq!(games[0].game.start(), games[1].game.start());
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
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[..3].iter().all(|l| l.starts_with("game")), "{stdout}");
    assert!(lines[3].contains("Elo"), "{stdout}");
}

#[test]
fn a_network_player_finishes_its_games() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    std::fs::create_dir_all(&checkpoints).unwrap();
    save_random_net(&checkpoints.join("000003.weights.safetensors"));
    std::fs::write(checkpoints.join("latest"), "000003\n").unwrap();
    // The run directory resolves through checkpoints/latest.
    let spec = format!("{}:playouts=4", dir.path().display());
    let summary = last_json(&arena(&[
        "--player",
        &spec,
        "--player",
        "random",
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
