//! Self-play, training and evaluation for mixzero, behind the `mixzero` binary.

pub mod arena;
pub mod bench;
pub mod config;
pub mod data;
pub mod metrics;
pub mod progress;
pub mod replay;
pub mod run;
pub mod selfplay;
pub mod train;
