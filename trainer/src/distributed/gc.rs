//! `mixzero store gc`: what a run's store no longer needs. Chunks written
//! before a cutoff have left the trainer's window once the cutoff covers
//! it (the window holds the newest games), and nets older than the newest
//! few are never fetched again (workers read the pointer's net only).

use std::time::{Duration, SystemTime};

use store::layout::{worker_prefix, GAMES_DIR, LATEST_NET, NETS_DIR};
use store::Store;

use super::DistributedError;

/// The objects a clean-up deletes.
#[derive(Debug, Default, PartialEq)]
pub struct Garbage {
    pub chunks: Vec<String>,
    pub nets: Vec<String>,
    pub bytes: u64,
}

/// Chunks written more than `keep` before `now`, and every net but the
/// newest `keep_nets` and the one the pointer names.
pub fn find(
    store: &Store,
    keep: Duration,
    keep_nets: usize,
    now: SystemTime,
) -> Result<Garbage, DistributedError> {
    let cutoff = now.checked_sub(keep).unwrap_or(SystemTime::UNIX_EPOCH);
    let mut garbage = Garbage::default();
    for worker in store.list_dirs(GAMES_DIR)? {
        for (entry, written) in store.list_with_times(&worker_prefix(&worker)?)? {
            if written < cutoff {
                garbage.bytes += entry.size;
                garbage.chunks.push(entry.key);
            }
        }
    }
    let pointed = store.latest_pointer()?.map(|p| p.key);
    // Net keys hold zero-padded steps: key order is age order.
    let nets: Vec<_> = store
        .list_with_times(NETS_DIR)?
        .into_iter()
        .filter(|(entry, _)| entry.key != LATEST_NET && Some(&entry.key) != pointed.as_ref())
        .collect();
    let old = nets.len().saturating_sub(keep_nets);
    for (entry, _) in nets.into_iter().take(old) {
        garbage.bytes += entry.size;
        garbage.nets.push(entry.key);
    }
    Ok(garbage)
}

/// Deletes what [`find`] found; a trainer that lists a chunk just before
/// it goes skips it with a warning.
pub fn delete(store: &Store, garbage: &Garbage) -> Result<(), DistributedError> {
    for key in garbage.chunks.iter().chain(&garbage.nets) {
        store.delete(key)?;
    }
    Ok(())
}
