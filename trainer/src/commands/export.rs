//! `mixzero export`: a checkpoint as a weights-only file for the engine
//! (safetensors with the architecture in its metadata), and optionally as a
//! TorchScript module traced from the net, for use from Python.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tch::Device;
use trainer::export::trace;
use trainer::run_dir::resolve_weights;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The checkpoint: a weights file, a run directory, its checkpoints
    /// directory or checkpoints/latest.
    pub checkpoint: PathBuf,
    /// The weights file to write (safetensors).
    pub out: PathBuf,
    /// Also write a TorchScript module here. Its `forward` takes the encoded
    /// planes [N, planes, 10, 10] (f32) and returns one [N, 8903] tensor: the
    /// 8900 policy logits, then the win/draw/loss logits.
    #[arg(long, value_name = "FILE")]
    pub torchscript: Option<PathBuf>,
}

pub fn run(args: ExportArgs) -> Result<()> {
    let source = resolve_weights(&args.checkpoint)?;
    let mut net = models::weights::load(&source, Device::Cpu)?;
    models::weights::save(&net, &args.out)?;
    let arch = net.arch();
    println!(
        "exported {} -> {} ({} net, history {}, {} parameters)",
        source.display(),
        args.out.display(),
        arch.net.name(),
        arch.encoder.history,
        net.parameter_count()
    );
    if let Some(path) = &args.torchscript {
        trace(&mut net, path)?;
        println!("traced TorchScript module -> {}", path.display());
    }
    Ok(())
}
