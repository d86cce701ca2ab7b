//! `mixzero uci`: a network as a UCI engine on stdin/stdout.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use engine::mcts::SearchConfig;
use engine::uci::run_uci;
use trainer::uci::{NetSearcher, NetSettings};

#[derive(Args, Debug, Clone)]
pub struct UciArgs {
    /// Weights: an exported file, a checkpoint, a run directory or checkpoints/latest.
    #[arg(long)]
    weights: PathBuf,
    /// libtorch threads of the inference thread (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Leaves the search evaluates together (the batch size).
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Most playouts per move (0 = only the time and `go` limits; a bare `go` searches 800).
    #[arg(long, default_value_t = 0)]
    playouts: u64,
    /// PUCT exploration constant.
    #[arg(long, default_value_t = SearchConfig::default().c_puct)]
    c_puct: f32,
}

pub fn run(args: UciArgs) -> Result<()> {
    tracing::info!(device = ?models::device(), "uci");
    let searcher = NetSearcher::new(NetSettings {
        weights: args.weights,
        threads: args.threads,
        batch: args.batch,
        playouts: args.playouts,
        c_puct: args.c_puct,
    })?;
    run_uci(searcher, std::io::stdin().lock(), std::io::stdout()).context("UCI session")
}
