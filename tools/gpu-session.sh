#!/usr/bin/env bash
# Runs on the lent GPU machine, from the repository root, after ../shared/tools/gpu-stage's parts (the JDK
# and the -Pgpu jars) were gathered in /tmp/stage. Our own classes travel with the call (`carry` the six module
# target folders: runtime-core, graph-ops, benchmarks, polyglot-bindings, python-facade and examples `/target`; CLASSES
# below lists what is used of them), so a code change needs no new staging. The calls, back to back on one warm machine:
#   here:  tools/gpu-stage-jars.sh                        (the -Pgpu build, and the JDK and external jars in .stage/partNN)
#   there: mkdir -p /tmp/stage && cp .stage/partNN /tmp/stage/   (one call per part, carrying that part)
#   there: tools/gpu-session.sh tests|bench|multigpu|java ...    (carrying the six target folders)
#
#   tools/gpu-session.sh tests [JUnit selectors...]   the gpu-tagged tests (default: all of them)
#   tools/gpu-session.sh bench [-Dbench.quick=true]   the gpu benchmarks (CommBenchmarks gpu,channelcuda)
#   tools/gpu-session.sh multigpu [-Dbench.quick=true] NCCL across the GPUs against torch.distributed (CommBenchmarks multigpu)
#   tools/gpu-session.sh java MAIN [ARGS...]          any main class on the class path
#   tools/gpu-session.sh python [LAUNCHER ARGS...]    the launcher as ./dtorch runs it, GraalPy's JIT on (run --devices ...);
#                                                     SAMPLER_OPTS="-Dsampler.out=F ..." runs it under StackSampler
#   tools/gpu-session.sh models [tiny|1b]             the Models and Training rows of docs/benchmarks.md, each case ours on one
#                                                     rank and then PyTorch eager in the machine's Python (tiny: the decode
#                                                     twice and the training step, warm and cold, about 3 minutes on an H100;
#                                                     1b: the decode, about 2 minutes)
# Writes JUnit's XML and the benchmark's report under $OUT when OUT is set.
# DTORCH_STAGE names another folder than /tmp/stage for the parts (when something else stages there too).
set -uo pipefail
cd "$(dirname "$0")/.."
STAGE="${DTORCH_STAGE:-/tmp/stage}"
[ -d "$STAGE/root" ] || { cat "$STAGE"/part* | tar -x -C "$STAGE" || exit 3; }
if [ "$STAGE" != /tmp/stage ]; then sed -i "s#/tmp/stage/#$STAGE/#g" "$STAGE/root/env.sh"; fi
. "$STAGE/root/env.sh"
CLASSES="runtime-core/target/test-classes:graph-ops/target/test-classes:runtime-core/target/classes:graph-ops/target/classes"
CLASSES="$CLASSES:benchmarks/target/classes:polyglot-bindings/target/classes:python-facade/target/test-classes"
CLASSES="$CLASSES:python-facade/target/classes:examples/target/test-classes:examples/target/classes"
export CP="$CLASSES:$CP"
export THP_MEM_ALLOC_ENABLE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# glibc's heap settings as ./dtorch sets them (see there)
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-4294967296}" MALLOC_TOP_PAD_="${MALLOC_TOP_PAD_:-67108864}" \
  MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-33554432}"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT" /tmp/jtmp
