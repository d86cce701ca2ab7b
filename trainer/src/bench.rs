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

/// Forward passes of `batch` random inputs per second, times `batch`.
fn bare_throughput(net: &Net, batch: usize, seconds: f64) -> f64 {
    let planes = net.arch().encoder.planes() as i64;
    let xs = Tensor::rand([batch as i64, planes, 10, 10], (Kind::Float, net.device()));
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

/// Positions per second through the server with enough callers in flight to
/// fill `batch`-sized passes: three callers each sending half a batch.
fn server_throughput(
    arch: Architecture,
    device: Device,
    batch: usize,
    seconds: f64,
    samples: &[Sample],
) -> (f64, f64) {
    let server = InferenceServer::start(
        Net::new(arch, device),
        ServerConfig {
            max_batch: batch,
            max_wait_us: 5000,
        },
    );
    let (callers, per_call) = if batch == 1 {
        (1, 1)
    } else {
        (3, batch.div_ceil(2))
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
    let rate = served as f64 / start.elapsed().as_secs_f64();
    let mean_batch = server.client().stats().mean_batch();
    server.shutdown();
    (rate, mean_batch)
}

pub fn nn_rows(
    arch: Architecture,
    device: Device,
    batches: &[usize],
    seconds: f64,
    samples: &[Sample],
) -> Vec<NnRow> {
    let net = Net::new(arch, device);
    batches
        .iter()
        .map(|&batch| {
            let bare = bare_throughput(&net, batch, seconds);
            let (server, mean_batch) = server_throughput(arch, device, batch, seconds, samples);
            NnRow {
                net: arch.net.name(),
                device: format!("{device:?}"),
                batch,
                server_pos_per_s: server,
                bare_pos_per_s: bare,
                ratio: server / bare,
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
