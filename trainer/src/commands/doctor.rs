//! `mixzero doctor`: what this process sees of libtorch, CUDA and the GPU.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trainer::doctor::Report;

use super::load_config;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Config whose net and inference settings to report (default: the embedded default).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DoctorArgs) -> Result<()> {
    let report = Report::collect(&load_config(args.config.as_deref())?);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(())
}
