//! `mixzero bench`: the inference server against bare forward passes, MCTS
//! through the server, self-play and training steps, as text rows or JSON
//! lines.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use tch::Device;

use trainer::bench;
use trainer::config::Config;

use super::load_config;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Inference-server positions/s against a bare forward-pass loop, and encoding speed.
    Nn(BenchNnArgs),
    /// MCTS nodes/s through the inference server against bare forward passes.
    Search(BenchSearchArgs),
    /// Self-play games/hour and positions/s.
    Selfplay(BenchSelfplayArgs),
    /// Training steps/s of each config's net, precision and targets.
    Train(BenchTrainArgs),
}

#[derive(Args)]
pub struct BenchTrainArgs {
    /// Config files to measure, in alternating rounds (default: the embedded default).
    #[arg(long = "config")]
    configs: Vec<PathBuf>,
    /// Seconds of measurement, shared by the configs.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchSearchArgs {
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
pub struct BenchSelfplayArgs {
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
pub struct BenchNnArgs {
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
    precision: Option<super::PrecisionArg>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

pub fn run(what: BenchCommand) -> Result<()> {
    match what {
        BenchCommand::Nn(args) => nn(args),
        BenchCommand::Search(args) => search(args),
        BenchCommand::Selfplay(args) => selfplay(args),
        BenchCommand::Train(args) => train(args),
    }
}

fn train(args: BenchTrainArgs) -> Result<()> {
    let configs = match args.configs.is_empty() {
        true => vec![("default".to_string(), Config::default_config())],
        false => args
            .configs
            .iter()
            .map(|p| Ok((p.display().to_string(), Config::load(p)?)))
            .collect::<Result<Vec<_>>>()?,
    };
    let device = Device::cuda_if_available();
    tracing::info!(?device, "bench train");
    for row in bench::train_rows(&configs, device, args.seconds)? {
        report(args.json, &row, || {
            let heads = match row.aux_heads.as_str() {
                "" => "none",
                heads => heads,
            };
            format!(
                "{} ({}, {} on {}, batch {}, auxiliary heads: {}): {:.2} steps/s, {:.0} samples/s; {:.1} ms to build a batch",
                row.config,
                row.net,
                row.precision,
                row.device,
                row.batch,
                heads,
                row.steps_per_s,
                row.samples_per_s,
                row.build_ms
            )
        })?;
    }
    Ok(())
}

fn nn(args: BenchNnArgs) -> Result<()> {
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

fn search(args: BenchSearchArgs) -> Result<()> {
    let config = load_config(args.config.as_deref())?;
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

fn selfplay(args: BenchSelfplayArgs) -> Result<()> {
    let mut config = load_config(args.config.as_deref())?;
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
            "{} ({}, {} workers): {} games in {:.0} s: {:.0} games/hour, {:.1} positions/s, {:.0} nodes/s (mean batch {:.1}, largest {}), {:.0}% distinct at ply 10",
            row.net,
            row.backend,
            row.workers,
            row.games,
            row.seconds,
            row.games_per_hour,
            row.positions_per_s,
            row.nodes_per_s,
            row.mean_batch,
            row.largest_batch,
            100.0 * row.distinct_ply10_share
        )
    })
}
