//! The options an engine announces after `uci` and the values `setoption`
//! gives them.

use std::fmt;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionError {
    #[error("unknown option `{0}`")]
    Unknown(String),
    #[error("option `{name}`: `{value}` is not {expected}")]
    BadValue {
        name: String,
        value: String,
        expected: String,
    },
    #[error("option `{name}` needs a value")]
    MissingValue { name: String },
    #[error("option `{name}`: {message}")]
    Rejected { name: String, message: String },
}

/// An option the engine announces after `uci`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UciOption {
    pub name: String,
    pub kind: OptionKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Check {
        default: bool,
    },
    Spin {
        default: i64,
        min: i64,
        max: i64,
    },
    Combo {
        default: String,
        choices: Vec<String>,
    },
    Button,
    String {
        default: String,
    },
}

/// A `setoption` value checked against its [`UciOption`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionValue {
    Check(bool),
    Spin(i64),
    /// One of the choices, spelled as the option spells it.
    Combo(String),
    Button,
    String(String),
}

impl UciOption {
    /// Checks `value` against the option's type (and range or choices).
    pub fn parse_value(&self, value: Option<&str>) -> Result<OptionValue, OptionError> {
        let bad = |value: &str, expected: String| OptionError::BadValue {
            name: self.name.clone(),
            value: value.to_string(),
            expected,
        };
        let required = || {
            value.ok_or_else(|| OptionError::MissingValue {
                name: self.name.clone(),
            })
        };
        match &self.kind {
            OptionKind::Check { .. } => match required()? {
                "true" => Ok(OptionValue::Check(true)),
                "false" => Ok(OptionValue::Check(false)),
                other => Err(bad(other, "`true` or `false`".to_string())),
            },
            OptionKind::Spin { min, max, .. } => {
                let text = required()?;
                text.parse::<i64>()
                    .ok()
                    .filter(|n| (*min..=*max).contains(n))
                    .map(OptionValue::Spin)
                    .ok_or_else(|| bad(text, format!("a whole number from {min} to {max}")))
            }
            OptionKind::Combo { choices, .. } => {
                let text = required()?;
                choices
                    .iter()
                    .find(|c| c.eq_ignore_ascii_case(text))
                    .map(|c| OptionValue::Combo(c.clone()))
                    .ok_or_else(|| bad(text, format!("one of {}", choices.join(", "))))
            }
            OptionKind::Button => match value {
                None => Ok(OptionValue::Button),
                Some(text) => Err(bad(text, "empty (a button takes no value)".to_string())),
            },
            // UCI writes an empty string as `<empty>`.
            OptionKind::String { .. } => Ok(OptionValue::String(match value {
                None | Some("<empty>") => String::new(),
                Some(text) => text.to_string(),
            })),
        }
    }
}

impl fmt::Display for UciOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "option name {} type ", self.name)?;
        match &self.kind {
            OptionKind::Check { default } => write!(f, "check default {default}"),
            OptionKind::Spin { default, min, max } => {
                write!(f, "spin default {default} min {min} max {max}")
            }
            OptionKind::Combo { default, choices } => {
                write!(f, "combo default {default}")?;
                for choice in choices {
                    write!(f, " var {choice}")?;
                }
                Ok(())
            }
            OptionKind::Button => f.write_str("button"),
            OptionKind::String { default } if default.is_empty() => {
                f.write_str("string default <empty>")
            }
            OptionKind::String { default } => write!(f, "string default {default}"),
        }
    }
}
