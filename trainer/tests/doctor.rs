//! `mixzero doctor` end to end: the binary loads libtorch's CUDA library
//! whenever the libtorch it was built against has one (the linker drops it
//! unless told otherwise), and the verdict matches the machine: a GPU when
//! the NVIDIA kernel driver's device node says there is one, else none.

mod common;

use std::path::Path;

use serde_json::Value;

/// The libtorch library directory the binary was built against.
const LIBTORCH_LIB: &str = env!("MIXZERO_LIBTORCH_LIB");

/// `mixzero doctor ARGS`'s standard output, after checking it succeeded.
fn doctor(args: &[&str]) -> String {
    let output = common::mixzero("doctor", args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn has_cuda_library() -> bool {
    Path::new(LIBTORCH_LIB).join("libtorch_cuda.so").exists()
}

/// Whether this machine has an NVIDIA GPU, asked of the kernel driver rather
/// than of libtorch or the CUDA driver library the doctor checks.
fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

#[test]
fn json_report_says_whether_cuda_is_loaded_and_a_gpu_found() {
    let json = doctor(&["--json"]);
    let report: Value = serde_json::from_str(&json).expect("one JSON object");
    for field in [
        "/verdict/status",
        "/verdict/message",
        "/device",
        "/libtorch/lib_dir",
        "/libtorch/version",
        "/libtorch/cuda_library_present",
        "/libtorch/cuda_library_loaded",
        "/torch_cuda/available",
        "/torch_cuda/device_count",
        "/torch_cuda/cudnn_available",
        "/driver/devices",
        "/bf16/matmul_works",
        "/threads/intra_op",
        "/threads/inter_op",
        "/threads/available_parallelism",
        "/inference/threads",
        "/inference/replicas",
        "/net/name",
        "/net/parameters",
        "/net/forward_flops",
    ] {
        assert!(
            report.pointer(field).is_some_and(|v| !v.is_null()),
            "{field} missing in {json}"
        );
    }
    assert_eq!(report["libtorch"]["lib_dir"], LIBTORCH_LIB, "{json}");
    let arch = trainer::config::Config::default_config().arch();
    assert_eq!(report["net"]["forward_flops"], arch.forward_flops());

    let status = &report["verdict"]["status"];
    let devices = report["driver"]["devices"].as_array().unwrap();
    if !has_cuda_library() {
        println!("{LIBTORCH_LIB} has no libtorch_cuda.so: a CPU-only libtorch");
        assert_eq!(report["libtorch"]["cuda_library_loaded"], false, "{json}");
        assert_eq!(status, "cuda_library_not_loaded", "{json}");
        assert_eq!(report["device"], "cpu", "{json}");
    } else if has_gpu() {
        assert_eq!(report["libtorch"]["cuda_library_loaded"], true, "{json}");
        assert_eq!(status, "gpu_ready", "{json}");
        assert_eq!(report["torch_cuda"]["available"], true, "{json}");
        assert!(!devices.is_empty(), "{json}");
        assert_eq!(report["device"], "cuda:0", "{json}");
    } else {
        assert_eq!(report["libtorch"]["cuda_library_loaded"], true, "{json}");
        assert_eq!(status, "no_gpu", "{json}");
        assert_eq!(report["torch_cuda"]["available"], false, "{json}");
        assert_eq!(report["torch_cuda"]["device_count"], 0, "{json}");
        assert!(devices.is_empty(), "{json}");
        assert_eq!(report["device"], "cpu", "{json}");
        assert_eq!(report["bf16"]["matmul_works"], true, "{json}");
    }
}

#[test]
fn text_report_starts_with_the_verdict() {
    let text = doctor(&[]);
    let verdict = match (has_cuda_library(), has_gpu()) {
        (false, _) => "CUDA library not loaded: ",
        (true, true) => "GPU ready: ",
        (true, false) => "CUDA library loaded, no GPU/driver found (",
    };
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("verdict:"), "{text}");
    assert!(first.contains(verdict), "{text}");
    for key in [
        "libtorch:",
        "libtorch_cuda.so:",
        "torch cuda:",
        "bf16:",
        "net:",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(key)),
            "no {key} line in {text}"
        );
    }
}
