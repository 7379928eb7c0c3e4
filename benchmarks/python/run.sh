#!/usr/bin/env bash
# Python-side benchmarks of dtorch, with GraalPy's optimizing JIT and in its interpreter, in one run.
# Usage: benchmarks/python/run.sh [rounds]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${1:-20}"
for mode in on off; do
  echo "== JIT $mode"
  DTORCH_JIT=$mode "$ROOT/dtorch" run --devices cpu:1 "$ROOT/benchmarks/python/bench_python.py" "$ROUNDS" 2>/dev/null | grep '^RESULT'
done
