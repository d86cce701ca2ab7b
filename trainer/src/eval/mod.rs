//! Evaluation: matches between players (built-in, networks, external UCI
//! engines), their openings, Elo and SPRT, and the ladder and gating that
//! rate checkpoints during training.

pub mod arena;
pub mod external_engine;
pub mod ladder;
pub mod openings;
pub mod rating;
pub mod sprt;
