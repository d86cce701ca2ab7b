//! Batched inference: one thread owns the network on its device; search
//! threads encode their positions and send them over a crossbeam channel; the
//! server gathers a batch (up to a size, or until a short wait ends), runs one
//! forward pass and answers each caller with priors over its legal moves.
//!
//! On a CPU the server can run several replicas, each a thread with its own
//! copy of the network and one libtorch thread, all taking batches from the
//! same queue: no OpenMP team then waits at a barrier for a thread that
//! another process has preempted, which made a two-thread server ten times
//! slower while anything else ran on the machine.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use engine::{EvalError, EvalRequest, Evaluation, Evaluator, Wdl};
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::encoding::{encode, EncoderConfig};
use crate::net::Net;
use crate::policy::{move_index, POLICY_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Most positions in one forward pass.
    pub max_batch: usize,
    /// How long a partial batch waits for more positions, in microseconds.
    pub max_wait_us: u64,
    /// libtorch intra-op threads of each replica's thread (0 = one per core).
    #[serde(default)]
    pub threads: usize,
    /// Server threads, each with its own copy of the network (at least 1).
    #[serde(default = "one")]
    pub replicas: usize,
}

fn one() -> usize {
    1
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_batch: 256,
            max_wait_us: 1000,
            threads: 0,
            replicas: 1,
        }
    }
}

/// Batches and positions served, for batch-fill statistics.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub batches: AtomicU64,
    pub positions: AtomicU64,
}

impl ServerStats {
    /// Mean positions per forward pass so far.
    pub fn mean_batch(&self) -> f64 {
        let batches = self.batches.load(Ordering::Relaxed);
        self.positions.load(Ordering::Relaxed) as f64 / batches.max(1) as f64
    }
}

/// Encoded positions from one caller, answered together.
struct Job {
    planes: Vec<f32>,
    /// Policy indices of every position's legal moves, concatenated.
    move_indices: Vec<u32>,
    move_counts: Vec<u32>,
    reply: Sender<Result<Vec<Evaluation>, EvalError>>,
}

/// Work run on the server thread with the network (weight updates, measurements).
type Task = Box<dyn FnOnce(&mut Net) + Send>;

/// What a replica gets on its own queue.
enum Control {
    Run(Task),
    Stop,
}

/// The server threads. Dropping it stops them; callers then get
/// [`EvalError::Disconnected`].
pub struct InferenceServer {
    client: InferenceClient,
    threads: Vec<JoinHandle<()>>,
}

/// A cheap, cloneable handle that search threads evaluate through.
#[derive(Clone)]
pub struct InferenceClient {
    /// Positions for any replica.
    sender: Sender<Job>,
    /// Each replica's own queue, for tasks and the stop.
    replicas: Arc<[Sender<Control>]>,
    encoder: EncoderConfig,
    stats: Arc<ServerStats>,
}

impl InferenceServer {
    pub fn start(net: Net, config: ServerConfig) -> InferenceServer {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let stats = Arc::new(ServerStats::default());
        let encoder = net.arch().encoder;
        let replicas = config.replicas.max(1);
        let mut nets = Vec::with_capacity(replicas);
        for _ in 1..replicas {
            let bytes = crate::weights::to_bytes(&net);
            nets.push(
                crate::weights::from_bytes(&bytes, "replica", net.device())
                    .expect("a network's own bytes load back"),
            );
        }
        nets.insert(0, net);
        let mut own_senders = Vec::with_capacity(replicas);
        let mut threads = Vec::with_capacity(replicas);
        for (i, net) in nets.into_iter().enumerate() {
            let (own, own_receiver) = crossbeam_channel::unbounded();
            own_senders.push(own);
            let shared = receiver.clone();
            let thread_stats = Arc::clone(&stats);
            let thread = std::thread::Builder::new()
                .name(format!("inference-{i}"))
                .spawn(move || serve(net, config, &own_receiver, &shared, &thread_stats))
                .expect("spawning an inference thread");
            threads.push(thread);
        }
        InferenceServer {
            client: InferenceClient {
                sender,
                replicas: own_senders.into(),
                encoder,
                stats,
            },
            threads,
        }
    }

