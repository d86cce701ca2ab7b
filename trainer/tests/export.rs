//! `mixzero export` end to end: the weights file and the traced module give
//! the same outputs as the checkpoint they came from.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use models::encoding::EncoderConfig;
use models::net::{Architecture, Net, NetConfig};
use tch::{CModule, Device, Kind, Tensor};

fn export(args: &[&str]) -> Output {
    common::mixzero("export", args)
}

fn assert_close(a: &Tensor, b: &Tensor) {
    let diff = (a - b).abs().max().double_value(&[]);
    assert!(diff < 1e-5, "outputs differ by {diff}");
}

#[test]
fn exported_weights_and_torchscript_match_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let arch = Architecture {
        net: NetConfig::new(1, 8),
        encoder: EncoderConfig {
            history: 2,
            attacks: true,
            hanging: true,
            ply_plane: 100,
        },
    };
    let net = Net::new(arch, Device::Cpu);
    let checkpoint = dir.path().join("000003.weights.safetensors");
    models::weights::save(&net, &checkpoint).unwrap();
    let out = dir.path().join("out/net.safetensors");
    let traced = dir.path().join("out/net.pt");

    let output = export(&[
        checkpoint.to_str().unwrap(),
        out.to_str().unwrap(),
        "--torchscript",
        traced.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let input = Tensor::randn(
        [3, arch.encoder.planes() as i64, 10, 10],
        (Kind::Float, Device::Cpu),
    );
    let (policy, wdl) = tch::no_grad(|| net.forward_t(&input, false));
    let loaded = models::weights::load(&out, Device::Cpu).unwrap();
    assert_eq!(loaded.arch(), arch);
    let (policy2, wdl2) = tch::no_grad(|| loaded.forward_t(&input, false));
    assert_close(&policy, &policy2);
    assert_close(&wdl, &wdl2);

    let module = CModule::load(&traced).unwrap();
    let output = tch::no_grad(|| module.forward_ts(&[&input])).unwrap();
    assert_eq!(output.size(), [3, 8903]);
    assert_close(&policy, &output.narrow(1, 0, 8900));
    assert_close(&wdl, &output.narrow(1, 8900, 3));

    // The module is for Python: torch there must load and run it too.
    let Some(python) = python_with_torch() else {
        eprintln!("NOTE: skipping the Python check: no Python with torch (run scripts/setup.sh)");
        return;
    };
    let script = "import sys, torch\n\
                  m = torch.jit.load(sys.argv[1])\n\
                  y = m(torch.zeros(1, int(sys.argv[2]), 10, 10))\n\
                  print(' '.join(str(v) for v in y[0, -3:].tolist()))";
    let out = Command::new(python)
        .args(["-c", script, traced.to_str().unwrap()])
        .arg(arch.encoder.planes().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_python: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let zeros = Tensor::zeros(
        [1, arch.encoder.planes() as i64, 10, 10],
        (Kind::Float, Device::Cpu),
    );
    let (_, wdl) = tch::no_grad(|| net.forward_t(&zeros, false));
    let from_rust = Vec::<f64>::try_from(wdl.reshape([3])).unwrap();
    assert_eq!(from_python.len(), 3);
    for (p, r) in from_python.iter().zip(&from_rust) {
        assert!(
            (p - r).abs() < 1e-4,
            "python {from_python:?}, rust {from_rust:?}"
        );
    }
}

/// MIXZERO_PYTHON, else setup.sh's venv: the first that can import torch.
fn python_with_torch() -> Option<PathBuf> {
    let venv = std::env::var_os("MIXZERO_TORCH_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/mixzero/torch-2.11.0"))
        });
    std::env::var_os("MIXZERO_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain(venv.map(|v| v.join("bin/python")))
        .find(|python| {
            Command::new(python)
                .args(["-c", "import torch"])
                .output()
                .is_ok_and(|out| out.status.success())
        })
}

#[test]
fn export_refuses_a_missing_or_corrupt_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("net.safetensors");
    let missing = export(&["no/such/file.safetensors", out.to_str().unwrap()]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such weights file"));

    let corrupt = dir.path().join("bad.safetensors");
    std::fs::write(&corrupt, b"not a weights file").unwrap();
    let output = export(&[corrupt.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error:"));
    assert!(!out.exists(), "nothing is written from a bad checkpoint");
}
