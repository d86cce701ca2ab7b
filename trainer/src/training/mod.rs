//! `mixzero train`: the AlphaZero loop in one process. Self-play workers feed
//! the replay buffer through the inference server; the training steps run on
//! the first inference replica's thread on a CPU (so one single-threaded
//! OpenMP team per replica owns the cores) and on a thread of their own on a
//! GPU (so self-play inference goes on during a step). The next batch is
//! built while a step runs. Each checkpoint becomes the self-play net.
//!
//! A run directory holds the resolved config, the code version, checkpoints
//! (`checkpoints/latest` names the newest), games and logs. Running the same
//! command again resumes from it.
//!
//! The run's games live in a store (see [`crate::distributed`]): the run
//! directory itself, or with `--store` one shared with self-play workers
//! on other machines, where the trainer also publishes its self-play nets
//! and trains on the workers' chunks too (or only on them, without
//! self-play of its own). Either way its own games are chunks under
//! `games/trainer/`, and a resumed run rebuilds its window from the store.

pub mod progress;
pub mod replay;
pub mod state;

use std::cell::Cell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use engine::pgn::write_pgn;
use engine::{Color, Game};
use models::net::{Architecture, Net};
use models::server::{InferenceClient, InferenceServer};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use store::Store;

use crate::config::Config;
use crate::distributed as shared;
use crate::distributed::ingest::{self, Chunk, Feed};
use crate::distributed::upload::{Uploaded, Uploader};
use crate::distributed::DistributedError;
use crate::eval::ladder::{Evaluations, Job, Report};
use crate::eval::rating::MATCHES_FILE;
use crate::metrics::MetricsLog;
use crate::run_dir::RunDir;
use crate::selfplay::data::GameRecord;
use crate::selfplay::{self, Finished, Throughput};
use crate::training::progress::{Progress, Status};
use crate::training::replay::{ReplayBuffer, ReuseLimiter};
use crate::training::state::{StepStats, TrainState, ValueHeadWatch, DIVERGED_FIX};

/// One `mixzero train` session of a run.
#[derive(Clone, Debug)]
pub struct Session {
    /// Stop cleanly (final checkpoint written) after this long.
    pub minutes: Option<f64>,
    /// Seed of self-play and sampling.
    pub seed: u64,
    /// Progress bars on the terminal (else log lines only).
    pub progress_bars: bool,
    /// PGN games to train on beside self-play, imported once per run.
    pub bootstrap: Option<PathBuf>,
    /// A store shared with self-play workers (`mixzero selfplay --store`):
    /// the run's config and every self-play net are published there, and
    /// the workers' games are trained on beside the trainer's own.
    pub store: Option<Store>,
    /// Whether the trainer plays games itself (off: only the store's games).
    pub selfplay: bool,
    /// The weights a new run starts from instead of a random net (a
    /// weights file, a run or checkpoints directory: see
    /// [`crate::run_dir::resolve_weights`]). Only the weights: the step
    /// count, the optimizer state and the learning-rate schedule start
    /// afresh.
    pub init: Option<PathBuf>,
}

/// Skipped steps in a row that stop the run. One non-finite batch can be
/// a fluke and is skipped; this many in a row mean the weights have grown
/// until every pass overflows, and more steps would not bring them back.
const MAX_SKIPPED_STEPS: u64 = 10;

/// The version of the code, recorded in the run directory.
pub fn code_version() -> String {
    format!(
        "{} ({})",
        env!("CARGO_PKG_VERSION"),
        option_env!("MIXZERO_GIT_REVISION").unwrap_or("unknown revision")
    )
}

/// Running totals for logs and TensorBoard.
#[derive(Default)]
struct SelfPlayTotals {
    games: u64,
    plies: u64,
    /// Policy-target samples.
    samples: u64,
    white_wins: u64,
    black_wins: u64,
    draws: u64,
    resigned: u64,
    adjudicated: u64,
    /// Games from sparse starts, and those of them that reached the cap.
    sparse: u64,
    sparse_adjudicated: u64,
    would_resign: u64,
    false_resign: u64,
    /// The threshold the latest game was played with: the totals are the
    /// session's, and a mean would lag the calibration.
    resign_threshold: f32,
    king_forced: u64,
    kind_banned: u64,
    /// Distinct positions at ply 10 among the games that got there.
    ply10_keys: std::collections::HashSet<u64>,
    reached_ply10: u64,
    /// The network's points (1, 1/2, 0) in its latest games against a
    /// baseline player: a strength curve for free while it trains.
    baseline_points: VecDeque<f64>,
}

/// Games against baseline players that `selfplay/baseline_score` averages.
const BASELINE_WINDOW: usize = 200;

impl SelfPlayTotals {
    fn add(&mut self, finished: &Finished) {
        let stats = &finished.stats;
        let outcome = finished.record.outcome;
        self.games += 1;
        self.plies += stats.plies as u64;
        self.samples += finished
            .record
            .moves
            .iter()
            .filter(|m| !m.visits.is_empty())
            .count() as u64;
        match outcome.winner {
            Some(Color::White) => self.white_wins += 1,
            Some(Color::Black) => self.black_wins += 1,
            None => self.draws += 1,
        }
        self.resigned += stats.resigned as u64;
        self.adjudicated += stats.capped as u64;
        self.sparse += stats.sparse as u64;
        self.sparse_adjudicated += (stats.sparse && stats.capped) as u64;
        self.would_resign += stats.would_resign.is_some() as u64;
        self.false_resign += stats.false_resign as u64;
        self.resign_threshold = stats.resign_threshold;
        self.king_forced += stats.king_forced;
        self.kind_banned += stats.kind_banned;
        if let Some(key) = stats.key_at_ply10 {
            self.ply10_keys.insert(key);
            self.reached_ply10 += 1;
        }
        if let Some(baseline) = &finished.record.baseline {
            if self.baseline_points.len() == BASELINE_WINDOW {
                self.baseline_points.pop_front();
            }
            self.baseline_points
                .push_back(outcome.score(!baseline.side));
        }
    }

