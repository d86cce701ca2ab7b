//! The trainer's side of the store: finding the chunks workers uploaded and
//! reading their games, each chunk once.
//!
//! Keys sort as strings, so one cursor over all of `games/` would miss a
//! slow worker's new chunk that sorts before a fast worker's last one. Each
//! worker's own keys grow with time, so the feed keeps one cursor per
//! worker (`games/<worker>`), found with [`Store::list_dirs`]. A cursor
//! moves past a chunk only once its games were handed over (or it was
//! skipped as damaged), so a chunk is neither read twice nor lost when a
//! request fails halfway through a poll.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::Receiver;

use store::layout::{parse_chunk_key, worker_prefix, GAMES_DIR};
use store::{Store, StoreError};

use super::{key_path, CHUNK_EXT};
use crate::selfplay::data::{self, GameRecord};

/// Keys per listing request (S3 answers at most 1,000).
const LIST_PAGE: usize = 1000;

/// One chunk read from the store.
#[derive(Debug)]
pub struct Chunk {
    pub key: String,
    pub games: Vec<GameRecord>,
    /// When the store says it was written.
    pub written: SystemTime,
}

/// A chunk the feed passed over, with why.
#[derive(Debug)]
pub struct Skipped {
    pub key: String,
    pub why: String,
}

/// What one poll found besides good chunks.
#[derive(Debug, Default)]
pub struct Polled {
    pub chunks: u64,
    pub games: u64,
    pub skipped: Vec<Skipped>,
}

/// The chunks of every worker under `games/`, read in each worker's order.
pub struct Feed {
    store: Store,
    /// The last chunk key seen under each worker's prefix.
    cursors: BTreeMap<String, String>,
    /// Other keys under `games/`, reported once.
    foreign: HashSet<String>,
}

impl Feed {
    /// A feed that has seen nothing yet: its first poll reads every chunk
    /// in the store (how a resumed trainer rebuilds its window).
    pub fn new(store: Store) -> Feed {
        Feed {
            store,
            cursors: BTreeMap::new(),
            foreign: HashSet::new(),
        }
    }

    /// Reads every chunk uploaded since the last poll and hands each to
    /// `take`, in order per worker. A chunk that does not decode (corrupt,
    /// truncated, another program's object) is skipped and reported once
    /// in the result. A failed request ends the poll early with the error;
    /// the chunks handed over before it stay counted, and the next poll
    /// resumes where this one stopped.
    pub fn poll(&mut self, mut take: impl FnMut(Chunk)) -> Result<Polled, StoreError> {
        let mut polled = Polled::default();
        for worker in self.store.list_dirs(GAMES_DIR)? {
            let Ok(prefix) = worker_prefix(&worker) else {
                let key = format!("games/{worker}");
                if self.foreign.insert(key.clone()) {
                    polled.skipped.push(Skipped {
                        key,
                        why: "not a worker's name".into(),
                    });
                }
                continue;
            };
            let mut page_cursor = self.cursors.get(&worker).cloned();
            loop {
                let page = self
                    .store
                    .list_after(&prefix, page_cursor.as_deref(), LIST_PAGE)?;
                let full = page.len() == LIST_PAGE;
                for entry in page {
                    page_cursor = Some(entry.key.clone());
                    if parse_chunk_key(&entry.key, CHUNK_EXT).is_none() {
                        // Not a worker's (a name like `notes.txt` sorts after
                        // every chunk): the cursor stays on the last chunk, so
                        // the next chunk is still found.
                        if self.foreign.insert(entry.key.clone()) {
                            polled.skipped.push(Skipped {
                                key: entry.key,
                                why: format!("not a chunk key (games/<worker>/<seq>.{CHUNK_EXT})"),
                            });
                        }
                        continue;
                    }
                    if let Some(chunk) = self.read(&entry.key, &mut polled)? {
                        polled.chunks += 1;
                        polled.games += chunk.games.len() as u64;
                        take(chunk);
                    }
                    self.cursors.insert(worker.clone(), entry.key);
                }
                if !full {
                    break;
                }
            }
        }
        Ok(polled)
    }

    /// The chunk at `key`, or `None` (noted in `polled`) if it is not one.
    fn read(&self, key: &str, polled: &mut Polled) -> Result<Option<Chunk>, StoreError> {
        let mut skip = |why: String| {
            polled.skipped.push(Skipped {
                key: key.to_owned(),
                why,
            });
            Ok(None)
        };
        let Some((bytes, written)) = self.store.get_with_time(key)? else {
            // Listed, then gone: deleted by hand in between.
            return skip("deleted after it was listed".into());
        };
        match data::decode_games(key_path(key), &bytes) {
            Ok(games) => Ok(Some(Chunk {
                key: key.to_owned(),
                games,
                written,
            })),
            Err(e) => skip(e.to_string()),
        }
    }
}

