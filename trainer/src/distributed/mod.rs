//! A run's games live in an object store (see [`store::layout`]), and so
//! do, on many machines (issue #13), the nets that self-play workers
//! (`mixzero selfplay --store`) and one trainer (`mixzero train --store`)
//! exchange:
//!
//! ```text
//! config.toml                  the run's resolved config (create-only, by the trainer)
//! games/<worker>/<seq:08>.mzg  a worker's chunks of games (create-only)
//! games/trainer/<seq:08>.mzg   the trainer's own games, likewise
//! nets/<step:08>.safetensors, nets/latest   published nets and the pointer
//! ```
//!
//! A trainer without `--store` uses its run directory as the store (its
//! games under `RUN/games/trainer/`), through the same code: its games are
//! written by an [`upload::Uploader`] and its window rebuilt by
//! [`ingest::Feed::rebuild`] either way.
//!
//! No machine ever overwrites another's object and none needs a lock: each
//! writer numbers its own chunks, the trainer alone writes nets and the
//! config, and readers poll (the trainer each worker's prefix with its own
//! cursor, the workers the net pointer).

pub mod gc;
pub mod ingest;
pub mod upload;
pub mod worker;

use std::path::Path;

use engine::{check, within, InvalidKey};
use serde::{Deserialize, Serialize};
use store::layout::NetPointer;
use store::{Store, StoreError};
use thiserror::Error;

use crate::config::{Config, ConfigError};
use crate::selfplay::data::DataError;

/// The key of the run's config in the store.
pub const CONFIG_KEY: &str = "config.toml";
/// The extension of chunk keys (the format of [`crate::selfplay::data`]).
pub const CHUNK_EXT: &str = "mzg";
/// The writer name of the trainer's own games (`games/trainer/`), which no
/// worker may take: the trainer holds those games in memory already, so
/// its feed reads them back only when it rebuilds its window.
pub const TRAINER: &str = "trainer";

/// The `[distributed]` section: how workers and the trainer use the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributedConfig {
    /// Games per uploaded chunk: fewer means fresher data and more requests
    /// (a killed worker loses at most one unfinished chunk).
    pub chunk_games: usize,
    /// Seconds between polls: a worker's of the net pointer, the trainer's of
    /// the workers' chunks.
    pub poll_seconds: f64,
}

impl DistributedConfig {
    pub fn validate(&self) -> Result<(), InvalidKey> {
        within("chunk_games", self.chunk_games, 1, 100_000)?;
        check(
            self.poll_seconds.is_finite() && (0.1..=3600.0).contains(&self.poll_seconds),
            "poll_seconds",
            || format!("{} (expected 0.1 to 3600 seconds)", self.poll_seconds),
        )
    }
}

