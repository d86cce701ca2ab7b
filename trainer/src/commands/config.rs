//! `mixzero config`: the resolved config, or a check of one file.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use trainer::config::Config;

use super::load_config;

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Print every key of a config (default: the embedded default) as it
    /// resolves: the file laid over configs/default.toml.
    Show {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Check a config file: exit 0 and say so, or name the bad `section.key`.
    Check { file: PathBuf },
}

pub fn run(what: ConfigCommand) -> Result<()> {
    match what {
        ConfigCommand::Show { config } => {
            print!("{}", load_config(config.as_deref())?.to_toml());
        }
        ConfigCommand::Check { file } => {
            Config::load(&file)?;
            println!("{}: valid", file.display());
        }
    }
    Ok(())
}
