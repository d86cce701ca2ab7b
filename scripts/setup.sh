#!/usr/bin/env bash
# Finds or installs libtorch (PyPI's torch==2.11.0 wheel, what tch 0.24 expects)
# and writes .cargo/config.toml so that plain `cargo build/test/run` work in
# this checkout afterwards. Safe to run again: an existing install is reused.
#
#   MIXZERO_TORCH_VENV  virtual environment to use or create
#                       (default: ~/.cache/mixzero/torch-2.11.0)
#   MIXZERO_PYTHON      Python used to create it (default: python3)
set -euo pipefail

TORCH_VERSION=2.11.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${MIXZERO_TORCH_VENV:-$HOME/.cache/mixzero/torch-$TORCH_VERSION}
python=${MIXZERO_PYTHON:-python3}

torch_dir() { # prints the torch package dir if $1 has torch $TORCH_VERSION
  "$1" - <<PY 2>/dev/null
import os, torch
if torch.__version__.split("+")[0] == "$TORCH_VERSION":
    print(os.path.dirname(torch.__file__))
PY
}

dir=""
if [ -x "$venv/bin/python" ]; then
  dir=$(torch_dir "$venv/bin/python" || true)
fi
if [ -z "$dir" ] && command -v "$python" >/dev/null; then
  dir=$(torch_dir "$python" || true)
fi
if [ -z "$dir" ]; then
  echo "setup: installing torch==$TORCH_VERSION into $venv (one time, a few GB)" >&2
  command -v "$python" >/dev/null || { echo "setup: $python not found; install Python 3.10+" >&2; exit 1; }
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "torch==$TORCH_VERSION"
  dir=$(torch_dir "$venv/bin/python")
fi
[ -n "$dir" ] && [ -d "$dir/lib" ] || { echo "setup: no usable torch $TORCH_VERSION found" >&2; exit 1; }

mkdir -p "$root/.cargo"
config="$root/.cargo/config.toml"
new=$(cat <<TOML
# Written by scripts/setup.sh; not committed (machine-specific paths).
[env]
LIBTORCH = "$dir"
TOML
)
if [ ! -f "$config" ] || [ "$(cat "$config")" != "$new" ]; then
  printf '%s\n' "$new" > "$config"
fi
echo "setup: libtorch at $dir" >&2
