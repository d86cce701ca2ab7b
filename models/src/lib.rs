//! The neural network side of mixzero, through `tch` (libtorch): input
//! encoding, the fixed policy move space, the residual net, weights files and
//! the batched inference server that implements `engine::Evaluator`.

pub mod encoding;
pub mod net;
pub mod policy;
pub mod server;
pub mod weights;

/// A CUDA GPU when one is present, the CPU otherwise.
pub fn device() -> tch::Device {
    tch::Device::cuda_if_available()
}

/// The number format a network computes in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// bf16 on a CUDA GPU, fp32 on a CPU.
    #[default]
    Auto,
    Fp32,
    /// bfloat16: fp32's exponent range with 8 bits of mantissa, so values
    /// and gradients need no loss scaling; tensor cores run it at about 15
    /// times the fp32 rate of a Hopper GPU.
    Bf16,
    /// IEEE half precision (inference only: training would need loss scaling).
    Fp16,
}

impl Precision {
    /// The tensor kind this precision means on `device`. `Auto` keeps fp32 on
    /// a CPU: without bf16 units, bf16 convolutions are far slower there (the
    /// default net served 25 times fewer positions/s on this project's 2-core
    /// development machine, `mixzero bench nn --precision bf16`).
    pub fn kind(self, device: tch::Device) -> tch::Kind {
        match self {
            Precision::Auto if device.is_cuda() => tch::Kind::BFloat16,
            Precision::Auto | Precision::Fp32 => tch::Kind::Float,
            Precision::Bf16 => tch::Kind::BFloat16,
            Precision::Fp16 => tch::Kind::Half,
        }
    }
}

/// Sets the libtorch intra-op thread count of the calling thread (0 = one per
/// core) and fixes it for this thread.
///
/// libgomp spins between parallel regions only while the process has no more
/// OpenMP threads than cores; a second multi-threaded team (say, the main
/// thread's and the inference thread's) makes every region sleep and wake,
/// which made forward passes 2-3x slower on 2 cores. So the main thread keeps
/// one thread (`set_intra_op_threads(1)` before any tensor work) and each
/// thread that runs the network sets its own count.
pub fn set_intra_op_threads(threads: usize) {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    tch::set_num_threads(threads as i32);
    // libtorch reads its thread count lazily, per thread, at the first
    // parallel operation: run one now so a later change by another thread
    // does not leak into this one.
    let _ = tch::Tensor::ones([4096], (tch::Kind::Float, tch::Device::Cpu)).sum(tch::Kind::Float);
}
