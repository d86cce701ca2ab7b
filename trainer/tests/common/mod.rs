//! What the end-to-end tests of the `mixzero` binary share.

use std::process::{Command, Output};

/// Runs `mixzero SUBCOMMAND ARGS` to the end, its log at warnings only.
pub fn mixzero(subcommand: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mixzero"))
        .arg(subcommand)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running mixzero")
}
