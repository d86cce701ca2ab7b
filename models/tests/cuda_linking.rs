//! A libtorch with CUDA must bring its CUDA library into every process that
//! links it. Nothing references a symbol of libtorch_cuda.so (it registers
//! itself with libtorch when loaded), so the linker's `--as-needed` drops it
//! unless the build script keeps it (`libtorch_link::directives`), and then
//! `Device::cuda_if_available()` answers CPU on a GPU machine. This test
//! fails when that linking regresses, GPU or not.

use std::path::{Path, PathBuf};

use tch::{Device, Kind, Tensor};

/// The libtorch library directory this test was built against.
const LIBTORCH_LIB: &str = env!("MIXZERO_LIBTORCH_LIB");

/// Where the shared library `name` is mapped in this process, if it is.
fn mapped(name: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("reading /proc/self/maps");
    maps.lines()
        .filter_map(|line| line.find('/').map(|start| Path::new(&line[start..])))
        .find(|path| path.file_name().is_some_and(|file| file == name))
        .map(Path::to_path_buf)
}

#[test]
fn libtorch_cuda_is_loaded_when_libtorch_has_it() {
    // Use libtorch, so the process surely runs the libtorch it links.
    let sum = Tensor::ones([4, 4], (Kind::Float, Device::Cpu)).sum(Kind::Float);
    assert_eq!(sum.double_value(&[]), 16.0);

    let lib_dir = Path::new(LIBTORCH_LIB);
    let cpu = mapped("libtorch_cpu.so").expect("libtorch_cpu.so is not mapped");
    assert_eq!(
        cpu.parent(),
        Some(lib_dir),
        "libtorch_cpu.so comes from elsewhere than the libtorch built against"
    );

    let cuda = mapped("libtorch_cuda.so");
    if lib_dir.join("libtorch_cuda.so").exists() {
        let cuda = cuda.unwrap_or_else(|| {
            panic!(
                "{LIBTORCH_LIB} has libtorch_cuda.so but it is not loaded: the linker \
                 dropped it (see libtorch_link::directives)"
            )
        });
        assert_eq!(cuda.parent(), Some(lib_dir));
    } else {
        println!("{LIBTORCH_LIB} has no libtorch_cuda.so: a CPU-only libtorch, nothing to link");
        assert_eq!(cuda, None);
    }
}