    /// The network's mean score in the window of games against baselines.
    fn baseline_score(&self) -> Option<f64> {
        let n = self.baseline_points.len();
        (n > 0).then(|| self.baseline_points.iter().sum::<f64>() / n as f64)
    }
}

/// The keys where `net` differs from the net `config` asks for, each as
/// "key = value `place`, value in the config"; `None` if they agree.
fn arch_mismatch(net: Architecture, config: &Config, place: &str) -> Option<String> {
    let differences: Vec<String> = net
        .differences(&config.arch())
        .into_iter()
        .map(|(key, ours, theirs)| format!("{key} = {ours} {place}, {theirs} in the config"))
        .collect();
    (!differences.is_empty()).then(|| differences.join("; "))
}

/// The net of `--init PATH` for the new run in `dirs`, which must be the
/// one `config` asks for.
fn initial_net(path: &Path, dirs: &RunDir, config: &Config, device: tch::Device) -> Result<Net> {
    if let Some(n) = dirs.checkpoints().latest()? {
        bail!(
            "--init {}: {} already has checkpoints (latest {n:06}); --init starts a new run only",
            path.display(),
            dirs.root().display()
        );
    }
    let file = crate::run_dir::resolve_weights(path).context("--init")?;
    let net = models::weights::load(&file, device).context("--init")?;
    if let Some(mismatch) = arch_mismatch(net.arch(), config, "there") {
        bail!(
            "--init {}: another net than the config asks for: {mismatch}",
            file.display()
        );
    }
    tracing::info!(weights = %file.display(), "starting from these weights");
    Ok(net)
}

/// Trains the run in `dirs` with `config` (its own, when resuming: see
/// [`RunDir::resolve_config`]) until `session` ends or Ctrl-C.
pub fn run(config: Config, dirs: &RunDir, session: Session) -> Result<()> {
    let checkpoints = dirs.checkpoints();
    let device = models::device();
    // Checked before the run directory is made, so that a refused --init
    // leaves nothing behind.
    let init = session
        .init
        .as_deref()
        .map(|path| initial_net(path, dirs, &config, device))
        .transpose()?;
    dirs.prepare(&config, &code_version())?;
    if let Some(store) = &session.store {
        shared::share_config(store, &config)?;
    }
    let seed = session.seed;
    tracing::info!(run_dir = %dirs.root().display(), ?device, net = %config.net.name(), version = %code_version(), "train");

    let mut state = match checkpoints.latest()? {
        Some(n) => {
            let state = TrainState::load_checkpoint(&checkpoints, n, device)
                .with_context(|| format!("resuming from checkpoint {n:06}"))?;
            tracing::info!(checkpoint = n, step = state.progress.step, "resumed");
            state
        }
        None => {
            tch::manual_seed(seed as i64);
            let net = init.unwrap_or_else(|| Net::new(config.arch(), device));
            let state = TrainState::new(net);
            state.save_checkpoint(&checkpoints)?;
            state
        }
    };
    state.set_compute_kind(config.training.precision.kind(device))?;
    // A run whose config predates a `[net]` key takes the key's default,
    // which may add a head its checkpoints lack.
    if let Some(mismatch) = arch_mismatch(state.arch(), &config, "in the checkpoints") {
        bail!(
            "the run's checkpoints hold another net than its config asks for: {mismatch}; to resume, set the checkpoints' values in {}",
            dirs.config().display()
        );
    }

    // The games live in a store: the shared one, else the run directory
    // itself, through the same code. A run directory from before stores
    // may hold chunks of the old layout, read once here.
    let run_store = Store::open_dir(dirs.root()).context("the run directory as a store")?;
    let games_store = session.store.clone().unwrap_or_else(|| run_store.clone());
    let mut feed = Feed::new(games_store.clone())
        .with_legacy(run_store)
        .skipping(shared::TRAINER);
    let rebuilt = feed
        .rebuild(&config.replay)
        .context("rebuilding the replay window from the games")?;
    ingest::log_skipped(&rebuilt.skipped);
    tracing::info!(
        chunks = rebuilt.chunks,
        games = rebuilt.games,
        read = rebuilt.read,
        store = games_store.url(),
        "replay window rebuilt from the stored games"
    );
    let mut replay = rebuilt.replay;
    let poll = Duration::from_secs_f64(config.distributed.poll_seconds);
    let mut own = OwnGames {
        uploader: Uploader::resume(&games_store, shared::TRAINER)?,
        chunk_games: config.distributed.chunk_games,
        pgn_dir: dirs.pgn(),
        retry: poll,
        retry_at: None,
    };
    // With workers, their new chunks as they come.
    let mut store_input = match session.store {
        Some(_) => Some(StoreInput {
            feed: Some(ingest::Background::start(feed, poll).context("starting the store feed")?),
            chunks: rebuilt.chunks,
            games: rebuilt.games,
            ..StoreInput::default()
        }),
        None => None,
    };
    // Samples from earlier sessions were trained on then: the reuse limit
    // counts this session's new samples against this session's steps.
    let samples_at_start = replay.total_samples_ever();
    if let Some(pgn) = &session.bootstrap {
        // Counted as new samples: training on them starts at once.
        import_bootstrap(pgn, dirs, &mut own, &mut replay)?;
    }
    tracing::info!(
        games = replay.games_in_window(),
        samples = replay.samples_in_window(),
        "replay buffer loaded"
    );

    // With gating, self-play goes on with the best net so far.
    let best = match config.evaluation.gating {
        true => checkpoints.best()?.unwrap_or(state.progress.checkpoint),
        false => state.progress.checkpoint,
    };
    let inference = if best == state.progress.checkpoint {
        models::weights::from_bytes(
            &models::weights::to_bytes(&state.net),
            "training net",
            device,
        )?
    } else {
        models::weights::load(&checkpoints.weights(best), device)?
    };
    let sharing = match &session.store {
        Some(store) => Some(Sharing {
            store,
            published: Cell::new(publish_at_start(
                store,
                &checkpoints,
                best,
                state.progress.step,
            )?),
        }),
        None => None,
    };
    let server = InferenceServer::start(inference, config.inference);
    let client = server.client();
    let trainer = Trainer::new(&client, device)?;
    tracing::info!(
        inference = ?config.inference.precision.kind(device),
        training = ?config.training.precision.kind(device),
        replicas = config.inference.replicas,
        on = trainer.placement(),
        "precision and threads"
    );
    let network = AtomicU32::new(best);
    // The trainer's step, for self-play's annealing.
    let train_step = AtomicU64::new(state.progress.step);
    let evaluations = config.evaluation.active().then(|| {
        Evaluations::start(
            config.evaluation.clone(),
            config.search,
            checkpoints.clone(),
            dirs.logs().join(MATCHES_FILE),
            seed,
        )
    });
    let stop = progress::stop_on_ctrl_c("finishing the current step and writing a checkpoint");

    let state = Arc::new(Mutex::new(state));
    let mut metrics = MetricsLog::open(&dirs.logs())?;
    let deadline = session
        .minutes
        .map(|m| Instant::now() + Duration::from_secs_f64(m * 60.0));
    let progress = Progress::new(session.minutes, session.progress_bars);
    let (games_tx, games_rx) = crossbeam_channel::unbounded::<Finished>();
    let workers_stop = AtomicBool::new(false);
    let throughput = Throughput::default();

    // Without self-play the sender stays here, so that the loop waits on
    // an empty channel rather than finding it closed.
    let mut idle_sender = None;
    if !session.selfplay {
        tracing::info!("no self-play of its own: training on the store's games alone");
    }
    let result = std::thread::scope(|scope| -> Result<()> {
        let workers = match session.selfplay {
            true => Some(scope.spawn(|| {
                selfplay::run_workers(
                    &config.selfplay,
                    &config.search,
                    &client,
                    &network,
                    &train_step,
                    &throughput,
                    &workers_stop,
                    seed,
                    games_tx,
                )
            })),
            false => {
                idle_sender = Some(games_tx);
                None
            }
        };
        let outcome = training_loop(TrainLoop {
            config: &config,
            dirs,
            client: &client,
            trainer: &trainer,
            state: &state,
            replay: &mut replay,
            metrics: &mut metrics,
            progress: &progress,
            games: &games_rx,
            network: &network,
            train_step: &train_step,
            throughput: &throughput,
            evaluations: evaluations.as_ref(),
            stop: &stop,
            deadline,
            seed,
            samples_at_start,
            own: &mut own,
            sharing: sharing.as_ref(),
            store_input: store_input.as_mut(),
        });
        workers_stop.store(true, Ordering::SeqCst);
        server.shutdown();
        let workers_result = match workers {
            Some(workers) => workers.join().expect("self-play thread"),
            None => Ok(()),
        };
        // Games that finished while stopping are kept too.
        own.push(games_rx.try_iter().map(|f| f.record));
        own.store(&mut Vec::new())
            .context("storing the last self-play games")?;
        outcome?;
        match workers_result {
            Ok(()) | Err(engine::EvalError::Disconnected) => Ok(()),
            Err(e) => Err(e).context("self-play"),
        }
    });
    drop(idle_sender);
    metrics.flush();
    progress.finish("training stopped");
    result
}

