//! Batched inference: one thread owns the network on its device; search
//! threads encode their positions and send them over a crossbeam channel; the
//! server gathers a batch (up to a size, or until a short wait ends), runs one
//! forward pass and answers each caller with priors over its legal moves.
//!
//! The server runs one or more replicas, each a thread with its own copy of
//! the network, all taking batches from the same queue. On a CPU each has one
//! libtorch thread: no OpenMP team then waits at a barrier for a thread that
//! another process has preempted, which made a two-thread server ten times
//! slower while anything else ran on the machine. On a GPU one replica's
//! host work (gathering, staging, answering) overlaps another's kernels.
//!
//! The GPU path of a batch: the callers' planes are copied straight into the
//! replica's page-locked staging buffer, which goes to the device with one
//! asynchronous copy; the batch is padded to a power of two (cuDNN's
//! benchmark mode tunes each shape once); the forward pass runs in the
//! replica's precision (bf16 by default); and one copy brings back the
//! requested moves' logits and the win/draw/loss probabilities together, the
//! only synchronisation of the batch.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use engine::{EvalError, EvalRequest, Evaluation, Evaluator, Wdl};
use serde::{Deserialize, Serialize};
use tch::kind::Element;
use tch::{Device, Kind, Tensor};

use crate::encoding::{encode, EncoderConfig};
use crate::net::{Net, MOVES_LEFT_UNIT};
use crate::policy::{move_index, POLICY_SIZE};
use crate::Precision;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Most positions in one forward pass.
    pub max_batch: usize,
    /// How long a partial batch waits for more positions, in microseconds.
    pub max_wait_us: u64,
    /// libtorch intra-op threads of each replica's thread (0 = one per core).
    pub threads: usize,
    /// Server threads, each with its own copy of the network (at least 1).
    pub replicas: usize,
    /// The replicas' number format: `auto` is bf16 on a GPU and on a CPU with
    /// AMX tiles, fp32 on other CPUs.
    pub precision: Precision,
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), engine::InvalidKey> {
        use engine::{check, within};
        within("max_batch", self.max_batch, 1, 65_536)?;
        check(self.max_wait_us <= 10_000_000, "max_wait_us", || {
            format!("{} (expected at most 10 s)", self.max_wait_us)
        })?;
        check(self.threads <= 1024, "threads", || {
            format!("{} (expected 0..=1024)", self.threads)
        })?;
        check((1..=256).contains(&self.replicas), "replicas", || {
            format!("{} (expected 1..=256)", self.replicas)
        })
    }
}

/// Batches and positions served, for batch-fill statistics.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub batches: AtomicU64,
    pub positions: AtomicU64,
    /// The most positions in one forward pass.
    pub largest: AtomicU64,
}

impl ServerStats {
    /// Mean positions per forward pass so far.
    pub fn mean_batch(&self) -> f64 {
        let batches = self.batches.load(Ordering::Relaxed);
        self.positions.load(Ordering::Relaxed) as f64 / batches.max(1) as f64
    }
}

/// Positions encoded for the network: what a caller's thread prepares.
#[derive(Debug, Default)]
pub struct EncodedBatch {
    /// Input planes of every position, back to back.
    pub planes: Vec<f32>,
    /// Policy indices of every position's legal moves, concatenated.
    pub move_indices: Vec<u32>,
    /// Legal moves of each position.
    pub move_counts: Vec<u32>,
    /// Whether any position asked for the plies left.
    pub moves_left: bool,
}

