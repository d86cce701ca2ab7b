//! Many machines end to end (issue #13), against a real S3 server (s3s-fs,
//! started by scripts/test.sh): one `mixzero train --store --no-selfplay`
//! and three `mixzero selfplay --store` workers on a tiny config, the
//! trainer and a worker killed with SIGKILL and restarted. Nothing may be
//! lost or counted twice, and the trainer must resume.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use store::layout::parse_chunk_key;
use store::test_server::TestServer;
use store::Store;
use trainer::run_dir::Checkpoints;
use trainer::selfplay::data::decode_games;

/// The tests' tiny config (tests/fixtures/tiny.toml) with small chunks, fast
/// polls and one inference replica per process (four share two cores).
fn config(dir: &Path) -> PathBuf {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny.toml");
    let text = std::fs::read_to_string(tiny)
        .unwrap()
        .replace("[inference]\n", "[inference]\nreplicas = 1\n")
        + "\n[distributed]\nchunk_games = 2\npoll_seconds = 0.5\n";
    let path = dir.join("distributed.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn mixzero(s3: &TestServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mixzero"));
    command
        .args(args)
        .envs(s3.vars())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    command
}

/// Starts `mixzero args`, its stderr (the log) into `log`.
fn spawn(s3: &TestServer, args: &[&str], log: &Path) -> Child {
    mixzero(s3, args)
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .expect("starting mixzero")
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn latest(run: &Path) -> Option<u32> {
    Checkpoints::new(run.join("checkpoints"))
        .latest()
        .ok()
        .flatten()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Asks a worker to stop as Ctrl-C would (it uploads what it has).
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn exit_ok(mut child: Child, name: &str, log: &Path) {
    let status = child.wait().unwrap();
    assert!(status.success(), "{name}: {status}\n{}", read(log));
}

/// Every object under `games/` of a worker, decoded: games per key.
fn chunks_in_store(store: &Store) -> BTreeMap<String, usize> {
    let mut chunks = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list_after("games", cursor.as_deref(), 1000).unwrap();
        let Some(last) = page.last() else { break };
        cursor = Some(last.key.clone());
        for entry in page {
            let bytes = store.get(&entry.key).unwrap().unwrap();
            chunks.insert(entry.key, bytes);
        }
    }
    chunks
        .into_iter()
        .map(|(key, bytes)| {
            let games = decode_games(Path::new(&key), &bytes)
                .unwrap_or_else(|e| panic!("{key} does not decode: {e}"));
            (key, games.len())
        })
        .collect()
}

/// Every value of `tag` in a run's metrics.jsonl, oldest first.
fn metric(run: &Path, tag: &str) -> Vec<f64> {
    read(&run.join("logs/metrics.jsonl"))
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| record["tag"] == tag)
        .filter_map(|record| record["value"].as_f64())
        .collect()
}

fn last_metric(run: &Path, tag: &str) -> Option<f64> {
    metric(run, tag).last().copied()
}

