//! `mixzero bench nn`: inference-server throughput against a bare
//! forward-pass loop on the same net and batch size, plus encoding speed.

use std::time::{Duration, Instant};

use engine::{EvalRequest, Evaluator, Move, Position};
use models::encoding::{encode, EncoderConfig};
use models::net::{Architecture, Net};
use models::server::{InferenceServer, ServerConfig};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use serde::Serialize;
use tch::{Device, Kind, Tensor};

/// Positions with their history, from seeded random games.
pub struct Sample {
    pub history: Vec<Position>,
    pub moves: Vec<Move>,
}

impl Sample {
    pub fn request(&self) -> EvalRequest<'_> {
        EvalRequest {
            history: &self.history,
            repetitions: 0,
            moves: &self.moves,
        }
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
    pub batch: usize,
    pub server_pos_per_s: f64,
    pub bare_pos_per_s: f64,
    /// Server throughput as a share of the bare forward pass.
    pub ratio: f64,
    pub mean_batch: f64,
}

/// Forward passes of `batch` encoded sample positions per second, times `batch`.
fn bare_throughput(net: &Net, planes: &[f32], batch: usize, seconds: f64) -> f64 {
    let encoder = net.arch().encoder;
    let xs = Tensor::from_slice(planes)
        .view([batch as i64, encoder.planes() as i64, 10, 10])
        .to_device(net.device());
    tch::no_grad(|| {
        let run = || {
            let (p, v) = net.forward_t(&xs, false);
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
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let served: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..callers)
            .map(|c| {
                let client = server.client();
                scope.spawn(move || {
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
                            .len();
                    }
                    served
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("caller thread"))
            .sum()
    });
    served as f64 / start.elapsed().as_secs_f64()
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
) -> Vec<NnRow> {
    let round = seconds / ROUNDS as f64;
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
            let mut planes = vec![0f32; batch * arch.encoder.input_len()];
            for (i, out) in planes
                .chunks_exact_mut(arch.encoder.input_len())
                .enumerate()
            {
                encode(&arch.encoder, &samples[i % samples.len()].request(), out);
            }
            let planes = std::sync::Arc::new(planes);
            let (mut bare, mut served) = (0f64, 0f64);
            for _ in 0..ROUNDS {
                // The bare loop runs on the server's own thread, with its net.
                let planes = std::sync::Arc::clone(&planes);
                let rate = server
                    .client()
                    .run_on_server(move |net| bare_throughput(net, &planes, batch, round))
                    .expect("bench server runs tasks");
                bare = bare.max(rate);
                served = served.max(server_throughput(&server, batch, round, samples));
            }
            let mean_batch = server.client().stats().mean_batch();
            server.shutdown();
            NnRow {
                net: arch.net.name(),
                device: format!("{device:?}"),
                batch,
                server_pos_per_s: served,
                bare_pos_per_s: bare,
                ratio: served / bare,
                mean_batch,
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