/// A [`Feed`] polled on a thread of its own every `poll` seconds, so that
/// slow requests never hold up training steps; its chunks arrive on a
/// channel.
pub struct Background {
    chunks: Receiver<Chunk>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts polling `feed`. Failed requests and skipped objects are
    /// logged (each skipped object once: the cursor moves past it).
    pub fn start(mut feed: Feed, poll: Duration) -> std::io::Result<Background> {
        let (sender, chunks) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("store-feed".into())
            .spawn(move || loop {
                // Read before polling, so a stop asked during a poll still
                // gets one more: the chunks uploaded until the very end.
                let last = stopping.load(Ordering::SeqCst);
                match feed.poll(|chunk| drop(sender.send(chunk))) {
                    Ok(polled) => log_skipped(&polled),
                    Err(e) => tracing::warn!("polling the store for games: {e}"),
                }
                if last {
                    return;
                }
                let next = Instant::now() + poll;
                while Instant::now() < next && !stopping.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            })?;
        Ok(Background {
            chunks,
            stop,
            thread: Some(thread),
        })
    }

    /// The chunks read since the last call.
    pub fn take(&self) -> Vec<Chunk> {
        self.chunks.try_iter().collect()
    }

    /// Polls a last time, stops the thread and returns what it read.
    pub fn finish(mut self) -> Vec<Chunk> {
        self.stop.store(true, Ordering::SeqCst);
        let joined = self.thread.take().map(JoinHandle::join);
        if matches!(joined, Some(Err(_))) {
            tracing::error!("the store feed's thread panicked");
        }
        self.chunks.try_iter().collect()
    }
}

impl Drop for Background {
    /// Dropped unfinished (training failed), the thread stops after at
    /// most one more poll, on its own.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Logs each object a poll skipped, as a warning.
pub fn log_skipped(polled: &Polled) {
    for skipped in &polled.skipped {
        tracing::warn!(key = %skipped.key, "skipped an object under games/: {}", skipped.why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfplay::data::{encode_games, MoveRecord};
    use engine::{Outcome, Position, Reason};
    use store::layout::chunk_key;

    fn game() -> GameRecord {
        let start = Position::start();
        let mv = start.legal_moves()[0];
        let visits = vec![1; start.legal_moves().len()];
        GameRecord {
            start,
            moves: vec![MoveRecord {
                mv,
                visits,
                search_value: 0.0,
            }],
            outcome: Outcome::draw(Reason::Adjudication),
            network: 0,
        }
    }

    fn put(store: &Store, worker: &str, seq: u64, games: usize) {
        let key = chunk_key(worker, seq, CHUNK_EXT).unwrap();
        let bytes = encode_games(key_path(&key), &vec![game(); games]).unwrap();
        store.put_new(&key, bytes).unwrap();
    }

    #[test]
    fn each_chunk_once_and_bad_objects_skipped_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let mut feed = Feed::new(store.clone());
        let mut keys = Vec::new();
        let polled = feed.poll(|c| keys.push(c.key)).unwrap();
        assert_eq!((polled.chunks, polled.games), (0, 0));

        put(&store, "b", 0, 2);
        put(&store, "a", 0, 1);
        store
            .put_new("games/a/00000001.mzg", &b"garbage"[..])
            .unwrap();
        store.put_new("games/a/notes.txt", &b"hello"[..]).unwrap();
        let polled = feed.poll(|c| keys.push(c.key)).unwrap();
        assert_eq!((polled.chunks, polled.games), (2, 3));
        assert_eq!(polled.skipped.len(), 2, "{:?}", polled.skipped);
        assert_eq!(keys, ["games/a/00000000.mzg", "games/b/00000000.mzg"]);

        // A slow worker's chunk that sorts before the others' is found.
        put(&store, "a", 2, 1);
        put(&store, "c", 0, 1);
        let polled = feed.poll(|c| keys.push(c.key)).unwrap();
        assert_eq!((polled.chunks, polled.games), (2, 2));
        assert!(polled.skipped.is_empty());
        assert_eq!(keys.len(), 4);

        // A new feed (a resumed trainer) reads everything again.
        let polled = Feed::new(store).poll(|_| {}).unwrap();
        assert_eq!((polled.chunks, polled.games), (4, 5));
    }
}
