//! Links libtorch for the tests (rpath, libtorch_cuda.so kept: see
//! `libtorch_link::directives`).
fn main() {
    libtorch_link::emit();
}
