//! `mixzero train`: the AlphaZero loop on a run directory, created or resumed.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use trainer::config::Config;
use trainer::run_dir::RunDir;
use trainer::training::{self, Session};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Config file (default: the embedded configs/default.toml, or the run's own config when resuming).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Run directory: created, or resumed when it exists.
    #[arg(long, default_value = "runs/default")]
    run_dir: PathBuf,
    /// Stop cleanly (final checkpoint written) after this many minutes.
    #[arg(long)]
    minutes: Option<f64>,
    /// Seed for self-play and sampling (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bars (log lines only).
    #[arg(long)]
    quiet: bool,
    /// PGN games to train on beside self-play (each move a policy target,
    /// each decided result a value target); imported once per run directory.
    #[arg(long, value_name = "PGN")]
    bootstrap: Option<PathBuf>,
    /// Share the run with self-play workers (`mixzero selfplay --store`)
    /// through an object store: s3://bucket/prefix (AWS_* variables),
    /// file:///path or a directory. The run directory keeps the trainer's
    /// own state (checkpoints, logs).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Play no games here: train only on the store's (needs --store).
    #[arg(long, requires = "store")]
    no_selfplay: bool,
    /// Start a new run from these weights instead of a random net: a
    /// weights file, or a run or checkpoints directory (its latest). The
    /// step count, optimizer state and learning-rate schedule start afresh.
    #[arg(long, value_name = "WEIGHTS")]
    init: Option<PathBuf>,
}

pub fn run(args: TrainArgs) -> Result<()> {
    let dirs = RunDir::new(&args.run_dir);
    let given = args.config.as_deref().map(Config::load).transpose()?;
    let config = dirs.resolve_config(given)?;
    let seed = super::seed_or_clock(args.seed);
    let store = args
        .store
        .as_deref()
        .map(|url| store::Store::open(url).context("--store"))
        .transpose()?;
    let session = Session {
        minutes: args.minutes,
        seed,
        progress_bars: !args.quiet,
        bootstrap: args.bootstrap,
        store,
        selfplay: !args.no_selfplay,
        init: args.init,
    };
    training::run(config, &dirs, session)
}