/// Publishes the self-play net `checkpoint` at the start of a session
/// unless the store's pointer already names a net of step `step` or later:
/// a fresh run's first net, so that waiting workers start, or the last
/// checkpoint of a trainer killed before it published it. With gating,
/// `checkpoint` is the best net, published under the current step so that
/// published steps only grow. Returns the step the pointer names after.
fn publish_at_start(
    store: &Store,
    checkpoints: &crate::run_dir::Checkpoints,
    checkpoint: u32,
    step: u64,
) -> Result<u64> {
    match store.latest_pointer()? {
        Some(pointer) if pointer.step > step => {
            tracing::warn!(
                published = pointer.step,
                step,
                "the store holds a net of a later step than this run directory's; workers use it until the next checkpoint"
            );
            Ok(pointer.step)
        }
        Some(pointer) if pointer.step == step => Ok(step),
        _ => Ok(shared::publish_checkpoint(store, checkpoints, checkpoint, step)?.step),
    }
}

/// The store shared with workers, and the training step of the newest net
/// published to it, which the workers' games are measured against.
struct Sharing<'a> {
    store: &'a Store,
    published: Cell<u64>,
}

impl Sharing<'_> {
    /// Publishes checkpoint `checkpoint` (of training step `step`) to the
    /// workers. A failure is logged, not fatal: the next checkpoint
    /// publishes a newer net, and training goes on meanwhile.
    fn publish(&self, dirs: &RunDir, checkpoint: u32, step: u64) {
        match shared::publish_checkpoint(self.store, &dirs.checkpoints(), checkpoint, step) {
            Ok(pointer) => self.published.set(pointer.step),
            Err(e) => tracing::warn!(checkpoint, "cannot publish the net: {e}"),
        }
    }
}

/// The games read from a store this session, for the logs and metrics.
#[derive(Default)]
struct StoreInput {
    feed: Option<ingest::Background>,
    /// Chunks and games taken from the store, the window's rebuild included.
    chunks: u64,
    games: u64,
    /// Seconds from upload to ingestion of the chunks since the last report.
    lag_sum: f64,
    /// Training steps from a chunk's newest net to the newest published
    /// one, over the chunks since the last report.
    net_age_sum: f64,
    /// Chunks since the last report.
    fresh: u64,
}

