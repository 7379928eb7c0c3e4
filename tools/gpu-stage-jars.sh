#!/usr/bin/env bash
# Builds with the GPU natives and packs what tools/gpu-session.sh needs on the GPU machine besides our own
# classes: a Java 25 runtime and the external jars of the -Pgpu class path (libtorch's CUDA build, Bytedeco's
# CUDA JNI, JavaCPP, OpenBLAS, HdrHistogram, GraalPy and picocli for the Python facade's tests, JUnit's console
# launcher), in .stage/partNN, in the layout of ../shared/tools/gpu-stage (one 52 MiB part per device call, unpacked
# into /tmp/stage there, with the same env.sh; a call's 64 MiB carry limit counts the working tree beside the part).
# It links the Java runtime itself because GraalPy needs the JDK module jdk.security.auth
# (com.sun.security.auth.module.UnixSystem) besides the modules gpu-stage links, and JVMCI (jdk.internal.vm.ci),
# through which GraalPy's optimizing JIT runs (tools/gpu-session.sh python).
# The CPU natives that Maven still lists under -Pgpu (it reads the modules' own POMs with their default, cpu, profile;
# JavaCPP loads the -gpu natives first) are left out. Prints the calls to make.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! "${JAVA_HOME:-/nonexistent}/bin/java" -version 2>&1 | grep -q 'version "2[5-9]'; then
  JAVA_HOME=$(ls -d /usr/lib/jvm/temurin-25* /usr/lib/jvm/*25* 2>/dev/null | head -n 1)
  [ -n "$JAVA_HOME" ] || { echo "gpu-stage-jars: set JAVA_HOME to a JDK 25" >&2; exit 2; }
fi
export JAVA_HOME PATH="$JAVA_HOME/bin:$PATH"
mvn -B -q -Pgpu install -DskipTests
cps=()
for m in graph-ops benchmarks python-facade examples; do
  f=$(mktemp); (cd "$m" && mvn -B -q -Pgpu dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$f" >/dev/null); cps+=("$f")
done
junit_dir="${TMPDIR:-/tmp}/gpu-test-junit"
ls "$junit_dir"/junit-platform-console-standalone-*.jar >/dev/null 2>&1 || \
  mvn -B -q dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:1.14.1 -DoutputDirectory="$junit_dir"
cat "${cps[@]}" | tr ':' '\n' | grep '\.jar$' | grep -v '/org/dtorch/' | grep -v 'pytorch-[0-9.-]*-linux-x86_64\.jar$' \
  | grep -v -E '/(junit|opentest4j|apiguardian)' | awk '!seen[$0]++' > .stage-cp.txt
ls "$junit_dir"/junit-platform-console-standalone-*.jar | head -n 1 >> .stage-cp.txt
rm -f "${cps[@]}"
STAGE=.stage
rm -rf "$STAGE"; mkdir -p "$STAGE/root/cp"
jlink --add-modules java.base,java.logging,jdk.unsupported,java.management,java.naming,jdk.management,jdk.security.auth,jdk.internal.vm.ci \
  --compress zip-9 --strip-debug --no-header-files --no-man-pages --output "$STAGE/root/jre"
CP=""; i=0
while read -r jar; do
  i=$((i + 1)); name="$(printf '%03d' "$i")-$(basename "$jar")"
  cp "$jar" "$STAGE/root/cp/$name"; CP="${CP:+$CP:}/tmp/stage/root/cp/$name"
done < .stage-cp.txt
rm -f .stage-cp.txt
cat > "$STAGE/root/env.sh" <<ENV
# Sourced on the GPU machine after unpacking into /tmp/stage (the layout of ../shared/tools/gpu-stage).
export JAVA=/tmp/stage/root/jre/bin/java
export CP="$CP"
NV=\$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia
export LD_LIBRARY_PATH="\$NV/cu13/lib:\$NV/cudnn/lib:\$NV/nccl/lib:\$NV/cusparselt/lib:\${LD_LIBRARY_PATH:-}"
ENV
tar -C "$STAGE" -cf "$STAGE/all.tar" root
split -b 52M -d -a 2 "$STAGE/all.tar" "$STAGE/part"
rm -rf "$STAGE/all.tar" "$STAGE/root"
echo "gpu-stage-jars: $(du -sh "$STAGE" | cut -f1) in $(ls "$STAGE"/part* | wc -l) part(s) under $STAGE"
for p in "$STAGE"/part*; do echo "  call: carry [\"$p\"]  command: mkdir -p /tmp/stage && cp $p /tmp/stage/"; done
echo "then, each call carrying the target folders of runtime-core, graph-ops, benchmarks, polyglot-bindings, python-facade and examples:"
echo "  tools/gpu-session.sh tests    |    tools/gpu-session.sh bench"
