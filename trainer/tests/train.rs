//! `mixzero train` end to end on a tiny config: it trains, writes checkpoints,
//! games and metrics, resumes, and survives being killed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use store::layout::parse_chunk_key;
use store::Store;
use trainer::run_dir::Checkpoints;
use trainer::selfplay::data::{decode_games, GameRecord};
use trainer::training::state::read_progress;

fn tiny_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny.toml")
}

fn train(run_dir: &Path, extra: &[&str]) -> Output {
    train_logging(run_dir, extra, "warn")
}

fn train_logging(run_dir: &Path, extra: &[&str], log_level: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .args(["train", "--quiet", "--seed", "1", "--run-dir"])
        .arg(run_dir)
        .args(extra)
        .env("RUST_LOG", log_level)
        .output()
        .expect("running mixzero")
}

fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "{}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn latest(run_dir: &Path) -> u32 {
    Checkpoints::new(run_dir.join("checkpoints"))
        .latest()
        .unwrap()
        .expect("a checkpoint")
}

/// The games of every chunk in the run directory (the run's store), each
/// of which must read back: the trainer's, under `games/trainer/`, and any
/// of the layout before stores (`games/chunk-NNNNNNNN.mzg`).
fn stored_games(run_dir: &Path) -> Vec<GameRecord> {
    let store = Store::open_dir(run_dir).unwrap();
    let mut games = Vec::new();
    for entry in store.list_after("games", None, usize::MAX).unwrap() {
        if !entry.key.ends_with(".mzg") {
            continue;
        }
        let legacy = entry.key.starts_with("games/chunk-");
        let trainers = parse_chunk_key(&entry.key, "mzg").is_some_and(|(w, _)| w == "trainer");
        assert!(
            legacy || trainers,
            "{} is no chunk of the trainer's",
            entry.key
        );
        let bytes = store.get(&entry.key).unwrap().unwrap();
        games.extend(decode_games(Path::new(&entry.key), &bytes).unwrap());
    }
    games
}

fn games_on_disk(run_dir: &Path) -> usize {
    stored_games(run_dir).len()
}

#[test]
fn trains_resumes_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = tiny_config();
    assert_ok(&train(
        &run,
        &["--config", config.to_str().unwrap(), "--minutes", "0.25"],
    ));
    let first_checkpoint = latest(&run);
    let first_games = games_on_disk(&run);
    assert!(first_checkpoint >= 1, "no training checkpoint after 15 s");
    assert!(first_games > 0);
    assert!(run.join("config.toml").exists());
    assert!(run.join("version.txt").exists());
    // A PGN of each chunk, for people and `mixzero serve`.
    let chunks = std::fs::read_dir(run.join("games/trainer"))
        .unwrap()
        .count();
    let pgns = std::fs::read_dir(run.join("pgn")).unwrap().count();
    assert_eq!(pgns, chunks);
    let metrics = std::fs::read_to_string(run.join("logs/metrics.jsonl")).unwrap();
    for tag in [
        "loss/policy",
        "loss/value",
        "loss/material",
        "loss/moves_left",
        "loss/reply",
        "selfplay/games_per_hour",
    ] {
        assert!(metrics.contains(tag), "{tag} missing from metrics.jsonl");
    }

    // Make it a run directory from before stores: its chunks directly in
    // games/, named chunk-NNNNNNNN.mzg.
    for entry in std::fs::read_dir(run.join("games/trainer")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        std::fs::rename(&path, run.join("games").join(format!("chunk-{name}"))).unwrap();
    }

    // Resuming takes the run's own config, rebuilds its window from every
    // chunk, old layout included, and carries on in the new one.
    let resumed = train_logging(&run, &["--minutes", "0.15"], "info");
    assert_ok(&resumed);
    let log = String::from_utf8_lossy(&resumed.stderr);
    let rebuilt = log
        .lines()
        .find(|l| l.contains("replay window rebuilt"))
        .unwrap_or_else(|| panic!("no rebuild logged:\n{log}"));
    assert!(
        rebuilt.contains(&format!(" games={first_games} ")),
        "{rebuilt}"
    );
    assert!(latest(&run) >= first_checkpoint);
    assert!(games_on_disk(&run) > first_games);
    // The checkpoints count the seconds of training over both sessions,
    // what `mixzero rate` plots against (the second is the shorter, so a
    // count begun again at the resume would fall).
    let checkpoints = Checkpoints::new(run.join("checkpoints"));
    let seconds = |n| read_progress(&checkpoints, n).unwrap().seconds.unwrap();
    if latest(&run) > first_checkpoint {
        let (first, last) = (seconds(first_checkpoint), seconds(latest(&run)));
        assert!(first > 0.0 && last > first, "{first} {last}");
    }
    assert!(
        std::fs::read_dir(run.join("games/trainer"))
            .unwrap()
            .count()
            > 0
    );

    // Another config for the same run directory is refused.
    let other = dir.path().join("other.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&other, text.replace("playouts = 8", "playouts = 9")).unwrap();
    let refused = train(
        &run,
        &["--config", other.to_str().unwrap(), "--minutes", "0.1"],
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("another config"));
}

