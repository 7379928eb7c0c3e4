#!/usr/bin/env bash
# Reruns every benchmark at full size, one after the other, for docs/benchmarks.md:
#   1. builds the checked-out code, the Python launcher included (so every figure measures this commit);
#   2. runs every harness (store, future, allreduce, redistribute, pipeline, process, python) in one JVM, with the
#      flags and environment the README lists, writing benchmarks/target/benchmarks.md;
#   3. runs the all-reduce harness again with THP_MEM_ALLOC_ENABLE=0, writing benchmarks/target/benchmarks-no-thp.md.
# Each table states the commit (with -dirty for uncommitted changes), machine and command it was measured with;
# pasting the tables into docs/benchmarks.md is the update. Extra arguments go to every Maven call, for example
# -Dbench.runs=3, or -Dbench.quick=true -Dbench.runs=2 -Dbench.rounds=1 for a smoke test of the harnesses.
# At full size this takes about 25 minutes on the project's 2-core VM (estimated from the iteration counts).
# Run it on a quiet machine: other load shows up in every figure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

java_major() {
  "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -n 1
}
if [ -z "${JAVA_HOME:-}" ] || [ ! -x "$JAVA_HOME/bin/java" ] || [ "$(java_major "$JAVA_HOME")" -lt 25 ] 2>/dev/null; then
  JAVA_HOME=""
  for candidate in /usr/lib/jvm/temurin-25* /usr/lib/jvm/*25* /usr/lib/jvm/*; do
    if [ -x "$candidate/bin/java" ] && [ "$(java_major "$candidate")" -ge 25 ] 2>/dev/null; then JAVA_HOME="$candidate"; break; fi
  done
  [ -n "$JAVA_HOME" ] || { echo "run-all: no JDK 25 or newer found; set JAVA_HOME" >&2; exit 2; }
fi
export JAVA_HOME PATH="$JAVA_HOME/bin:$PATH"

echo "== build (python-facade and benchmarks, with their dependencies)"
mvn -B -q -DskipTests -pl python-facade -am package "$@"
rm -f python-facade/target/jit-mode # ./dtorch probes the JIT again for this build

status=0
echo "== all benchmarks -> benchmarks/target/benchmarks.md"
mvn -B -q -pl benchmarks -am package exec:exec -DskipTests -Dbench.select=all "$@" || status=1

echo "== all-reduce without transparent huge pages -> benchmarks/target/benchmarks-no-thp.md"
mvn -B -q -pl benchmarks -am package exec:exec -DskipTests -Dbench.select=allreduce -Ddtorch.env.thp=0 \
  -Dbench.report="$ROOT/benchmarks/target/benchmarks-no-thp.md" "$@" || status=1

exit "$status"
