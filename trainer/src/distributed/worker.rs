//! `mixzero selfplay --store`: a self-play worker of a run shared through a
//! store. It plays with the newest published net, switching when the
//! pointer moves, and uploads its games in chunks of
//! `[distributed] chunk_games`, each create-only under its own prefix
//! (`games/<worker>/<seq:08>.mzg`), so a killed worker loses at most the
//! chunk it had not finished, and no upload ever replaces another.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use models::server::{InferenceClient, InferenceServer, LoadError};
use store::layout::NetPointer;
use store::Store;

use super::upload::Uploader;
use super::{DistributedError, TRAINER};
use crate::config::Config;
use crate::selfplay::{self, Finished, Throughput};

/// One worker process's settings.
#[derive(Clone, Debug)]
pub struct WorkerSession {
    /// Its name in the store; `None` for a new one (host name and a random
    /// suffix), so that a restarted worker never writes an earlier one's keys.
    pub worker_id: Option<String>,
    /// Stop cleanly (last partial chunk uploaded) after this long.
    pub minutes: Option<f64>,
    pub seed: u64,
}

/// A worker's own hardware settings, laid over the run's config: the
/// `[inference]` keys and `[selfplay] workers` change how fast a machine
/// plays, never what it plays (the net, the search, the games' targets
/// stay the run's), so each worker may size them for its own CPU or GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Hardware {
    pub replicas: Option<usize>,
    pub threads: Option<usize>,
    pub max_batch: Option<usize>,
    pub max_wait_us: Option<u64>,
    pub precision: Option<models::Precision>,
    /// `[selfplay] workers`: games played at once.
    pub workers: Option<usize>,
}

impl Hardware {
    /// Lays these settings over `config`, each checked as the config's own
    /// key is; an error names the flag (`--replicas`, ...) that sets it.
    pub fn apply(&self, config: &mut Config) -> Result<(), DistributedError> {
        let inference = &mut config.inference;
        set(&mut inference.replicas, self.replicas);
        set(&mut inference.threads, self.threads);
        set(&mut inference.max_batch, self.max_batch);
        set(&mut inference.max_wait_us, self.max_wait_us);
        set(&mut inference.precision, self.precision);
        set(&mut config.selfplay.workers, self.workers);
        let invalid = |section: &str, e: engine::InvalidKey| DistributedError::Hardware {
            flag: format!("--{}", e.key.replace('_', "-")),
            key: format!("{section}.{}", e.key),
            why: e.why,
        };
        config
            .inference
            .validate()
            .map_err(|e| invalid("inference", e))?;
        config
            .selfplay
            .validate()
            .map_err(|e| invalid("selfplay", e))
    }
}

fn set<T>(key: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *key = value;
    }
}

/// What a worker did, for its last log line.
#[derive(Clone, Debug, Default)]
pub struct WorkerSummary {
    pub worker: String,
    pub chunks: u64,
    pub games: u64,
    /// Nets played with (the first included).
    pub nets: u64,
    /// Positions its searches evaluated, unfinished games included.
    pub nodes: u64,
    pub seconds: f64,
}

/// A fresh worker name: the host's, sanitised to a key segment, and eight
/// random hex digits.
pub fn new_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '-',
        })
        .collect();
    let host = if host.is_empty() { "worker" } else { &host };
    format!("{host}-{:08x}", rand::random::<u32>())
}

