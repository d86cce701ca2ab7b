//! Benchmarks: the inference server against bare forward passes (`bench nn`),
//! MCTS through the server (`bench search`), self-play (`bench selfplay`) and
//! training steps (`bench train`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::mcts::{Search, SearchConfig};
use engine::{
    Color, EvalError, EvalRequest, Evaluation, Evaluator, Game, Move, Outcome, Position, Reason,
    UniformEvaluator,
};
use models::encoding::{encode, EncoderConfig};
use models::net::{Architecture, Net};
use models::server::{encode_requests, InferenceClient, InferenceServer, ServerConfig};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::config::Config;
use crate::selfplay::data::{GameRecord, MoveRecord};
use crate::selfplay::{run_workers, Throughput};
use crate::training::replay::{Batch, ReplayBuffer};
use crate::training::state::TrainState;

/// Positions with their history, from seeded random games.
pub struct Sample {
    pub history: Vec<Position>,
    pub moves: Vec<Move>,
}

impl Sample {
    pub fn request(&self) -> EvalRequest<'_> {
        EvalRequest::new(&self.history, &self.moves)
    }
}

/// `count` positions from random games, each with up to `history` predecessors.
pub fn sample_positions(count: usize, history: usize, seed: u64) -> Vec<Sample> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut samples = Vec::with_capacity(count);
    while samples.len() < count {
        let mut line = vec![Position::start()];
        for _ in 0..120 {
            let pos = *line.last().expect("line is never empty");
            let moves = pos.legal_moves();
            let Some(&mv) = moves.choose(&mut rng) else {
                break;
            };
            let start = line.len().saturating_sub(history);
            samples.push(Sample {
                history: line[start..].to_vec(),
                moves: moves.to_vec(),
            });
            line.push(pos.after(mv));
        }
    }
    samples.truncate(count);
    samples
}

