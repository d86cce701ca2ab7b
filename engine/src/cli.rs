//! Command-line pieces shared by `mixchess` and `mixzero`: a position given
//! by `--fen`/`--moves`, and perft.

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::{divide, perft, Game, Position, Rules, START_FEN};

#[derive(Args)]
pub struct PositionArgs {
    /// Start position (default: the standard start)
    #[arg(long)]
    pub fen: Option<String>,
    /// Coordinate moves played from the start position, space-separated ("e2e5 e9e7")
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Classical rules only: turn rules 5 and 6 off
    #[arg(long)]
    pub base_rules: bool,
}

#[derive(Args)]
pub struct PerftArgs {
    #[arg(long)]
    pub depth: u32,
    #[command(flatten)]
    pub position: PositionArgs,
    /// Print the count under each root move first
    #[arg(long)]
    pub divide: bool,
}

pub fn rules(base: bool) -> Rules {
    if base {
        Rules::Base
    } else {
        Rules::Full
    }
}

pub fn start_position(fen: Option<&str>, base_rules: bool) -> Result<Position> {
    let fen = fen.unwrap_or(START_FEN);
    Position::from_fen_with_rules(fen, rules(base_rules))
        .with_context(|| format!("invalid FEN `{fen}`"))
}

impl PositionArgs {
    /// The game after `--moves`. With `stop_when_over`, a move after the end
    /// of the game (threefold, fifty moves) is an error too.
    pub fn game(&self, stop_when_over: bool) -> Result<Game> {
        let mut game = Game::new(start_position(self.fen.as_deref(), self.base_rules)?);
        for (i, text) in self.moves.split_whitespace().enumerate() {
            let what = || format!("move {} of --moves (`{text}`)", i + 1);
            if let Some(outcome) = game.outcome().filter(|_| stop_when_over) {
                bail!(
                    "{}: the game is already over ({} by {})",
                    what(),
                    outcome.result(),
                    outcome.reason
                );
            }
            let mv = game.position().parse_move(text).with_context(what)?;
            game.play_unchecked(mv);
        }
        Ok(game)
    }
}

/// Counts leaves; `--divide` first prints `move: count` lines; the last line is the total.
pub fn run_perft(args: &PerftArgs, out: &mut impl Write) -> Result<()> {
    let pos = *args.position.game(false)?.position();
    let started = Instant::now();
    let nodes = if args.divide {
        let counts = divide(&pos, args.depth);
        for (mv, n) in &counts {
            writeln!(out, "{mv}: {n}")?;
        }
        counts.iter().map(|(_, n)| n).sum()
    } else {
        perft(&pos, args.depth)
    };
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "depth {}: {nodes} nodes in {seconds:.3} s ({:.0} nodes/s)",
        args.depth,
        nodes as f64 / seconds.max(1e-9)
    );
    writeln!(out, "{nodes}")?;
    Ok(())
}