/// Encodes `requests` as the server expects them; an error names a move
/// outside the policy space.
pub fn encode_requests(
    encoder: &EncoderConfig,
    requests: &[EvalRequest<'_>],
) -> Result<EncodedBatch, EvalError> {
    let input_len = encoder.input_len();
    let mut batch = EncodedBatch {
        planes: vec![0f32; input_len * requests.len()],
        move_indices: Vec::new(),
        move_counts: Vec::with_capacity(requests.len()),
        moves_left: requests.iter().any(|r| r.moves_left),
    };
    for (request, out) in requests
        .iter()
        .zip(batch.planes.chunks_exact_mut(input_len))
    {
        encode(encoder, request, out);
        let side = request.position().side_to_move();
        for &mv in request.moves {
            let index = move_index(side, mv)
                .ok_or_else(|| EvalError::Backend(format!("move {mv} has no policy index")))?;
            batch.move_indices.push(index as u32);
        }
        batch.move_counts.push(request.moves.len() as u32);
    }
    Ok(batch)
}

/// Encoded positions from one caller, answered together.
struct CallerBatch {
    batch: EncodedBatch,
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
    sender: Sender<CallerBatch>,
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
        for net in &mut nets {
            net.set_kind(config.precision.kind(net.device()));
        }
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

    /// Queues `task` on the first replica's thread and returns at once; its
    /// answer comes on the returned channel.
    pub fn submit_to_server<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut Net) -> R + Send + 'static,
    ) -> Result<Receiver<R>, EvalError> {
        send_task(&self.replicas[0], task)
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

/// Why [`InferenceClient::load_weights`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("inference server stopped")]
    Stopped,
    #[error(transparent)]
    Weights(#[from] crate::weights::WeightsError),
    #[error("copying the weights into a replica: {0}")]
    Copy(#[from] tch::TchError),
}

impl InferenceClient {
    /// Loads a weights file's `bytes` (`name` in errors) into every
    /// replica's net, each on its own device, between two of its batches.
    pub fn load_weights(
        &self,
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        name: &str,
    ) -> Result<(), LoadError> {
        let name = name.to_owned();
        self.run_on_each(move |inference| -> Result<(), LoadError> {
            let net = crate::weights::from_bytes(bytes.as_ref(), &name, inference.device())?;
            inference.var_store_mut().copy(net.var_store())?;
            Ok(())
        })
        .map_err(|_| LoadError::Stopped)?
        .into_iter()
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
        let batch = encode_requests(&self.encoder, requests)?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let job = CallerBatch { batch, reply };
        self.sender.send(job).map_err(|_| EvalError::Disconnected)?;
        answer.recv().map_err(|_| EvalError::Disconnected)?
    }
}

/// A host buffer that batches are assembled in before they go to the
/// device: page-locked on a GPU, so that the copy runs asynchronously.
struct Staging {
    tensor: Tensor,
    device: Device,
}

impl Staging {
    fn new(kind: Kind, device: Device) -> Staging {
        Staging {
            tensor: Tensor::zeros([0], (kind, Device::Cpu)),
            device,
        }
    }

    /// Room for `len` elements (grown to a power of two, kept zeroed so that
    /// padding rows hold no NaN bit patterns).
    fn reserve(&mut self, len: usize) {
        if self.tensor.numel() >= len {
            return;
        }
        let host = Tensor::zeros(
            [len.next_power_of_two() as i64],
            (self.tensor.kind(), Device::Cpu),
        );
        self.tensor = match self.device.is_cuda() {
            true => host.pin_memory(self.device),
            false => host,
        };
    }

    /// Writes `data` at element `offset`; room must have been reserved.
    fn write<T: Element>(&mut self, offset: usize, data: &[T]) {
        assert!(T::KIND == self.tensor.kind() && offset + data.len() <= self.tensor.numel());
        // SAFETY: the tensor is a contiguous host buffer of `T` (checked
        // kind) with room for `offset + data.len()` elements (checked), owned
        // by this replica's thread, and no copy from it is in flight: the
        // previous batch's answer was copied back, which waits for it.
        unsafe {
            let base = self.tensor.data_ptr() as *mut T;
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(offset), data.len());
        }
    }

    /// The first `len` elements, shaped, on the device.
    fn upload(&self, len: usize, shape: &[i64]) -> Tensor {
        let host = self.tensor.narrow(0, 0, len as i64).view(shape);
        match self.device.is_cuda() {
            true => host.to_device_(self.device, host.kind(), true, false),
            false => host,
        }
    }
}

/// The batch size a forward pass runs at: on a GPU the next power of two
/// (at most `max_batch`), so that only a few shapes occur and cuDNN's
/// benchmark mode tunes each once; on a CPU, where padding costs as much as
/// real positions, the batch itself.
pub fn padded_batch(positions: usize, max_batch: usize, device: Device) -> usize {
    if !device.is_cuda() || positions >= max_batch {
        return positions;
    }
    positions.next_power_of_two().min(max_batch)
}

/// One replica: tasks and the stop come on `own`, batches on `shared`.
fn serve(
    mut net: Net,
    config: ServerConfig,
    own: &Receiver<Control>,
    shared: &Receiver<CallerBatch>,
    stats: &ServerStats,
) {
    crate::set_intra_op_threads(config.threads);
    let device = net.device();
    if device.is_cuda() {
        tch::Cuda::cudnn_set_benchmark(true);
    }
    let input_len = net.arch().encoder.input_len();
    let max_batch = config.max_batch.max(1);
    let wait = Duration::from_micros(config.max_wait_us);
    let mut inputs = Staging::new(Kind::Float, device);
    inputs.reserve(max_batch * input_len);
    let mut indices = Staging::new(Kind::Int64, device);
    let mut flat: Vec<i64> = Vec::new();
    // A job that did not fit into the last batch.
    let mut next: Option<CallerBatch> = None;
    loop {
        let first = match next.take() {
            Some(job) => Ok(job),
            None => crossbeam_channel::select_biased! {
                recv(own) -> control => match control {
                    Ok(Control::Run(task)) => {
                        task(&mut net);
                        continue;
                    }
                    Ok(Control::Stop) | Err(_) => return,
                },
                recv(shared) -> job => job,
            },
        };
        // The server holds a sender, so the shared queue outlives the replicas.
        let Ok(first) = first else { return };
        let mut jobs = vec![first];
        let mut positions = jobs[0].batch.move_counts.len();
        let deadline = Instant::now() + wait;
        while positions < max_batch {
            match shared.recv_deadline(deadline) {
                // A job that would take the batch past max_batch starts the
                // next one instead: on a GPU every size above max_batch is a
                // shape of its own (1,025 to 1,031 positions with 8 leaves a
                // caller), padded to no power of two.
                Ok(job) if positions + job.batch.move_counts.len() > max_batch => {
                    next = Some(job);
                    break;
                }
                Ok(job) => {
                    positions += job.batch.move_counts.len();
                    jobs.push(job);
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }

        let padded = padded_batch(positions, max_batch, device);
        inputs.reserve(padded * input_len);
        let mut offset = 0;
        for job in &jobs {
            inputs.write(offset, &job.batch.planes);
            offset += job.batch.planes.len();
        }
        flat_indices(&jobs, &mut flat);
        indices.reserve(flat.len());
        indices.write(0, &flat);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let moves_left = jobs.iter().any(|job| job.batch.moves_left);
            run_batch(
                &net,
                &inputs,
                &indices,
                flat.len(),
                positions,
                padded,
                moves_left,
            )
        }));
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats
            .positions
            .fetch_add(positions as u64, Ordering::Relaxed);
        stats.largest.fetch_max(positions as u64, Ordering::Relaxed);
        match result {
            Ok(answers) => answer(jobs, &answers, flat.len(), positions),
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

/// One forward pass over the staged batch (`padded` rows, the first
/// `positions` real). Only the logits of the requested moves leave the device
/// (a few hundred bytes a position instead of the whole 8,900-move row),
/// followed by the WDL probabilities `[positions * 3]` and, where a job
/// asked for them and the net has the head, the plies left `[positions]`,
/// in one copy.
fn run_batch(
    net: &Net,
    inputs: &Staging,
    indices: &Staging,
    moves: usize,
    positions: usize,
    padded: usize,
    moves_left: bool,
) -> Vec<f32> {
    tch::no_grad(|| {
        let encoder = net.arch().encoder;
        let xs = inputs.upload(padded * encoder.input_len(), &encoder.input_shape(padded));
        let picks = indices.upload(moves, &[moves as i64]);
        let (policy, value, moves_left) = net.forward_search(&xs, moves_left);
        let picked = policy
            .view([-1])
            .index_select(0, &picks)
            .to_kind(Kind::Float);
        let wdl = value
            .narrow(0, 0, positions as i64)
            .to_kind(Kind::Float)
            .softmax(-1, Kind::Float)
            .view([-1]);
        let mut parts = vec![picked, wdl];
        if let Some(moves_left) = moves_left {
            parts.push(
                moves_left
                    .narrow(0, 0, positions as i64)
                    .to_kind(Kind::Float)
                    * MOVES_LEFT_UNIT,
            );
        }
        let out = Tensor::cat(&parts, 0).to_device(Device::Cpu);
        let len = out.numel();
        let mut answers = vec![0f32; len];
        out.copy_data(&mut answers, len);
        answers
    })
}

/// Each position's requested moves as indices into the flattened `[n, 8900]` logits.
fn flat_indices(jobs: &[CallerBatch], out: &mut Vec<i64>) {
    out.clear();
    let mut position = 0i64;
    for job in jobs {
        let mut indices = job.batch.move_indices.as_slice();
        for &count in &job.batch.move_counts {
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

/// Softmax over each position's legal moves only. `answers` is
/// [`run_batch`]'s: the requested moves' logits back to back (`moves` of
/// them), then each position's WDL and plies left.
fn answer(jobs: Vec<CallerBatch>, answers: &[f32], moves: usize, positions: usize) {
    let (mut logits, rest) = answers.split_at(moves);
    let (wdl, moves_left) = rest.split_at(positions * 3);
    let mut position = 0;
    for job in jobs {
        let mut evaluations = Vec::with_capacity(job.batch.move_counts.len());
        for &count in &job.batch.move_counts {
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
                moves_left: moves_left.get(position).copied(),
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
        serving(Net::new(arch, Device::Cpu), max_batch, replicas)
    }

    /// `net` served in fp32 on the CPU.
    fn serving(net: Net, max_batch: usize, replicas: usize) -> InferenceServer {
        InferenceServer::start(
            net,
            ServerConfig {
                max_batch,
                max_wait_us: 2000,
                threads: 1,
                replicas,
                precision: Precision::Fp32,
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
        let request = EvalRequest::new(&history, &moves);
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
    fn the_moves_left_head_reaches_each_position_of_a_batch() {
        let arch = Architecture {
            net: NetConfig {
                moves_left_head: true,
                ..NetConfig::new(1, 8)
            },
            encoder: EncoderConfig::default(),
        };
        let net = Net::new(arch, Device::Cpu);
        let positions = random_positions(5);
        let requests: Vec<EvalRequest<'_>> = positions
            .iter()
            .map(|(history, moves)| EvalRequest {
                moves_left: true,
                ..EvalRequest::new(history, moves)
            })
            .collect();
        let encoded = encode_requests(&arch.encoder, &requests).unwrap();
        let xs = Tensor::from_slice(&encoded.planes).view(arch.encoder.input_shape(5).as_slice());
        let heads = tch::no_grad(|| net.forward_heads(&xs, false));
        let expected: Vec<f32> =
            Vec::try_from(heads.moves_left.unwrap() * MOVES_LEFT_UNIT).unwrap();
        let server = serving(net, 8, 1);
        let answers = server.client().evaluate_batch(&requests).unwrap();
        for (answer, expected) in answers.iter().zip(&expected) {
            let got = answer.moves_left.expect("the net has a moves-left head");
            assert!(
                (got - expected).abs() < 1e-3 * expected.max(1.0),
                "{got} vs {expected}"
            );
        }
        // Not asked, the net leaves the head out.
        let unasked = EvalRequest {
            moves_left: false,
            ..requests[0]
        };
        assert_eq!(server.client().evaluate(&unasked).unwrap().moves_left, None);
        // Without the head the search is told nothing.
        let answer = server_with_replicas(4, 1)
            .client()
            .evaluate(&requests[0])
            .unwrap();
        assert_eq!(answer.moves_left, None);
    }

    #[test]
    fn replicas_answer_alike_batch_up_to_max_and_each_run_tasks() {
        let server = server_with_replicas(4, 3);
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest::new(&history, &moves);
        let expected = server.client().evaluate(&request).unwrap();
        from_many_threads(&server, &request, 6, 3, |eval| {
            assert_same_policy(eval, &expected)
        });
        // Callers of 3 positions and room for 4: batches stop at max_batch,
        // so no two callers' positions share a pass.
        let client = server.client();
        let stats = client.stats();
        assert_eq!(stats.largest.load(Ordering::Relaxed), 3);
        assert_eq!(stats.positions.load(Ordering::Relaxed), 1 + 6 * 10 * 3);
        assert_eq!(stats.batches.load(Ordering::Relaxed), 1 + 6 * 10);
        // A caller with more than max_batch positions still gets one pass.
        assert_eq!(client.evaluate_batch(&[request; 6]).unwrap().len(), 6);
        assert_eq!(stats.largest.load(Ordering::Relaxed), 6);
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
        server.shutdown();
        assert_eq!(
            client.evaluate(&request).unwrap_err(),
            EvalError::Disconnected
        );
    }

    /// Positions from seeded random games, each with its history.
    fn random_positions(count: usize) -> Vec<(Vec<Position>, Vec<engine::Move>)> {
        use rand::seq::IndexedRandom;
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut out = Vec::new();
        while out.len() < count {
            let mut line = vec![Position::start()];
            for _ in 0..60 {
                let pos = *line.last().unwrap();
                let moves = pos.legal_moves();
                let Some(&mv) = moves.choose(&mut rng) else {
                    break;
                };
                out.push((line.clone(), moves.to_vec()));
                line.push(pos.after(mv));
            }
        }
        out.truncate(count);
        out
    }

    /// The same net served in bf16 and in fp32 on the CPU: the tolerances
    /// here are what the bf16 default on a GPU is held to.
    #[test]
    fn bf16_agrees_with_fp32() {
        tch::manual_seed(3);
        let arch = Architecture {
            net: NetConfig::new(4, 32),
            encoder: EncoderConfig {
                history: 2,
                ..EncoderConfig::default()
            },
        };
        let net = Net::new(arch, Device::Cpu);
        let bytes = crate::weights::to_bytes(&net);
        let start = |precision| {
            let net = crate::weights::from_bytes(&bytes, "test", Device::Cpu).unwrap();
            InferenceServer::start(
                net,
                ServerConfig {
                    max_batch: 64,
                    max_wait_us: 0,
                    threads: 1,
                    replicas: 1,
                    precision,
                },
            )
        };
        let (fp32, bf16) = (start(Precision::Fp32), start(Precision::Bf16));
        let bf16_kind = bf16.client().run_on_server(|net| net.kind()).unwrap();
        assert_eq!(bf16_kind, Kind::BFloat16);
        let positions = random_positions(200);
        let requests: Vec<EvalRequest<'_>> = positions
            .iter()
            .map(|(history, moves)| EvalRequest::new(history, moves))
            .collect();
        let exact = fp32.client().evaluate_batch(&requests).unwrap();
        let approx = bf16.client().evaluate_batch(&requests).unwrap();
        let (mut same_argmax, mut worst_value, mut worst_tv) = (0, 0f32, 0f32);
        let argmax = |p: &[f32]| (0..p.len()).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        for (e, a) in exact.iter().zip(&approx) {
            same_argmax += (argmax(&e.policy) == argmax(&a.policy)) as usize;
            let value = |w: &Wdl| w.win - w.loss;
            worst_value = worst_value.max((value(&e.wdl) - value(&a.wdl)).abs());
            let tv: f32 = e
                .policy
                .iter()
                .zip(&a.policy)
                .map(|(x, y)| (x - y).abs())
                .sum();
            worst_tv = worst_tv.max(tv / 2.0);
        }
        eprintln!(
            "bf16 vs fp32 over {} positions: argmax agrees on {same_argmax}, \
             worst value difference {worst_value:.4}, worst policy total variation {worst_tv:.4}",
            exact.len()
        );
        assert!(
            same_argmax * 100 >= exact.len() * 95,
            "argmax agrees on {same_argmax}"
        );
        assert!(worst_value <= 0.02, "value differs by {worst_value}");
        assert!(worst_tv <= 0.02, "policy total variation {worst_tv}");
    }

    #[test]
    fn gpu_batches_pad_to_powers_of_two() {
        let cuda = Device::Cuda(0);
        assert_eq!(padded_batch(1, 1024, cuda), 1);
        assert_eq!(padded_batch(300, 1024, cuda), 512);
        assert_eq!(padded_batch(600, 1000, cuda), 1000);
        assert_eq!(padded_batch(1030, 1024, cuda), 1030);
        assert_eq!(padded_batch(300, 1024, Device::Cpu), 300);
    }

    #[test]
    fn callers_of_a_stopped_server_get_an_error() {
        let server = server(4);
        let client = server.client();
        server.shutdown();
        let pos = Position::start();
        let moves = pos.legal_moves();
        let history = [pos];
        let request = EvalRequest::new(&history, &moves);
        assert_eq!(
            client.evaluate(&request).unwrap_err(),
            EvalError::Disconnected
        );
    }
}
