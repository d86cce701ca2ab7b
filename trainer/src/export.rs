//! A net as a TorchScript module, for use from Python (`mixzero export
//! --torchscript`).

use std::path::Path;

use anyhow::{Context, Result};
use tch::{CModule, Device, Kind, Tensor};

use models::net::Net;

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
