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
# The store crate's S3 tests need a server: start a local one unless one is
# given (MIXZERO_TEST_S3_ENDPOINT and the rest of s3-server.sh's exports),
# and stop it when this script exits.
if [ -z "${MIXZERO_TEST_S3_ENDPOINT:-}" ]; then
  s3_env=$("$root/scripts/s3-server.sh")
  eval "$s3_env"
  trap 'kill "$MIXZERO_TEST_S3_PID" 2>/dev/null || true; rm -rf "$MIXZERO_TEST_S3_DIR"' EXIT
  # So that an interrupted run also goes through the EXIT cleanup.
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
cd "$root"
cargo test --workspace "$@"
