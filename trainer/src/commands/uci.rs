//! `mixzero uci`: a network as a UCI engine on stdin/stdout.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use engine::mcts::{RootSearch, SearchConfig, DRAW_SCORES, POLICY_TEMPERATURES};
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
    #[arg(long, default_value_t = SearchConfig::play().c_puct)]
    c_puct: f32,
    /// Share of each node's prior moved onto its captures (0 = the network's priors alone).
    #[arg(long, default_value_t = SearchConfig::play().capture_prior)]
    capture_prior: f32,
    /// The search's priors are the network's ^ (1 / this), renormalised (above 1 flattens them).
    #[arg(long, default_value_t = SearchConfig::play().policy_temperature)]
    policy_temperature: f32,
    /// How the root searches: puct, or gumbel (sequential halving over the playouts).
    #[arg(long, default_value_t = SearchConfig::play().root)]
    root: RootSearch,
    /// lc0's moves-left utility: at most this much added to a move's score for
    /// a shorter win or a longer loss (0 = off; needs a moves-left head).
    #[arg(long, default_value_t = SearchConfig::play().moves_left_effect)]
    moves_left_effect: f32,
    /// A draw's worth to the engine, in [-1, 1] (lc0's draw score; below 0
    /// it avoids draws, as against a weaker opponent).
    #[arg(long, default_value_t = SearchConfig::play().draw_score, allow_negative_numbers = true)]
    draw_score: f32,
    /// After each search, one `info string` line per root move: visits,
    /// prior and value (lc0's `VerboseMoveStats`).
    #[arg(long)]
    verbose_move_stats: bool,
}

pub fn run(args: UciArgs) -> Result<()> {
    anyhow::ensure!(
        (0.0..1.0).contains(&args.capture_prior),
        "--capture-prior {} is not a number in [0, 1)",
        args.capture_prior
    );
    anyhow::ensure!(
        POLICY_TEMPERATURES.contains(&args.policy_temperature),
        "--policy-temperature {} is not a number in {POLICY_TEMPERATURES:?}",
        args.policy_temperature
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.moves_left_effect),
        "--moves-left-effect {} is not a number in [0, 1]",
        args.moves_left_effect
    );
    anyhow::ensure!(
        DRAW_SCORES.contains(&args.draw_score),
        "--draw-score {} is not a number in {DRAW_SCORES:?}",
        args.draw_score
    );
    tracing::info!(device = ?models::device(), "uci");
    let searcher = NetSearcher::new(NetSettings {
        weights: args.weights,
        threads: args.threads,
        batch: args.batch,
        playouts: args.playouts,
        c_puct: args.c_puct,
        capture_prior: args.capture_prior,
        policy_temperature: args.policy_temperature,
        root: args.root,
        moves_left_effect: args.moves_left_effect,
        draw_score: args.draw_score,
        verbose_move_stats: args.verbose_move_stats,
    })?;
    run_uci(searcher, std::io::stdin().lock(), std::io::stdout()).context("UCI session")
}
