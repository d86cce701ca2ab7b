//! `mixzero store`: housekeeping of a run's object store.

use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use trainer::distributed::gc;

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Delete chunks older than the trainer's window and all but the newest nets.
    Gc(GcArgs),
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// The run's store: s3://bucket/prefix (AWS_* variables), file:///path
    /// or a directory.
    #[arg(long, value_name = "URL")]
    store: String,
    /// Keep the chunks written in the last this many hours; choose it to
    /// cover the replay window (the newest `max_window` samples), or a
    /// resumed trainer starts from a smaller one.
    #[arg(long, value_name = "HOURS")]
    keep_hours: f64,
    /// Keep the newest this many nets (the one `nets/latest` names is kept
    /// in any case).
    #[arg(long, default_value_t = 5)]
    keep_nets: usize,
    /// Only say what would be deleted.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(what: StoreCommand) -> Result<()> {
    let StoreCommand::Gc(args) = what;
    if !(args.keep_hours.is_finite() && args.keep_hours >= 0.0) {
        bail!("--keep-hours must be 0 or more, not {}", args.keep_hours);
    }
    let store = store::Store::open(&args.store).context("--store")?;
    let keep = Duration::from_secs_f64(args.keep_hours * 3600.0);
    let garbage = gc::find(&store, keep, args.keep_nets, SystemTime::now())?;
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    if !args.dry_run {
        gc::delete(&store, &garbage)?;
    }
    println!(
        "{}: {verb} {} chunks and {} nets ({:.1} MB)",
        store.url(),
        garbage.chunks.len(),
        garbage.nets.len(),
        garbage.bytes as f64 / 1e6
    );
    Ok(())
}