#[derive(Debug, Serialize)]
pub struct NnRow {
    pub net: String,
    pub device: String,
    /// The replicas' number format (`Float`, `BFloat16`, `Half`).
    pub precision: String,
    pub batch: usize,
    pub server_pos_per_s: f64,
    pub bare_pos_per_s: f64,
    /// Server throughput as a share of the bare forward pass.
    pub ratio: f64,
    pub mean_batch: f64,
    /// Forward-pass arithmetic of one position.
    pub gflop_per_position: f64,
    /// What the server's throughput is in arithmetic.
    pub server_tflops: f64,
    /// `server_tflops` as a share of the matrix-product peak measured in the
    /// same run ([`PeakRow`]), when one was.
    pub peak_share: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct PeakRow {
    pub device: String,
    pub precision: String,
    /// Side of the square matrices multiplied.
    pub size: i64,
    /// Threads (one per replica) multiplying at once.
    pub threads: usize,
    /// Their summed rate: the peak the server's replicas could reach.
    pub peak_tflops: f64,
}

/// The arithmetic peak of the server's replicas in their precision: square
/// matrix products (8192 on a GPU, 1024 on a CPU) on every replica's thread
/// at once for `seconds`, their rates summed. On one GPU the replicas share
/// the device, and the sum is the device's rate.
pub fn peak_row(arch: Architecture, device: Device, config: ServerConfig, seconds: f64) -> PeakRow {
    let kind = config.precision.kind(device);
    let size: i64 = if device.is_cuda() { 8192 } else { 1024 };
    let server = InferenceServer::start(Net::new(arch, device), config);
    let rates = server
        .client()
        .run_on_each(move |_| matmul_tflops(device, kind, size, seconds))
        .expect("bench server runs tasks");
    server.shutdown();
    PeakRow {
        device: format!("{device:?}"),
        precision: format!("{kind:?}"),
        size,
        threads: rates.len(),
        peak_tflops: rates.iter().sum(),
    }
}

/// TFLOP/s of `size` x `size` matrix products in `kind` on `device`.
fn matmul_tflops(device: Device, kind: Kind, size: i64, seconds: f64) -> f64 {
    let sync = || {
        if let Device::Cuda(index) = device {
            tch::Cuda::synchronize(index as i64);
        }
    };
    tch::no_grad(|| {
        let a = Tensor::randn([size, size], (kind, device));
        let b = Tensor::randn([size, size], (kind, device));
        let _ = a.matmul(&b);
        sync();
        let start = Instant::now();
        let mut products = 0u64;
        while products < 2 || start.elapsed().as_secs_f64() < seconds {
            for _ in 0..4 {
                let _ = a.matmul(&b);
            }
            sync();
            products += 4;
        }
        2.0 * (size as f64).powi(3) * products as f64 / start.elapsed().as_secs_f64() / 1e12
    })
}

/// The first `batch` samples (cycled) encoded back to back.
fn encode_batch(encoder: EncoderConfig, batch: usize, samples: &[Sample]) -> Vec<f32> {
    let mut planes = vec![0f32; batch * encoder.input_len()];
    for (i, out) in planes.chunks_exact_mut(encoder.input_len()).enumerate() {
        encode(&encoder, &samples[i % samples.len()].request(), out);
    }
    planes
}

/// Forward passes of `batch` encoded sample positions per second, times `batch`.
fn bare_throughput(net: &Net, planes: &[f32], batch: usize, seconds: f64) -> f64 {
    let encoder = net.arch().encoder;
    let xs = Tensor::from_slice(planes)
        .view(encoder.input_shape(batch))
        .to_device(net.device());
    tch::no_grad(|| {
        let run = || {
            let (p, v, _) = net.forward_search(&xs, false);
            // Bring results back as the server does, so both pay the same copy.
            let _ = (
                p.to_device(Device::Cpu),
                v.softmax(-1, Kind::Float).to_device(Device::Cpu),
            );
        };
        run();
        let start = Instant::now();
        let mut passes = 0usize;
        while passes < 2 || start.elapsed().as_secs_f64() < seconds {
            run();
            passes += 1;
        }
        (passes * batch) as f64 / start.elapsed().as_secs_f64()
    })
}

/// Positions per second through `server` with two batches' worth of callers
/// in flight (four callers of half a batch each), so that the next batch is
/// queued while one runs, as it is with many self-play games.
fn server_throughput(
    server: &InferenceServer,
    batch: usize,
    seconds: f64,
    samples: &[Sample],
) -> f64 {
    let (callers, per_call) = if batch == 1 {
        (2, 1)
    } else {
        (4, batch.div_ceil(2))
    };
    per_second_on_threads(server, callers, seconds, |c, client, deadline| {
        let mut served = 0;
        let mut offset = c * per_call;
        while Instant::now() < deadline {
            let requests: Vec<EvalRequest<'_>> = (0..per_call)
                .map(|i| samples[(offset + i) % samples.len()].request())
                .collect();
            offset += per_call * callers;
            served += client
                .evaluate_batch(&requests)
                .expect("bench server answers")
                .len() as u64;
        }
        served
    })
}

/// Runs `work(thread, client, deadline)` on `threads` threads at once, each
/// with its own client of `server`, until `seconds` from now: the sum of
/// what they return, per second.
fn per_second_on_threads(
    server: &InferenceServer,
    threads: usize,
    seconds: f64,
    work: impl Fn(usize, InferenceClient, Instant) -> u64 + Sync,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let work = &work;
    let done: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let client = server.client();
                scope.spawn(move || work(t, client, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .sum()
    });
    done as f64 / start.elapsed().as_secs_f64()
}

/// Bare forward passes on every replica's own thread and net at once: the
/// most the server could serve.
fn bare_on_replicas(
    server: &InferenceServer,
    planes: &Arc<Vec<f32>>,
    batch: usize,
    round: f64,
) -> f64 {
    let planes = Arc::clone(planes);
    server
        .client()
        .run_on_each(move |net| bare_throughput(net, &planes, batch, round))
        .expect("bench server runs tasks")
        .iter()
        .sum()
}

/// Rounds of bare and server measurements alternate, and each side keeps its
/// best round, so that a noisy moment on a shared machine favours neither.
const ROUNDS: usize = 4;

pub fn nn_rows(
    arch: Architecture,
    device: Device,
    server_config: ServerConfig,
    batches: &[usize],
    seconds: f64,
    samples: &[Sample],
    peak: Option<&PeakRow>,
) -> Vec<NnRow> {
    let round = seconds / ROUNDS as f64;
    let gflop = arch.forward_flops() as f64 / 1e9;
    batches
        .iter()
        .map(|&batch| {
            let server = InferenceServer::start(
                Net::new(arch, device),
                ServerConfig {
                    max_batch: batch,
                    max_wait_us: 5000,
                    ..server_config
                },
            );
            let planes = Arc::new(encode_batch(arch.encoder, batch, samples));
            let (mut bare, mut served) = (0f64, 0f64);
            for _ in 0..ROUNDS {
                bare = bare.max(bare_on_replicas(&server, &planes, batch, round));
                served = served.max(server_throughput(&server, batch, round, samples));
            }
            let mean_batch = server.client().stats().mean_batch();
            server.shutdown();
            let server_tflops = served * gflop / 1e3;
            NnRow {
                net: arch.net.name(),
                device: format!("{device:?}"),
                precision: format!("{:?}", server_config.precision.kind(device)),
                batch,
                server_pos_per_s: served,
                bare_pos_per_s: bare,
                ratio: served / bare,
                mean_batch,
                gflop_per_position: gflop,
                server_tflops,
                peak_share: peak.map(|p| server_tflops / p.peak_tflops),
            }
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct EncodeRow {
    pub history: usize,
    pub planes: usize,
    pub encode_pos_per_s: f64,
}

pub fn encode_row(encoder: EncoderConfig, samples: &[Sample], seconds: f64) -> EncodeRow {
    let mut out = vec![0f32; encoder.input_len()];
    let start = Instant::now();
    let mut done = 0usize;
    while done < samples.len() || start.elapsed().as_secs_f64() < seconds {
        encode(&encoder, &samples[done % samples.len()].request(), &mut out);
        done += 1;
    }
    EncodeRow {
        history: encoder.history,
        planes: encoder.planes(),
        encode_pos_per_s: done as f64 / start.elapsed().as_secs_f64(),
    }
}

#[derive(Debug, Serialize)]
pub struct SearchRow {
    pub net: String,
    pub device: String,
    pub batch: usize,
    pub search_threads: usize,
    pub search_nodes_per_s: f64,
    pub bare_pos_per_s: f64,
    pub ratio: f64,
    pub mean_batch: f64,
}

/// MCTS evaluations per second with enough searches in flight to fill
/// `batch` twice over (as in self-play), against bare forward passes at that
/// batch on the server's replicas.
pub fn search_row(
    arch: Architecture,
    device: Device,
    server_config: ServerConfig,
    search: SearchConfig,
    batch: usize,
    seconds: f64,
    samples: &[Sample],
) -> SearchRow {
    let server = InferenceServer::start(
        Net::new(arch, device),
        ServerConfig {
            max_batch: batch,
            ..server_config
        },
    );
    let planes = Arc::new(encode_batch(arch.encoder, batch, samples));
    let threads = (2 * batch).div_ceil(search.leaves_in_flight.max(1));
    let round = seconds / ROUNDS as f64;
    let (mut bare, mut nodes) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        bare = bare.max(bare_on_replicas(&server, &planes, batch, round));
        let per_second = per_second_on_threads(&server, threads, round, |t, client, deadline| {
            let mut done = 0;
            let mut i = t;
            while Instant::now() < deadline {
                let game = sample_game(&samples[i % samples.len()]);
                i += threads;
                if game.outcome().is_some() {
                    continue;
                }
                let mut s = Search::new(search, &game);
                while Instant::now() < deadline && s.root_visits() < 400 {
                    s.run(&client, search.leaves_in_flight as u32)
                        .expect("bench search");
                }
                done += s.evaluations();
            }
            done
        });
        nodes = nodes.max(per_second);
    }
    let mean_batch = server.client().stats().mean_batch();
    server.shutdown();
    SearchRow {
        net: arch.net.name(),
        device: format!("{device:?}"),
        batch,
        search_threads: threads,
        search_nodes_per_s: nodes,
        bare_pos_per_s: bare,
        ratio: nodes / bare,
        mean_batch,
    }
}

/// A game whose current position is the sample's, its history replayed.
fn sample_game(sample: &Sample) -> Game {
    let mut game = Game::new(sample.history[0]);
    for pair in sample.history.windows(2) {
        let mv = pair[0]
            .legal_moves()
            .into_iter()
            .find(|&m| pair[0].after(m) == pair[1])
            .expect("consecutive sample positions are one move apart");
        game.play_unchecked(mv);
    }
    game
}

/// Answers every position as the inference server's callers prepare it
/// (encoded planes and policy indices) with uniform priors and an even
/// value, without a network: what self-play costs the CPU alone.
pub struct HostOnly {
    pub encoder: EncoderConfig,
}

impl Evaluator for HostOnly {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        std::hint::black_box(encode_requests(&self.encoder, requests)?);
        UniformEvaluator.evaluate_batch(requests)
    }
}

/// What evaluates self-play's positions in [`selfplay_row`].
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    /// A fresh network through the inference server on this device.
    Network(Device),
    /// [`HostOnly`].
    HostOnly,
}

#[derive(Debug, Serialize)]
pub struct SelfPlayRow {
    pub net: String,
    /// `network` or `host-only`.
    pub backend: &'static str,
    pub workers: usize,
    pub seconds: f64,
    pub games: u64,
    pub games_per_hour: f64,
    /// Moves per second, of every game (those still running included).
    pub positions_per_s: f64,
    /// Positions the searches evaluated per second.
    pub nodes_per_s: f64,
    pub mean_batch: f64,
    /// The most positions in one forward pass (at most `max_batch`, unless
    /// one search alone sends more).
    pub largest_batch: u64,
    /// Distinct positions at ply 10 among the games that got there.
    pub distinct_ply10_share: f64,
}

/// Self-play with `config` for `seconds`, evaluated by `backend`; games
/// still running at the end are not counted.
pub fn selfplay_row(config: &Config, backend: Backend, seconds: f64, seed: u64) -> SelfPlayRow {
    let server = match backend {
        Backend::Network(device) => Some(InferenceServer::start(
            Net::new(config.arch(), device),
            config.inference,
        )),
        Backend::HostOnly => None,
    };
    let client = server.as_ref().map(InferenceServer::client);
    let host_only = HostOnly {
        encoder: config.encoder,
    };
    let evaluator: &(dyn Evaluator + Sync) = match &client {
        Some(client) => client,
        None => &host_only,
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let stop = AtomicBool::new(false);
    let network = AtomicU32::new(0);
    let throughput = Throughput::default();
    let start = Instant::now();
    let (games, plies, nodes, ply10) = std::thread::scope(|scope| {
        let workers = scope.spawn(|| {
            run_workers(
                &config.selfplay,
                &config.search,
                evaluator,
                &network,
                &AtomicU64::new(0),
                &throughput,
                &stop,
                seed,
                tx,
            )
        });
        let mut games = 0u64;
        let mut ply10 = Vec::new();
        let deadline = start + Duration::from_secs_f64(seconds);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if let Ok(finished) = rx.recv_timeout(left) {
                games += 1;
                ply10.extend(finished.stats.key_at_ply10);
            }
        }
        let plies = throughput.plies.load(Ordering::Relaxed);
        let nodes = throughput.nodes.load(Ordering::Relaxed);
        // Games still running stop at their next search.
        stop.store(true, Ordering::SeqCst);
        if let Some(server) = server {
            // Stopping the server cuts them short at once.
            server.shutdown();
        }
        let _ = workers.join();
        (games, plies, nodes, ply10)
    });
    let reached = ply10.len();
    let distinct = ply10
        .into_iter()
        .collect::<std::collections::HashSet<u64>>()
        .len();
    let elapsed = seconds.max(start.elapsed().as_secs_f64().min(seconds));
    SelfPlayRow {
        net: config.net.name(),
        backend: match backend {
            Backend::Network(_) => "network",
            Backend::HostOnly => "host-only",
        },
        workers: config.selfplay.workers,
        seconds: elapsed,
        games,
        games_per_hour: games as f64 * 3600.0 / elapsed,
        positions_per_s: plies as f64 / elapsed,
        nodes_per_s: nodes as f64 / elapsed,
        mean_batch: client.as_ref().map_or(0.0, |c| c.stats().mean_batch()),
        largest_batch: client.map_or(0, |c| c.stats().largest.load(Ordering::Relaxed)),
        distinct_ply10_share: distinct as f64 / reached.max(1) as f64,
    }
}

/// Training steps of one config's net per second (`bench train`).
#[derive(Debug, Serialize)]
pub struct TrainRow {
    /// Where the config came from.
    pub config: String,
    pub net: String,
    /// The auxiliary heads trained (a weight above 0), comma-separated.
    pub aux_heads: String,
    pub device: String,
    /// The passes' number format (`Float`, `BFloat16`).
    pub precision: String,
    pub batch: usize,
    /// The best round's rate.
    pub steps_per_s: f64,
    pub samples_per_s: f64,
    /// Building one batch (sampling, encoding, targets), which the training
    /// loop does on its own thread while the step before runs.
    pub build_ms: f64,
}

/// Distinct batches each config's steps cycle through.
const TRAIN_BATCHES: usize = 4;

/// Training steps on `device` for each of `configs` (named), as `mixzero
/// train` takes them: the config's net, precision and targets, on one thread
/// with the libtorch threads of the replica whose thread trains on a CPU
/// (one on a GPU, as the training thread has). The batches come from games
/// of random moves shaped like self-play's (a `full_search_share` of policy
/// targets, a quarter of the games stopped at the length cap). Rounds of the
/// configs alternate and each keeps its best, so that a noisy moment on a
/// shared machine favours none.
pub fn train_rows(
    configs: &[(String, Config)],
    device: Device,
    seconds: f64,
) -> anyhow::Result<Vec<TrainRow>> {
    let mut runs = Vec::with_capacity(configs.len());
    for (i, (_, config)) in configs.iter().enumerate() {
        let games = random_games(64, 80, config.selfplay.full_search_share, 5 + i as u64);
        let mut replay = ReplayBuffer::new(config.replay);
        games.into_iter().for_each(|g| replay.add(Arc::new(g)));
        let targets = config.training.targets();
        let mut rng = SmallRng::seed_from_u64(17);
        let start = Instant::now();
        let batches: Vec<Batch> = (0..TRAIN_BATCHES)
            .map(|_| {
                replay.batch(
                    &mut rng,
                    config.training.batch_size,
                    &config.encoder,
                    &targets,
                )
            })
            .collect();
        let build_ms = start.elapsed().as_secs_f64() * 1e3 / TRAIN_BATCHES as f64;
        let mut state = TrainState::new(Net::new(config.arch(), device));
        state.set_compute_kind(config.training.precision.kind(device))?;
        runs.push((state, batches, build_ms, 0f64));
    }
    let round = seconds / (ROUNDS * configs.len().max(1)) as f64;
    for r in 0..=ROUNDS {
        for ((state, batches, _, best), (_, config)) in runs.iter_mut().zip(configs) {
            let threads = match device.is_cuda() {
                true => 1,
                false => config.inference.threads,
            };
            let rate = std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        models::set_intra_op_threads(threads);
                        let start = Instant::now();
                        let mut steps = 0;
                        while steps < 1 || start.elapsed().as_secs_f64() < round {
                            let _ = state.step(&batches[steps % batches.len()], &config.training);
                            steps += 1;
                        }
                        steps as f64 / start.elapsed().as_secs_f64()
                    })
                    .join()
                    .expect("bench thread")
            });
            // Round 0 warms up (allocator, first-pass kernels) and does not count.
            if r > 0 {
                *best = best.max(rate);
            }
        }
    }
    Ok(runs
        .into_iter()
        .zip(configs)
        .map(|((_, _, build_ms, steps_per_s), (name, config))| {
            let t = &config.training;
            let aux_heads = [
                ("material", t.material_weight),
                ("moves_left", t.moves_left_weight),
                ("reply", t.reply_weight),
            ]
            .iter()
            .filter(|(_, weight)| *weight > 0.0)
            .map(|(head, _)| *head)
            .collect::<Vec<_>>()
            .join(",");
            TrainRow {
                config: name.clone(),
                net: config.net.name(),
                aux_heads,
                device: format!("{device:?}"),
                precision: format!("{:?}", t.precision.kind(device)),
                batch: t.batch_size,
                steps_per_s,
                samples_per_s: steps_per_s * t.batch_size as f64,
                build_ms,
            }
        })
        .collect())
}

