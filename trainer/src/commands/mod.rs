//! One thin file per subcommand: its command-line types, the library calls
//! it makes, and what it prints. What a command does lives in the library.

pub mod arena;
pub mod bench;
pub mod config;
pub mod doctor;
pub mod export;
pub mod rate;
pub mod selfplay;
pub mod serve;
pub mod store;
pub mod train;
pub mod uci;

use std::path::Path;

use anyhow::Result;
use trainer::config::Config;

/// The config file given, or the embedded default.
pub fn load_config(path: Option<&Path>) -> Result<Config> {
    match path {
        Some(path) => Ok(Config::load(path)?),
        None => Ok(Config::default_config()),
    }
}

/// The seed given, or one from the clock (a run that names none differs
/// from the last).
pub fn seed_or_clock(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    })
}

/// `--precision` values, as the config spells them.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PrecisionArg {
    Auto,
    Fp32,
    Bf16,
    Fp16,
}

impl From<PrecisionArg> for models::Precision {
    fn from(arg: PrecisionArg) -> models::Precision {
        match arg {
            PrecisionArg::Auto => models::Precision::Auto,
            PrecisionArg::Fp32 => models::Precision::Fp32,
            PrecisionArg::Bf16 => models::Precision::Bf16,
            PrecisionArg::Fp16 => models::Precision::Fp16,
        }
    }
}