#[test]
fn a_killed_run_resumes_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = tiny_config();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .args(["train", "--quiet", "--seed", "2", "--config"])
        .arg(&config)
        .arg("--run-dir")
        .arg(&run)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting mixzero");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(90) {
        let trained = Checkpoints::new(run.join("checkpoints"))
            .latest()
            .ok()
            .flatten()
            .is_some_and(|n| n != 0);
        if trained {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let checkpoint = latest(&run);
    assert!(checkpoint >= 1, "no checkpoint before the kill");
    let games = games_on_disk(&run);

    assert_ok(&train(&run, &["--minutes", "0.1"]));
    assert!(latest(&run) >= checkpoint);
    assert!(games_on_disk(&run) >= games);
}

/// Rewrites the config file's `lr_schedule` line as one constant `rate`.
fn set_learning_rate(config: &Path, rate: &str) {
    let text = std::fs::read_to_string(config).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("lr_schedule"))
        .expect("the config sets lr_schedule");
    let text = text.replace(line, &format!("lr_schedule = [[0, {rate}]]"));
    std::fs::write(config, text).unwrap();
}

#[test]
fn a_diverging_run_stops_and_keeps_a_usable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = dir.path().join("diverging.toml");
    std::fs::copy(tiny_config(), &config).unwrap();
    // A rate that sends the weights far past what fp32 holds in a step or two.
    set_learning_rate(&config, "1e20");
    let output = train(
        &run,
        &["--config", config.to_str().unwrap(), "--minutes", "1"],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("training diverged"), "{stderr}");
    // What `latest` names loads and answers with finite numbers: the run
    // can go on from it with a lower rate, and self-play never got a net
    // that answers NaN (every stored game reads back).
    let weights = Checkpoints::new(run.join("checkpoints")).weights(latest(&run));
    let net = models::weights::load(&weights, tch::Device::Cpu).unwrap();
    for (name, t) in net.var_store().variables() {
        assert_eq!(t.isfinite().all().int64_value(&[]), 1, "{name}");
    }
    stored_games(&run);

    // With the rate lowered in the run's own config, it resumes from there.
    set_learning_rate(&run.join("config.toml"), "0.01");
    let checkpoint = latest(&run);
    assert_ok(&train(&run, &["--minutes", "0.2"]));
    assert!(latest(&run) > checkpoint);
}

