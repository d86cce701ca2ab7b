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
    /// bf16 on a CUDA GPU and on a CPU with bf16 matrix units (Intel AMX),
    /// fp32 on other CPUs.
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
    /// a CPU without bf16 matrix units, where bf16 convolutions are far
    /// slower (the default net served 25 times fewer positions/s on such a
    /// development machine, `mixzero bench nn --precision bf16`). With AMX
    /// the 2x32 net served 1.88 times fp32's positions/s at batch 64, played
    /// 1.47 times the self-play nodes/s and trained 1.65 times the steps/s
    /// (README, "Speed").
    pub fn kind(self, device: tch::Device) -> tch::Kind {
        match self {
            Precision::Auto if device.is_cuda() || cpu_has_bf16_tiles() => tch::Kind::BFloat16,
            Precision::Auto | Precision::Fp32 => tch::Kind::Float,
            Precision::Bf16 => tch::Kind::BFloat16,
            Precision::Fp16 => tch::Kind::Half,
        }
    }
}

/// Whether this CPU has Intel AMX's bf16 tile units and the operating system
/// saves their state (XCR0's tile bits), which is what lets libtorch's oneDNN
/// run bf16 convolutions and matrix products on them.
fn cpu_has_bf16_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
        // CPUID leaf 1 ECX bit 27: the OS has enabled XGETBV (OSXSAVE).
        // Leaf 7 EDX bit 22: AMX-BF16; bit 24: AMX-TILE. XCR0 bits 17 and 18:
        // tile configuration and tile data are saved by the OS.
        #[target_feature(enable = "xsave")]
        unsafe fn xcr0() -> u64 {
            _xgetbv(0)
        }
        // The cpuid intrinsics are safe from Rust 1.94 and unsafe before
        // (the workspace supports 1.85). A leaf above the highest one reads
        // as garbage, hence the check of leaf 0 before leaf 7 is believed.
        #[allow(unused_unsafe)]
        let (max_leaf, leaf1_ecx, leaf7_edx) =
            unsafe { (__cpuid(0).eax, __cpuid(1).ecx, __cpuid_count(7, 0).edx) };
        let osxsave = leaf1_ecx & (1 << 27) != 0;
        let tiles = max_leaf >= 7 && leaf7_edx & (1 << 22) != 0 && leaf7_edx & (1 << 24) != 0;
        // SAFETY: with OSXSAVE set, XGETBV exists and XCR0 is readable.
        osxsave && tiles && unsafe { xcr0() } & (0b11 << 17) == 0b11 << 17
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUID and XCR0 reading agrees with the kernel's own: Linux lists
    /// `amx_bf16` and `amx_tile` in /proc/cpuinfo only where the CPU has the
    /// units and the kernel saves their state. And `Auto` follows it on a CPU.
    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn bf16_tiles_agree_with_the_kernel() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let flags: std::collections::HashSet<&str> = cpuinfo
            .lines()
            .find(|line| line.starts_with("flags"))
            .expect("a flags line")
            .split_whitespace()
            .collect();
        let kernel = flags.contains("amx_bf16") && flags.contains("amx_tile");
        assert_eq!(cpu_has_bf16_tiles(), kernel);
        let auto = Precision::Auto.kind(tch::Device::Cpu);
        let expected = if kernel {
            tch::Kind::BFloat16
        } else {
            tch::Kind::Float
        };
        assert_eq!(auto, expected);
    }
}
