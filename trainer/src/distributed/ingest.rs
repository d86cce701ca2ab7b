//! The trainer's side of the store: rebuilding the replay window from the
//! chunks in it when a session starts, then reading each new chunk the
//! workers upload, once.
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
use rayon::prelude::*;

use store::layout::{parse_chunk_key, worker_prefix, GAMES_DIR};
use store::{Store, StoreError};

use super::{key_path, CHUNK_EXT};
use crate::selfplay::data::{self, GameRecord, HEADER_LEN};
use crate::training::replay::{ReplayBuffer, ReplayConfig};

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

/// A replay window rebuilt from a store, and what it was made of.
pub struct Rebuilt {
    pub replay: ReplayBuffer,
    /// Chunks and games found (every writer's, and any of the old layout),
    /// counted from their headers.
    pub chunks: u64,
    pub games: u64,
    /// Of those chunks, the newest, read whole to fill the window.
    pub read: u64,
    pub skipped: Vec<Skipped>,
}

/// A chunk found by [`Feed::rebuild`].
struct Listed {
    /// In the legacy store rather than the feed's own.
    legacy: bool,
    key: String,
    size: u64,
    written: SystemTime,
}

/// The chunks of every worker under `games/`, read in each worker's order.
pub struct Feed {
    store: Store,
    /// A run directory whose chunks may lie in the layout before stores
    /// (`games/chunk-NNNNNNNN.mzg`), read by [`rebuild`](Self::rebuild) only:
    /// nothing writes there any more.
    legacy: Option<Store>,
    /// The writer whose chunks [`poll`](Self::poll) leaves alone: the
    /// trainer's own, which it holds in memory once it has written them.
    own: Option<String>,
    /// The last chunk key seen under each worker's prefix.
    cursors: BTreeMap<String, String>,
    /// Other keys under `games/`, reported once.
    foreign: HashSet<String>,
}

impl Feed {
    /// A feed that has seen nothing yet: its first poll (or rebuild) reads
    /// every chunk in the store.
    pub fn new(store: Store) -> Feed {
        Feed {
            store,
            legacy: None,
            own: None,
            cursors: BTreeMap::new(),
            foreign: HashSet::new(),
        }
    }

    /// Also rebuilds from the chunks of the layout before stores in `run`
    /// (a run directory opened as a store).
    pub fn with_legacy(mut self, run: Store) -> Feed {
        self.legacy = Some(run);
        self
    }

    /// Polls never read `writer`'s chunks (a rebuild does).
    pub fn skipping(mut self, writer: &str) -> Feed {
        self.own = Some(writer.to_owned());
        self
    }

    /// The replay window of every chunk in the store, as if their games had
    /// been added in the order the chunks were written (each writer's in
    /// its own order, where the store dates two alike). Only the chunks'
    /// headers are read, then the newest chunks whole until they cover the
    /// window. Every cursor moves past its writer's last chunk, so polls go
    /// on with the chunks written after this. Damaged chunks are skipped
    /// and reported; a failed request is an error.
    pub fn rebuild(&mut self, config: &ReplayConfig) -> Result<Rebuilt, StoreError> {
        let mut skipped = Vec::new();
        let mut listed = self.list_all(&mut skipped)?;
        // Keys break ties: the store dates objects to the second, and one
        // writer's keys grow with time.
        listed.sort_by(|a, b| (a.written, &a.key).cmp(&(b.written, &b.key)));

        // Headers, a request each, in parallel: the requests wait on the
        // network, and the store serves many threads at once.
        let headers = listed
            .par_iter()
            .map(|chunk| self.header(chunk))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut chunks = Vec::new();
        for (chunk, header) in listed.into_iter().zip(headers) {
            match header {
                Ok(header) => chunks.push((chunk, header)),
                Err(why) => skipped.push(Skipped {
                    key: chunk.key,
                    why,
                }),
            }
        }
        let samples: Vec<u64> = chunks.iter().map(|(_, header)| header.samples).collect();
        let mut damaged = vec![false; chunks.len()];
        let mut read = 0;
        let replay = ReplayBuffer::rebuild(config, &samples, |index| {
            let chunk = &chunks[index].0;
            let store = self.source(chunk);
            let why = match store.get(&chunk.key)? {
                Some(bytes) => match data::decode_games(key_path(&chunk.key), &bytes) {
                    Ok(games) => {
                        read += 1;
                        return Ok(Some(games));
                    }
                    Err(e) => e.to_string(),
                },
                None => "deleted after it was listed".to_owned(),
            };
            damaged[index] = true;
            skipped.push(Skipped {
                key: chunk.key.clone(),
                why,
            });
            Ok(None)
        })?;
        let good = chunks.iter().zip(&damaged).filter(|(_, &bad)| !bad);
        let (chunks, games) = good.fold((0, 0), |(chunks, games), ((_, header), _)| {
            (chunks + 1, games + u64::from(header.games))
        });
        Ok(Rebuilt {
            replay,
            chunks,
            games,
            read,
            skipped,
        })
    }

