#!/usr/bin/env bash
# Runs `mixzero` (release build) after making sure libtorch is set up.
#   ./scripts/mixzero.sh train            # train on the embedded default config
#   ./scripts/mixzero.sh bench nn --json  # any other subcommand
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec cargo run --quiet --release -p trainer --bin mixzero -- "$@"
