//! `mixzero`: one binary for every job, in the spirit of `katago`/`lc0` subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use tch::Device;

use trainer::bench;
use trainer::config::Config;

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
        what: BenchCommand,
    },
    /// Count leaf nodes of the legal-move tree.
    Perft(engine::cli::PerftArgs),
    /// Train by self-play (resumes an existing run directory).
    Train(trainer::run::TrainArgs),
    /// Play a match between two players and rate them (--serve: watch it in a browser).
    Arena(trainer::serve::ArenaServeArgs),
    /// Write a checkpoint as a weights-only file (and optionally TorchScript).
    Export(trainer::export::ExportArgs),
    /// Run a network as a UCI engine on stdin/stdout.
    Uci(trainer::uci::UciArgs),
    /// Check libtorch, CUDA, the GPU, bf16, threads and the config's net.
    Doctor(trainer::doctor::DoctorArgs),
    /// Print the resolved config, or check a config file.
    Config {
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// Play and watch in a browser: a page and its API on loopback.
    Serve(trainer::serve::ServeArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print every key of a config (default: the embedded default) as it
    /// resolves: the file laid over configs/default.toml.
    Show {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Check a config file: exit 0 and say so, or name the bad `section.key`.
    Check { file: PathBuf },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Inference-server positions/s against a bare forward-pass loop, and encoding speed.
    Nn(BenchNnArgs),
    /// MCTS nodes/s through the inference server against bare forward passes.
    Search(BenchSearchArgs),
    /// Self-play games/hour and positions/s.
    Selfplay(BenchSelfplayArgs),
}

#[derive(Args)]
struct BenchSearchArgs {
    /// Config whose net and search settings to use (default: the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Batch size the searches fill.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Seconds of measurement.
    #[arg(long, default_value_t = 8.0)]
    seconds: f64,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchSelfplayArgs {
    /// Config to play with (default: the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Games played at once (default: the config's `[selfplay] workers`).
    #[arg(long)]
    workers: Option<usize>,
    /// No network: positions are encoded and answered with uniform priors,
    /// so the figures are what the CPU side (search, move generation,
    /// encoding) sustains on its own.
    #[arg(long)]
    host_only: bool,
    /// Seconds of self-play.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchNnArgs {
    /// Config files whose nets to measure (default: the embedded default and GPU configs).
    #[arg(long = "config")]
    configs: Vec<PathBuf>,
    /// Batch sizes to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32, 128, 512])]
    batches: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// libtorch CPU threads of the server (default: the config's).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Number format of the replicas (default: the config's `[inference] precision`).
    #[arg(long, value_enum)]
    precision: Option<PrecisionArg>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// `--precision` values, as the config spells them.
#[derive(Clone, Copy, clap::ValueEnum)]
enum PrecisionArg {
    Auto,
    Fp32,
    Bf16,
    Fp16,
}

impl From<PrecisionArg> for models::Precision {
    fn from(arg: PrecisionArg) -> models::Precision {
        match arg {
            PrecisionArg::Auto => models::Precision::Auto,
            PrecisionArg::Fp32 => models::Precision::Fp32,
            PrecisionArg::Bf16 => models::Precision::Bf16,
            PrecisionArg::Fp16 => models::Precision::Fp16,
        }
    }
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
        Command::Bench {
            what: BenchCommand::Nn(args),
        } => bench_nn(args),
        Command::Bench {
            what: BenchCommand::Search(args),
        } => bench_search(args),
        Command::Bench {
            what: BenchCommand::Selfplay(args),
        } => bench_selfplay(args),
        Command::Perft(args) => engine::cli::run_perft(&args, &mut std::io::stdout().lock()),
        Command::Train(args) => trainer::run::run(args),
        Command::Arena(args) => trainer::serve::run_arena(args),
        Command::Export(args) => trainer::export::run(args),
        Command::Uci(args) => trainer::uci::run(args),
        Command::Doctor(args) => trainer::doctor::run(args),
        Command::Config {
            what: ConfigCommand::Show { config },
        } => load_config(&config).map(|c| print!("{}", c.to_toml())),
        Command::Config {
            what: ConfigCommand::Check { file },
        } => Config::load(&file)
            .map(|_| println!("{}: valid", file.display()))
            .map_err(Into::into),
        Command::Serve(args) => trainer::serve::run(args),
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

fn bench_nn(args: BenchNnArgs) -> Result<()> {
    let configs = if args.configs.is_empty() {
        vec![Config::default_config(), Config::gpu_config()]
    } else {
        args.configs
            .iter()
            .map(|p| Ok(Config::load(p)?))
            .collect::<Result<Vec<_>>>()?
    };
    let device = Device::cuda_if_available();
    tracing::info!(?device, "bench nn");
    let history = configs.iter().map(|c| c.encoder.history).max().unwrap_or(1);
    let samples = bench::sample_positions(1024, history, 7);
    for config in &configs {
        let encode = bench::encode_row(config.encoder, &samples, args.seconds.min(1.0));
        report(args.json, &encode, || {
            format!(
                "encoding: {:.0} positions/s ({} planes, history {})",
                encode.encode_pos_per_s, encode.planes, encode.history
            )
        })?;
        let mut server = config.inference;
        if args.threads > 0 {
            server.threads = args.threads;
        }
        if let Some(precision) = args.precision {
            server.precision = precision.into();
        }
        let peak = bench::peak_row(config.arch(), device, server, args.seconds.min(2.0));
        report(args.json, &peak, || {
            format!(
                "matrix-product peak ({}, {}x{}, {} threads): {:.3} TFLOP/s",
                peak.precision, peak.size, peak.size, peak.threads, peak.peak_tflops
            )
        })?;
        if !args.json {
            println!(
                "{:>10} {:>6} {:>14} {:>14} {:>7} {:>9} {:>9} {:>8}",
                "net",
                "batch",
                "server pos/s",
                "bare pos/s",
                "ratio",
                "mean fill",
                "TFLOP/s",
                "of peak"
            );
        }
        for row in bench::nn_rows(
            config.arch(),
            device,
            server,
            &args.batches,
            args.seconds,
            &samples,
            Some(&peak),
        ) {
            report(args.json, &row, || {
                format!(
                    "{:>10} {:>6} {:>14.0} {:>14.0} {:>6.1}% {:>9.1} {:>9.3} {:>7.1}%",
                    row.net,
                    row.batch,
                    row.server_pos_per_s,
                    row.bare_pos_per_s,
                    100.0 * row.ratio,
                    row.mean_batch,
                    row.server_tflops,
                    100.0 * row.peak_share.unwrap_or(0.0)
                )
            })?;
        }
    }
    Ok(())
}

/// Prints a benchmark row as one JSON line, or as text.
fn report(json: bool, row: &impl serde::Serialize, text: impl FnOnce() -> String) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(row)?);
    } else {
        println!("{}", text());
    }
    Ok(())
}

fn load_config(path: &Option<PathBuf>) -> Result<Config> {
    match path {
        Some(path) => Ok(Config::load(path)?),
        None => Ok(Config::default_config()),
    }
}

fn bench_search(args: BenchSearchArgs) -> Result<()> {
    let config = load_config(&args.config)?;
    tracing::info!(device = ?Device::cuda_if_available(), "bench search");
    let samples = bench::sample_positions(1024, config.search.history, 11);
    let row = bench::search_row(
        config.arch(),
        Device::cuda_if_available(),
        config.inference,
        config.search,
        args.batch,
        args.seconds,
        &samples,
    );
    report(args.json, &row, || {
        format!(
            "{} batch {} ({} search threads): {:.0} nodes/s, bare {:.0} positions/s, {:.1}% (mean batch {:.1})",
            row.net,
            row.batch,
            row.search_threads,
            row.search_nodes_per_s,
            row.bare_pos_per_s,
            100.0 * row.ratio,
            row.mean_batch
        )
    })
}

fn bench_selfplay(args: BenchSelfplayArgs) -> Result<()> {
    let mut config = load_config(&args.config)?;
    if let Some(workers) = args.workers {
        config.selfplay.workers = workers;
    }
    let backend = match args.host_only {
        true => bench::Backend::HostOnly,
        false => bench::Backend::Network(Device::cuda_if_available()),
    };
    tracing::info!(?backend, "bench selfplay");
    let row = bench::selfplay_row(&config, backend, args.seconds, 1);
    report(args.json, &row, || {
        format!(
            "{} ({}, {} workers): {} games in {:.0} s: {:.0} games/hour, {:.1} positions/s, {:.0} nodes/s (mean batch {:.1}), {:.0}% distinct at ply 10",
            row.net,
            row.backend,
            row.workers,
            row.games,
            row.seconds,
            row.games_per_hour,
            row.positions_per_s,
            row.nodes_per_s,
            row.mean_batch,
            100.0 * row.distinct_ply10_share
        )
    })
}