/// `count` games of up to `plies` random moves from the start position. A
/// `full_search_share` of the moves carry visits (random, the move played
/// among them); every fourth game ends at the length cap, the others by a
/// resignation.
fn random_games(count: usize, plies: usize, full_search_share: f64, seed: u64) -> Vec<GameRecord> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count)
        .map(|i| {
            let start = Position::start();
            let mut pos = start;
            let mut moves = Vec::with_capacity(plies);
            for _ in 0..plies {
                let legal = pos.legal_moves();
                let Some(&mv) = legal.choose(&mut rng) else {
                    break;
                };
                let visits = match rng.random_bool(full_search_share.clamp(0.0, 1.0)) {
                    true => legal
                        .iter()
                        .map(|&m| rng.random_range(0..4) + (m == mv) as u32)
                        .collect(),
                    false => Vec::new(),
                };
                moves.push(MoveRecord {
                    mv,
                    visits,
                    search_value: 0.0,
                });
                pos = pos.after(mv);
            }
            let outcome = match i % 4 {
                0 => Outcome::draw(Reason::Adjudication),
                _ => Outcome::win(Color::White, Reason::Resignation),
            };
            GameRecord {
                start,
                moves,
                outcome,
                network: 0,
                baseline: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn train_rows_measure_each_config() {
        let tiny = |reply: bool| {
            let text = format!(
                "[net]\nblocks = 1\nchannels = 8\nvalue_channels = 4\nvalue_hidden = 8\n\
                 reply_head = {reply}\n[training]\nbatch_size = 8\nreply_weight = {:?}\n",
                if reply { 0.15 } else { 0.0 }
            );
            Config::parse(&text, "tiny").unwrap()
        };
        let configs = [
            ("tiny".to_string(), tiny(false)),
            ("reply".to_string(), tiny(true)),
        ];
        let rows = train_rows(&configs, Device::Cpu, 0.2).unwrap();
        let heads: Vec<&str> = rows.iter().map(|r| r.aux_heads.as_str()).collect();
        assert_eq!(heads, ["material,moves_left", "material,moves_left,reply"]);
        for row in &rows {
            assert!(row.steps_per_s > 0.0, "{row:?}");
            assert_eq!(row.samples_per_s, row.steps_per_s * 8.0);
            assert_eq!((row.batch, row.net.as_str()), (8, "1x8"));
        }
    }
}
