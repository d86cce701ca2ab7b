//! Run configuration in TOML. Unknown keys and bad values are errors that
//! name the key.

use std::path::Path;

use anyhow::{bail, Context, Result};
use engine::mcts::SearchConfig;
use models::encoding::EncoderConfig;
use models::net::{Architecture, NetConfig};
use models::server::ServerConfig;
use serde::{Deserialize, Serialize};

use crate::ladder::EvaluationConfig;
use crate::replay::ReplayConfig;
use crate::selfplay::SelfPlayConfig;
use crate::train::TrainingConfig;

pub const DEFAULT_TOML: &str = include_str!("../../configs/default.toml");
pub const GPU_TOML: &str = include_str!("../../configs/gpu.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub net: NetConfig,
    pub encoder: EncoderConfig,
    /// The `[inference]` section is the inference server's own config.
    pub inference: ServerConfig,
    pub search: SearchConfig,
    pub selfplay: SelfPlayConfig,
    pub replay: ReplayConfig,
    pub training: TrainingConfig,
    #[serde(default)]
    pub evaluation: EvaluationConfig,
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
        if self.inference.replicas == 0 || self.inference.replicas > 256 {
            bail!(
                "[inference] replicas = {} (expected 1..=256)",
                self.inference.replicas
            );
        }
        let search = &self.search;
        if search.leaves_in_flight == 0 || search.c_puct <= 0.0 || search.virtual_loss < 0.0 {
            bail!("[search] leaves_in_flight >= 1, c_puct > 0 and virtual_loss >= 0 required");
        }
        if !(0.0..=1.0).contains(&search.dirichlet_epsilon) || search.dirichlet_alpha_total <= 0.0 {
            bail!("[search] dirichlet_epsilon in [0, 1] and dirichlet_alpha_total > 0 required");
        }
        if !(0.0..1.0).contains(&search.capture_prior) {
            bail!(
                "[search] capture_prior = {} (expected 0 <= capture_prior < 1)",
                search.capture_prior
            );
        }
        if search.history < self.encoder.history {
            bail!(
                "[search] history = {} must cover [encoder] history = {}",
                search.history,
                self.encoder.history
            );
        }
        self.selfplay.validate().map_err(anyhow::Error::msg)?;
        self.training.validate().map_err(anyhow::Error::msg)?;
        self.evaluation.validate().map_err(anyhow::Error::msg)?;
        if self.replay.min_window == 0 || self.replay.max_window < self.replay.min_window {
            bail!("[replay] need 0 < min_window <= max_window");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_configs_parse() {
        assert_eq!(Config::default_config().net.name(), "4x32");
        assert_eq!(Config::gpu_config().net.name(), "15x192se");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let cases = [
            ("blocks", "blokcs", "blokcs"),
            ("channels = 32", "channels = 0", "channels"),
            ("history = 2", "history = \"x\"", "history"),
            ("workers = 16", "workers = 0", "workers"),
            ("optimizer = \"sgd\"", "optimizer = \"adam\"", "optimizer"),
            (
                "[training]",
                "[training]\nlearning_rate = 1.0",
                "learning_rate",
            ),
            (
                "value_q_share = 0.0",
                "value_q_share = 0.6",
                "value_material_share",
            ),
            ("material_plies = 8", "material_plies = 0", "material_plies"),
            (
                "capture_prior = 0.2",
                "capture_prior = 1.0",
                "capture_prior",
            ),
            (
                "material_scale = 3.0",
                "material_scale = -1.0",
                "material_scale",
            ),
        ];
        for (from, to, key) in cases {
            let text = DEFAULT_TOML.replacen(from, to, 1);
            assert_ne!(text, DEFAULT_TOML, "{from}");
            let err = Config::parse(&text, "test").unwrap_err();
            assert!(format!("{err:#}").contains(key), "{key}: {err:#}");
        }
    }
}
