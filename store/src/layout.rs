//! Where a run shared through a store keeps its objects:
//!
//! ```text
//! games/<worker>/<seq:08>.<ext>   a chunk of self-play games (create-only)
//! nets/<step:08>.safetensors      a published net (create-only)
//! nets/latest                     JSON NetPointer to the newest net (overwritten)
//! ```
//!
//! Every writer owns its keys: a worker numbers its own chunks, so no two
//! machines ever write one key, and create-only puts turn a clash (two
//! workers given one name) into an error instead of lost games. Numbers are
//! zero-padded to 8 digits so keys sort in numeric order up to 99,999,999,
//! which lets a reader poll `games/<worker>` with
//! [`Store::list_after`] and a cursor. Readers follow `nets/latest`, which
//! is replaced atomically after the net it names is complete, and check the
//! net's CRC-32 against it.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::{Store, StoreError};

/// Where the workers' chunks live, a folder per worker.
pub const GAMES_DIR: &str = "games";
/// Where the published nets and their pointer live.
pub const NETS_DIR: &str = "nets";
/// The pointer to the newest net.
pub const LATEST_NET: &str = "nets/latest";

/// A worker name or file extension that would not stay one key segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{name}` must be non-empty ASCII letters, digits, `-`, `_` or `.`, not starting with `.`")]
pub struct BadName {
    pub what: &'static str,
    pub name: String,
}

/// The prefix under which `worker`'s chunks live (`games/<worker>`), to poll
/// with [`Store::list_after`].
pub fn worker_prefix(worker: &str) -> Result<String, BadName> {
    segment("worker name", worker)?;
    Ok(format!("{GAMES_DIR}/{worker}"))
}

/// The key of `worker`'s chunk number `seq`: `games/<worker>/<seq:08>.<ext>`.
pub fn chunk_key(worker: &str, seq: u64, ext: &str) -> Result<String, BadName> {
    segment("extension", ext)?;
    Ok(format!("{}/{seq:08}.{ext}", worker_prefix(worker)?))
}

/// The worker and number of a key [`chunk_key`] made with `ext`, or `None`
/// for any other key (a foreign object, a nested one, a temporary name), so
/// a reader can skip what no worker wrote.
pub fn parse_chunk_key<'k>(key: &'k str, ext: &str) -> Option<(&'k str, u64)> {
    let (worker, name) = key
        .strip_prefix(GAMES_DIR)?
        .strip_prefix('/')?
        .split_once('/')?;
    let digits = name.strip_suffix(ext)?.strip_suffix('.')?;
    let well_formed = segment("worker name", worker).is_ok()
        && digits.len() >= 8
        && digits.bytes().all(|b| b.is_ascii_digit());
    well_formed.then(|| Some((worker, digits.parse().ok()?)))?
}

/// The key of the net of training step `step`: `nets/<step:08>.safetensors`.
pub fn net_key(step: u64) -> String {
    format!("{NETS_DIR}/{step:08}.safetensors")
}

fn segment(what: &'static str, name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(()).ok_or_else(|| BadName {
        what,
        name: name.to_owned(),
    })
}

/// The contents of [`LATEST_NET`]: which net is newest, and its checksum so
/// a reader knows it got all of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetPointer {
    pub step: u64,
    pub key: String,
    pub crc32: u32,
}

