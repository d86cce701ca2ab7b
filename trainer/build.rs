//! Embeds libtorch's directory as an rpath (so `mixzero` runs without
//! LD_LIBRARY_PATH) and the git revision (recorded in run directories).
fn main() {
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        let dir = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.into());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    let revision = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(revision) = revision {
        println!("cargo:rustc-env=MIXZERO_GIT_REVISION={revision}");
    }
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/index");
}
