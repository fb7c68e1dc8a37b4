#!/usr/bin/env bash
# Runs the compile-speed benchmark and writes results/<date>-<machine>.json (Google Benchmark JSON,
# with the machine's context). Build first: cmake --build --preset default
set -euo pipefail
cd "$(dirname "$0")"
bin=../../build/default/experiments/compile_speed/compile_speed
out=results/$(date -u +%F)-$(hostname -s | tr -c 'a-zA-Z0-9\n-' '_')-$(nproc)cpu.json
"$bin" --benchmark_out="$out" --benchmark_out_format=json "$@"
echo "wrote $out"
