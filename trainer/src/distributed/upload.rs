//! Games on their way into a store: every writer (a self-play worker, or
//! the trainer with its own games) numbers its chunks under a prefix of its
//! own (`games/<worker>/<seq:08>.mzg`) and writes each create-only, so no
//! chunk ever replaces another, whatever machine wrote it.

use store::layout::{chunk_key, parse_chunk_key, worker_prefix};
use store::{Store, StoreError};

use super::{key_path, DistributedError, CHUNK_EXT};
use crate::selfplay::data::{encode_games, GameRecord};

/// Keys per listing request when a writer looks for its last chunk.
const LIST_PAGE: usize = 1000;

/// The number after the last chunk under `worker`'s prefix (0 if none), so
/// that a restarted writer with the same name carries on its sequence.
pub fn next_seq(store: &Store, worker: &str) -> Result<u64, DistributedError> {
    let prefix = worker_prefix(worker)?;
    let mut cursor: Option<String> = None;
    let mut next = 0;
    loop {
        let page = store.list_after(&prefix, cursor.as_deref(), LIST_PAGE)?;
        let full = page.len() == LIST_PAGE;
        for entry in &page {
            if let Some((_, seq)) = parse_chunk_key(&entry.key, CHUNK_EXT) {
                next = next.max(seq + 1);
            }
        }
        match page.into_iter().last() {
            Some(last) if full => cursor = Some(last.key),
            _ => return Ok(next),
        }
    }
}

/// One writer's games waiting for the store, and its next chunk number.
pub struct Uploader {
    store: Store,
    worker: String,
    seq: u64,
    pending: Vec<GameRecord>,
}

/// A chunk [`Uploader::upload`] stored.
#[derive(Debug)]
pub struct Uploaded {
    /// Its number under the writer's prefix.
    pub seq: u64,
    /// Its games, no longer pending.
    pub games: Vec<GameRecord>,
}

impl Uploader {
    /// An uploader whose first chunk is number `seq` under `worker`'s
    /// prefix (a name that is not one key segment is refused).
    pub fn new(store: &Store, worker: &str, seq: u64) -> Result<Uploader, DistributedError> {
        worker_prefix(worker)?;
        Ok(Uploader {
            store: store.clone(),
            worker: worker.to_owned(),
            seq,
            pending: Vec::new(),
        })
    }

    /// An uploader that carries on after `worker`'s last chunk in the store.
    pub fn resume(store: &Store, worker: &str) -> Result<Uploader, DistributedError> {
        let seq = next_seq(store, worker)?;
        Uploader::new(store, worker, seq)
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// The number the next chunk gets (unless another writer took it).
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Games waiting to be uploaded.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn push(&mut self, games: impl IntoIterator<Item = GameRecord>) {
        self.pending.extend(games);
    }

    /// Uploads the first `n` pending games (all, if fewer) as the next
    /// chunk. A key someone else wrote (two workers given one
    /// `--worker-id`) is logged and skipped for the next free number: never
    /// overwritten. On an error the games stay pending.
    pub fn upload(&mut self, n: usize) -> Result<Uploaded, DistributedError> {
        let n = n.min(self.pending.len());
        let key = chunk_key(&self.worker, self.seq, CHUNK_EXT)?;
        let bytes = encode_games(key_path(&key), &self.pending[..n])?;
        loop {
            let key = chunk_key(&self.worker, self.seq, CHUNK_EXT)?;
            match self.store.put_new(&key, bytes.clone()) {
                Ok(()) => {
                    let seq = self.seq;
                    self.seq += 1;
                    let games = self.pending.drain(..n).collect();
                    return Ok(Uploaded { seq, games });
                }
                Err(StoreError::AlreadyExists { .. }) => {
                    let next = next_seq(&self.store, &self.worker)?.max(self.seq + 1);
                    tracing::error!(
                        %key,
                        next,
                        "another writer holds this chunk key (is --worker-id used twice?); skipping to the next free number"
                    );
                    self.seq = next;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::selfplay::data::decode_games;
    use crate::selfplay::data::tests::one_move_game;

    #[test]
    fn a_named_writer_carries_on_its_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).unwrap();
        assert_eq!(next_seq(&store, "w").unwrap(), 0);
        for seq in [0, 1, 7] {
            let key = chunk_key("w", seq, CHUNK_EXT).unwrap();
            store.put_new(&key, &b"x"[..]).unwrap();
        }
        store.put_new("games/w/other.txt", &b"x"[..]).unwrap();
        store.put_new("games/wx/00000099.mzg", &b"x"[..]).unwrap();
        assert_eq!(next_seq(&store, "w").unwrap(), 8);
        assert_eq!(Uploader::resume(&store, "w").unwrap().next_seq(), 8);
        assert!(Uploader::new(&store, "a/b", 0).is_err());
    }

    #[test]
    fn a_taken_chunk_key_is_skipped_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).unwrap();
        // Another process with the same --worker-id got there first.
        store
            .put_new("games/w/00000000.mzg", &b"theirs"[..])
            .unwrap();
        let game = one_move_game(0);
        let mut uploader = Uploader::new(&store, "w", 0).unwrap();
        uploader.push(vec![game.clone(); 3]);
        let uploaded = uploader.upload(2).unwrap();
        assert_eq!((uploaded.seq, uploaded.games.len()), (1, 2));
        assert_eq!(uploader.pending(), 1);
        assert_eq!(uploader.next_seq(), 2);
        let theirs = store.get("games/w/00000000.mzg").unwrap().unwrap();
        assert_eq!(&theirs[..], b"theirs");
        let ours = store.get("games/w/00000001.mzg").unwrap().unwrap();
        let key = Path::new("games/w/00000001.mzg");
        assert_eq!(decode_games(key, &ours).unwrap(), vec![game; 2]);
        // More than is pending: what there is.
        assert_eq!(uploader.upload(10).unwrap().games.len(), 1);
    }
}
