//! `mixchess`: perft, position inspection, matches between baseline players,
//! benchmarks and a UCI engine for Chess-mix.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};

use engine::cli::{run_perft, start_position, PerftArgs, PositionArgs};
use engine::pgn::write_annotated_pgn;
use engine::players::{play_scored_game, player_from_spec, AlphaBeta, MAX_DEPTH};
use engine::uci::run_uci;
use engine::{control_period, perft, Color, Game, Position, Rules, START_FEN};

#[derive(Parser)]
#[command(
    name = "mixchess",
    version,
    about = "Chess-mix (10x10) command-line tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Count the leaves of the legal move tree; the last stdout line is the total
    Perft(PerftArgs),
    /// Print a position: board, FEN, legal moves, rule 5/6 state and outcome
    Show(ShowArgs),
    /// Play games between players: random, greedy or alphabeta:DEPTH
    Play(PlayArgs),
    /// Time perft and the alpha-beta player
    Bench(BenchArgs),
    /// Run the alpha-beta player as a UCI engine on stdin/stdout
    ///
    /// Moves are coordinate moves on the 10x10 board (e2e5, f1i1, e9e10q);
    /// `position fen` takes the project's FEN, rule 5/6 fields included.
    /// Options: Depth (deepest iteration, 1-16; a `go` without limits searches
    /// to it) and Seed (breaks ties between equal moves).
    Uci,
}

#[derive(Args)]
struct ShowArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// One JSON object instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PlayArgs {
    /// White's player (with --alternate, the first player)
    #[arg(long)]
    white: String,
    /// Black's player (with --alternate, the second player)
    #[arg(long)]
    black: String,
    #[arg(long, default_value_t = 1)]
    games: u32,
    /// Seed of every player's random choices
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Plies after which a game is adjudicated a draw
    #[arg(long, default_value_t = 400)]
    max_plies: usize,
    /// Start position (default: the standard start)
    #[arg(long)]
    fen: Option<String>,
    /// Classical rules only: turn rules 5 and 6 off
    #[arg(long)]
    base_rules: bool,
    /// Write the PGNs to this file instead of stdout, which then gets one line per game
    #[arg(long)]
    pgn_out: Option<PathBuf>,
    /// Swap colours after every game
    #[arg(long)]
    alternate: bool,
}

