//! Build-script support for `models` and `trainer`, the packages whose
//! binaries and test executables link libtorch (through `torch-sys`).
//!
//! `cargo:rustc-link-arg` reaches only the targets of the package whose build
//! script prints it, so each of those packages calls [`emit`] from its own
//! `build.rs`.

use std::path::Path;

/// Prints the cargo directives of [`directives`] for the libtorch that
/// `torch-sys` linked.
///
/// `torch-sys` (`links = "tch"`) passes its library directory as
/// `DEP_TCH_LIBTORCH_LIB` to the build scripts of the packages that depend on
/// it directly; without it (`torch-sys`'s `doc-only` feature) there is
/// nothing to link.
pub fn emit() {
    if let Some(dir) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        for directive in directives(Path::new(&dir)) {
            println!("{directive}");
        }
    }
}

/// The cargo directives for libtorch's library directory `lib_dir`:
///
/// - an rpath, so that binaries and tests run without `LD_LIBRARY_PATH`;
/// - `MIXZERO_LIBTORCH_LIB` at compile time, the directory itself, so that
///   `mixzero doctor` and the tests can tell which libtorch they were built
///   against;
/// - when the directory has `libtorch_cuda.so`, a `DT_NEEDED` entry for it.
///   Nothing in the Rust code or in `torch-sys`'s C++ wrapper references a
///   symbol of it (CUDA registers itself with libtorch from its static
///   initialisers), so the linker's `--as-needed`, which rustc passes, drops
///   the `-ltorch_cuda` that `torch-sys` asks for, and libtorch then reports
///   no CUDA on a GPU machine. `--no-as-needed` around our own `-ltorch_cuda`
///   keeps it; `--as-needed` is restored after it for any later library.
pub fn directives(lib_dir: &Path) -> Vec<String> {
    let dir = std::fs::canonicalize(lib_dir).unwrap_or_else(|_| lib_dir.to_path_buf());
    let mut directives = vec![
        format!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display()),
        format!("cargo:rustc-env=MIXZERO_LIBTORCH_LIB={}", dir.display()),
    ];
    if dir.join("libtorch_cuda.so").exists() {
        directives.extend(
            ["-Wl,--no-as-needed", "-Wl,-ltorch_cuda", "-Wl,--as-needed"]
                .map(|arg| format!("cargo:rustc-link-arg={arg}")),
        );
    }
    directives
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh empty directory under the system's temporary directory.
    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("libtorch-link-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_cpu_only_libtorch_gets_an_rpath_and_no_cuda_library() {
        let dir = scratch_dir("cpu");
        let directives = directives(&dir);
        let dir = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            directives,
            [
                format!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display()),
                format!("cargo:rustc-env=MIXZERO_LIBTORCH_LIB={}", dir.display()),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cuda_libtorch_links_libtorch_cuda_even_unreferenced() {
        let dir = scratch_dir("cuda");
        std::fs::write(dir.join("libtorch_cuda.so"), b"").unwrap();
        let directives = directives(&dir);
        assert_eq!(
            directives[2..],
            [
                "cargo:rustc-link-arg=-Wl,--no-as-needed",
                "cargo:rustc-link-arg=-Wl,-ltorch_cuda",
                "cargo:rustc-link-arg=-Wl,--as-needed",
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