impl StoreInput {
    /// Adds a worker's chunk, ingested at `now`, to `replay`, measuring how
    /// long it waited and how many steps behind `published` its net was.
    fn add(&mut self, chunk: Chunk, replay: &mut ReplayBuffer, now: SystemTime, published: u64) {
        self.chunks += 1;
        self.games += chunk.games.len() as u64;
        self.fresh += 1;
        let lag = now.duration_since(chunk.written).unwrap_or_default();
        self.lag_sum += lag.as_secs_f64();
        // A worker records the published step it played with; a chunk of
        // games of several nets is as old as its newest one.
        let newest = chunk.games.iter().map(|g| u64::from(g.network)).max();
        self.net_age_sum += newest.map_or(0, |n| published.saturating_sub(n)) as f64;
        for game in chunk.games {
            replay.add(Arc::new(game));
        }
    }

    /// The `store/*` scalars, lag and net age averaged over the chunks
    /// since the last call (none if there were none). S3 dates objects to
    /// the second, so the lag is good to about a second.
    fn scalars(&mut self) -> Vec<(&'static str, f64)> {
        let mut scalars = vec![
            ("store/chunks_in", self.chunks as f64),
            ("store/games_in", self.games as f64),
        ];
        if self.fresh > 0 {
            let n = self.fresh as f64;
            scalars.push(("store/lag_seconds", self.lag_sum / n));
            scalars.push(("store/net_age_steps", self.net_age_sum / n));
        }
        (self.lag_sum, self.net_age_sum, self.fresh) = (0.0, 0.0, 0);
        scalars
    }
}

/// The trainer's own games on their way to the store, as a writer of its
/// own ([`shared::TRAINER`]): each batch of finished games becomes a chunk
/// (of at most `chunk_games` games) with a PGN of it in the run directory,
/// and only then enters the replay window, so a game counts once it is
/// stored.
struct OwnGames {
    uploader: Uploader,
    chunk_games: usize,
    pgn_dir: PathBuf,
    /// How long a failed put waits for its retry, so that a store that is
    /// down is not asked at every turn of the loop.
    retry: Duration,
    retry_at: Option<Instant>,
}

impl OwnGames {
    fn push(&mut self, games: impl IntoIterator<Item = GameRecord>) {
        self.uploader.push(games);
    }

    /// Stores every pending game, adding those stored to `stored`. The
    /// first failure ends it with the error; what was not stored stays
    /// pending.
    fn store(&mut self, stored: &mut Vec<GameRecord>) -> Result<(), DistributedError> {
        while self.uploader.pending() > 0 {
            let uploaded = self.uploader.upload(self.chunk_games)?;
            self.write_pgn(&uploaded);
            stored.extend(uploaded.games);
        }
        Ok(())
    }

    /// [`store`](Self::store), where a failure of the store is logged and
    /// retried after a while (the games stay pending): returns the games
    /// stored. Any other failure (a game that cannot be encoded) is an error.
    fn store_or_retry(&mut self) -> Result<Vec<GameRecord>, DistributedError> {
        let mut stored = Vec::new();
        let waiting = self.retry_at.is_some_and(|at| Instant::now() < at);
        if self.uploader.pending() == 0 || waiting {
            return Ok(stored);
        }
        match self.store(&mut stored) {
            Ok(()) => self.retry_at = None,
            Err(e) if !e.is_transient() => return Err(e),
            Err(e) => {
                tracing::warn!(
                    pending = self.uploader.pending(),
                    "cannot store self-play games, retrying in {:.0} s: {e}",
                    self.retry.as_secs_f64()
                );
                self.retry_at = Some(Instant::now() + self.retry);
            }
        }
        Ok(stored)
    }

    /// The chunk's games as PGN beside the run's other files, for people
    /// and `mixzero serve`; the chunk is the record, so a failure here is
    /// only logged.
    fn write_pgn(&self, uploaded: &Uploaded) {
        let path = self.pgn_dir.join(format!("{:08}.pgn", uploaded.seq));
        let mut pgn = String::new();
        for record in &uploaded.games {
            let mut game = Game::new(record.start);
            for m in &record.moves {
                game.play_unchecked(m.mv);
            }
            if game.outcome().is_none() {
                game.adjudicate(record.outcome);
            }
            let player = match record.network {
                crate::selfplay::bootstrap::IMPORTED => "imported".to_string(),
                n => format!("net {n}"),
            };
            let [mut white, mut black] = [player.clone(), player];
            if let Some(baseline) = &record.baseline {
                match baseline.side {
                    Color::White => white = baseline.spec.clone(),
                    Color::Black => black = baseline.spec.clone(),
                }
            }
            let tags = [
                ("Event", "mixzero self-play".to_string()),
                ("White", white),
                ("Black", black),
            ];
            pgn.push_str(&write_pgn(&game, &tags));
            pgn.push('\n');
        }
        if let Err(e) = models::weights::write_atomically(&path, pgn.as_bytes()) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
}

/// A training task: it runs with the device's libtorch state and returns nothing.
type Task = Box<dyn FnOnce() + Send>;

/// Where training steps and checkpoint writes run. On a CPU, the first
/// inference replica's thread: its single libtorch thread stays the only
/// one on its core, and a step pauses that replica. On a GPU, a thread of
/// its own, so that inference on every replica goes on during a step.
enum Trainer<'a> {
    Replica(&'a InferenceClient),
    Own {
        tasks: Option<Sender<Task>>,
        thread: Option<JoinHandle<()>>,
    },
}

impl<'a> Trainer<'a> {
    fn new(client: &'a InferenceClient, device: tch::Device) -> Result<Trainer<'a>> {
        if !device.is_cuda() {
            return Ok(Trainer::Replica(client));
        }
        let (tasks, queue) = crossbeam_channel::unbounded::<Task>();
        let thread = std::thread::Builder::new()
            .name("training".to_string())
            .spawn(move || {
                models::set_intra_op_threads(1);
                for task in queue {
                    task();
                }
            })
            .context("spawning the training thread")?;
        Ok(Trainer::Own {
            tasks: Some(tasks),
            thread: Some(thread),
        })
    }

    fn placement(&self) -> &'static str {
        match self {
            Trainer::Replica(_) => "the first inference replica's thread",
            Trainer::Own { .. } => "a training thread of its own",
        }
    }