/// What goes wrong between a machine and the store, beyond the store's
/// own errors.
#[derive(Debug, Error)]
pub enum DistributedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{url}: {CONFIG_KEY}: {source}")]
    StoredConfig {
        url: String,
        // Boxed, like the other large variants, to keep the error small.
        #[source]
        source: Box<ConfigError>,
    },
    #[error(
        "{url} already holds another config ({CONFIG_KEY}): give the run's own config (a worker may leave --config out), or use a new store prefix"
    )]
    OtherConfig { url: String },
    #[error(
        "{url} has no {CONFIG_KEY} yet: start the trainer (`mixzero train --store`) first, or give the worker --config"
    )]
    NoConfig { url: String },
    #[error(transparent)]
    Name(#[from] store::layout::BadName),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("{what}: {source}")]
    Weights {
        what: String,
        #[source]
        source: models::weights::WeightsError,
    },
    #[error("net {key} is a {found:?}, the run's config asks for {expected:?}")]
    Architecture {
        key: String,
        found: Box<models::net::Architecture>,
        expected: Box<models::net::Architecture>,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{flag}: {why} (the worker's {key})")]
    Hardware {
        flag: String,
        key: String,
        why: String,
    },
    #[error("worker id `{0}` names the trainer's own games; choose another --worker-id")]
    ReservedWorkerId(String),
    #[error("the inference server stopped")]
    ServerStopped,
    #[error("self-play: {0}")]
    SelfPlay(engine::EvalError),
}

impl DistributedError {
    /// Whether trying again later can succeed: the store's errors (a store
    /// that is down, a network that drops), not a game that cannot be
    /// encoded or a name that cannot be formed, which would fail the same
    /// way at every try while the games pile up.
    pub fn is_transient(&self) -> bool {
        matches!(self, DistributedError::Store(_))
    }
}

/// Writes the trainer's `config` to the store once (create-only), so that
/// every worker plays with the run's settings; a store that already holds
/// another config is refused, as a run directory refuses one.
pub fn share_config(store: &Store, config: &Config) -> Result<(), DistributedError> {
    match store.put_new(CONFIG_KEY, config.to_toml()) {
        Ok(()) => Ok(()),
        Err(StoreError::AlreadyExists { .. }) => match stored_config(store)? {
            Some(stored) if stored == *config => Ok(()),
            _ => Err(DistributedError::OtherConfig {
                url: store.url().to_owned(),
            }),
        },
        Err(e) => Err(e.into()),
    }
}

/// The run's config as the trainer stored it, or `None` before it did.
pub fn stored_config(store: &Store) -> Result<Option<Config>, DistributedError> {
    let Some(bytes) = store.get(CONFIG_KEY)? else {
        return Ok(None);
    };
    let origin = format!("{}/{CONFIG_KEY}", store.url());
    let text = String::from_utf8_lossy(&bytes);
    Config::parse_saved(&text, &origin)
        .map(Some)
        .map_err(|source| DistributedError::StoredConfig {
            url: store.url().to_owned(),
            source: Box::new(source),
        })
}

/// The config a worker plays with: the store's (so that it agrees with the
/// trainer), else the `given` one; a given config that differs from the
/// store's is refused.
pub fn worker_config(store: &Store, given: Option<Config>) -> Result<Config, DistributedError> {
    match (stored_config(store)?, given) {
        (Some(stored), Some(given)) if stored != given => Err(DistributedError::OtherConfig {
            url: store.url().to_owned(),
        }),
        (Some(stored), _) => Ok(stored),
        (None, Some(given)) => Ok(given),
        (None, None) => Err(DistributedError::NoConfig {
            url: store.url().to_owned(),
        }),
    }
}

/// Publishes checkpoint `checkpoint`'s weights file as the net of training
/// step `step`: workers switch to it at their next poll.
pub fn publish_checkpoint(
    store: &Store,
    checkpoints: &crate::run_dir::Checkpoints,
    checkpoint: u32,
    step: u64,
) -> Result<NetPointer, DistributedError> {
    let path = checkpoints.weights(checkpoint);
    let bytes = std::fs::read(&path).map_err(|source| DistributedError::Io {
        path: path.clone(),
        source,
    })?;
    let pointer = store.publish_net(step, bytes)?;
    tracing::info!(checkpoint, step, net = %pointer.key, "net published");
    Ok(pointer)
}

/// The chunk's key as a path, for the chunk reader's error messages.
fn key_path(key: &str) -> &Path {
    Path::new(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_shared_once_and_a_different_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let config = Config::default_config();
        assert!(matches!(
            worker_config(&store, None),
            Err(DistributedError::NoConfig { .. })
        ));
        share_config(&store, &config).unwrap();
        // Again (a restarted trainer): the same config is fine.
        share_config(&store, &config).unwrap();
        assert_eq!(worker_config(&store, None).unwrap(), config);
        let mut other = config.clone();
        other.distributed.chunk_games += 1;
        assert!(matches!(
            share_config(&store, &other),
            Err(DistributedError::OtherConfig { .. })
        ));
        assert!(matches!(
            worker_config(&store, Some(other)),
            Err(DistributedError::OtherConfig { .. })
        ));
    }
}
