//! `mixzero arena`: a match between two players, its games as lines and its
//! result as Elo with a confidence interval (and SPRT), optionally watched
//! in a browser.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use trainer::eval::arena::{play_match, Entrant, MatchSpec, Openings};
use trainer::eval::sprt::Sprt;
use trainer::serve::{self, Listen, DEFAULT_BIND};

/// Where the games start.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpeningsArg {
    /// The built-in book of balanced lines, cycled through.
    Book,
    /// `--opening-plies` random moves.
    Random,
}

#[derive(Args, Debug, Clone)]
pub struct ArenaArgs {
    /// A player, given twice: random, greedy, alphabeta:DEPTH, a network
    /// PATH[:playouts=N|:movetime=MS] (a weights file, a run directory, its
    /// checkpoints directory or its checkpoints/latest file), or an external
    /// engine uci:COMMAND[;key=value...] (keys: option.NAME, files=j,
    /// searchmoves=1, movetime=MS, nodes=N, depth=D, timeout=MS, name=NAME).
    #[arg(long = "player", value_name = "SPEC", required = true)]
    players: Vec<String>,
    /// Games to play (pairs share an opening with colours swapped); the
    /// most, with --sprt.
    #[arg(long, default_value_t = 100)]
    games: usize,
    /// Games played at once (default: the number of cores).
    #[arg(long)]
    concurrency: Option<usize>,
    /// libtorch threads of each network's inference thread (default: the
    /// cores shared among the networks).
    #[arg(long)]
    threads: Option<usize>,
    /// Number format of the networks' inference: auto is bf16 on a GPU and
    /// on a CPU with AMX tiles, fp32 elsewhere.
    #[arg(long, value_enum, default_value = "auto")]
    precision: super::PrecisionArg,
    /// Seed of the openings and of the baseline players.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Plies, opening included, after which a game is adjudicated a draw.
    #[arg(long, default_value_t = 400)]
    max_plies: usize,
    /// Where the games start: the built-in book or random moves.
    #[arg(long, value_enum, default_value_t = OpeningsArg::Book)]
    openings: OpeningsArg,
    /// Random plies from the start position, with --openings random.
    #[arg(long, default_value_t = 4)]
    opening_plies: usize,
    /// Stop once a sequential test decides between Elo elo0 (H0) and elo1
    /// (H1), with error rates alpha and beta (default 0.05 each).
    #[arg(
        long,
        value_name = "ELO0,ELO1[,ALPHA,BETA]",
        allow_hyphen_values = true
    )]
    sprt: Option<Sprt>,
    /// Write every game here as PGN when the match ends.
    #[arg(long, value_name = "FILE")]
    pgn_out: Option<PathBuf>,
    /// The summary as one JSON object on stdout; the line per game goes to
    /// stderr, so that a long match still shows its progress.
    #[arg(long)]
    json: bool,
    /// Serve the games in a browser while they are played, on IP:PORT
    /// (default 127.0.0.1:8080); the server ends with the match.
    #[arg(long, value_name = "IP:PORT", num_args = 0..=1, default_missing_value = DEFAULT_BIND)]
    serve: Option<SocketAddr>,
    /// With --serve: allow an address other than loopback.
    #[arg(long, requires = "serve")]
    allow_remote: bool,
}

impl ArenaArgs {
    fn to_spec(&self) -> Result<MatchSpec> {
        let [one, two] = <[&String; 2]>::try_from(self.players.iter().collect::<Vec<_>>())
            .ok()
            .context("give --player exactly twice")?;
        let concurrency = self
            .concurrency
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(MatchSpec {
            entrants: [Entrant::parse(one)?, Entrant::parse(two)?],
            games: self.games,
            concurrency,
            threads: self.threads,
            precision: self.precision.into(),
            seed: self.seed,
            max_plies: self.max_plies,
            openings: match self.openings {
                OpeningsArg::Book => Openings::Book,
                OpeningsArg::Random => Openings::Random {
                    plies: self.opening_plies,
                },
            },
            sprt: self.sprt,
            pgn_out: self.pgn_out.clone(),
        })
    }
}

pub fn run(args: ArenaArgs) -> Result<()> {
    if let Some(bind) = args.serve {
        serve::watch_arena(Listen {
            bind,
            allow_remote: args.allow_remote,
        })?;
    }
    let device = models::device();
    let precision = models::Precision::from(args.precision).kind(device);
    tracing::info!(?device, ?precision, "arena");
    let summary = play_match(&args.to_spec()?, &AtomicBool::new(false), |line| {
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    })?;
    let (elo, elo_ci95, seconds) = (summary.elo, summary.elo_ci95, summary.seconds);
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
        return Ok(());
    }
    println!(
        "{} vs {}: +{} ={} -{} in {} games ({seconds:.1} s), score {:.3}, \
         Elo {:+.1} (95% CI {:+.1} to {:+.1})",
        summary.player1,
        summary.player2,
        summary.wins,
        summary.draws,
        summary.losses,
        summary.games,
        summary.score,
        elo,
        elo_ci95[0],
        elo_ci95[1]
    );
    println!("{}: {}", summary.player1, summary.endings);
    if let (Some(test), Some(report)) = (args.sprt, summary.sprt) {
        println!(
            "SPRT elo0={} elo1={} alpha={} beta={}: LLR {:.2} (bounds {:.2}, {:.2}), result {}",
            test.elo0,
            test.elo1,
            test.alpha,
            test.beta,
            report.llr,
            report.lower,
            report.upper,
            report.result
        );
    }
    Ok(())
}