    /// Queues `task`; its answer comes on the returned channel.
    fn submit<R: Send + 'static>(
        &self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> Result<Receiver<R>> {
        match self {
            Trainer::Replica(client) => client
                .submit_to_server(move |_| task())
                .context("inference server stopped"),
            Trainer::Own { tasks, .. } => {
                let (reply, answer) = crossbeam_channel::bounded(1);
                let task: Task = Box::new(move || {
                    let _ = reply.send(task());
                });
                tasks
                    .as_ref()
                    .expect("tasks are open until drop")
                    .send(task)
                    .map_err(|_| anyhow::anyhow!("the training thread stopped"))?;
                Ok(answer)
            }
        }
    }

    /// Runs `task` and waits for its answer.
    fn run<R: Send + 'static>(&self, task: impl FnOnce() -> R + Send + 'static) -> Result<R> {
        self.submit(task)?
            .recv()
            .map_err(|_| anyhow::anyhow!("training task lost (its thread stopped)"))
    }
}

impl Drop for Trainer<'_> {
    fn drop(&mut self) {
        if let Trainer::Own { tasks, thread } = self {
            tasks.take();
            if let Some(thread) = thread.take() {
                let _ = thread.join();
            }
        }
    }
}

struct TrainLoop<'a> {
    config: &'a Config,
    dirs: &'a RunDir,
    client: &'a InferenceClient,
    trainer: &'a Trainer<'a>,
    state: &'a Arc<Mutex<TrainState>>,
    replay: &'a mut ReplayBuffer,
    metrics: &'a mut MetricsLog,
    progress: &'a Progress,
    games: &'a crossbeam_channel::Receiver<Finished>,
    network: &'a AtomicU32,
    train_step: &'a AtomicU64,
    /// Self-play's work as it happens, for its rates.
    throughput: &'a Throughput,
    evaluations: Option<&'a Evaluations>,
    stop: &'a AtomicBool,
    deadline: Option<Instant>,
    seed: u64,
    samples_at_start: u64,
    own: &'a mut OwnGames,
    sharing: Option<&'a Sharing<'a>>,
    store_input: Option<&'a mut StoreInput>,
}

/// Adds the games of `pgn` to the run's games (stored like self-play's)
/// and to `replay`, unless this run imported the same text before
/// (`bootstrap.txt` in the run directory lists what it imported).
fn import_bootstrap(
    pgn: &Path,
    dirs: &RunDir,
    own: &mut OwnGames,
    replay: &mut ReplayBuffer,
) -> Result<()> {
    let text = std::fs::read_to_string(pgn)
        .with_context(|| format!("cannot read --bootstrap {}", pgn.display()))?;
    let checksum = format!("{:08x}", crc32fast::hash(text.as_bytes()));
    let log_path = dirs.bootstrap_log();
    let mut log = std::fs::read_to_string(&log_path).unwrap_or_default();
    if log
        .lines()
        .any(|line| line.split_whitespace().next() == Some(&checksum))
    {
        tracing::info!(pgn = %pgn.display(), "bootstrap games already imported into this run");
        return Ok(());
    }
    let imported = crate::selfplay::bootstrap::games_from_pgn(&text)
        .with_context(|| format!("--bootstrap {}", pgn.display()))?;
    for why in &imported.skipped {
        tracing::warn!(pgn = %pgn.display(), "bootstrap: left out {why}");
    }
    if imported.games.is_empty() {
        bail!(
            "--bootstrap {}: no game with moves and a result",
            pgn.display()
        );
    }
    let samples: usize = imported.games.iter().map(GameRecord::samples).sum();
    let count = imported.games.len();
    own.push(imported.games);
    let mut stored = Vec::new();
    own.store(&mut stored)
        .with_context(|| format!("storing the games of --bootstrap {}", pgn.display()))?;
    tracing::info!(
        pgn = %pgn.display(),
        games = count,
        samples,
        "bootstrap games imported"
    );
    log.push_str(&format!("{checksum} {count} games {}\n", pgn.display()));
    models::weights::write_atomically(&log_path, log.as_bytes())
        .with_context(|| format!("writing {}", log_path.display()))?;
    for game in stored {
        replay.add(Arc::new(game));
    }
    Ok(())
}

