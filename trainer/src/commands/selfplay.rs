//! `mixzero selfplay --store URL`: a self-play worker of a run shared
//! through an object store (see `trainer::distributed`).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use trainer::config::Config;
use trainer::distributed::{self, worker};
use trainer::training::progress::stop_on_ctrl_c;

/// Where the hardware flags show in `--help`.
const HARDWARE: &str = "This machine's hardware (laid over the run's config)";

#[derive(Args, Debug)]
pub struct SelfPlayArgs {
    /// The run's store: s3://bucket/prefix (AWS_* variables), file:///path
    /// or a directory, as given to `mixzero train --store`.
    #[arg(long, value_name = "URL")]
    store: String,
    /// Config file, used only if the store holds none yet (else it must
    /// match the store's `config.toml`, which the trainer writes).
    #[arg(long)]
    config: Option<PathBuf>,
    /// This worker's name in the store (games/<ID>/...); a restart with the
    /// same name carries on its chunk numbers. Default: the host name and a
    /// random suffix, new at each start.
    #[arg(long, value_name = "ID")]
    worker_id: Option<String>,
    /// Stop cleanly (last chunk uploaded) after this many minutes.
    #[arg(long)]
    minutes: Option<f64>,
    /// Seed for self-play (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// `[inference] replicas`: inference threads, each with its own copy of the net.
    #[arg(long, value_name = "N", help_heading = HARDWARE)]
    replicas: Option<usize>,
    /// `[inference] threads`: libtorch threads of each replica (0 = one per core).
    #[arg(long, value_name = "N", help_heading = HARDWARE)]
    threads: Option<usize>,
    /// `[inference] max_batch`: most positions in one forward pass.
    #[arg(long, value_name = "N", help_heading = HARDWARE)]
    max_batch: Option<usize>,
    /// `[inference] max_wait_us`: how long a partial batch waits for more positions.
    #[arg(long, value_name = "US", help_heading = HARDWARE)]
    max_wait_us: Option<u64>,
    /// `[inference] precision`: the replicas' number format.
    #[arg(long, value_enum, help_heading = HARDWARE)]
    precision: Option<super::PrecisionArg>,
    /// `[selfplay] workers`: games played at once (threads).
    #[arg(long, value_name = "N", help_heading = HARDWARE)]
    workers: Option<usize>,
}

pub fn run(args: SelfPlayArgs) -> Result<()> {
    let store = store::Store::open(&args.store).context("--store")?;
    let given = args.config.as_deref().map(Config::load).transpose()?;
    let mut config = distributed::worker_config(&store, given)?;
    let hardware = worker::Hardware {
        replicas: args.replicas,
        threads: args.threads,
        max_batch: args.max_batch,
        max_wait_us: args.max_wait_us,
        precision: args.precision.map(Into::into),
        workers: args.workers,
    };
    hardware.apply(&mut config)?;
    let seed = super::seed_or_clock(args.seed);
    let stop = stop_on_ctrl_c("uploading the games played so far");
    let session = worker::WorkerSession {
        worker_id: args.worker_id,
        minutes: args.minutes,
        seed,
    };
    let summary = worker::run(&store, &config, &session, &stop)?;
    let seconds = summary.seconds.max(1e-9);
    println!(
        "worker {}: {} games in {} chunks, {} nets, {:.0} s ({:.2} games/s, {:.0} nodes/s)",
        summary.worker,
        summary.games,
        summary.chunks,
        summary.nets,
        summary.seconds,
        summary.games as f64 / seconds,
        summary.nodes as f64 / seconds
    );
    Ok(())
}