#[test]
fn bad_configs_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(tiny_config()).unwrap();
    std::fs::write(&bad, text.replace("workers = 4", "wrokers = 4")).unwrap();
    let output = train(
        &dir.path().join("run"),
        &["--config", bad.to_str().unwrap(), "--minutes", "0.1"],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("wrokers"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_run_from_before_a_head_existed_resumes_and_a_changed_head_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = dir.path().join("no-moves-left.toml");
    let text = std::fs::read_to_string(tiny_config()).unwrap();
    let text = text
        .replacen("[net]\n", "[net]\nmoves_left_head = false\n", 1)
        .replacen("[training]\n", "[training]\nmoves_left_weight = 0.0\n", 1);
    std::fs::write(&config, text).unwrap();
    assert_ok(&train(
        &run,
        &["--config", config.to_str().unwrap(), "--minutes", "0.02"],
    ));
    // The run's config as a build from before the moves-left head wrote it:
    // without the keys, which then meant no head. It resumes as it began.
    let stored = run.join("config.toml");
    let saved = std::fs::read_to_string(&stored).unwrap();
    let old: String = saved
        .lines()
        .filter(|line| !line.starts_with("moves_left_"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&stored, old).unwrap();
    assert_ok(&train(&run, &["--minutes", "0.02"]));
    // A config edited to add the head no longer fits the checkpoints: the
    // error names the key, both values and the file to edit.
    std::fs::write(
        &stored,
        saved
            .replace("moves_left_head = false", "moves_left_head = true")
            .replace("moves_left_weight = 0.0", "moves_left_weight = 0.25"),
    )
    .unwrap();
    let refused = train(&run, &["--minutes", "0.02"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("net.moves_left_head = false in the checkpoints, true in the config")
            && stderr.contains(&stored.display().to_string()),
        "{stderr}"
    );
}

#[test]
fn the_ladder_and_gating_report_to_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = dir.path().join("gated.toml");
    let text = std::fs::read_to_string(tiny_config()).unwrap()
        + "\n[evaluation]\nladder_every = 1\nbaselines = [\"random\"]\nladder_games = 2\n\
           gating = true\ngate_games = 2\ngate_threshold = 0.5\nplayouts = 4\n\
           concurrency = 2\nmax_plies = 40\n";
    std::fs::write(&config, text).unwrap();
    assert_ok(&train(
        &run,
        &["--config", config.to_str().unwrap(), "--minutes", "0.4"],
    ));
    let metrics = std::fs::read_to_string(run.join("logs/metrics.jsonl")).unwrap();
    let missing: Vec<&str> = [
        "ladder/score_vs_random",
        "ladder/elo_vs_random",
        "gate/score",
        "gate/promoted",
    ]
    .into_iter()
    .filter(|tag| !metrics.contains(tag))
    .collect();
    assert!(missing.is_empty(), "not in the metrics: {missing:?}");
    // Self-play's net is the best checkpoint, recorded for a resumed run.
    if let Ok(best) = std::fs::read_to_string(run.join("checkpoints/best")) {
        let best: u32 = best.trim().parse().unwrap();
        assert!(best >= 1 && best <= latest(&run));
    }

    // Every match is logged, and `mixzero rate` puts the run's checkpoints
    // on the scale where random is 0.
    let matches = std::fs::read_to_string(run.join("logs/matches.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = matches
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|m| m["player2"] == "random"), "{matches}");
    assert!(lines
        .iter()
        .all(|m| m["player1"].as_str().unwrap().starts_with("checkpoint ")));
    let svg = dir.path().join("elo.svg");
    let rated = Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .args([
            "rate",
            "--json",
            "--svg",
            svg.to_str().unwrap(),
            run.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ok(&rated);
    let ratings: Vec<serde_json::Value> = String::from_utf8_lossy(&rated.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let random = ratings.iter().find(|r| r["player"] == "random").unwrap();
    assert_eq!(random["elo"], 0.0);
    assert!(ratings
        .iter()
        .any(|r| r["player"].as_str().unwrap().starts_with("run checkpoint ")));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

/// Games in the run's chunks that came from `--bootstrap`.
fn imported_games(run_dir: &Path) -> usize {
    stored_games(run_dir)
        .iter()
        .filter(|game| game.network == trainer::selfplay::bootstrap::IMPORTED)
        .count()
}

#[test]
fn bootstrap_games_are_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let pgn = dir.path().join("games.pgn");
    std::fs::write(
        &pgn,
        "[Variant \"Chess-mix\"]\n[Result \"0-1\"]\n\n1. e5 e6 2. Nd3 Nd8 0-1\n\n\
         [Variant \"Chess-mix\"]\n[Result \"1-0\"]\n\n1. e5 e6 1-0\n",
    )
    .unwrap();
    let config = tiny_config();
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--minutes",
        "0.05",
        "--bootstrap",
        pgn.to_str().unwrap(),
    ];
    assert_ok(&train(&run, &args));
    assert_eq!(imported_games(&run), 2);
    let log = std::fs::read_to_string(run.join("bootstrap.txt")).unwrap();
    assert!(log.contains("2 games"), "{log}");
    // The same file again: nothing new.
    assert_ok(&train(&run, &args[2..]));
    assert_eq!(imported_games(&run), 2);
    // Not PGN: a clear error.
    std::fs::write(&pgn, "[Variant \"Chess\"]\n\n1. e4 *\n").unwrap();
    let output = train(&run, &args[2..]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--bootstrap"));
}

#[test]
fn a_new_run_starts_from_given_weights() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let config = tiny_config();
    let config_arg = ["--config", config.to_str().unwrap()];
    assert_ok(&train(
        &first,
        &[&config_arg[..], &["--minutes", "0.05"]].concat(),
    ));
    let trained = Checkpoints::new(first.join("checkpoints")).weights(latest(&first));
    assert!(latest(&first) >= 1);

    // A new run from the first run's latest net: its checkpoint 0 is that net.
    let second = dir.path().join("second");
    let init = ["--init", first.to_str().unwrap()];
    assert_ok(&train(
        &second,
        &[&config_arg[..], &init, &["--minutes", "0.02"]].concat(),
    ));
    let start = Checkpoints::new(second.join("checkpoints")).weights(0);
    let (start, trained) = (
        std::fs::read(start).unwrap(),
        std::fs::read(&trained).unwrap(),
    );
    let tensors = |bytes| {
        let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
        let mut tensors: Vec<(String, Vec<u8>)> = file
            .tensors()
            .into_iter()
            .map(|(name, view)| (name, view.data().to_vec()))
            .collect();
        tensors.sort();
        tensors
    };
    let trained = tensors(&trained);
    assert!(trained.len() > 10);
    assert!(
        tensors(&start) == trained,
        "checkpoint 0 is not the --init net"
    );

    // Only for a new run: an existing one is refused, not overwritten.
    let refused = train(&second, &[&init[..], &["--minutes", "0.02"]].concat());
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("already has checkpoints"), "{stderr}");

    // Another net than the config's, or no weights at all: named, and no
    // run directory is left behind.
    let wider = dir.path().join("wider.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&wider, text.replace("channels = 8", "channels = 16")).unwrap();
    let third = dir.path().join("third");
    let wider_arg = ["--config", wider.to_str().unwrap(), "--minutes", "0.02"];
    let refused = train(&third, &[&wider_arg[..], &init].concat());
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("net.channels = 8 there, 16 in the config"),
        "{stderr}"
    );
    let missing = dir.path().join("missing.safetensors");
    let refused = train(
        &third,
        &[&wider_arg[..], &["--init", missing.to_str().unwrap()]].concat(),
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no such weights file") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(!third.exists());
}
