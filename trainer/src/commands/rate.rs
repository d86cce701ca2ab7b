//! `mixzero rate`: every checkpoint and baseline of some runs (and any
//! arena summaries) on one Elo scale with `random` at 0, as a table and an
//! SVG plot of Elo against hours of training.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use trainer::eval::rating::{self, MatchRecord};
use trainer::run_dir::RunDir;

#[derive(Args, Debug)]
pub struct RateArgs {
    /// Run directories whose ladder and gating matches to rate (each
    /// named by its folder name in the table).
    #[arg(value_name = "RUN")]
    runs: Vec<PathBuf>,
    /// JSON-lines files of more matches, such as `mixzero arena --json`
    /// summaries (one per line).
    #[arg(long = "matches", value_name = "FILE")]
    matches: Vec<PathBuf>,
    /// Write the plot of Elo against hours of training here (SVG).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// One JSON object per rated player instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: RateArgs) -> Result<()> {
    let mut records: Vec<MatchRecord> = Vec::new();
    for dir in &args.runs {
        let label = dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
        records.extend(rating::run_records(&RunDir::new(dir).logs(), &label)?);
    }
    for file in &args.matches {
        records.extend(rating::read_records(file)?);
    }
    let mut ratings = rating::rate(&records)?;
    ratings.sort_by(|a, b| b.elo.total_cmp(&a.elo));
    if args.json {
        for r in &ratings {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        println!(
            "{:<40} {:>7} {:>17} {:>6} {:>7}",
            "player", "Elo", "95% interval", "games", "hours"
        );
        for r in &ratings {
            let hours = r.hours.map_or(String::new(), |h| format!("{h:.2}"));
            println!(
                "{:<40} {:>7.0} {:>8.0} {:>8.0} {:>6} {:>7}",
                r.player, r.elo, r.elo_ci95[0], r.elo_ci95[1], r.games, hours
            );
        }
    }
    if let Some(path) = &args.svg {
        models::weights::write_atomically(path, rating::plot_svg(&ratings).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
