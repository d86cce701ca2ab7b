#!/usr/bin/env bash
# The whole test suite: sets up libtorch if needed, then tests every crate.
# Extra arguments go to `cargo test` (e.g. `-- --ignored` for the slow perft rows).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
cargo test --workspace "$@"
