//! `mixzero serve`: play the engine and watch its games in a browser.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trainer::serve::{self, Listen, ServeOptions, DEFAULT_BIND};

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// A training run: its games to watch, its metrics to plot, and its
    /// latest checkpoint as the `net` player.
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// The `net` player's weights (an exported file, a checkpoint, a run
    /// directory or checkpoints/latest); default: the run directory's latest.
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
    /// Address to listen on, IP:PORT (port 0: any free port).
    #[arg(long, value_name = "IP:PORT", default_value = DEFAULT_BIND)]
    bind: SocketAddr,
    /// Allow a --bind address other than loopback: everyone who can reach
    /// it can then run searches on this machine.
    #[arg(long)]
    allow_remote: bool,
    /// An external engine the page may choose, as in the arena:
    /// uci:COMMAND[;key=value...] (repeatable). The page cannot name others.
    #[arg(long = "engine", value_name = "SPEC")]
    engines: Vec<String>,
    /// Searches running at once; further engines wait for a slot.
    #[arg(long, default_value_t = 1)]
    max_searches: usize,
    /// libtorch threads of the network's inference thread (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

pub fn run(args: ServeArgs) -> Result<()> {
    serve::run(ServeOptions {
        run_dir: args.run_dir,
        weights: args.weights,
        listen: Listen {
            bind: args.bind,
            allow_remote: args.allow_remote,
        },
        engines: args.engines,
        max_searches: args.max_searches,
        threads: args.threads,
    })
}
