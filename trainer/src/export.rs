//! `mixzero export`: a checkpoint as a weights-only file for the engine
//! (safetensors with the architecture in its metadata), and optionally as a
//! TorchScript module traced from the net, for use from Python.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use tch::{CModule, Device, Kind, Tensor};

use crate::run_dir::resolve_weights;
use models::net::Net;

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

/// Traces the net in evaluation mode and saves the module atomically. The
/// weights are frozen first: tracing stores them as constants.
pub fn trace(net: &mut Net, path: &Path) -> Result<()> {
    net.var_store_mut().freeze();
    let example = Tensor::zeros(
        net.arch().encoder.input_shape(1),
        (Kind::Float, Device::Cpu),
    );
    let module = tch::no_grad(|| {
        CModule::create_by_tracing("MixZeroNet", "forward", &[example], &mut |inputs| {
            let (policy, wdl) = net.forward_t(&inputs[0], false);
            // tch cannot save a traced module with more than one output.
            vec![Tensor::cat(&[policy, wdl], 1)]
        })
    })
    .context("tracing the network")?;
    // CModule::save writes in place: save beside the target, then rename.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("module");
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let written = module
        .save(&tmp)
        .map_err(anyhow::Error::from)
        .and_then(|()| std::fs::rename(&tmp, path).map_err(anyhow::Error::from));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("writing {}", path.display()))
}
