//! Embeds libtorch's directory as an rpath so that tests and binaries run
//! without LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        let dir = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.into());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
}
