//! One thin file per subcommand: its command-line types, the library calls
//! it makes, and what it prints. What a command does lives in the library.

pub mod arena;
pub mod bench;
pub mod config;
pub mod doctor;
pub mod export;
pub mod serve;
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