    pub fn client(&self) -> InferenceClient {
        self.client.clone()
    }

    /// Stops the server and waits for its threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        for replica in self.client.replicas.iter() {
            let _ = replica.send(Control::Stop);
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for InferenceServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl InferenceClient {
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Runs `task` on the first replica's thread, between batches, with its network.
    pub fn run_on_server<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut Net) -> R + Send + 'static,
    ) -> Result<R, EvalError> {
        run_on(&self.replicas[0], task)
    }

    /// Runs `task` on every replica's thread with its network, all at once,
    /// and returns the answers in replica order.
    pub fn run_on_each<R: Send + 'static>(
        &self,
        task: impl Fn(&mut Net) -> R + Send + Sync + 'static,
    ) -> Result<Vec<R>, EvalError> {
        let task = Arc::new(task);
        let answers = self
            .replicas
            .iter()
            .map(|replica| {
                let task = Arc::clone(&task);
                send_task(replica, move |net| task(net))
            })
            .collect::<Result<Vec<_>, _>>()?;
        answers
            .into_iter()
            .map(|answer| answer.recv().map_err(|_| EvalError::Disconnected))
            .collect()
    }
}

fn run_on<R: Send + 'static>(
    replica: &Sender<Control>,
    task: impl FnOnce(&mut Net) -> R + Send + 'static,
) -> Result<R, EvalError> {
    send_task(replica, task)?
        .recv()
        .map_err(|_| EvalError::Disconnected)
}

/// Queues `task` on `replica`; its answer comes on the returned channel.
fn send_task<R: Send + 'static>(
    replica: &Sender<Control>,
    task: impl FnOnce(&mut Net) -> R + Send + 'static,
) -> Result<Receiver<R>, EvalError> {
    let (reply, answer) = crossbeam_channel::bounded(1);
    let task: Task = Box::new(move |net| {
        let _ = reply.send(task(net));
    });
    replica
        .send(Control::Run(task))
        .map_err(|_| EvalError::Disconnected)?;
    Ok(answer)
}

impl Evaluator for InferenceClient {
    fn evaluate_batch(&self, requests: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
        let input_len = self.encoder.input_len();
        let mut planes = vec![0f32; input_len * requests.len()];
        let mut move_indices = Vec::new();
        let mut move_counts = Vec::with_capacity(requests.len());
        for (request, out) in requests.iter().zip(planes.chunks_exact_mut(input_len)) {
            encode(&self.encoder, request, out);
            let side = request.position().side_to_move();
            for &mv in request.moves {
                let index = move_index(side, mv)
                    .ok_or_else(|| EvalError::Backend(format!("move {mv} has no policy index")))?;
                move_indices.push(index as u32);
            }
            move_counts.push(request.moves.len() as u32);
        }
        let (reply, answer) = crossbeam_channel::bounded(1);
        let job = Job {
            planes,
            move_indices,
            move_counts,
            reply,
        };
        self.sender.send(job).map_err(|_| EvalError::Disconnected)?;
        answer.recv().map_err(|_| EvalError::Disconnected)?
    }
}

