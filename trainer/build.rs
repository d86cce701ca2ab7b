//! Links libtorch for `mixzero` and the tests (rpath, libtorch_cuda.so kept:
//! see `libtorch_link::directives`) and embeds the git revision (recorded in
//! run directories).
fn main() {
    libtorch_link::emit();
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
