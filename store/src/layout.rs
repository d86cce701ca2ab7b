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
    Ok(format!("games/{worker}"))
}

/// The key of `worker`'s chunk number `seq`: `games/<worker>/<seq:08>.<ext>`.
pub fn chunk_key(worker: &str, seq: u64, ext: &str) -> Result<String, BadName> {
    segment("extension", ext)?;
    Ok(format!("{}/{seq:08}.{ext}", worker_prefix(worker)?))
}

/// The key of the net of training step `step`: `nets/<step:08>.safetensors`.
pub fn net_key(step: u64) -> String {
    format!("nets/{step:08}.safetensors")
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
    /// [`publish_net`](Self::publish_net). A pointer that does not parse, or
    /// a net whose CRC-32 differs from the pointer's, is
    /// [`StoreError::Corrupt`]; a net the pointer names but the store lacks
    /// is [`StoreError::NotFound`].
    pub fn latest_net(&self) -> Result<Option<(NetPointer, Bytes)>, StoreError> {
        let Some(json) = self.get(LATEST_NET)? else {
            return Ok(None);
        };
        let corrupt = |key: &str, reason: String| StoreError::Corrupt {
            url: self.url().to_owned(),
            key: key.to_owned(),
            reason,
        };
        let pointer: NetPointer = serde_json::from_slice(&json)
            .map_err(|e| corrupt(LATEST_NET, format!("not a net pointer: {e}")))?;
        let weights = self
            .get(&pointer.key)?
            .ok_or_else(|| StoreError::NotFound {
                url: self.url().to_owned(),
                key: pointer.key.clone(),
                why: format!("{LATEST_NET} points at it"),
            })?;
        let crc32 = crc32fast::hash(&weights);
        if crc32 != pointer.crc32 {
            return Err(corrupt(
                &pointer.key,
                format!(
                    "CRC-32 {crc32:08x}, but {LATEST_NET} says {:08x}",
                    pointer.crc32
                ),
            ));
        }
        Ok(Some((pointer, weights)))
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
    fn names_stay_one_segment() {
        for bad in ["", "a/b", "..", ".hidden", "sp ace"] {
            assert!(worker_prefix(bad).is_err(), "{bad:?}");
            assert!(chunk_key("w", 1, bad).is_err(), "{bad:?}");
        }
    }
}
