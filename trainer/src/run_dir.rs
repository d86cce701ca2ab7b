//! The layout of a run directory, in one place:
//!
//! ```text
//! RUN/config.toml        the resolved config (every key)
//! RUN/version.txt        a line per session: the code version that ran
//! RUN/bootstrap.txt      the PGN texts `--bootstrap` imported (checksums)
//! RUN/checkpoints/       NNNNNN.weights.safetensors, NNNNNN.state.safetensors,
//!                        latest and best (a checkpoint number each)
//! RUN/games/trainer/     00000000.mzg, ...: the trainer's games, when the run
//!                        directory is the run's store (no `--store`; see
//!                        `crate::distributed`)
//! RUN/pgn/               00000000.pgn, ...: each of those chunks as PGN
//! RUN/logs/              TensorBoard event files and metrics.jsonl
//! ```
//!
//! Every file is written atomically (temporary file, then rename), the
//! `latest` pointer after the checkpoint it names; chunks are written
//! create-only, synced, through the store. Run directories from before
//! stores hold their chunks as `RUN/games/chunk-NNNNNNNN.mzg` (a PGN
//! beside each), which a resumed run reads too.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use models::weights::write_atomically;

use crate::config::Config;

/// A run directory.
#[derive(Clone, Debug)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// The config of this run: its own when resuming (a `given` one must
    /// match it), else `given` or the embedded default.
    pub fn resolve_config(&self, given: Option<Config>) -> Result<Config> {
        let stored = self.config();
        if stored.exists() {
            let config = Config::load_saved(&stored)?;
            if given.is_some_and(|given| given != config) {
                bail!(
                    "{} was started with another config ({}); use a new run directory or resume without a config",
                    self.root.display(),
                    stored.display()
                );
            }
            return Ok(config);
        }
        Ok(given.unwrap_or_else(Config::default_config))
    }

    pub fn bootstrap_log(&self) -> PathBuf {
        self.root.join("bootstrap.txt")
    }

    pub fn checkpoints(&self) -> Checkpoints {
        Checkpoints::new(self.root.join("checkpoints"))
    }

    /// Where the trainer's own chunks are written as PGN, one file each.
    pub fn pgn(&self) -> PathBuf {
        self.root.join("pgn")
    }

    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// Creates the folders, writes `config` once (a resumed run keeps the
    /// config it started with) and records the code version.
    pub fn prepare(&self, config: &Config, code_version: &str) -> Result<()> {
        for dir in [self.checkpoints().dir().to_path_buf(), self.logs()] {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let config_path = self.config();
        if !config_path.exists() {
            // Resolved, every key written: a later change of the embedded
            // defaults does not change a resumed run.
            let text = format!(
                "# The resolved config of this run (every key), written by mixzero {code_version}.\n{}",
                config.to_toml()
            );
            write_atomically(&config_path, text.as_bytes())
                .with_context(|| format!("writing {}", config_path.display()))?;
        }
        let version_path = self.root.join("version.txt");
        let mut versions = std::fs::read_to_string(&version_path).unwrap_or_default();
        versions.push_str(&format!("{code_version}\n"));
        write_atomically(&version_path, versions.as_bytes())
            .with_context(|| format!("writing {}", version_path.display()))
    }
}

/// A checkpoints directory: numbered weights and optimizer-state files, and
/// the `latest` and `best` pointers.
#[derive(Clone, Debug)]
pub struct Checkpoints {
    dir: PathBuf,
}

impl Checkpoints {
    pub fn new(dir: impl Into<PathBuf>) -> Checkpoints {
        Checkpoints { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The weights file of checkpoint `n`: the net alone, what engines load.
    pub fn weights(&self, n: u32) -> PathBuf {
        self.dir.join(format!("{n:06}.weights.safetensors"))
    }

    /// The optimizer state and counters of checkpoint `n`.
    pub fn state(&self, n: u32) -> PathBuf {
        self.dir.join(format!("{n:06}.state.safetensors"))
    }

    /// The newest checkpoint, if any was written.
    pub fn latest(&self) -> Result<Option<u32>> {
        read_number(&self.dir.join("latest"))
    }

    pub fn set_latest(&self, n: u32) -> Result<()> {
        write_number(&self.dir.join("latest"), n)
    }

    /// With gating, the checkpoint self-play uses.
    pub fn best(&self) -> Result<Option<u32>> {
        read_number(&self.dir.join("best"))
    }

    pub fn set_best(&self, n: u32) -> Result<()> {
        write_number(&self.dir.join("best"), n)
    }
}

/// A pointer file's checkpoint number; `None` when the file does not exist.
fn read_number(path: &Path) -> Result<Option<u32>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let text = text.trim();
            match text.bytes().all(|b| b.is_ascii_digit()) {
                true => text.parse().map(Some).ok(),
                false => None,
            }
            .with_context(|| {
                format!(
                    "{}: expected a checkpoint number, found {text:?}",
                    path.display()
                )
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_number(path: &Path, n: u32) -> Result<()> {
    write_atomically(path, format!("{n:06}\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The weights file behind `path`: a weights file itself, a `latest` file
/// naming a checkpoint (`000012` means `000012.weights.safetensors` beside
/// it), a checkpoints directory holding `latest`, or a run directory holding
/// `checkpoints/latest`.
pub fn resolve_weights(path: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        for latest in [path.join("checkpoints").join("latest"), path.join("latest")] {
            if latest.is_file() {
                return resolve_weights(&latest);
            }
        }
        bail!(
            "{}: a directory without checkpoints/latest or latest (no checkpoint yet?)",
            path.display()
        );
    }
    if path.file_name() == Some("latest".as_ref()) {
        let checkpoints = Checkpoints::new(path.parent().unwrap_or(Path::new(".")));
        let n = checkpoints
            .latest()?
            .with_context(|| format!("{}: no such file", path.display()))?;
        let weights = checkpoints.weights(n);
        if !weights.is_file() {
            bail!(
                "{} names checkpoint {n:06}, but {} does not exist",
                path.display(),
                weights.display()
            );
        }
        return Ok(weights);
    }
    if !path.is_file() {
        bail!("{}: no such weights file", path.display());
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_refuse_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path());
        assert_eq!(checkpoints.latest().unwrap(), None);
        checkpoints.set_latest(12).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("latest")).unwrap(),
            "000012\n"
        );
        assert_eq!(checkpoints.latest().unwrap(), Some(12));
        assert_eq!(
            checkpoints.weights(12),
            dir.path().join("000012.weights.safetensors")
        );
        checkpoints.set_best(3).unwrap();
        assert_eq!(checkpoints.best().unwrap(), Some(3));
        for garbage in ["", "12a", "-1", "99999999999"] {
            std::fs::write(dir.path().join("latest"), garbage).unwrap();
            let err = format!("{:#}", checkpoints.latest().unwrap_err());
            assert!(
                err.contains("expected a checkpoint number"),
                "{garbage:?}: {err}"
            );
        }
    }
}
