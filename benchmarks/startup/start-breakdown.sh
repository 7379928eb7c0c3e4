#!/usr/bin/env bash
# start-breakdown.sh [rounds] [script.py]: where `./dtorch run` spends its start, part by part (StartBreakdown), with
# the JVM flags `./dtorch` uses in its JIT mode, or in the interpreter with DTORCH_JIT=off.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="$ROOT/python-facade/target"
JAVA="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java"
CLASSPATH_ALL="$TARGET/classes:$(cat "$TARGET/launcher.classpath")"
UPGRADE=""
REST=""
IFS=':' read -r -a ENTRIES <<< "$CLASSPATH_ALL"
for entry in "${ENTRIES[@]}"; do
  case "$(basename "$entry")" in
    compiler-2*.jar|word-2*.jar|collections-2*.jar|truffle-compiler-2*.jar|nativeimage-2*.jar) UPGRADE="${UPGRADE:+$UPGRADE:}$entry" ;;
    *) REST="${REST:+$REST:}$entry" ;;
  esac
done
BASE=(--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED -Dorg.bytedeco.javacpp.maxPhysicalBytes=0)
export THP_MEM_ALLOC_ENABLE="${THP_MEM_ALLOC_ENABLE:-1}"
if [ "${DTORCH_JIT:-on}" = "off" ]; then
  exec "$JAVA" "${BASE[@]}" -cp "$CLASSPATH_ALL" org.dtorch.python.StartBreakdown "$@"
else
  exec "$JAVA" -XX:+UnlockExperimentalVMOptions -XX:+EnableJVMCI "--upgrade-module-path=$UPGRADE" "${BASE[@]}" -cp "$REST" \
    org.dtorch.python.StartBreakdown "$@"
fi
