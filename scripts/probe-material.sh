#!/usr/bin/env bash
# Does a network's value count material? Prints the root win/draw/loss (per
# mille, White to move) after a short search of positions that differ only by
# a queen, and of whole armies against a bare king (README, Status).
#   scripts/probe-material.sh WEIGHTS [NODES] [MIXZERO]
# WEIGHTS: a weights file or a run's checkpoints/latest; NODES: 30 unless
# given; MIXZERO: the binary (default: the release build, built if missing).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
weights=${1:?usage: probe-material.sh WEIGHTS [NODES] [MIXZERO]}
nodes=${2:-30}
[[ -e $weights ]] || { echo "probe-material.sh: no weights at $weights" >&2; exit 1; }
mixzero=${3:-}
if [[ -z $mixzero ]]; then
  "$root/scripts/setup.sh"
  (cd "$root" && cargo build --quiet --release -p trainer --bin mixzero)
  mixzero=$root/target/release/mixzero
fi

positions=(
  "start|rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 1"
  "black queen off|rnnb1kbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 1"
  "white queen off|rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNB1KBNNR w KQkq - 0 1"
  "black queen en prise on e3|rnnb1kbnnr/pppppppppp/10/10/10/10/10/4q5/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 1"
  "white army vs bare king|5k4/10/10/10/10/10/10/10/PPPPP5/RNNBQKBNNR w - - 0 1"
  "black army vs bare king|rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/10/5K4 w - - 0 1"
)

coproc engine { "$mixzero" uci --weights "$weights" --capture-prior 0; }
trap 'kill "${engine_PID:-}" 2>/dev/null || true' EXIT
echo uci >&"${engine[1]}"
printf '%-28s %5s %5s %5s  %s\n' position win draw loss best
for entry in "${positions[@]}"; do
  name=${entry%%|*}
  fen=${entry#*|}
  printf 'position fen %s\ngo nodes %s\n' "$fen" "$nodes" >&"${engine[1]}"
  wdl=(- - -)
  best=-
  while true; do
    read -r line <&"${engine[0]}" || { echo "probe-material.sh: mixzero uci stopped" >&2; exit 1; }
    if [[ $line == info*" wdl "* ]]; then
      read -r -a wdl <<<"${line#* wdl }"
    elif [[ $line == bestmove* ]]; then
      best=${line#bestmove }
      break
    fi
  done
  printf '%-28s %5s %5s %5s  %s\n' "$name" "${wdl[0]}" "${wdl[1]}" "${wdl[2]}" "${best%% *}"
done
echo quit >&"${engine[1]}"
