#!/usr/bin/env bash
# The GPU check: proves in about 6 minutes (at most 9) that a `mixzero`
# binary sees the GPU, keeps it busy and trains on it. Runs from the project
# root on a machine with Python's torch 2.11.0 (CUDA build) and no Rust
# toolchain, with a binary built beforehand on any Linux machine (see the
# README, "GPU check"):
#
#   scripts/gpu-check.sh OUT_DIR [MIXZERO_BINARY]    # binary default: gpu-bin/mixzero
#
# Writes into OUT_DIR: summary.txt (each step's exit status and seconds),
# doctor.json/.txt, bench-nn.jsonl, bench-selfplay.jsonl, bench-train.jsonl,
# train.log and the 3-minute run directory (run/, with logs/metrics.jsonl;
# its config is gpu.toml with training from 2,000 samples instead of 20,000,
# so that it takes steps), nvidia-smi.csv
# (utilisation sampled every second, when nvidia-smi exists), and each
# step's stderr as STEP.log.
set -uo pipefail

out=${1:?usage: scripts/gpu-check.sh OUT_DIR [MIXZERO_BINARY]}
bin=${2:-gpu-bin/mixzero}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mkdir -p "$out"
out=$(cd "$out" && pwd)
case $bin in /*) ;; *) bin="$root/$bin" ;; esac
[ -x "$bin" ] || { echo "gpu-check: no executable mixzero at $bin" >&2; exit 2; }

# libtorch from Python's torch (the binary's rpath names the build machine's
# copy, which is usually not here).
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
if [ -n "$torch_lib" ]; then
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  python3 -c 'import torch; print("python torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' \
    > "$out/python-torch.txt" 2>&1
else
  echo "gpu-check: python3 cannot import torch; relying on the binary's rpath" | tee "$out/python-torch.txt" >&2
fi

: > "$out/summary.txt"
# step NAME SECONDS STDOUT_FILE COMMAND...: runs COMMAND with a time limit
# (SIGINT first, so `train` writes its checkpoint), stdout to STDOUT_FILE.
step() {
  local name=$1 limit=$2 stdout=$3
  shift 3
  echo "== $name (at most ${limit} s): ${*#"$root/"}" >&2
  local start=$SECONDS
  timeout --signal=INT --kill-after=20 "$limit" "$@" > "$stdout" 2> "$out/$name.log"
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$out/summary.txt" >&2
}

sampler=""
if command -v nvidia-smi > /dev/null; then
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,power.draw \
    --format=csv -l 1 > "$out/nvidia-smi.csv" 2>&1 &
  sampler=$!
fi

step doctor 30 "$out/doctor.json" "$bin" doctor --config configs/gpu.toml --json
step doctor-text 30 "$out/doctor.txt" "$bin" doctor --config configs/gpu.toml
step bench-nn 90 "$out/bench-nn.jsonl" \
  "$bin" bench nn --config configs/gpu.toml --batches 128,512,1024 --seconds 4 --json
step bench-selfplay 90 "$out/bench-selfplay.jsonl" \
  "$bin" bench selfplay --config configs/gpu.toml --seconds 60 --json
step bench-train 60 "$out/bench-train.jsonl" \
  "$bin" bench train --config configs/gpu.toml --seconds 20 --json
# gpu.toml trains from 20,000 samples, about 3 minutes of self-play.
sed 's/^min_samples = .*/min_samples = 2000/' configs/gpu.toml > "$out/gpu-check.toml"
step train 220 "$out/train.out" \
  "$bin" train --config "$out/gpu-check.toml" --run-dir "$out/run" --minutes 3 --seed 1 --quiet
# The run's games are bulky and prove nothing the metrics do not.
rm -rf "$out/run/games"

[ -n "$sampler" ] && kill "$sampler" 2> /dev/null
cat "$out/summary.txt"