impl Store {
    /// Publishes the net of `step`: writes it create-only under
    /// [`net_key`], then points [`LATEST_NET`] at it, so a reader never
    /// follows the pointer to a net still being written. Publishing the same
    /// bytes again succeeds (a trainer restarted between the two writes
    /// finishes the job); different bytes under a published step are
    /// [`StoreError::AlreadyExists`].
    pub fn publish_net(
        &self,
        step: u64,
        weights: impl Into<Bytes>,
    ) -> Result<NetPointer, StoreError> {
        let weights = weights.into();
        let pointer = NetPointer {
            step,
            key: net_key(step),
            crc32: crc32fast::hash(&weights),
        };
        match self.put_new(&pointer.key, weights.clone()) {
            Ok(()) => {}
            Err(StoreError::AlreadyExists { .. })
                if self.get(&pointer.key)?.as_ref() == Some(&weights) => {}
            Err(e) => return Err(e),
        }
        let json = serde_json::to_vec(&pointer).map_err(|e| StoreError::Corrupt {
            url: self.url().to_owned(),
            key: LATEST_NET.to_owned(),
            reason: format!("cannot encode the pointer: {e}"),
        })?;
        self.put_pointer(LATEST_NET, json)?;
        Ok(pointer)
    }

    /// The newest published net and its bytes, or `None` before the first
    /// [`publish_net`](Self::publish_net): [`latest_pointer`](Self::latest_pointer)
    /// then [`fetch_net`](Self::fetch_net).
    pub fn latest_net(&self) -> Result<Option<(NetPointer, Bytes)>, StoreError> {
        let Some(pointer) = self.latest_pointer()? else {
            return Ok(None);
        };
        let weights = self.fetch_net(&pointer)?;
        Ok(Some((pointer, weights)))
    }

    /// Reads [`LATEST_NET`] alone (a few dozen bytes), or `None` before the
    /// first [`publish_net`](Self::publish_net), so that a poller fetches a
    /// net only when the pointer names a new one. A pointer that does not
    /// parse is [`StoreError::Corrupt`].
    pub fn latest_pointer(&self) -> Result<Option<NetPointer>, StoreError> {
        let Some(json) = self.get(LATEST_NET)? else {
            return Ok(None);
        };
        serde_json::from_slice(&json)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                url: self.url().to_owned(),
                key: LATEST_NET.to_owned(),
                reason: format!("not a net pointer: {e}"),
            })
    }

    /// The bytes of the net `pointer` names. A net whose CRC-32 differs from
    /// the pointer's is [`StoreError::Corrupt`]; one the store lacks is
    /// [`StoreError::NotFound`].
    pub fn fetch_net(&self, pointer: &NetPointer) -> Result<Bytes, StoreError> {
        let weights = self
            .get(&pointer.key)?
            .ok_or_else(|| StoreError::NotFound {
                url: self.url().to_owned(),
                key: pointer.key.clone(),
                why: format!("{LATEST_NET} points at it"),
            })?;
        let crc32 = crc32fast::hash(&weights);
        if crc32 != pointer.crc32 {
            return Err(StoreError::Corrupt {
                url: self.url().to_owned(),
                key: pointer.key.clone(),
                reason: format!(
                    "CRC-32 {crc32:08x}, but {LATEST_NET} says {:08x}",
                    pointer.crc32
                ),
            });
        }
        Ok(weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_number() {
        assert_eq!(
            chunk_key("w-1", 7, "chunk").unwrap(),
            "games/w-1/00000007.chunk"
        );
        assert_eq!(net_key(120), "nets/00000120.safetensors");
        assert!(net_key(99) < net_key(100));
    }

    #[test]
    fn chunk_keys_parse_back() {
        let key = chunk_key("w-1", 42, "mzg").unwrap();
        assert_eq!(parse_chunk_key(&key, "mzg"), Some(("w-1", 42)));
        for other in [
            "games/w-1/00000042.pgn",
            "games/w-1/x/00000042.mzg",
            "games/w-1/42.mzg",
            "games/w-1/0000004a.mzg",
            "nets/00000042.mzg",
            "games/.w/00000042.mzg",
        ] {
            assert_eq!(parse_chunk_key(other, "mzg"), None, "{other}");
        }
    }

    #[test]
    fn names_stay_one_segment() {
        for bad in ["", "a/b", "..", ".hidden", "sp ace"] {
            assert!(worker_prefix(bad).is_err(), "{bad:?}");
            assert!(chunk_key("w", 1, bad).is_err(), "{bad:?}");
        }
    }
}
