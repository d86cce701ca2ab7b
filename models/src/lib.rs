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
