//! Self-play, training and evaluation for mixzero, behind the `mixzero` binary.

pub mod arena;
pub mod bench;
pub mod bootstrap;
pub mod config;
pub mod data;
pub mod doctor;
pub mod export;
pub mod external_engine;
pub mod ladder;
pub mod metrics;
pub mod openings;
pub mod progress;
pub mod replay;
pub mod run;
pub mod run_dir;
pub mod selfplay;
pub mod serve;
pub mod sprt;
pub mod train;
pub mod uci;
