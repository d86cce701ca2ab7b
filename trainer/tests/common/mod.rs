//! What the end-to-end tests of the `mixzero` binary share.

use std::process::{Command, Output};

/// Runs `mixzero SUBCOMMAND ARGS` to the end, its log at warnings only.
pub fn mixzero(subcommand: &str, args: &[&str]) -> Output {
    mixzero_logging(subcommand, args, "warn")
}

/// Runs `mixzero SUBCOMMAND ARGS` to the end, its log at `level`.
pub fn mixzero_logging(subcommand: &str, args: &[&str], level: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .arg(subcommand)
        .args(args)
        .env("RUST_LOG", level)
        .output()
        .expect("running mixzero")
}