#[derive(Args)]
struct BenchArgs {
    /// Perft depth from the start position
    #[arg(long, default_value_t = 5)]
    depth: u32,
    /// Depth of the timed alpha-beta searches
    #[arg(long, default_value_t = 4)]
    search_depth: u32,
    /// One JSON object per line
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Each command locks stdout itself: `uci` writes from its search thread too.
    let result = match cli.command {
        Command::Perft(args) => run_perft(&args, &mut io::stdout().lock()),
        Command::Show(args) => run_show(&args, &mut io::stdout().lock()),
        Command::Play(args) => run_play(&args, &mut io::stdout().lock()),
        Command::Bench(args) => run_bench(&args, &mut io::stdout().lock()),
        Command::Uci => run_uci(
            AlphaBeta::new(MAX_DEPTH, 0),
            io::stdin().lock(),
            io::stdout(),
        )
        .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`| head`) is not an error worth a message.
        Err(e)
            if e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The whole cause chain on one line, without a backtrace.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Rule 5 and 6 state of one side.
fn rule_state(pos: &Position, color: Color) -> Value {
    let next = pos.next_move_number(color);
    let period = match pos.rules() {
        Rules::Full => control_period(color, next).map(|p| json!([p.first, p.last])),
        Rules::Base => None,
    };
    let run = pos.run(color);
    json!({
        "next_move_number": next,
        "control_period": period,
        "king_moved_in_period": pos.king_moved_in_period(color),
        "must_move_king": pos.must_move_king(color),
        "banned_kind": pos.banned_kind(color).map(|k| k.name()),
        "last_kind": run.kind.map(|k| k.name()),
        "run_length": run.length,
    })
}

fn run_show(args: &ShowArgs, out: &mut impl Write) -> Result<()> {
    let game = args.position.game(true)?;
    let pos = game.position();
    let legal: Vec<String> = pos.legal_moves().iter().map(|m| m.to_string()).collect();
    let san: Vec<String> = pos.legal_moves().iter().map(|&m| pos.san(m)).collect();
    let rule_set = match pos.rules() {
        Rules::Full => "full",
        Rules::Base => "base",
    };
    let outcome = game.outcome();
    if args.json {
        let object = json!({
            "fen": pos.fen(),
            "side": pos.side_to_move().name(),
            "legal": legal,
            "san": san,
            "outcome": outcome,
            "rules": {
                "set": rule_set,
                "white": rule_state(pos, Color::White),
                "black": rule_state(pos, Color::Black),
            },
        });
        writeln!(out, "{object}")?;
        return Ok(());
    }
    write!(out, "{}", pos.board_text())?;
    writeln!(out, "fen: {}", pos.fen())?;
    writeln!(out, "side to move: {}", pos.side_to_move().name())?;
    writeln!(out, "rules: {rule_set}")?;
    if pos.rules() == Rules::Full {
        for color in Color::ALL {
            let period = control_period(color, pos.next_move_number(color))
                .map_or("none".to_string(), |p| format!("{}-{}", p.first, p.last));
            let yes_no = |b: bool| if b { "yes" } else { "no" };
            writeln!(
                out,
                "{}: next move {}, control period {period}, king moved in period {}, \
                 must move king now {}, banned kind {}",
                color.name(),
                pos.next_move_number(color),
                yes_no(pos.king_moved_in_period(color)),
                yes_no(pos.must_move_king(color)),
                pos.banned_kind(color).map_or("none", |k| k.name()),
            )?;
        }
    }
    writeln!(out, "legal moves ({}): {}", legal.len(), legal.join(" "))?;
    writeln!(out, "san: {}", san.join(" "))?;
    match outcome {
        Some(o) => writeln!(out, "outcome: {} {}", o.result(), o.reason)?,
        None => writeln!(out, "outcome: none")?,
    }
    Ok(())
}

/// A distinct seed for each game and side.
fn player_seed(seed: u64, game: u32, side: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (2 * game as u64 + side)
}

fn run_play(args: &PlayArgs, out: &mut impl Write) -> Result<()> {
    // Check both specs before the first game.
    player_from_spec(&args.white, 0).context("--white")?;
    player_from_spec(&args.black, 0).context("--black")?;
    let start = start_position(args.fen.as_deref(), args.base_rules)?;
    let mut pgn_file = match &args.pgn_out {
        Some(path) => Some(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create --pgn-out {}", path.display()))?,
        ),
        None => None,
    };
    let (first, second) = (&args.white, &args.black);
    // Wins, draws and losses of the first player.
    let mut record = [0u32; 3];
    for g in 0..args.games {
        let swapped = args.alternate && g % 2 == 1;
        let (white_spec, black_spec) = if swapped {
            (second, first)
        } else {
            (first, second)
        };
        let mut white = player_from_spec(white_spec, player_seed(args.seed, g, 0))?;
        let mut black = player_from_spec(black_spec, player_seed(args.seed, g, 1))?;
        let (game, scores) =
            play_scored_game(white.as_mut(), black.as_mut(), start, args.max_plies);
        let outcome = game.outcome().context("a finished game has an outcome")?;
        let first_color = if swapped { Color::Black } else { Color::White };
        match outcome.winner {
            Some(c) if c == first_color => record[0] += 1,
            None => record[1] += 1,
            Some(_) => record[2] += 1,
        }
        let pgn = write_annotated_pgn(
            &game,
            &[
                ("Event", "mixchess play".to_string()),
                ("Round", (g + 1).to_string()),
                ("White", white.name()),
                ("Black", black.name()),
            ],
            &scores,
        );
        match &mut pgn_file {
            Some(file) => {
                writeln!(file, "{pgn}")?;
                writeln!(
                    out,
                    "game {}: {} - {} {} ({}, {} plies)",
                    g + 1,
                    white.name(),
                    black.name(),
                    outcome.result(),
                    outcome.reason,
                    game.moves().len()
                )?;
            }
            None => writeln!(out, "{pgn}")?,
        }
    }
    let [w, d, l] = record;
    let points = w as f64 + d as f64 / 2.0;
    writeln!(
        out,
        "score: {first} {points} - {} {second} (W {w} D {d} L {l})",
        (w + d + l) as f64 - points
    )?;
    Ok(())
}

/// The start and middlegame positions from alpha-beta self-play, for timing the search.
const BENCH_FENS: [&str; 4] = [
    START_FEN,
    "rn1b5r/ppppk1ppp1/3nbp1nn1/3q6/1Q2pB3p/10/4PP4/6N3/PPPP2PPPP/RNNB2K1NR w - - 10 11 - Q1q1",
    "r8r/pp1p1k1pp1/3nbp1n2/n1pq2p3/4p4p/7N1P/4PP1Bn1/1NN2B1N2/PPPP1KPPP1/R8R w - - 3 21 - N1n1",
    "2n2k1n1r/2pp1bppp1/2n2B1q2/5p3p/1p2p5/r3P1P2P/5K4/2NN1B1N2/P1PP3PP1/R3Q2N1R w - - 1 21 - B2r1",
];

fn run_bench(args: &BenchArgs, out: &mut impl Write) -> Result<()> {
    for rule_set in [Rules::Full, Rules::Base] {
        let pos = Position::start().with_rules(rule_set);
        let started = Instant::now();
        let nodes = perft(&pos, args.depth);
        let seconds = started.elapsed().as_secs_f64();
        let nps = nodes as f64 / seconds.max(1e-9);
        let name = match rule_set {
            Rules::Full => "full",
            Rules::Base => "base",
        };
        if args.json {
            let line = json!({"bench": "perft", "rules": name, "depth": args.depth,
                "nodes": nodes, "seconds": seconds, "nodes_per_second": nps});
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "perft {name} rules depth {}: {nodes} nodes, {seconds:.3} s, {nps:.0} nodes/s",
                args.depth
            )?;
        }
    }
    let mut total = 0.0;
    for (i, fen) in BENCH_FENS.iter().enumerate() {
        let game = Game::new(Position::from_fen(fen)?);
        let mut player = AlphaBeta::new(args.search_depth, 0);
        let started = Instant::now();
        let result = player.search(&game);
        let seconds = started.elapsed().as_secs_f64();
        total += seconds;
        let best = result.best.to_string();
        if args.json {
            let line = json!({"bench": "alphabeta", "depth": args.search_depth, "fen": fen,
                "best": best, "score": result.score, "nodes": result.nodes, "seconds": seconds});
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "alphabeta:{} position {}: {best} score {} nodes {} in {seconds:.3} s",
                args.search_depth,
                i + 1,
                result.score,
                result.nodes
            )?;
        }
    }
    let mean = total / BENCH_FENS.len() as f64;
    if args.json {
        let line = json!({"bench": "alphabeta-mean", "depth": args.search_depth,
            "positions": BENCH_FENS.len(), "seconds_per_move": mean});
        writeln!(out, "{line}")?;
    } else {
        writeln!(
            out,
            "alphabeta:{} mean {mean:.3} s per move",
            args.search_depth
        )?;
    }
    Ok(())
}