/// Plays and uploads until `stop` is set or `session.minutes` have passed.
/// A store that cannot be reached at the start is an error at once; later
/// failures are logged and retried at the next poll, holding on to the
/// games not yet uploaded.
pub fn run(
    store: &Store,
    config: &Config,
    session: &WorkerSession,
    stop: &AtomicBool,
) -> Result<WorkerSummary, DistributedError> {
    let started = Instant::now();
    let deadline = session
        .minutes
        .map(|m| started + Duration::from_secs_f64(m * 60.0));
    let mut uploader = match &session.worker_id {
        Some(id) if id == TRAINER => return Err(DistributedError::ReservedWorkerId(id.clone())),
        Some(id) => Uploader::resume(store, id)?,
        None => Uploader::new(store, &new_worker_id(), 0)?,
    };
    let worker = uploader.worker().to_owned();
    let chunk_games = config.distributed.chunk_games;
    let poll = Duration::from_secs_f64(config.distributed.poll_seconds);
    let mut summary = WorkerSummary {
        worker: worker.clone(),
        ..WorkerSummary::default()
    };
    let halted = || stop.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d);
    let inference = &config.inference;
    tracing::info!(
        %worker,
        first_chunk = uploader.next_seq(),
        store = store.url(),
        games_at_once = config.selfplay.workers,
        replicas = inference.replicas,
        threads = inference.threads,
        max_batch = inference.max_batch,
        max_wait_us = inference.max_wait_us,
        precision = ?inference.precision,
        "self-play worker"
    );

    // The first net: the pointer's absence is the trainer not having
    // published yet, so wait; an error on the very first request is a
    // wrong URL or endpoint, reported at once.
    let mut first_request = true;
    let mut waiting_logged = false;
    let (pointer, weights) = loop {
        match store.latest_pointer() {
            Ok(Some(pointer)) => match store.fetch_net(&pointer) {
                Ok(weights) => break (pointer, weights),
                Err(e) => tracing::warn!("cannot read the published net yet: {e}"),
            },
            Ok(None) if !waiting_logged => {
                tracing::info!("no net published yet; waiting for the trainer");
                waiting_logged = true;
            }
            Ok(None) => {}
            Err(e) if first_request => return Err(e.into()),
            Err(e) => tracing::warn!("polling the net pointer: {e}"),
        }
        first_request = false;
        if sleep_unless(poll, &halted) {
            summary.seconds = started.elapsed().as_secs_f64();
            return Ok(summary);
        }
    };
    let device = models::device();
    let net = models::weights::from_bytes(&weights, &pointer.key, device).map_err(|source| {
        DistributedError::Weights {
            what: format!("{}: {}", store.url(), pointer.key),
            source,
        }
    })?;
    check_arch(&pointer, net.arch(), config)?;
    tracing::info!(net = %pointer.key, step = pointer.step, ?device, "playing");
    summary.nets = 1;

    let server = InferenceServer::start(net, config.inference);
    let client = server.client();
    let network = AtomicU32::new(record_id(&pointer));
    let train_step = AtomicU64::new(pointer.step);
    let workers_stop = AtomicBool::new(false);
    let throughput = Throughput::default();
    let (games_tx, games_rx) = crossbeam_channel::unbounded::<Finished>();
    let mut current = pointer;
    let mut loaded_at = Instant::now();

    let result = std::thread::scope(|scope| -> Result<(), DistributedError> {
        let players = scope.spawn(|| {
            selfplay::run_workers(
                &config.selfplay,
                &config.search,
                &client,
                &network,
                &train_step,
                &throughput,
                &workers_stop,
                session.seed,
                games_tx,
            )
        });
        let mut next_poll = Instant::now() + poll;
        let outcome = 'play: loop {
            if halted() {
                break Ok(());
            }
            match games_rx.recv_timeout(Duration::from_millis(200)) {
                Ok(finished) => uploader.push([finished.record]),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break Ok(()),
            }
            uploader.push(games_rx.try_iter().map(|f| f.record));
            let net_age = loaded_at.elapsed().as_secs_f64();
            while uploader.pending() >= chunk_games {
                match uploader.upload(chunk_games) {
                    Ok(uploaded) => {
                        summary.chunks += 1;
                        summary.games += uploaded.games.len() as u64;
                        tracing::info!(
                            %worker,
                            chunk = uploaded.seq,
                            games = uploaded.games.len(),
                            net_step = current.step,
                            net_age_s = format!("{net_age:.0}"),
                            "chunk uploaded"
                        );
                    }
                    Err(e) if e.is_transient() => {
                        tracing::warn!("upload failed, retrying at the next poll: {e}");
                        break;
                    }
                    Err(e) => break 'play Err(e),
                }
            }
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + poll;
                match switch_net(store, &client, config, &current) {
                    Ok(Some(pointer)) => {
                        network.store(record_id(&pointer), Ordering::SeqCst);
                        train_step.store(pointer.step, Ordering::SeqCst);
                        tracing::info!(
                            net = %pointer.key,
                            step = pointer.step,
                            previous_age_s = format!("{:.0}", loaded_at.elapsed().as_secs_f64()),
                            "switched to a new net"
                        );
                        current = pointer;
                        loaded_at = Instant::now();
                        summary.nets += 1;
                    }
                    Ok(None) => {}
                    Err(DistributedError::ServerStopped) => {
                        break Err(DistributedError::ServerStopped)
                    }
                    Err(e) => tracing::warn!("keeping the current net: {e}"),
                }
            }
        };
        workers_stop.store(true, Ordering::SeqCst);
        server.shutdown();
        let played = players.join().expect("self-play thread");
        // Games that finished while stopping are uploaded too.
        uploader.push(games_rx.try_iter().map(|f| f.record));
        outcome?;
        match played {
            Ok(()) | Err(engine::EvalError::Disconnected) => Ok(()),
            Err(e) => Err(DistributedError::SelfPlay(e)),
        }
    });
    // What is left, in one last (possibly short) chunk.
    while uploader.pending() > 0 {
        let uploaded = uploader.upload(chunk_games)?;
        summary.chunks += 1;
        summary.games += uploaded.games.len() as u64;
    }
    result?;
    summary.nodes = throughput.nodes.load(Ordering::Relaxed);
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// A record's `network` for games of `pointer`'s net: its training step,
/// the number it was published under.
fn record_id(pointer: &NetPointer) -> u32 {
    u32::try_from(pointer.step).unwrap_or(u32::MAX)
}

