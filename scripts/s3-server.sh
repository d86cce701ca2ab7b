#!/usr/bin/env bash
# Starts a local S3-compatible server (s3s-fs, files in a temporary directory)
# for the `store` crate's tests, and prints the settings they read as shell
# `export` lines:
#
#   eval "$(scripts/s3-server.sh)"     # start; the tests can now reach it
#   kill "$MIXZERO_TEST_S3_PID"; rm -rf "$MIXZERO_TEST_S3_DIR"   # stop
#
# scripts/test.sh does this itself (and stops it on exit) unless
# MIXZERO_TEST_S3_ENDPOINT is already set. A server's port is chosen by the
# system (port 0) and read back from its log, so several runs never clash.
#
# s3s-fs is installed with cargo the first time (a few minutes; cached in
# ~/.cargo/bin afterwards). Progress goes to stderr, only exports to stdout.
set -euo pipefail

S3S_FS_VERSION=0.14.1
bucket=mixzero-test
access_key=mixzero-test-key
secret_key=mixzero-test-secret

if ! command -v s3s-fs >/dev/null; then
  PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
if ! command -v s3s-fs >/dev/null; then
  echo "s3-server.sh: installing s3s-fs $S3S_FS_VERSION (once)" >&2
  cargo install s3s-fs --version "$S3S_FS_VERSION" --features binary --locked >&2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/mixzero-s3.XXXXXX")
# s3s-fs maps each bucket to a directory of its root.
mkdir -p "$dir/data/$bucket"
# Its "server is running at" line is INFO, which it logs only when asked.
RUST_LOG=s3s_fs=info nohup s3s-fs --host 127.0.0.1 --port 0 \
  --access-key "$access_key" --secret-key "$secret_key" "$dir/data" \
  >"$dir/log" 2>&1 </dev/null &
pid=$!

endpoint=""
for _ in $(seq 100); do
  endpoint=$(grep -o 'server is running at http://[0-9.:]*' "$dir/log" | grep -o 'http://.*' || true)
  [ -n "$endpoint" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if [ -z "$endpoint" ]; then
  echo "s3-server.sh: s3s-fs did not start; its log:" >&2
  cat "$dir/log" >&2
  kill "$pid" 2>/dev/null || true
  rm -rf "$dir"
  exit 1
fi
echo "s3-server.sh: s3s-fs $pid serving $dir/data at $endpoint (bucket $bucket)" >&2

for var in ENDPOINT="$endpoint" BUCKET="$bucket" ACCESS_KEY="$access_key" \
  SECRET_KEY="$secret_key" PID="$pid" DIR="$dir"; do
  printf 'export MIXZERO_TEST_S3_%s=%q\n' "${var%%=*}" "${var#*=}"
done
