//! `mixzero`: one binary for every job, in the spirit of `katago`/`lc0`
//! subcommands; each lives in a file of `commands/`.

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{arena, bench, config, doctor, export, rate, selfplay, serve, store, train, uci};

#[derive(Parser)]
#[command(
    name = "mixzero",
    version,
    about = "AlphaZero-style self-play for Chess-mix"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure speed: `nn` (inference server), `search` (MCTS), `selfplay`.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// Count leaf nodes of the legal-move tree.
    Perft(engine::cli::PerftArgs),
    /// Train by self-play (resumes an existing run directory).
    Train(train::TrainArgs),
    /// Self-play worker of a run shared through an object store (see `train --store`).
    Selfplay(selfplay::SelfPlayArgs),
    /// Play a match between two players and rate them (--serve: watch it in a browser).
    Arena(arena::ArenaArgs),
    /// Rate runs' checkpoints and the baselines on one Elo scale (random = 0).
    Rate(rate::RateArgs),
    /// Write a checkpoint as a weights-only file (and optionally TorchScript).
    Export(export::ExportArgs),
    /// Run a network as a UCI engine on stdin/stdout.
    Uci(uci::UciArgs),
    /// Check libtorch, CUDA, the GPU, bf16, threads and the config's net.
    Doctor(doctor::DoctorArgs),
    /// Print the resolved config, or check a config file.
    Config {
        #[command(subcommand)]
        what: config::ConfigCommand,
    },
    /// Housekeeping of a run's object store (`gc`).
    Store {
        #[command(subcommand)]
        what: store::StoreCommand,
    },
    /// Play and watch in a browser: a page and its API on loopback.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: logs redirected to a file stay plain.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    models::set_intra_op_threads(1);
    let result = match cli.command {
        Command::Bench { what } => bench::run(what),
        Command::Perft(args) => engine::cli::run_perft(&args, &mut std::io::stdout().lock()),
        Command::Train(args) => train::run(args),
        Command::Selfplay(args) => selfplay::run(args),
        Command::Arena(args) => arena::run(args),
        Command::Rate(args) => rate::run(args),
        Command::Export(args) => export::run(args),
        Command::Uci(args) => uci::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Config { what } => config::run(what),
        Command::Store { what } => store::run(what),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The cause chain on one line, without a backtrace.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
