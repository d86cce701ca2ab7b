//! Run configuration in TOML. The embedded `configs/default.toml` is the one
//! source of every default: a user's file is laid over it key by key, so a
//! key left out takes the default file's value. Unknown keys, values of the
//! wrong type and values out of range are errors naming the file and the
//! `section.key`.

use std::path::Path;

use engine::mcts::SearchConfig;
use engine::InvalidKey;
use models::encoding::EncoderConfig;
use models::net::{Architecture, NetConfig};
use models::server::ServerConfig;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::distributed::DistributedConfig;
use crate::eval::ladder::EvaluationConfig;
use crate::selfplay::SelfPlayConfig;
use crate::training::replay::{CappedValue, ReplayConfig};
use crate::training::state::TrainingConfig;

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
    pub evaluation: EvaluationConfig,
    pub distributed: DistributedConfig,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config {origin} is not valid TOML: {source}")]
    Toml {
        origin: String,
        source: toml::de::Error,
    },
    #[error("config {origin}: {key}: {why}")]
    Key {
        origin: String,
        /// `section.key`, or the section for a key it does not have.
        key: String,
        why: String,
    },
}

impl Config {
    /// Parses `text` (named `origin` in errors) laid over the embedded
    /// default config, and checks every value.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let user: toml::Table = text.parse().map_err(|source| ConfigError::Toml {
            origin: origin.to_string(),
            source,
        })?;
        let mut merged: toml::Table = DEFAULT_TOML.parse().expect("the embedded default parses");
        lay_over(&mut merged, user);
        let config: Config = serde_path_to_error::deserialize(merged).map_err(|e| {
            let key = e.path().to_string();
            ConfigError::Key {
                origin: origin.to_string(),
                key,
                why: e.into_inner().message().to_string(),
            }
        })?;
        config.validate().map_err(|(key, why)| ConfigError::Key {
            origin: origin.to_string(),
            key,
            why,
        })?;
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::parse(&read(path)?, &path.display().to_string())
    }

    /// A config a run saved when it started (its run directory's, or the
    /// one a trainer stored for its workers). Saved configs name every key
    /// of their version; a key added since whose default changes what the
    /// run does (its net's heads, so its checkpoints; its games) takes the value its
    /// absence meant then, so that an older run resumes as it started.
    pub fn parse_saved(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let mut saved: toml::Table = text.parse().map_err(|source| ConfigError::Toml {
            origin: origin.to_string(),
            source,
        })?;
        for (section, key, then) in [
            ("net", "moves_left_head", toml::Value::Boolean(false)),
            ("training", "moves_left_weight", toml::Value::Float(0.0)),
            ("training", "value_q_share", toml::Value::Float(0.0)),
            ("selfplay", "sparse_start_share", toml::Value::Float(0.0)),
            ("encoder", "attacks", toml::Value::Boolean(false)),
            ("search", "moves_left_effect", toml::Value::Float(0.0)),
            ("search", "draw_score", toml::Value::Float(0.0)),
            // Unused while the effect is 0; the search's default, written once.
            (
                "search",
                "moves_left_slope",
                toml::Value::Float(SearchConfig::default().moves_left_slope.into()),
            ),
        ] {
            if let Some(toml::Value::Table(table)) = saved.get_mut(section) {
                table.entry(key).or_insert(then);
            }
        }
        // Before its own key a noised root had every node's reduction.
        if let Some(toml::Value::Table(search)) = saved.get_mut("search") {
            if let Some(fpu) = search.get("fpu_reduction").cloned() {
                search.entry("noised_root_fpu_reduction").or_insert(fpu);
            }
        }
        Config::parse(&saved.to_string(), origin)
    }

    /// [`Config::parse_saved`] of the file at `path`.
    pub fn load_saved(path: &Path) -> Result<Config, ConfigError> {
        Config::parse_saved(&read(path)?, &path.display().to_string())
    }

    pub fn default_config() -> Config {
        Config::parse(DEFAULT_TOML, "configs/default.toml")
            .expect("embedded default config is valid")
    }

    pub fn gpu_config() -> Config {
        Config::parse(GPU_TOML, "configs/gpu.toml").expect("embedded GPU config is valid")
    }

    /// The config as TOML: every key, resolved.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a config serialises")
    }

    pub fn arch(&self) -> Architecture {
        Architecture {
            net: self.net,
            encoder: self.encoder,
        }
    }

    /// Every section's own checks, then those across sections; an error is
    /// `(section.key, why)`.
    fn validate(&self) -> Result<(), (String, String)> {
        let within = |section: &str| {
            let section = section.to_string();
            move |e: InvalidKey| (format!("{section}.{}", e.key), e.why)
        };
        self.net.validate().map_err(within("net"))?;
        self.encoder.validate().map_err(within("encoder"))?;
        self.inference.validate().map_err(within("inference"))?;
        self.search.validate().map_err(within("search"))?;
        self.selfplay.validate().map_err(within("selfplay"))?;
        self.replay.validate().map_err(within("replay"))?;
        self.training.validate().map_err(within("training"))?;
        self.evaluation.validate().map_err(within("evaluation"))?;
        self.distributed.validate().map_err(within("distributed"))?;
        if self.search.history < self.encoder.history {
            return Err((
                "search.history".into(),
                format!(
                    "{} must cover encoder.history = {}",
                    self.search.history, self.encoder.history
                ),
            ));
        }
        if self.training.capped_value == CappedValue::Verdict
            && self.encoder.ply_plane != self.selfplay.max_plies as u32
        {
            return Err((
                "training.capped_value".into(),
                format!(
                    "\"verdict\" needs encoder.ply_plane = selfplay.max_plies ({}), so that \
                     the position shows the cap; it is {}",
                    self.selfplay.max_plies, self.encoder.ply_plane
                ),
            ));
        }
        let heads = [
            (
                "material",
                self.training.material_weight,
                self.net.material_head,
            ),
            (
                "moves_left",
                self.training.moves_left_weight,
                self.net.moves_left_head,
            ),
            ("reply", self.training.reply_weight, self.net.reply_head),
        ];
        for (head, weight, present) in heads {
            if weight > 0.0 && !present {
                return Err((
                    format!("training.{head}_weight"),
                    format!("a weight above 0 needs net.{head}_head = true"),
                ));
            }
        }
        Ok(())
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Lays `over` onto `base`: tables merge key by key, anything else replaces.
fn lay_over(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => lay_over(base, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_configs_parse() {
        assert_eq!(Config::default_config().net.name(), "2x32");
        assert_eq!(Config::gpu_config().net.name(), "15x192se");
        // The distillation configs the README's commands use.
        let distilled = include_str!("../../configs/distilled.toml");
        let config = Config::parse(distilled, "configs/distilled.toml").unwrap();
        assert!(config.training.value_q_share > 0.0);
        // Both recipes were measured without the attack planes the default has.
        assert!(Config::default_config().encoder.attacks);
        assert!(!config.encoder.attacks);
        // ...and with the 4-block tower the default had then.
        assert_eq!(config.net.name(), "4x32");
        let selfplay = include_str!("../../configs/distilled-selfplay.toml");
        let config = Config::parse(selfplay, "configs/distilled-selfplay.toml").unwrap();
        assert_eq!(config.search.capture_prior, 0.0);
        assert_eq!(config.replay.min_window, config.replay.max_window);
        assert!(!config.encoder.attacks);
        assert_eq!(config.net.name(), "4x32");
    }

    /// `section.key` of every value in a TOML text's tables.
    fn keys(text: &str) -> Vec<(String, toml::Value)> {
        let table: toml::Table = text.parse().unwrap();
        table
            .into_iter()
            .flat_map(|(section, value)| match value {
                toml::Value::Table(keys) => keys
                    .into_iter()
                    .map(|(key, value)| (format!("{section}.{key}"), value))
                    .collect::<Vec<_>>(),
                _ => panic!("{section} is not a section"),
            })
            .collect()
    }

    #[test]
    fn every_key_round_trips_and_the_default_file_has_them_all() {
        for (text, origin) in [(DEFAULT_TOML, "default"), (GPU_TOML, "gpu")] {
            let config = Config::parse(text, origin).unwrap();
            let resolved = config.to_toml();
            assert_eq!(Config::parse(&resolved, "resolved").unwrap(), config);
            let written: Vec<String> = keys(&resolved).into_iter().map(|(k, _)| k).collect();
            for (key, value) in keys(text) {
                assert!(written.contains(&key), "{origin}: {key} not written");
                // The value read is the value written.
                let again = keys(&resolved)
                    .into_iter()
                    .find(|(k, _)| *k == key)
                    .unwrap()
                    .1;
                let same = match (&value, &again) {
                    (toml::Value::Integer(a), toml::Value::Float(b)) => *a as f64 == *b,
                    _ => value == again,
                };
                assert!(same, "{origin}: {key} = {value} read back as {again}");
            }
        }
        // The default file names every key: it is where defaults come from.
        let all: Vec<String> = keys(&Config::default_config().to_toml())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let listed: Vec<String> = keys(DEFAULT_TOML).into_iter().map(|(k, _)| k).collect();
        for key in all {
            assert!(listed.contains(&key), "configs/default.toml lacks {key}");
        }
    }

    #[test]
    fn capped_games_teach_their_verdict_once_the_cap_is_an_input() {
        let verdict = "[encoder]\nply_plane = 100\n[training]\ncapped_value = \"verdict\"\n";
        let config = Config::parse(verdict, "verdict").unwrap();
        assert_eq!(config.training.capped_value, CappedValue::Verdict);
        assert_eq!(config.encoder.ply_plane, 100);
    }

    #[test]
    fn a_missing_key_takes_the_default_files_value() {
        let config = Config::parse("[replay]\nalpha = 0.5\n", "partial").unwrap();
        let default = Config::default_config();
        assert_eq!(config.replay.alpha, 0.5);
        assert_eq!(
            Config {
                replay: default.replay,
                ..config
            },
            default
        );
        assert_eq!(Config::parse("", "empty").unwrap(), default);
    }

    #[test]
    fn a_saved_config_from_before_a_key_resumes_as_it_started() {
        let default = Config::default_config();
        let mut saved: toml::Table = default.to_toml().parse().unwrap();
        for (section, key) in [
            ("net", "moves_left_head"),
            ("training", "moves_left_weight"),
            ("training", "value_q_share"),
            ("selfplay", "sparse_start_share"),
            ("encoder", "attacks"),
            ("search", "noised_root_fpu_reduction"),
            ("search", "draw_score"),
        ] {
            saved[section].as_table_mut().unwrap().remove(key);
        }
        let old = Config::parse_saved(&saved.to_string(), "old run").unwrap();
        assert_eq!(
            old.search.noised_root_fpu_reduction,
            default.search.fpu_reduction
        );
        assert!(!old.net.moves_left_head);
        assert!(!old.encoder.attacks);
        assert_eq!(old.training.moves_left_weight, 0.0);
        assert_eq!(old.training.value_q_share, 0.0);
        assert_ne!(default.training.value_q_share, 0.0);
        assert_eq!(old.selfplay.sparse_start_share, 0.0);
        assert_eq!(old.search.draw_score, 0.0);
        assert_ne!(default.search.draw_score, 0.0);
        // A config saved now names the keys: they keep their values.
        assert_eq!(
            Config::parse_saved(&default.to_toml(), "new run").unwrap(),
            default
        );
    }

    #[test]
    fn every_number_out_of_range_names_its_key() {
        for (key, value) in keys(DEFAULT_TOML) {
            let bad = match value {
                toml::Value::Float(_) => "nan",
                toml::Value::Integer(_) => "-1",
                _ => continue,
            };
            let (section, name) = key.split_once('.').unwrap();
            let text = format!("[{section}]\n{name} = {bad}\n");
            let err = Config::parse(&text, "mutated.toml")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("mutated.toml") && err.contains(&key),
                "{key} = {bad}: {err}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let cases = [
            ("[net]\nblokcs = 4", "net.blokcs"),
            ("[net]\nchannels = 0", "net.channels"),
            ("[encoder]\nhistroy = 2", "encoder.histroy"),
            ("[encoder]\nhistory = \"x\"", "encoder.history"),
            ("[search]\nc_puct = \"x\"", "search.c_puct"),
            ("[training]\noptimizer = \"adam\"", "training.optimizer"),
            ("[training]\nlearning_rate = 1.0", "training.learning_rate"),
            (
                "[training]\nlr_schedule = [[5, 0.1]]",
                "training.lr_schedule",
            ),
            ("[replay]\nalpha = 1.5", "replay.alpha"),
            ("[net]\nmaterial_head = false", "training.material_weight"),
            (
                "[net]\nmoves_left_head = false\n[training]\nmoves_left_weight = 0.5",
                "training.moves_left_weight",
            ),
            (
                "[net]\nreply_head = false\n[training]\nreply_weight = 0.5",
                "training.reply_weight",
            ),
            ("[search]\ncapture_prior = 1.0", "search.capture_prior"),
            (
                "[search]\npolicy_temperature = 0.0",
                "search.policy_temperature",
            ),
            ("[search]\nhistory = 1", "search.history"),
            (
                "[training]\ncapped_value = \"verdict\"",
                "training.capped_value",
            ),
            (
                "[encoder]\nply_plane = 200\n[training]\ncapped_value = \"verdict\"",
                "training.capped_value",
            ),
            (
                "[selfplay]\nsparse_keep = [0.5, 0.2]",
                "selfplay.sparse_keep",
            ),
            (
                "[selfplay]\nsparse_keep = [0.1, 1.5]",
                "selfplay.sparse_keep",
            ),
            ("[selfplay]\nsparse_keep = [0.1]", "selfplay.sparse_keep"),
            (
                "[selfplay]\nbaselines = [\"grandmaster\"]",
                "selfplay.baselines",
            ),
            (
                "[selfplay]\nbaseline_share = 0.5\nbaselines = []",
                "selfplay.baselines",
            ),
            (
                "[evaluation]\nbaselines = [\"grandmaster\"]",
                "evaluation.baselines",
            ),
            ("[nets]\nblocks = 4", "nets"),
        ];
        for (text, key) in cases {
            let err = Config::parse(text, "test.toml").unwrap_err().to_string();
            assert!(
                err.contains(key) && err.contains("test.toml"),
                "{key}: {err}"
            );
        }
        // A weight without its head names both keys.
        for head in ["material", "moves_left", "reply"] {
            let text = format!("[net]\n{head}_head = false\n[training]\n{head}_weight = 0.5");
            let err = Config::parse(&text, "test.toml").unwrap_err().to_string();
            assert!(
                err.contains(&format!("training.{head}_weight"))
                    && err.contains(&format!("net.{head}_head = true")),
                "{err}"
            );
            // A head with no weight is allowed (trained by nothing, but loadable).
            let text = format!("[net]\n{head}_head = true\n[training]\n{head}_weight = 0.0");
            Config::parse(&text, "test.toml").unwrap();
        }
        let err = Config::parse("[net", "broken.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.toml") && err.contains("TOML"), "{err}");
    }
}