fn check_arch(
    pointer: &NetPointer,
    found: models::net::Architecture,
    config: &Config,
) -> Result<(), DistributedError> {
    if found == config.arch() {
        return Ok(());
    }
    Err(DistributedError::Architecture {
        key: pointer.key.clone(),
        found: Box::new(found),
        expected: Box::new(config.arch()),
    })
}

/// Loads the net the pointer names into every inference replica if it is
/// not `current`; the replicas swap weights between batches.
fn switch_net(
    store: &Store,
    client: &InferenceClient,
    config: &Config,
    current: &NetPointer,
) -> Result<Option<NetPointer>, DistributedError> {
    let Some(pointer) = store.latest_pointer()? else {
        return Ok(None);
    };
    if pointer == *current {
        return Ok(None);
    }
    let weights = store.fetch_net(&pointer)?;
    // Parsed once here, to check it, before any replica sees it.
    let net = models::weights::from_bytes(&weights, &pointer.key, tch::Device::Cpu).map_err(
        |source| DistributedError::Weights {
            what: format!("{}: {}", store.url(), pointer.key),
            source,
        },
    )?;
    check_arch(&pointer, net.arch(), config)?;
    drop(net);
    match client.load_weights(weights, &pointer.key) {
        Ok(()) => Ok(Some(pointer)),
        Err(LoadError::Stopped) => Err(DistributedError::ServerStopped),
        Err(why) => {
            // Only a replica's device can fail here: the bytes parsed above.
            tracing::error!("a replica could not load {}: {why}", pointer.key);
            Err(DistributedError::ServerStopped)
        }
    }
}

/// Sleeps `total` in short steps; true if `halted` said to stop.
fn sleep_unless(total: Duration, halted: &impl Fn() -> bool) -> bool {
    let end = Instant::now() + total;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if halted() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    halted()
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::layout::worker_prefix;

    #[test]
    fn hardware_settings_override_the_run_config_and_are_checked() {
        let run = Config::default_config();
        let mut config = run.clone();
        Hardware::default().apply(&mut config).unwrap();
        assert_eq!(config, run);
        let gpu = Hardware {
            replicas: Some(3),
            threads: Some(2),
            max_batch: Some(1024),
            max_wait_us: Some(100),
            precision: Some(models::Precision::Bf16),
            workers: Some(768),
        };
        gpu.apply(&mut config).unwrap();
        assert_eq!(config.inference.replicas, 3);
        assert_eq!(config.inference.threads, 2);
        assert_eq!(config.inference.max_batch, 1024);
        assert_eq!(config.inference.max_wait_us, 100);
        assert_eq!(config.inference.precision, models::Precision::Bf16);
        assert_eq!(config.selfplay.workers, 768);
        // Everything else is the run's.
        assert_eq!(config.search, run.search);
        assert_eq!(config.net, run.net);
        assert_eq!(
            config.selfplay.playouts, run.selfplay.playouts,
            "only workers changes in [selfplay]"
        );
        for (bad, flag) in [
            (
                Hardware {
                    replicas: Some(0),
                    ..Hardware::default()
                },
                "--replicas",
            ),
            (
                Hardware {
                    max_batch: Some(0),
                    ..Hardware::default()
                },
                "--max-batch",
            ),
            (
                Hardware {
                    threads: Some(5000),
                    ..Hardware::default()
                },
                "--threads",
            ),
            (
                Hardware {
                    workers: Some(0),
                    ..Hardware::default()
                },
                "--workers",
            ),
        ] {
            let err = bad.apply(&mut run.clone()).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{flag}: {err}");
        }
    }

    #[test]
    fn worker_ids_are_key_segments_and_differ() {
        let (a, b) = (new_worker_id(), new_worker_id());
        assert!(worker_prefix(&a).is_ok(), "{a}");
        assert_ne!(a, b);
    }
}
