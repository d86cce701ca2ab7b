//! Self-play, training and evaluation for mixzero, behind the `mixzero` binary.
//!
//! - [`selfplay`]: worker threads playing games, their records and the chunk
//!   files they are stored in;
//! - [`training`]: the AlphaZero loop, the replay window and the optimizer;
//! - [`eval`]: matches between players, external engines, openings, Elo and
//!   SPRT, and the ladder run during training;
//! - [`distributed`]: self-play workers and a trainer sharing a run through
//!   an object store;
//! - [`run_dir`] and [`config`]: a run's directory and its settings;
//! - [`serve`]: the web page; [`bench`], [`doctor`], [`export`], [`uci`]:
//!   what the other subcommands do.

pub mod bench;
pub mod config;
pub mod distributed;
pub mod doctor;
pub mod eval;
pub mod export;
pub mod metrics;
pub mod run_dir;
pub mod selfplay;
pub mod serve;
pub mod training;
pub mod uci;
