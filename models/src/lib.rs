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