    /// Every chunk in the store (and the legacy run directory), moving each
    /// writer's cursor past its last; what is not a chunk goes to `skipped`.
    fn list_all(&mut self, skipped: &mut Vec<Skipped>) -> Result<Vec<Listed>, StoreError> {
        let mut listed = Vec::new();
        for worker in self.store.list_dirs(GAMES_DIR)? {
            let Some(prefix) = self.prefix(&worker, skipped) else {
                continue;
            };
            for (entry, written) in self.store.list_with_times(&prefix)? {
                if !self.is_chunk(&entry.key, skipped) {
                    continue;
                }
                self.cursors.insert(worker.clone(), entry.key.clone());
                listed.push(Listed {
                    legacy: false,
                    key: entry.key,
                    size: entry.size,
                    written,
                });
            }
        }
        if let Some(legacy) = &self.legacy {
            // Their PGN files and any temporary files lie beside them.
            for (entry, written) in legacy.list_files(GAMES_DIR)? {
                if is_legacy_chunk(&entry.key) {
                    listed.push(Listed {
                        legacy: true,
                        key: entry.key,
                        size: entry.size,
                        written,
                    });
                }
            }
        }
        Ok(listed)
    }

    fn source(&self, chunk: &Listed) -> &Store {
        match (&self.legacy, chunk.legacy) {
            (Some(legacy), true) => legacy,
            _ => &self.store,
        }
    }

    /// The header of `chunk`, or why it is not a chunk.
    fn header(&self, chunk: &Listed) -> Result<Result<data::ChunkHeader, String>, StoreError> {
        let name = key_path(&chunk.key);
        let first = match chunk.size.min(HEADER_LEN as u64) {
            // An empty range is no request: an empty object is no chunk.
            0 => Some(Default::default()),
            len => self.source(chunk).get_range(&chunk.key, 0..len)?,
        };
        Ok(match first {
            Some(first) => data::decode_header(name, &first, chunk.size).map_err(|e| e.to_string()),
            None => Err("deleted after it was listed".to_owned()),
        })
    }

    /// The prefix of the writer `worker`, or `None` (reported once) for a
    /// name no writer has.
    fn prefix(&mut self, worker: &str, skipped: &mut Vec<Skipped>) -> Option<String> {
        let Ok(prefix) = worker_prefix(worker) else {
            let key = format!("{GAMES_DIR}/{worker}");
            if self.foreign.insert(key.clone()) {
                skipped.push(Skipped {
                    key,
                    why: "not a worker's name".into(),
                });
            }
            return None;
        };
        Some(prefix)
    }

    /// Whether `key` is a chunk key; other keys are reported once.
    fn is_chunk(&mut self, key: &str, skipped: &mut Vec<Skipped>) -> bool {
        if parse_chunk_key(key, CHUNK_EXT).is_some() {
            return true;
        }
        if self.foreign.insert(key.to_owned()) {
            skipped.push(Skipped {
                key: key.to_owned(),
                why: format!("not a chunk key (games/<worker>/<seq>.{CHUNK_EXT})"),
            });
        }
        false
    }

