//! `mixzero doctor`: which libtorch this process runs, whether its CUDA
//! library is loaded, what the CUDA driver sees, whether bf16 works, the
//! thread settings and the config's net, and a verdict on whether the GPU
//! will be used (and if not, why).

mod cuda_driver;

use std::path::{Path, PathBuf};

use models::net::Net;
use models::Precision;
use serde::Serialize;
use tch::{Device, Kind, TchError, Tensor};

use crate::config::Config;

/// Everything `mixzero doctor` finds out.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    /// The device `Device::cuda_if_available()` picks: `cpu` or `cuda:N`.
    pub device: String,
    pub libtorch: Libtorch,
    pub torch_cuda: TorchCuda,
    pub driver: DriverReport,
    pub bf16: Bf16,
    pub threads: Threads,
    pub inference: Inference,
    pub net: NetReport,
}

#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub status: Status,
    /// One line that says which status holds and why.
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// libtorch_cuda.so is not mapped: every tensor goes to the CPU.
    CudaLibraryNotLoaded,
    /// libtorch_cuda.so is loaded but there is no driver or no device.
    NoGpu,
    /// The driver sees a GPU that libtorch cannot use (say, a driver older
    /// than the CUDA this libtorch was built for).
    GpuUnusable,
    GpuReady,
}

#[derive(Clone, Debug, Serialize)]
pub struct Libtorch {
    /// The directory where libtorch_cpu.so is mapped in this process.
    pub lib_dir: Option<String>,
    /// The library directory this binary was built against.
    pub built_against: Option<String>,
    /// `__version__` of a PyPI wheel's `version.py`, or a libtorch zip's
    /// `build-version`.
    pub version: Option<String>,
    /// The CUDA version libtorch was built for (none: a CPU-only build).
    pub cuda: Option<String>,
    /// Whether `lib_dir` (or else `built_against`) has libtorch_cuda.so.
    pub cuda_library_present: bool,
    /// Whether libtorch_cuda.so is mapped in this process.
    pub cuda_library_loaded: bool,
}

/// What libtorch itself says about CUDA.
#[derive(Clone, Debug, Serialize)]
pub struct TorchCuda {
    pub available: bool,
    pub device_count: i64,
    pub cudnn_available: bool,
    /// The cuDNN version libtorch was built with, asked only while cuDNN is
    /// available (libtorch throws where it has no cuDNN).
    pub cudnn_version: Option<String>,
    /// The CUDA runtime version libtorch was built with, known once its CUDA
    /// library is loaded, GPU or not.
    pub cudart_version: Option<String>,
}