JVM=("$JAVA" --enable-native-access=ALL-UNNAMED --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 -Djava.io.tmpdir=/tmp/jtmp -cp "$CP")
what="${1:-tests}"; shift || true
case "$what" in
  tests)
    select=("$@"); [ ${#select[@]} -gt 0 ] || select=(--scan-class-path)
    "${JVM[@]}" org.junit.platform.console.ConsoleLauncher execute "${select[@]}" --include-tag gpu \
      --details=tree --disable-banner ;;
  bench)
    "${JVM[@]}" -Dbench.root=. -Dbench.commit="${COMMIT:-unknown}" "$@" \
      org.dtorch.benchmarks.CommBenchmarks gpu,channelcuda "$OUT/gpu-benchmarks.md" ;;
  multigpu)
    "${JVM[@]}" -Dbench.root=. -Dbench.commit="${COMMIT:-unknown}" "$@" \
      org.dtorch.benchmarks.CommBenchmarks multigpu "$OUT/multigpu-benchmarks.md" ;;
  java)
    "${JVM[@]}" "$@" ;;
  python)
    # As ./dtorch does: the Graal compiler's jars on the upgrade module path (JVMCI), the rest on the class path.
    upgrade=""; rest=""
    IFS=':' read -r -a entries <<< "$CP"
    for entry in "${entries[@]}"; do
      case "$(basename "$entry")" in
        *-compiler-2*.jar|*-word-2*.jar|*-collections-2*.jar|*-truffle-compiler-2*.jar|*-nativeimage-2*.jar) upgrade="${upgrade:+$upgrade:}$entry" ;;
        *) rest="${rest:+$rest:}$entry" ;;
      esac
    done
    "$JAVA" -XX:+UnlockExperimentalVMOptions -XX:+EnableJVMCI "--upgrade-module-path=$upgrade" --enable-native-access=ALL-UNNAMED \
      --sun-misc-unsafe-memory-access=allow --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED \
      -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 -Djava.io.tmpdir=/tmp/jtmp ${SAMPLER_OPTS:-} -cp "$rest" \
      ${SAMPLER_OPTS:+org.dtorch.benchmarks.StackSampler} org.dtorch.python.Launcher "$@" ;;
  models)
    # GraalPy's JIT compiles a step's Python over its first few hundred steps (CPython has nothing to warm): the decode
    # repeats its generation and the training step warms up first, and the cold training figure is printed beside.
    self="$(dirname "$0")/gpu-session.sh"
    export PYTHONUNBUFFERED=1 DTORCH_SERVER=off
    nvidia-smi --query-gpu=name --format=csv,noheader
    case "${1:-tiny}" in
      tiny)
        # PyTorch eager before and after ours: a machine whose load changes shows in eager's two figures.
        echo "== decode, ours"
        timeout 200 "$self" python run --devices cuda:1 examples/python/llama.py --weights /tmp/tiny.safetensors --repeat 60 --no-reference
        echo "== decode, PyTorch eager"
        timeout 60 python3 benchmarks/python/bench_llama_torch.py /tmp/tiny.safetensors --repeat 9
        echo "== decode, ours again"
        timeout 200 "$self" python run --devices cuda:1 examples/python/llama.py --weights /tmp/tiny.safetensors --repeat 60 --no-reference
        echo "== decode, PyTorch eager again"
        timeout 60 python3 benchmarks/python/bench_llama_torch.py /tmp/tiny.safetensors --repeat 9
        echo "== training step, warm, ours and the torch module"
        timeout 250 "$self" python run --devices cuda:1 benchmarks/python/bench_train.py --warmup 400 --steps 250 --rounds 5 --device cuda:0
        echo "== training step, warm, PyTorch eager"
        timeout 60 python3 benchmarks/python/bench_train.py --device cuda:0 --warmup 400 --steps 250 --rounds 5
        echo "== training step, cold (3 warm-up steps), PyTorch eager"
        timeout 60 python3 benchmarks/python/bench_train.py --device cuda:0 --steps 15 --rounds 5 ;;
      1b)
        echo "== decode 1b, ours"
        timeout 330 "$self" python run --devices cuda:1 examples/python/llama.py --size 1b --weights /tmp/1b.safetensors --repeat 16 --no-reference
        echo "== decode 1b, PyTorch eager"
        timeout 120 python3 benchmarks/python/bench_llama_torch.py /tmp/1b.safetensors --repeat 5 ;;
      *) echo "gpu-session: models tiny | models 1b" >&2; exit 2 ;;
    esac ;;
  *) echo "gpu-session: tests | bench | multigpu | java MAIN | python ARGS | models [tiny|1b]" >&2; exit 2 ;;
esac