fn training_loop(ctx: TrainLoop<'_>) -> Result<()> {
    let TrainLoop {
        config,
        dirs,
        client,
        trainer,
        state,
        replay,
        metrics,
        progress,
        games,
        network,
        train_step,
        throughput,
        evaluations,
        stop,
        deadline,
        seed,
        samples_at_start,
        own,
        sharing,
        mut store_input,
    } = ctx;
    let gating = config.evaluation.gating;
    // The newest checkpoint waiting to be gated, and whether a gate match runs.
    let mut gate_queue: Option<(u32, u64)> = None;
    let mut gate_running = false;
    let limiter = ReuseLimiter {
        max_reuse: config.training.max_reuse,
    };
    let mut rng = SmallRng::seed_from_u64(seed.rotate_left(17));
    let started = Instant::now();
    let (start_step, games_at_start, seconds_at_start) = {
        let s = state.lock().expect("train state");
        (s.progress.step, s.progress.games, s.progress.seconds)
    };
    let targets = config.training.targets();
    // A checkpoint of the run so far; with gating, self-play keeps its net.
    let save = |replay: &ReplayBuffer, games: u64| {
        let network = (!gating).then_some(network);
        let seconds = seconds_at_start.map(|s| s + started.elapsed().as_secs_f64());
        checkpoint(
            client, trainer, state, dirs, replay, games, seconds, network, sharing,
        )
    };
    // The step in flight, and the steps this session has finished (the train
    // state is locked while a step runs, so the loop keeps its own count).
    let mut pending: Option<Receiver<crate::training::state::StepStats>> = None;
    let mut steps_done = 0u64;
    let mut tally = SelfPlayTotals::default();
    let mut last_stats: Option<StepStats> = None;
    let mut value_watch = ValueHeadWatch::default();
    let mut skipped_in_a_row = 0u64;
    // Of the batch in the pending step: the share `[training] mirror` may
    // mirror, logged with that step.
    let mut mirrorable_share = 0.0;
    let mut steps_since_checkpoint = 0u64;
    let mut last_log = Instant::now();
    let mut last_tally = (0u64, 0u64, Instant::now());
    let stats = client.stats();

    loop {
        let time_up = deadline.is_some_and(|d| Instant::now() >= d);
        if time_up || stop.load(Ordering::SeqCst) {
            break;
        }
        // Collect finished games; each is stored before it counts.
        let mut finished = Vec::new();
        match games.recv_timeout(Duration::from_millis(50)) {
            Ok(f) => finished.push(f),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => bail!("self-play stopped unexpectedly"),
        }
        finished.extend(games.try_iter());
        for f in finished {
            tally.add(&f);
            own.push([f.record]);
        }
        for game in own.store_or_retry().context("storing self-play games")? {
            replay.add(Arc::new(game));
        }
        if let (Some(input), Some(sharing)) = (store_input.as_deref_mut(), sharing) {
            let chunks = input.feed.as_ref().map(ingest::Background::take);
            let now = SystemTime::now();
            for chunk in chunks.into_iter().flatten() {
                input.add(chunk, replay, now, sharing.published.get());
            }
        }

        // Train as far as the reuse limit allows. The next batch is built
        // while the step before it runs.
        let submitted = steps_done + pending.is_some() as u64;
        let new_samples = replay.total_samples_ever().saturating_sub(samples_at_start);
        let allowed = limiter.allowed_steps(new_samples, config.training.batch_size, submitted);
        let next =
            (replay.samples_in_window() >= config.training.min_samples && allowed > 0).then(|| {
                replay.batch(
                    &mut rng,
                    config.training.batch_size,
                    &config.encoder,
                    &targets,
                )
            });
        if let Some(step_stats) = pending.take() {
            let step_stats = step_stats
                .recv()
                .map_err(|_| anyhow::anyhow!("training step lost (its thread stopped)"))?;
            last_stats = Some(step_stats);
            steps_done += 1;
            steps_since_checkpoint += 1;
            let step = start_step + steps_done;
            train_step.store(step, Ordering::Relaxed);
            if step_stats.skipped {
                skipped_in_a_row += 1;
                tracing::warn!(
                    step,
                    loss = step_stats.policy_loss + step_stats.value_loss,
                    grad_norm = step_stats.grad_norm,
                    "training step skipped: its loss or gradient was not finite (the weights \
                     are unchanged)"
                );
                if skipped_in_a_row >= MAX_SKIPPED_STEPS {
                    bail!(
                        "training diverged: {skipped_in_a_row} steps in a row up to step {step} \
                         had a non-finite loss or gradient, and were skipped (the checkpoints \
                         hold the last finite weights); {DIVERGED_FIX}"
                    );
                }
            } else {
                skipped_in_a_row = 0;
            }
            if value_watch.observe(&step_stats) {
                tracing::warn!(
                    step,
                    value_spread = step_stats.value_spread,
                    "the value head answers the same for every position (its ReLUs are off); \
                     it will not recover: restart the run with a lower [training] lr_schedule \
                     or more warmup_steps"
                );
            }
            if step % 10 == 0 && !step_stats.skipped {
                metrics.scalars(
                    step,
                    &[
                        ("loss/policy", step_stats.policy_loss),
                        ("loss/value", step_stats.value_loss),
                        ("train/policy_accuracy", step_stats.policy_accuracy),
                        ("train/value_mse", step_stats.value_mse),
                        ("train/value_spread", step_stats.value_spread),
                        ("loss/material", step_stats.material_loss),
                        ("loss/moves_left", step_stats.moves_left_loss),
                        ("loss/reply", step_stats.reply_loss),
                        ("train/learning_rate", step_stats.learning_rate),
                        ("train/grad_norm", step_stats.grad_norm),
                        ("train/mirrorable_share", mirrorable_share),
                    ],
                );
            }
            if steps_since_checkpoint >= config.training.checkpoint_every {
                let saved = save(replay, games_at_start + tally.games)?;
                steps_since_checkpoint = 0;
                if let Some(evaluations) = evaluations {
                    let every = config.evaluation.ladder_every;
                    if every > 0 && saved % every == 0 {
                        evaluations.submit(Job::Rate {
                            checkpoint: saved,
                            step,
                        });
                    }
                    if gating {
                        gate_queue = Some((saved, step));
                    }
                }
            }
        }
        if let Some(batch) = next {
            mirrorable_share = batch.mirrorable as f64 / batch.n.max(1) as f64;
            let task_state = Arc::clone(state);
            let training = config.training.clone();
            pending = Some(trainer.submit(move || {
                task_state
                    .lock()
                    .expect("train state")
                    .step(&batch, &training)
            })?);
        }

        if let Some(evaluations) = evaluations {
            for report in evaluations.reports() {
                if matches!(
                    report,
                    Report::Gated { .. } | Report::Failed { gating: true, .. }
                ) {
                    gate_running = false;
                }
                handle_report(report, config, client, dirs, metrics, network, sharing)?;
            }
            if !gate_running {
                if let Some((candidate, step)) = gate_queue.take() {
                    let best = network.load(Ordering::SeqCst);
                    evaluations.submit(Job::Gate {
                        candidate,
                        best,
                        step,
                    });
                    gate_running = true;
                }
            }
        }

        if last_log.elapsed() >= Duration::from_secs(10) {
            let (games0, nodes0, t0) = last_tally;
            let secs = t0.elapsed().as_secs_f64();
            let nodes = throughput.nodes.load(Ordering::Relaxed);
            let step = start_step + steps_done;
            let n = tally.games.max(1) as f64;
            let rates = [
                (
                    "selfplay/games_per_hour",
                    (tally.games - games0) as f64 * 3600.0 / secs,
                ),
                ("selfplay/nodes_per_s", (nodes - nodes0) as f64 / secs),
                (
                    "selfplay/positions_per_s",
                    throughput.plies.load(Ordering::Relaxed) as f64
                        / started.elapsed().as_secs_f64(),
                ),
                (
                    "selfplay/samples_per_s",
                    tally.samples as f64 / started.elapsed().as_secs_f64(),
                ),
                (
                    "selfplay/batch_fill",
                    stats.mean_batch() / config.inference.max_batch as f64,
                ),
                ("selfplay/mean_batch", stats.mean_batch()),
                ("selfplay/game_length", tally.plies as f64 / n),
                ("selfplay/white_win_share", tally.white_wins as f64 / n),
                ("selfplay/black_win_share", tally.black_wins as f64 / n),
                ("selfplay/draw_share", tally.draws as f64 / n),
                ("selfplay/resigned_share", tally.resigned as f64 / n),
                ("selfplay/adjudicated_share", tally.adjudicated as f64 / n),
                ("selfplay/sparse_start_share", tally.sparse as f64 / n),
                (
                    "selfplay/sparse_adjudicated_share",
                    tally.sparse_adjudicated as f64 / tally.sparse.max(1) as f64,
                ),
                ("selfplay/resign_threshold", tally.resign_threshold.into()),
                (
                    "selfplay/resign_false_positive_rate",
                    tally.false_resign as f64 / tally.would_resign.max(1) as f64,
                ),
                (
                    "selfplay/distinct_ply10_share",
                    tally.ply10_keys.len() as f64 / tally.reached_ply10.max(1) as f64,
                ),
                ("rules/king_forced_per_game", tally.king_forced as f64 / n),
                ("rules/kind_banned_per_game", tally.kind_banned as f64 / n),
                (
                    "replay/samples_in_window",
                    replay.samples_in_window() as f64,
                ),
                ("replay/total_samples", replay.total_samples_ever() as f64),
            ];
            metrics.scalars(step, &rates);
            if let Some(score) = tally.baseline_score() {
                metrics.scalars(step, &[("selfplay/baseline_score", score)]);
            }
            if let Some(input) = store_input.as_deref_mut() {
                metrics.scalars(step, &input.scalars());
                if progress.is_hidden() {
                    tracing::info!(chunks = input.chunks, games = input.games, "store");
                }
            }
            metrics.flush();
            let status = Status {
                games: tally.games,
                samples: replay.total_samples_ever(),
                train_steps: step,
                policy_loss: last_stats.map(|s| s.policy_loss),
                value_loss: last_stats.map(|s| s.value_loss),
                positions_per_s: rates[2].1,
                nodes_per_s: rates[1].1,
                checkpoint: network.load(Ordering::Relaxed),
            };
            progress.update(&status);
            // With the display on, log lines would break it up.
            if progress.is_hidden() {
                tracing::info!(
                    games = tally.games,
                    samples = replay.total_samples_ever(),
                    step,
                    checkpoint = network.load(Ordering::Relaxed),
                    policy_loss = last_stats.map(|s| format!("{:.3}", s.policy_loss)),
                    value_loss = last_stats.map(|s| format!("{:.3}", s.value_loss)),
                    nodes_per_s = format!("{:.0}", rates[1].1),
                    mean_batch = format!("{:.1}", stats.mean_batch()),
                    "progress"
                );
            }
            last_tally = (tally.games, nodes, Instant::now());
            last_log = Instant::now();
        }
    }
    if let (Some(input), Some(sharing)) = (store_input, sharing) {
        // The chunks uploaded until now, so that the session's count is
        // complete.
        if let Some(feed) = input.feed.take() {
            let now = SystemTime::now();
            for chunk in feed.finish() {
                input.add(chunk, replay, now, sharing.published.get());
            }
        }
        metrics.scalars(start_step + steps_done, &input.scalars());
        tracing::info!(
            chunks = input.chunks,
            games = input.games,
            "store: games read this session"
        );
    }
    if let Some(step) = pending.take() {
        step.recv()
            .map_err(|_| anyhow::anyhow!("training step lost (its thread stopped)"))?;
        steps_since_checkpoint += 1;
    }
    if steps_since_checkpoint > 0 {
        save(replay, games_at_start + tally.games)?;
    }
    Ok(())
}