#[test]
fn workers_and_a_trainer_share_a_run_through_s3() {
    let s3 = TestServer::from_env();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path();
    let config = config(dir.path());
    let config = config.to_str().unwrap();
    let url = s3.fresh_url("e2e");
    let url = url.as_str();
    let store = s3.open(url, s3.vars()).unwrap();
    let run = dir.path().join("run");
    let run_arg = run.to_str().unwrap();
    let started = Instant::now();

    // A worker before anything is published: it has to be given the config,
    // and waits for a net.
    let early_log = logs.join("early.log");
    let early = spawn(
        &s3,
        &[
            "selfplay", "--store", url, "--config", config, "--seed", "1",
        ],
        &early_log,
    );
    wait_for("the early worker to wait", Duration::from_secs(30), || {
        read(&early_log).contains("no net published yet")
    });
    // Something no worker wrote, under games/.
    let corrupt = "games/zz-corrupt/00000000.mzg";
    store.put_new(corrupt, &b"MZGCHUNK garbage"[..]).unwrap();

    let train_args = |extra: &[&'static str]| -> Vec<&str> {
        let mut args = vec![
            "train",
            "--quiet",
            "--store",
            url,
            "--no-selfplay",
            "--seed",
            "1",
            "--run-dir",
            run_arg,
        ];
        args.extend(extra);
        args
    };
    let trainer_log = logs.join("trainer.log");
    let mut args = train_args(&[]);
    args.extend(["--config", config]);
    let mut trainer = spawn(&s3, &args, &trainer_log);
    wait_for(
        "the trainer to store the config",
        Duration::from_secs(60),
        || store.get("config.toml").unwrap().is_some(),
    );
    // A worker with a name of its own (resumable), one with a random name
    // reading the stored config and sizing it for its own hardware.
    let named_args = [
        "selfplay",
        "--store",
        url,
        "--worker-id",
        "named",
        "--seed",
        "2",
    ];
    let named_log = logs.join("named.log");
    let mut named = spawn(&s3, &named_args, &named_log);
    let random_log = logs.join("random.log");
    let random = spawn(
        &s3,
        &[
            "selfplay",
            "--store",
            url,
            "--seed",
            "3",
            "--workers",
            "2",
            "--max-batch",
            "8",
        ],
        &random_log,
    );

    wait_for(
        "two checkpoints and two chunks of the named worker",
        Duration::from_secs(90),
        || {
            let chunks = store.list_after("games/named", None, 10).unwrap().len();
            latest(&run).is_some_and(|n| n >= 2) && chunks >= 2
        },
    );
    named.kill().unwrap();
    trainer.kill().unwrap();
    named.wait().unwrap();
    trainer.wait().unwrap();
    let killed_at = latest(&run).unwrap();
    let early_text = read(&early_log);
    assert!(
        early_text.contains("playing net=nets/"),
        "the early worker did not pick up the first net:\n{early_text}"
    );
    let first_log = read(&trainer_log);
    assert_eq!(
        first_log.lines().filter(|l| l.contains(corrupt)).count(),
        1,
        "the corrupt object should be reported once:\n{first_log}"
    );

    // Restarted: the trainer from its run directory (no --config), the
    // named worker carrying on its sequence.
    let resumed_log = logs.join("trainer-resumed.log");
    let args = train_args(&["--minutes", "0.5"]);
    let resumed = spawn(&s3, &args, &resumed_log);
    let named_again_log = logs.join("named-again.log");
    let mut named_again_args = named_args.to_vec();
    named_again_args.extend(["--minutes", "0.2"]);
    let named_again = spawn(&s3, &named_again_args, &named_again_log);
    exit_ok(named_again, "the restarted named worker", &named_again_log);
    interrupt(&early);
    interrupt(&random);
    exit_ok(early, "the early worker", &early_log);
    exit_ok(random, "the random worker", &random_log);
    let random_text = read(&random_log);
    assert!(
        random_text.contains("games_at_once=2 ") && random_text.contains("max_batch=8 "),
        "the worker's own settings were not used:\n{random_text}"
    );
    let uploads_done = started.elapsed();
    exit_ok(resumed, "the resumed trainer", &resumed_log);

    // Every chunk decodes, and the named worker's numbers have no gap
    // and no repeat across its restart.
    // The planted object was never a chunk: out of the count.
    store.delete(corrupt).unwrap();
    let chunks = chunks_in_store(&store);
    let named_seqs: Vec<u64> = chunks
        .keys()
        .filter_map(|key| parse_chunk_key(key, "mzg"))
        .filter(|(worker, _)| *worker == "named")
        .map(|(_, seq)| seq)
        .collect();
    assert!(named_seqs.len() >= 3, "{named_seqs:?}");
    assert_eq!(named_seqs, (0..named_seqs.len() as u64).collect::<Vec<_>>());
    let workers: std::collections::BTreeSet<&str> = chunks
        .keys()
        .filter_map(|key| parse_chunk_key(key, "mzg").map(|(worker, _)| worker))
        .collect();
    assert_eq!(workers.len(), 3, "{workers:?}");
    let games: usize = chunks.values().sum();

    // The resumed trainer counted every game once.
    let resumed_text = read(&resumed_log);
    assert!(
        resumed_text.contains(&format!("resumed checkpoint={killed_at} ")),
        "the trainer did not resume from checkpoint {killed_at}:\n{resumed_text}"
    );
    assert_eq!(
        last_metric(&run, "store/games_in"),
        Some(games as f64),
        "{resumed_text}"
    );
    assert_eq!(
        last_metric(&run, "store/chunks_in"),
        Some(chunks.len() as f64)
    );
    let lags = metric(&run, "store/lag_seconds");
    assert!(!lags.is_empty());
    // Workers play with a published net: none is older than the run.
    let ages = metric(&run, "store/net_age_steps");
    let steps = read(&run.join("logs/metrics.jsonl"))
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|record| record["step"].as_u64())
        .max()
        .unwrap();
    assert!(!ages.is_empty());
    assert!(
        ages.iter().all(|&age| (0.0..=steps as f64).contains(&age)),
        "{ages:?} over {steps} steps"
    );
    assert!(latest(&run).unwrap() > killed_at);
    eprintln!(
        "{games} games in {} chunks from 3 workers in {:.0} s ({:.1} games/s uploaded), \
         all ingested, {:.1} s after upload on average; whole test {:.0} s",
        chunks.len(),
        uploads_done.as_secs_f64(),
        games as f64 / uploads_done.as_secs_f64(),
        lags.iter().sum::<f64>() / lags.len() as f64,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_trainer_stores_its_own_games_once() {
    let s3 = TestServer::from_env();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let url = s3.fresh_url("own");
    let store = s3.open(&url, s3.vars()).unwrap();
    let run = dir.path().join("run");
    let train = |minutes: &str| {
        let output = mixzero(
            &s3,
            &[
                "train",
                "--quiet",
                "--seed",
                "4",
                "--store",
                &url,
                "--config",
                config.to_str().unwrap(),
                "--run-dir",
                run.to_str().unwrap(),
                "--minutes",
                minutes,
            ],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        stderr
    };
    train("0.1");
    // Its games went to the store under its own prefix, their PGNs to the
    // run directory, and none came back in as a worker's.
    let chunks = chunks_in_store(&store);
    assert!(!chunks.is_empty());
    assert!(
        chunks.keys().all(|key| key.starts_with("games/trainer/")),
        "{chunks:?}"
    );
    let games: usize = chunks.values().sum();
    assert_eq!(
        std::fs::read_dir(run.join("pgn")).unwrap().count(),
        chunks.len()
    );
    assert_eq!(last_metric(&run, "store/games_in"), Some(0.0));
    assert!(!run.join("games").exists());

    // Resumed, it rebuilds its window from them: each counted once.
    let log = train("0.05");
    assert!(
        log.contains(&format!("chunks={} games={games} ", chunks.len())),
        "{log}"
    );
    assert_eq!(last_metric(&run, "store/games_in"), Some(games as f64));
}

#[test]
fn an_unreachable_store_fails_fast_and_clearly() {
    let s3 = TestServer::from_env();
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let output: Output = mixzero(&s3, &["selfplay", "--store", "s3://nowhere/run"])
        .env("AWS_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        stderr.contains("cannot reach") && stderr.contains(&format!("127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_workers_hardware_flags_are_checked_like_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::copy(config(dir.path()), store.join("config.toml")).unwrap();
    let store = store.to_str().unwrap();
    for (flags, says) in [
        (["--replicas", "0"], "--replicas: 0 (expected 1..=256)"),
        (["--workers", "0"], "--workers: 0"),
        (
            ["--precision", "fp8"],
            "invalid value 'fp8' for '--precision",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_mixzero"))
            .args(["selfplay", "--store", store])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn store_gc_deletes_old_chunks_and_nets_but_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().to_str().unwrap();
    let store = Store::open(url).unwrap();
    for key in ["games/w1/00000000.mzg", "games/w2/00000000.mzg"] {
        store.put_new(key, &b"chunk"[..]).unwrap();
    }
    for step in 1..=4 {
        store.publish_net(step, vec![step as u8; 10]).unwrap();
    }
    let gc = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_mixzero"))
            .args(["store", "gc", "--store", url, "--keep-nets", "2"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    // An hour keeps every chunk; of the nets, the pointer's and the newest
    // two of the rest stay.
    let said = gc(&["--keep-hours", "1", "--dry-run"]);
    assert!(said.contains("would delete 0 chunks and 1 nets"), "{said}");
    assert!(store.get("nets/00000001.safetensors").unwrap().is_some());

    let said = gc(&["--keep-hours", "0"]);
    assert!(said.contains("deleted 2 chunks and 1 nets"), "{said}");
    assert!(store.list_after("games", None, 10).unwrap().is_empty());
    let nets: Vec<String> = store
        .list_after("nets", None, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(
        nets,
        [
            "nets/00000002.safetensors",
            "nets/00000003.safetensors",
            "nets/00000004.safetensors",
            "nets/latest"
        ]
    );
    assert_eq!(store.latest_pointer().unwrap().unwrap().step, 4);
}