/// One replica: tasks and the stop come on `own`, batches on `shared`.
fn serve(
    mut net: Net,
    config: ServerConfig,
    own: &Receiver<Control>,
    shared: &Receiver<Job>,
    stats: &ServerStats,
) {
    crate::set_intra_op_threads(config.threads);
    let planes = net.arch().encoder.planes() as i64;
    let input_len = net.arch().encoder.input_len();
    let max_batch = config.max_batch.max(1);
    let wait = Duration::from_micros(config.max_wait_us);
    let mut buffer: Vec<f32> = Vec::with_capacity(max_batch * input_len);
    let mut indices: Vec<i64> = Vec::new();
    loop {
        let first = crossbeam_channel::select_biased! {
            recv(own) -> control => match control {
                Ok(Control::Run(task)) => {
                    task(&mut net);
                    continue;
                }
                Ok(Control::Stop) | Err(_) => return,
            },
            recv(shared) -> job => job,
        };
        // The server holds a sender, so the shared queue outlives the replicas.
        let Ok(first) = first else { return };
        let mut jobs = vec![first];
        let mut positions = jobs[0].move_counts.len();
        let deadline = Instant::now() + wait;
        while positions < max_batch {
            match shared.recv_deadline(deadline) {
                Ok(job) => {
                    positions += job.move_counts.len();
                    jobs.push(job);
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }

        buffer.clear();
        for job in &jobs {
            buffer.extend_from_slice(&job.planes);
        }
        flat_indices(&jobs, &mut indices);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_batch(&net, &buffer, &indices, positions as i64, planes)
        }));
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats
            .positions
            .fetch_add(positions as u64, Ordering::Relaxed);
        match result {
            Ok((logits, wdl)) => answer(jobs, &logits, &wdl),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "forward pass failed".to_string());
                for job in jobs {
                    let _ = job.reply.send(Err(EvalError::Backend(why.clone())));
                }
            }
        }
    }
}

/// One forward pass. Only the logits of the requested moves leave the device
/// (a few hundred bytes a position instead of the whole 8,900-move row), with
/// the WDL probabilities `[n * 3]`.
fn run_batch(
    net: &Net,
    buffer: &[f32],
    flat_indices: &[i64],
    n: i64,
    planes: i64,
) -> (Vec<f32>, Vec<f32>) {
    tch::no_grad(|| {
        let device = net.device();
        let xs = Tensor::from_slice(buffer)
            .view([n, planes, 10, 10])
            .to_device(device);
        let (policy, value) = net.forward_t(&xs, false);
        let picked = policy
            .view([-1])
            .index_select(0, &Tensor::from_slice(flat_indices).to_device(device))
            .to_kind(Kind::Float)
            .to_device(tch::Device::Cpu);
        let wdl = value
            .to_kind(Kind::Float)
            .softmax(-1, Kind::Float)
            .to_device(tch::Device::Cpu);
        let mut logits = vec![0f32; flat_indices.len()];
        picked.copy_data(&mut logits, flat_indices.len());
        let mut probs = vec![0f32; n as usize * 3];
        wdl.copy_data(&mut probs, n as usize * 3);
        (logits, probs)
    })
}

/// Each position's requested moves as indices into the flattened `[n, 8900]` logits.
fn flat_indices(jobs: &[Job], out: &mut Vec<i64>) {
    out.clear();
    let mut position = 0i64;
    for job in jobs {
        let mut indices = job.move_indices.as_slice();
        for &count in &job.move_counts {
            let (mine, rest) = indices.split_at(count as usize);
            indices = rest;
            out.extend(
                mine.iter()
                    .map(|&i| position * POLICY_SIZE as i64 + i as i64),
            );
            position += 1;
        }
    }
}