/// Logs what the evaluation thread found and, with gating, promotes a
/// checkpoint that passed.
fn handle_report(
    report: Report,
    config: &Config,
    client: &InferenceClient,
    dirs: &RunDir,
    metrics: &mut MetricsLog,
    network: &AtomicU32,
    sharing: Option<&Sharing<'_>>,
) -> Result<()> {
    match report {
        Report::Rated {
            checkpoint,
            step,
            baseline,
            summary,
        } => {
            tracing::info!(
                checkpoint,
                baseline = %baseline,
                wins = summary.wins,
                draws = summary.draws,
                losses = summary.losses,
                elo = format!("{:.0}", summary.elo),
                "ladder"
            );
            let tag = baseline.replace(':', "");
            let (score, elo) = (
                format!("ladder/score_vs_{tag}"),
                format!("ladder/elo_vs_{tag}"),
            );
            metrics.scalars(
                step,
                &[(score.as_str(), summary.score), (elo.as_str(), summary.elo)],
            );
        }
        Report::Gated {
            candidate,
            best,
            step,
            summary,
        } => {
            let promoted = summary.score > config.evaluation.gate_threshold;
            tracing::info!(
                candidate,
                best,
                score = format!("{:.3}", summary.score),
                promoted,
                "gate"
            );
            metrics.scalars(
                step,
                &[
                    ("gate/score", summary.score),
                    ("gate/promoted", promoted as u8 as f64),
                ],
            );
            if promoted {
                promote(client, dirs, candidate, network)?;
                if let Some(sharing) = sharing {
                    sharing.publish(dirs, candidate, step);
                }
            }
        }
        Report::Failed { why, .. } => tracing::warn!("evaluation match failed: {why}"),
    }
    Ok(())
}

