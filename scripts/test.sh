#!/usr/bin/env bash
# The whole test suite: sets up libtorch if needed, then tests every crate.
# Extra arguments go to `cargo test` (e.g. `-- --ignored` for the slow perft rows).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
# trainer/tests/tensorboard.rs checks our event files with TensorBoard's own
# reader, installed into setup.sh's venv (created here if setup.sh found
# torch outside it).
venv=${MIXZERO_TORCH_VENV:-$HOME/.cache/mixzero/torch-2.11.0}
[ -x "$venv/bin/python" ] || "${MIXZERO_PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -c 'import tensorboard' 2>/dev/null ||
  "$venv/bin/python" -m pip install --quiet tensorboard
export MIXZERO_PYTHON="$venv/bin/python"
cd "$root"
cargo test --workspace "$@"