/// What the CUDA driver (`libcuda.so.1`) and the NVIDIA kernel module say.
#[derive(Clone, Debug, Serialize)]
pub struct DriverReport {
    /// The kernel module's version, from `/proc/driver/nvidia/version`.
    pub kernel_module: Option<String>,
    /// The newest CUDA version the driver supports.
    pub cuda_version: Option<String>,
    pub devices: Vec<GpuReport>,
    /// The step that failed, when one did.
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GpuReport {
    pub index: usize,
    pub name: String,
    pub total_memory_bytes: u64,
    /// `major.minor`.
    pub compute_capability: String,
    pub multiprocessors: i32,
    /// Compute capability 8.0 (Ampere) or newer: bf16 tensor cores.
    pub bf16: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Bf16 {
    /// Whether the chosen GPU has bf16 tensor cores; none on a CPU.
    pub hardware: Option<bool>,
    /// Whether a small bf16 matrix product on the chosen device ran and gave
    /// the exact answer.
    pub matmul_works: bool,
    pub matmul_error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Threads {
    /// libtorch's intra-op threads on this thread (`mixzero` keeps the main
    /// thread at one; each inference replica sets its own).
    pub intra_op: i32,
    pub inter_op: i32,
    pub available_parallelism: usize,
}

/// The config's `[inference]` settings.
#[derive(Clone, Debug, Serialize)]
pub struct Inference {
    /// Intra-op threads per replica (0 = one per core).
    pub threads: usize,
    pub replicas: usize,
    pub precision: Precision,
    /// The tensor kind `precision` means on the chosen device.
    pub kind: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct NetReport {
    pub name: String,
    pub parameters: i64,
    /// Per position, a multiply-add counted as two.
    pub forward_flops: u64,
}

impl Report {
    /// Inspects this process and `config`. Runs a little libtorch work on
    /// the chosen device, and builds the config's net on the CPU.
    pub fn collect(config: &Config) -> Report {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let libtorch = libtorch(&maps);
        let torch_cuda = torch_cuda();
        let driver = driver();
        let device = Device::cuda_if_available();
        let bf16 = bf16(device, &driver);
        let verdict = verdict(&libtorch, &torch_cuda, &driver);
        let net = Net::new(config.arch(), Device::Cpu);
        Report {
            verdict,
            device: device_name(device),
            libtorch,
            torch_cuda,
            driver,
            bf16,
            threads: Threads {
                intra_op: tch::get_num_threads(),
                inter_op: tch::get_num_interop_threads(),
                available_parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
            },
            inference: Inference {
                threads: config.inference.threads,
                replicas: config.inference.replicas,
                precision: config.inference.precision,
                kind: format!("{:?}", config.inference.precision.kind(device)),
            },
            net: NetReport {
                name: config.net.name(),
                parameters: net.parameter_count(),
                forward_flops: config.arch().forward_flops(),
            },
        }
    }

    /// Aligned `key: value` lines, the verdict first.
    pub fn text(&self) -> String {
        let mut lines: Vec<(String, String)> = Vec::new();
        let mut line = |key: &str, value: String| lines.push((key.to_string(), value));
        line("verdict", self.verdict.message.clone());
        line("device", self.device.clone());

        let lib = &self.libtorch;
        let version = lib.version.as_deref().unwrap_or("unknown");
        let cuda = match &lib.cuda {
            Some(cuda) => format!("built for CUDA {cuda}"),
            None => "built without CUDA".to_string(),
        };
        line("libtorch", format!("{version} ({cuda})"));
        line("libtorch dir", or_unknown(&lib.lib_dir));
        if lib.built_against != lib.lib_dir {
            line("built against", or_unknown(&lib.built_against));
        }
        let cuda_library = match (lib.cuda_library_present, lib.cuda_library_loaded) {
            (_, true) => "loaded",
            (true, false) => "present, not loaded",
            (false, false) => "absent",
        };
        line("libtorch_cuda.so", cuda_library.to_string());

        let torch = &self.torch_cuda;
        line(
            "torch cuda",
            format!(
                "{} ({} devices)",
                if torch.available {
                    "available"
                } else {
                    "not available"
                },
                torch.device_count
            ),
        );
        let mut cudnn = if torch.cudnn_available {
            "available".to_string()
        } else {
            "not available".to_string()
        };
        if let Some(version) = &torch.cudnn_version {
            cudnn += &format!(", version {version}");
        }
        line("cudnn", cudnn);
        if let Some(version) = &torch.cudart_version {
            line("cuda runtime", version.clone());
        }

        let driver = &self.driver;
        let kernel_module = driver.kernel_module.as_deref();
        line(
            "nvidia kernel module",
            kernel_module
                .unwrap_or("none (no /proc/driver/nvidia/version)")
                .to_string(),
        );
        let cuda_driver = match (&driver.cuda_version, &driver.error) {
            (Some(version), None) => format!("supports CUDA {version}"),
            (Some(version), Some(error)) => format!("supports CUDA {version}; {error}"),
            (None, error) => or_unknown(error),
        };
        line("cuda driver", cuda_driver);
        for gpu in &driver.devices {
            line(
                &format!("gpu {}", gpu.index),
                format!(
                    "{}, {:.1} GiB, compute capability {}, {} multiprocessors",
                    gpu.name,
                    gpu.total_memory_bytes as f64 / (1u64 << 30) as f64,
                    gpu.compute_capability,
                    gpu.multiprocessors
                ),
            );
        }

        let bf16 = &self.bf16;
        let mut bf16_text = match &bf16.matmul_error {
            None => format!("matmul works on {}", self.device),
            Some(error) => format!("matmul fails on {}: {error}", self.device),
        };
        match bf16.hardware {
            Some(true) => bf16_text += "; tensor cores (compute capability >= 8.0)",
            Some(false) => bf16_text += "; no tensor cores (compute capability < 8.0)",
            None => {}
        }
        line("bf16", bf16_text);

        let threads = &self.threads;
        line(
            "torch threads",
            format!(
                "intra-op {} (this thread), inter-op {}, {} cores available",
                threads.intra_op, threads.inter_op, threads.available_parallelism
            ),
        );
        let inference = &self.inference;
        let per_replica = match inference.threads {
            0 => "one per core".to_string(),
            n => n.to_string(),
        };
        line(
            "inference",
            format!(
                "replicas {}, threads per replica {per_replica}, precision {} ({} here)",
                inference.replicas,
                format!("{:?}", inference.precision).to_lowercase(),
                inference.kind
            ),
        );
        line(
            "net",
            format!(
                "{}: {} parameters, {:.3} GFLOP per position",
                self.net.name,
                self.net.parameters,
                self.net.forward_flops as f64 / 1e9
            ),
        );

        let width = lines.iter().map(|(key, _)| key.len()).max().unwrap_or(0) + 1;
        lines
            .iter()
            .map(|(key, value)| format!("{:width$} {value}\n", format!("{key}:")))
            .collect()
    }
}

fn or_unknown(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "unknown".to_string())
}

fn device_name(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".to_string(),
        Device::Cuda(index) => format!("cuda:{index}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Where the shared library `name` is mapped, from `/proc/self/maps` text.
fn mapped(maps: &str, name: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.find('/').map(|start| Path::new(&line[start..])))
        .find(|path| path.file_name().is_some_and(|file| file == name))
        .map(Path::to_path_buf)
}

fn libtorch(maps: &str) -> Libtorch {
    let lib_dir =
        mapped(maps, "libtorch_cpu.so").and_then(|cpu| cpu.parent().map(Path::to_path_buf));
    let built_against = option_env!("MIXZERO_LIBTORCH_LIB").map(PathBuf::from);
    let dir = lib_dir.as_ref().or(built_against.as_ref());
    // A PyPI wheel is `torch/lib` with `torch/version.py`; a libtorch zip is
    // `libtorch/lib` with `libtorch/build-version`.
    let root = dir.and_then(|dir| dir.parent());
    let (version, cuda) = match root {
        Some(root) => match std::fs::read_to_string(root.join("version.py")) {
            Ok(text) => parse_version_py(&text),
            Err(_) => {
                let version = std::fs::read_to_string(root.join("build-version"))
                    .ok()
                    .map(|text| text.trim().to_string());
                let cuda = version.as_deref().and_then(cuda_of_version);
                (version, cuda)
            }
        },
        None => (None, None),
    };
    Libtorch {
        lib_dir: lib_dir.as_deref().map(path_string),
        built_against: built_against.as_deref().map(path_string),
        version,
        cuda,
        cuda_library_present: dir.is_some_and(|dir| dir.join("libtorch_cuda.so").exists()),
        cuda_library_loaded: mapped(maps, "libtorch_cuda.so").is_some(),
    }
}

fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `__version__` and `cuda` of a PyPI wheel's `torch/version.py`.
fn parse_version_py(text: &str) -> (Option<String>, Option<String>) {
    // Lines such as `__version__ = '2.11.0+cu130'` and
    // `cuda: Optional[str] = '13.0'` (or `= None`).
    let value = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            if !rest.starts_with([' ', ':', '=']) {
                return None;
            }
            let value = rest.rsplit_once('=')?.1.trim();
            let quoted = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')));
            quoted.map(str::to_string)
        })
    };
    let version = value("__version__");
    let cuda = value("cuda").or_else(|| version.as_deref().and_then(cuda_of_version));
    (version, cuda)
}

/// The CUDA version of a `+cuNNN` version suffix: `2.11.0+cu130` is 13.0.
fn cuda_of_version(version: &str) -> Option<String> {
    let digits = version.rsplit_once("+cu")?.1;
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some(format!("{major}.{minor}"))
}

fn torch_cuda() -> TorchCuda {
    let cudnn_available = tch::Cuda::cudnn_is_available();
    TorchCuda {
        available: tch::Cuda::is_available(),
        device_count: tch::Cuda::device_count(),
        cudnn_available,
        cudnn_version: cudnn_available.then(|| cudnn_version(tch::utils::version_cudnn())),
        // Without libtorch_cuda.so libtorch throws instead of answering, so
        // ask only when its CUDA hooks are registered.
        cudart_version: tch::utils::has_cudart()
            .then(|| cuda_version(tch::utils::version_cudart())),
    }
}

/// cuDNN encodes 9.19.0 as 91900 (and 8.9.7, before version 9, as 8907).
fn cudnn_version(version: i64) -> String {
    let (major, rest) = if version >= 90000 {
        (version / 10000, version % 10000)
    } else {
        (version / 1000, version % 1000)
    };
    format!("{major}.{}.{}", rest / 100, rest % 100)
}

/// CUDA encodes 13.0 as 13000.
fn cuda_version(version: i64) -> String {
    format!("{}.{}", version / 1000, version % 1000 / 10)
}

fn driver() -> DriverReport {
    let kernel_module = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|text| kernel_module_version(&text));
    let (cuda_version, devices, error) = match cuda_driver::query() {
        Err(error) => (None, Vec::new(), Some(error_chain(&error))),
        Ok(driver) => {
            let (major, minor) = driver.cuda_version;
            let (devices, error) = match driver.devices {
                Ok(devices) => (devices, None),
                Err(error) => (Vec::new(), Some(error_chain(&error))),
            };
            (Some(format!("{major}.{minor}")), devices, error)
        }
    };
    DriverReport {
        kernel_module,
        cuda_version,
        devices: devices
            .into_iter()
            .enumerate()
            .map(|(index, gpu)| GpuReport {
                index,
                name: gpu.name,
                total_memory_bytes: gpu.total_memory_bytes,
                compute_capability: format!(
                    "{}.{}",
                    gpu.compute_capability.0, gpu.compute_capability.1
                ),
                multiprocessors: gpu.multiprocessors,
                bf16: gpu.compute_capability >= (8, 0),
            })
            .collect(),
        error,
    }
}