/// Makes `candidate` the self-play net and records it as the best.
fn promote(
    client: &InferenceClient,
    dirs: &RunDir,
    candidate: u32,
    network: &AtomicU32,
) -> Result<()> {
    let path = dirs.checkpoints().weights(candidate);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    client.load_weights(bytes, &path.display().to_string())?;
    dirs.checkpoints().set_best(candidate)?;
    network.store(candidate, Ordering::SeqCst);
    Ok(())
}

/// Saves a checkpoint, with the run's games and seconds of training so
/// far, where training runs and, given the self-play
/// `network` to replace (no gating), copies it into every replica: each
/// pauses for one device-to-device copy of the weights, between batches;
/// with `sharing`, it is published to the workers too.
#[allow(clippy::too_many_arguments)]
fn checkpoint(
    client: &InferenceClient,
    trainer: &Trainer<'_>,
    state: &Arc<Mutex<TrainState>>,
    dirs: &RunDir,
    replay: &ReplayBuffer,
    games: u64,
    seconds: Option<f64>,
    network: Option<&AtomicU32>,
    sharing: Option<&Sharing<'_>>,
) -> Result<u32> {
    let task_state = Arc::clone(state);
    let checkpoints = dirs.checkpoints();
    let samples = replay.total_samples_ever();
    let (saved, step) = trainer.run(move || -> Result<(u32, u64)> {
        let mut s = task_state.lock().expect("train state");
        s.progress.checkpoint += 1;
        s.progress.samples_seen = samples;
        s.progress.games = games;
        s.progress.seconds = seconds;
        s.save_checkpoint(&checkpoints)?;
        Ok((s.progress.checkpoint, s.progress.step))
    })??;
    let Some(network) = network else {
        tracing::info!(checkpoint = saved, "checkpoint written");
        return Ok(saved);
    };
    let task_state = Arc::clone(state);
    client
        .run_on_each(move |inference| {
            let s = task_state.lock().expect("train state");
            inference.var_store_mut().copy(s.net.var_store())
        })
        .context("inference server stopped")?
        .into_iter()
        .collect::<Result<(), _>>()?;
    network.store(saved, Ordering::SeqCst);
    tracing::info!(
        checkpoint = saved,
        "checkpoint written; self-play uses it now"
    );
    if let Some(sharing) = sharing {
        sharing.publish(dirs, saved, step);
    }
    Ok(saved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfplay::data::tests::one_move_game;
    use replay::ReplayConfig;

    #[test]
    fn store_metrics_average_lag_and_net_age_over_new_chunks() {
        let mut replay = ReplayBuffer::new(ReplayConfig {
            min_window: 100,
            alpha: 0.75,
            beta: 0.4,
            max_window: 100,
        });
        let mut input = StoreInput {
            chunks: 3,
            games: 9,
            ..StoreInput::default()
        };
        let now = SystemTime::now();
        let chunk = |networks: &[u32], seconds_ago| Chunk {
            key: "games/w/00000000.mzg".into(),
            games: networks.iter().map(|&n| one_move_game(n)).collect(),
            written: now - Duration::from_secs(seconds_ago),
        };
        // Newest net of the first chunk: step 80, 20 behind; the second's
        // was published after the trainer's newest (none behind).
        input.add(chunk(&[40, 80], 4), &mut replay, now, 100);
        input.add(chunk(&[120], 2), &mut replay, now, 100);
        let scalars: std::collections::HashMap<_, _> = input.scalars().into_iter().collect();
        assert_eq!(scalars["store/chunks_in"], 5.0);
        assert_eq!(scalars["store/games_in"], 12.0);
        assert_eq!(scalars["store/lag_seconds"], 3.0);
        assert_eq!(scalars["store/net_age_steps"], 10.0);
        assert_eq!(replay.total_samples_ever(), 3);
        // Nothing new since: only the totals.
        let scalars = input.scalars();
        assert_eq!(scalars.len(), 2, "{scalars:?}");
    }

    #[test]
    fn a_game_that_cannot_be_stored_is_an_error_not_a_retry() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).unwrap();
        let mut own = OwnGames {
            uploader: Uploader::resume(&store, shared::TRAINER).unwrap(),
            chunk_games: 8,
            pgn_dir: dir.path().to_path_buf(),
            retry: Duration::from_secs(60),
            retry_at: None,
        };
        own.push([one_move_game(1)]);
        assert_eq!(own.store_or_retry().unwrap().len(), 1);
        // A search value no net can give (a diverged one answers NaN).
        let mut broken = one_move_game(2);
        broken.moves[0].search_value = f32::NAN;
        own.push([broken]);
        let err = own.store_or_retry().unwrap_err();
        assert!(!err.is_transient());
        assert!(err.to_string().contains("search value"), "{err}");
    }
}