/// Softmax over each position's legal moves only; `logits` holds the
/// requested moves' logits back to back.
fn answer(jobs: Vec<Job>, logits: &[f32], wdl: &[f32]) {
    let mut position = 0;
    let mut logits = logits;
    for job in jobs {
        let mut evaluations = Vec::with_capacity(job.move_counts.len());
        for &count in &job.move_counts {
            let (mine, rest) = logits.split_at(count as usize);
            logits = rest;
            let max = mine.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut policy: Vec<f32> = mine.iter().map(|&l| (l - max).exp()).collect();
            let sum: f32 = policy.iter().sum();
            for p in policy.iter_mut() {
                *p /= sum;
            }
            let w = &wdl[position * 3..position * 3 + 3];
            evaluations.push(Evaluation {
                policy,
                wdl: Wdl {
                    win: w[0],
                    draw: w[1],
                    loss: w[2],
                },
            });
            position += 1;
        }
        let _ = job.reply.send(Ok(evaluations));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::{Architecture, NetConfig};
    use engine::Position;
    use tch::Device;

    fn server(max_batch: usize) -> InferenceServer {
        server_with_replicas(max_batch, 1)
    }

    fn server_with_replicas(max_batch: usize, replicas: usize) -> InferenceServer {
        let arch = Architecture {
            net: NetConfig::new(1, 8),
            encoder: EncoderConfig::default(),
        };
        InferenceServer::start(
            Net::new(arch, Device::Cpu),
            ServerConfig {
                max_batch,
                max_wait_us: 2000,
                threads: 1,
                replicas,
            },
        )
    }

    fn assert_same_policy(eval: &Evaluation, expected: &Evaluation) {
        for (a, b) in eval.policy.iter().zip(&expected.policy) {
            assert!((a - b).abs() < 1e-4);
        }
    }

    /// `threads` callers each send ten batches of `batch` copies of
    /// `request` and `check` every answer.
    fn from_many_threads(
        server: &InferenceServer,
        request: &EvalRequest<'_>,
        threads: usize,
        batch: usize,
        check: impl Fn(&Evaluation) + Sync,
    ) {
        let requests = vec![*request; batch];
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let client = server.client();
                let (requests, check) = (&requests, &check);
                scope.spawn(move || {
                    for _ in 0..10 {
                        client
                            .evaluate_batch(requests)
                            .unwrap()
                            .iter()
                            .for_each(check);
                    }
                });
            }
        });
    }

    #[test]
    fn many_threads_get_their_own_answers() {
        let server = server(16);
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest {
            history: &history,
            repetitions: 0,
            moves: &moves,
        };
        let expected = server.client().evaluate(&request).unwrap();
        assert_eq!(expected.policy.len(), 38);
        assert!((expected.policy.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        let w = expected.wdl;
        assert!((w.win + w.draw + w.loss - 1.0).abs() < 1e-4);

        from_many_threads(&server, &request, 4, 2, |eval| {
            assert_same_policy(eval, &expected)
        });
        assert!(server.client().stats().mean_batch() >= 1.0);
        let blocks = server.client().run_on_server(|net| net.arch().net.blocks);
        assert_eq!(blocks, Ok(1));
    }

    #[test]
    fn replicas_answer_alike_and_each_runs_tasks() {
        let server = server_with_replicas(4, 3);
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest {
            history: &history,
            repetitions: 0,
            moves: &moves,
        };
        let expected = server.client().evaluate(&request).unwrap();
        from_many_threads(&server, &request, 6, 3, |eval| {
            assert_same_policy(eval, &expected)
        });
        let names = server
            .client()
            .run_on_each(|_| std::thread::current().name().unwrap().to_string())
            .unwrap();
        assert_eq!(names, ["inference-0", "inference-1", "inference-2"]);
        // A weight change reaches every replica.
        server
            .client()
            .run_on_each(|net| {
                tch::no_grad(|| {
                    for mut v in net.var_store().trainable_variables() {
                        let _ = v.zero_();
                    }
                })
            })
            .unwrap();
        // All-zero weights give uniform priors, whichever replica answers.
        from_many_threads(&server, &request, 6, 2, |eval| {
            let uniform = 1.0 / eval.policy.len() as f32;
            assert!(eval.policy.iter().all(|p| (p - uniform).abs() < 1e-6));
        });
        let client = server.client();
        server.shutdown();
        assert_eq!(
            client.evaluate(&request).unwrap_err(),
            EvalError::Disconnected
        );
    }

    #[test]
    fn callers_of_a_stopped_server_get_an_error() {
        let server = server(4);
        let client = server.client();
        server.shutdown();
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest {
            history: &history,
            repetitions: 0,
            moves: &moves,
        };
        assert_eq!(
            client.evaluate(&request).unwrap_err(),
            EvalError::Disconnected
        );
    }
}