    /// Reads every chunk uploaded since the last poll (or rebuild) and
    /// hands each to `take`, in order per worker. A chunk that does not
    /// decode (corrupt, truncated, another program's object) is skipped
    /// and reported once in the result. A failed request ends the poll
    /// early with the error; the chunks handed over before it stay counted,
    /// and the next poll resumes where this one stopped.
    pub fn poll(&mut self, mut take: impl FnMut(Chunk)) -> Result<Polled, StoreError> {
        let mut polled = Polled::default();
        for worker in self.store.list_dirs(GAMES_DIR)? {
            if self.own.as_deref() == Some(worker.as_str()) {
                continue;
            }
            let Some(prefix) = self.prefix(&worker, &mut polled.skipped) else {
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
                    // Not a worker's (a name like `notes.txt` sorts after
                    // every chunk): the cursor stays on the last chunk, so
                    // the next chunk is still found.
                    if !self.is_chunk(&entry.key, &mut polled.skipped) {
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

/// Whether `key` is a chunk of a run directory from before stores:
/// `games/chunk-NNNNNNNN.mzg`.
fn is_legacy_chunk(key: &str) -> bool {
    let digits = key
        .strip_prefix(GAMES_DIR)
        .and_then(|k| k.strip_prefix("/chunk-"))
        .and_then(|k| k.strip_suffix(CHUNK_EXT))
        .and_then(|k| k.strip_suffix('.'));
    digits.is_some_and(|d| d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))
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
                    Ok(polled) => log_skipped(&polled.skipped),
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

/// Logs each object a poll or rebuild skipped, as a warning.
pub fn log_skipped(skipped: &[Skipped]) {
    for skipped in skipped {
        tracing::warn!(key = %skipped.key, "skipped an object under games/: {}", skipped.why);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::distributed::TRAINER;
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
            baseline: None,
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

    #[test]
    fn a_rebuild_reads_every_writer_and_the_old_layout_then_polls_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).unwrap();
        // A run directory from before stores: chunks (one damaged) with
        // their PGNs and a temporary file beside them.
        let games_dir = dir.path().join(GAMES_DIR);
        std::fs::create_dir_all(&games_dir).unwrap();
        let legacy_bytes = encode_games(Path::new("old"), &vec![game(); 3]).unwrap();
        std::fs::write(games_dir.join("chunk-00000000.mzg"), &legacy_bytes).unwrap();
        std::fs::write(games_dir.join("chunk-00000001.mzg"), &legacy_bytes[..20]).unwrap();
        std::fs::write(games_dir.join("chunk-00000000.pgn"), "").unwrap();
        std::fs::write(games_dir.join(".chunk-00000002.mzg.tmp7"), "").unwrap();
        // Then two workers and the trainer's own games.
        put(&store, "w", 0, 2);
        put(&store, TRAINER, 0, 1);
        put(&store, "w", 1, 1);
        store.put_new("games/w/notes.txt", &b"hello"[..]).unwrap();

        let config = ReplayConfig {
            min_window: 1000,
            alpha: 0.75,
            beta: 0.4,
            max_window: 1000,
        };
        let mut feed = Feed::new(store.clone())
            .with_legacy(store.clone())
            .skipping(TRAINER);
        let rebuilt = feed.rebuild(&config).unwrap();
        assert_eq!((rebuilt.chunks, rebuilt.games, rebuilt.read), (4, 7, 4));
        // A game is a sample here.
        assert_eq!(rebuilt.replay.total_samples_ever(), 7);
        let skipped: Vec<&str> = rebuilt.skipped.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(skipped.len(), 2, "{:?}", rebuilt.skipped);
        assert!(skipped.contains(&"games/chunk-00000001.mzg"));
        assert!(skipped.contains(&"games/w/notes.txt"));

        // Polls read only what comes after, never the trainer's own games,
        // and do not report the same foreign key again.
        put(&store, "w", 2, 1);
        put(&store, TRAINER, 1, 5);
        put(&store, "v", 0, 2);
        let mut keys = Vec::new();
        let polled = feed.poll(|c| keys.push(c.key)).unwrap();
        assert_eq!(keys, ["games/v/00000000.mzg", "games/w/00000002.mzg"]);
        assert!(polled.skipped.is_empty(), "{:?}", polled.skipped);

        // A small window reads only the newest chunks whole.
        let small = ReplayConfig {
            min_window: 2,
            max_window: 2,
            ..config
        };
        let rebuilt = Feed::new(store.clone()).rebuild(&small).unwrap();
        assert_eq!((rebuilt.chunks, rebuilt.games), (6, 12));
        assert_eq!(rebuilt.replay.total_samples_ever(), 12);
        assert!(rebuilt.read < 6, "read {} chunks", rebuilt.read);
    }
}