/// An error and its causes on one line, as `anyhow`'s `{:#}` prints them:
/// libloading's own message is only "dlopen failed", the reason is its cause.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text += &format!(": {error}");
        cause = error.source();
    }
    text
}

/// The version in `NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  ...`.
fn kernel_module_version(text: &str) -> Option<String> {
    text.lines()
        .next()?
        .split_whitespace()
        .find(|word| {
            word.contains('.')
                && word
                    .split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// Why a bf16 matrix product failed.
#[derive(Debug, thiserror::Error)]
enum MatmulError {
    #[error(transparent)]
    Torch(#[from] TchError),
    #[error("wrong result: {got} instead of {expected}")]
    Wrong { got: f64, expected: f64 },
}

fn bf16(device: Device, driver: &DriverReport) -> Bf16 {
    let hardware = match device {
        // libtorch and the driver number devices alike unless
        // CUDA_VISIBLE_DEVICES reorders them for one and not the other.
        Device::Cuda(index) => driver.devices.get(index).map(|gpu| gpu.bf16),
        _ => None,
    };
    let matmul = bf16_matmul(device);
    Bf16 {
        hardware,
        matmul_works: matmul.is_ok(),
        matmul_error: matmul.err().map(|e| e.to_string()),
    }
}

/// A 16x16 product of ones in bf16: every entry is 16, exact in bf16.
fn bf16_matmul(device: Device) -> Result<(), MatmulError> {
    const N: i64 = 16;
    let ones = Tensor::f_ones([N, N], (Kind::BFloat16, device))?;
    let got = ones
        .f_matmul(&ones)?
        .f_sum(Kind::Float)?
        .f_double_value(&[])?;
    let expected = (N * N * N) as f64;
    if got == expected {
        Ok(())
    } else {
        Err(MatmulError::Wrong { got, expected })
    }
}

fn verdict(libtorch: &Libtorch, torch: &TorchCuda, driver: &DriverReport) -> Verdict {
    let dir = libtorch
        .lib_dir
        .as_ref()
        .or(libtorch.built_against.as_ref())
        .map_or("libtorch's directory", String::as_str);
    let gpu_name = |index: usize| {
        driver
            .devices
            .get(index)
            .map_or_else(|| format!("device {index}"), |gpu| gpu.name.clone())
    };
    let (status, message) = if !libtorch.cuda_library_loaded {
        let why = if libtorch.cuda_library_present {
            format!("although {dir} has it: the linker dropped it (see libtorch_link)")
        } else {
            format!("because {dir} has none: a CPU-only libtorch")
        };
        (
            Status::CudaLibraryNotLoaded,
            format!("CUDA library not loaded: libtorch_cuda.so is not mapped {why}"),
        )
    } else if torch.available {
        let more = match torch.device_count {
            n if n > 1 => format!(" (and {} more)", n - 1),
            _ => String::new(),
        };
        (
            Status::GpuReady,
            format!("GPU ready: {}{more}", gpu_name(0)),
        )
    } else if !driver.devices.is_empty() {
        let driver_cuda = driver.cuda_version.as_deref().unwrap_or("unknown");
        let torch_cuda = libtorch.cuda.as_deref().unwrap_or("unknown");
        (
            Status::GpuUnusable,
            format!(
                "GPU found but libtorch cannot use it: {} (the driver supports CUDA {driver_cuda}, \
                 libtorch was built for CUDA {torch_cuda})",
                gpu_name(0)
            ),
        )
    } else {
        let why = driver
            .error
            .as_deref()
            .unwrap_or("the driver reports 0 devices");
        (
            Status::NoGpu,
            format!("CUDA library loaded, no GPU/driver found ({why})"),
        )
    };
    Verdict { status, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_mapped_library() {
        let maps = "\
7f00a000-7f00b000 r--p 00000000 08:01 1234 /opt/torch/lib/libtorch_cpu.so
7f00b000-7f00c000 r-xp 00001000 08:01 1234 /opt/torch/lib/libtorch_cpu.so
7f00c000-7f00d000 rw-p 00000000 00:00 0 
7f00d000-7f00e000 r--p 00000000 08:01 99 /opt/torch/lib/libtorch_cuda.so.bak
7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]";
        assert_eq!(
            mapped(maps, "libtorch_cpu.so"),
            Some(PathBuf::from("/opt/torch/lib/libtorch_cpu.so"))
        );
        assert_eq!(mapped(maps, "libtorch_cuda.so"), None);
    }

    #[test]
    fn reads_a_wheels_version() {
        let text = "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n\
                    git_version = '70d99e9'\nhip: Optional[str] = None\n";
        assert_eq!(
            parse_version_py(text),
            (Some("2.11.0+cu130".to_string()), Some("13.0".to_string()))
        );
        let cpu = "__version__ = '2.11.0+cpu'\ncuda: Optional[str] = None\n";
        assert_eq!(
            parse_version_py(cpu),
            (Some("2.11.0+cpu".to_string()), None)
        );
    }

    #[test]
    fn reads_cuda_from_a_version_suffix() {
        assert_eq!(cuda_of_version("2.11.0+cu130").as_deref(), Some("13.0"));
        assert_eq!(cuda_of_version("2.4.0+cu118").as_deref(), Some("11.8"));
        assert_eq!(cuda_of_version("2.11.0+cpu"), None);
        assert_eq!(cuda_of_version("2.11.0"), None);
    }

    #[test]
    fn formats_library_versions() {
        assert_eq!(cudnn_version(91900), "9.19.0");
        assert_eq!(cudnn_version(8907), "8.9.7");
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12040), "12.4");
    }

    #[test]
    fn reads_the_kernel_module_version() {
        let text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  \
                    Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n\
                    GCC version:  gcc version 12.3.0\n";
        assert_eq!(kernel_module_version(text).as_deref(), Some("570.86.15"));
        assert_eq!(kernel_module_version(""), None);
    }
}
