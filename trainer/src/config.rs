//! Run configuration in TOML. Unknown keys and bad values are errors that
//! name the key.

use std::path::Path;

use anyhow::{bail, Context, Result};
use models::encoding::EncoderConfig;
use models::net::{Architecture, NetConfig};
use models::server::ServerConfig;
use serde::{Deserialize, Serialize};

pub const DEFAULT_TOML: &str = include_str!("../../configs/default.toml");
pub const GPU_TOML: &str = include_str!("../../configs/gpu.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub net: NetConfig,
    pub encoder: EncoderConfig,
    pub inference: InferenceConfig,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferenceConfig {
    pub max_batch: usize,
    pub max_wait_us: u64,
    /// libtorch CPU threads; 0 lets libtorch use one per core.
    #[serde(default)]
    pub threads: usize,
}

impl InferenceConfig {
    pub fn server(&self) -> ServerConfig {
        ServerConfig {
            max_batch: self.max_batch,
            max_wait_us: self.max_wait_us,
            threads: self.threads,
        }
    }
}

impl Config {
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let config: Config =
            toml::from_str(text).with_context(|| format!("invalid config {origin}"))?;
        config
            .validate()
            .with_context(|| format!("invalid config {origin}"))?;
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        Config::parse(&text, &path.display().to_string())
    }

    pub fn default_config() -> Config {
        Config::parse(DEFAULT_TOML, "configs/default.toml")
            .expect("embedded default config is valid")
    }

    pub fn gpu_config() -> Config {
        Config::parse(GPU_TOML, "configs/gpu.toml").expect("embedded GPU config is valid")
    }

    pub fn arch(&self) -> Architecture {
        Architecture {
            net: self.net,
            encoder: self.encoder,
        }
    }

    fn validate(&self) -> Result<()> {
        if let Err(why) = self.net.validate() {
            bail!("[net] {why}");
        }
        if self.encoder.history == 0 || self.encoder.history > 16 {
            bail!(
                "[encoder] history = {} (expected 1..=16)",
                self.encoder.history
            );
        }
        if self.inference.max_batch == 0 || self.inference.max_batch > 65_536 {
            bail!(
                "[inference] max_batch = {} (expected 1..=65536)",
                self.inference.max_batch
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_configs_parse() {
        assert_eq!(Config::default_config().net.name(), "6x64");
        assert_eq!(Config::gpu_config().net.name(), "15x192se");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let err = Config::parse(&DEFAULT_TOML.replace("blocks", "blokcs"), "test").unwrap_err();
        assert!(format!("{err:#}").contains("blokcs"), "{err:#}");
        let err = Config::parse(
            &DEFAULT_TOML.replace("channels = 64", "channels = 0"),
            "test",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("channels"), "{err:#}");
        let err = Config::parse(
            &DEFAULT_TOML.replace("history = 4", "history = \"x\""),
            "test",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("history"), "{err:#}");
    }
}
