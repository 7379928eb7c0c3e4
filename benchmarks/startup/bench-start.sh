#!/usr/bin/env bash
# bench-start.sh [repeats]: time to first result of `./dtorch run`, cold (a direct start, `--no-server`) and warm (the
# runtime server with a prepared context and, with --per-device-process, standby worker JVMs), side by side in one run:
# print("hi"), one distributed operator and the quickstart, each in thread mode and with --per-device-process
# (BENCH_MODES="threads processes"; name one to time only its part). Each repeat times every case cold, then warm;
# before each timed run the server's background preparation has finished, so neither run competes with it. Prints a
# Markdown table: medians, the median of the per-repeat ratios (cold / warm), and the 3 s goal. Uses a runtime
# directory of its own and ends its server at the end.
# BENCH_BASELINE=<another built checkout> also times that checkout's `./dtorch run` in each repeat, right before the cold
# run (for example the launcher before the runtime server: a worktree of an older commit, built with
# `mvn -B -o -DskipTests package`), and adds its median and the ratio cold / baseline.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/benchmarks/startup"
REPEATS="${1:-3}"
read -r -a MODES <<< "${BENCH_MODES:-threads processes}"
export XDG_RUNTIME_DIR; XDG_RUNTIME_DIR="$(mktemp -d)"
export DTORCH_SERVER_IDLE_SECONDS=900
unset DTORCH_SERVER
SERVER_DIR="$XDG_RUNTIME_DIR/dtorch-server"
trap 'for log in "$SERVER_DIR"/*.log; do pid=$(sed -n "s/.*dtorch runtime server \([0-9]*\) serves.*/\1/p" "$log" | tail -1); [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; done; rm -rf "$XDG_RUNTIME_DIR"' EXIT

now_ms() { date +%s%3N; }
# Waits until the server has a context ready for the next run and its standby worker JVMs, if it prepares any, are
# started (its log's last lines about contexts and about standby workers say so).
await_prepared() {
  local deadline=$(( $(date +%s) + 600 ))
  while :; do
    local last workers; last="$(cat "$SERVER_DIR"/*.log 2>/dev/null | grep -E 'prepared a context|waited' | tail -1 || true)"
    workers="$(cat "$SERVER_DIR"/*.log 2>/dev/null | grep -E 'on standby$|standby workers, pids|could not prepare' | tail -1 || true)"
    case "$last" in *"prepared a context"*) case "$workers" in *"on standby") ;; *) return 0 ;; esac ;; esac
    [ "$(date +%s)" -lt "$deadline" ] || { echo "no prepared context and workers within 600 s" >&2; exit 1; }
    sleep 0.5
  done
}
served() { cat "$SERVER_DIR"/*.log 2>/dev/null | grep -c ' ran \[' || true; }
# time_run ARGS...: the wall time of one ./dtorch run in ms (DTORCH_CHECKOUT: another checkout's ./dtorch); the run must
# succeed.
time_run() {
  local start end
  start=$(now_ms)
  (cd "$HERE" && "${DTORCH_CHECKOUT:-$ROOT}/dtorch" "$@" </dev/null >/tmp/bench-start.$$.out 2>&1) || { cat /tmp/bench-start.$$.out >&2; exit 1; }
  end=$(now_ms)
  echo $(( end - start ))
}

# Start the server once (a direct run starts it after itself) and wait for its first context. The server keeps worker
# JVMs on standby for the configuration of its last --per-device-process run: one such run names it before the timing.
(cd "$HERE" && "$ROOT/dtorch" run hi.py >/dev/null)
await_prepared
(cd "$HERE" && "$ROOT/dtorch" run --per-device-process hi.py >/dev/null)
await_prepared

CASES=("hi.py" "one_operator.py" "$ROOT/examples/python/quickstart.py")
NAMES=('`print("hi")`' 'one distributed operator' 'the quickstart')
BASELINE="${BENCH_BASELINE:-}"
# The baseline's first run probes its JIT mode once; it is not timed.
[ -z "$BASELINE" ] || (cd "$HERE" && "$BASELINE/dtorch" run hi.py >/dev/null)
declare -A COLD WARM BASE
for ((r = 1; r <= REPEATS; r++)); do
  for mode in "${MODES[@]}"; do
    flags=(); [ "$mode" = threads ] || flags=(--per-device-process)
    for i in "${!CASES[@]}"; do
      if [ -n "$BASELINE" ]; then
        await_prepared
        # The quickstart of the baseline's own checkout: today's uses operators the older one lacks.
        b=$(DTORCH_CHECKOUT="$BASELINE" time_run run "${flags[@]+"${flags[@]}"}" "${CASES[$i]/#$ROOT/$BASELINE}")
        BASE[$mode,$i]="${BASE[$mode,$i]:-} $b"
        echo "repeat $r $mode ${CASES[$i]##*/}: baseline $b ms" >&2
      fi
      await_prepared
      c=$(time_run run --no-server "${flags[@]+"${flags[@]}"}" "${CASES[$i]}")
      await_prepared
      before=$(served)
      w=$(time_run run "${flags[@]+"${flags[@]}"}" "${CASES[$i]}")
      [ "$(served)" -gt "$before" ] || { echo "the warm run of ${CASES[$i]} was not served by the server; its logs end:" >&2
        tail -n 20 "$SERVER_DIR"/*.log >&2; exit 1; }
      COLD[$mode,$i]="${COLD[$mode,$i]:-} $c"
      WARM[$mode,$i]="${WARM[$mode,$i]:-} $w"
      echo "repeat $r $mode ${CASES[$i]##*/}: cold $c ms, warm $w ms" >&2
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
if [ -n "$BASELINE" ]; then
  echo "| script | mode | baseline: $(git -C "$BASELINE" log -1 --format=%h) (median) | cold, direct start (median) | cold / baseline (median of repeats) | warm, server (median) | cold / warm (median of repeats) | warm <= 3 s |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| script | mode | cold, direct start (median) | warm, server (median) | cold / warm (median of repeats) | warm <= 3 s |"
  echo "|---|---|---|---|---|---|"
fi
for mode in "${MODES[@]}"; do
  for i in "${!CASES[@]}"; do
    cold=(${COLD[$mode,$i]}); warm=(${WARM[$mode,$i]})
    ratios=""; met=0
    for ((k = 0; k < ${#cold[@]}; k++)); do
      ratios="$ratios $(awk -v c="${cold[$k]}" -v w="${warm[$k]}" 'BEGIN {printf "%.2f", c / w}')"
      [ "${warm[$k]}" -gt 3000 ] || met=$((met + 1))
    done
    mc=$(echo "${cold[*]}" | median); mw=$(echo "${warm[*]}" | median); mr=$(echo "$ratios" | median)
    goal=$([ "$(awk -v w="$mw" 'BEGIN {print (w <= 3000)}')" = 1 ] && echo "**met** ($met of ${#warm[@]})" || echo "**not met** ($met of ${#warm[@]})")
    label=$([ "$mode" = threads ] && echo "threads" || echo "\`--per-device-process\`")
    if [ -n "$BASELINE" ]; then
      base=(${BASE[$mode,$i]}); bratios=""
      for ((k = 0; k < ${#cold[@]}; k++)); do
        bratios="$bratios $(awk -v c="${cold[$k]}" -v b="${base[$k]}" 'BEGIN {printf "%.2f", c / b}')"
      done
      mb=$(echo "${base[*]}" | median); mbr=$(echo "$bratios" | median)
      printf '| %s | %s | %.1f s | %.1f s | %sx | %.2f s | %sx | %s |\n' "${NAMES[$i]}" "$label" "$(awk -v m="$mb" 'BEGIN {print m / 1000}')" \
        "$(awk -v m="$mc" 'BEGIN {print m / 1000}')" "$mbr" "$(awk -v m="$mw" 'BEGIN {print m / 1000}')" "$mr" "$goal"
    else
      printf '| %s | %s | %.1f s | %.2f s | %sx | %s |\n' "${NAMES[$i]}" "$label" "$(awk -v m="$mc" 'BEGIN {print m / 1000}')" \
        "$(awk -v m="$mw" 'BEGIN {print m / 1000}')" "$mr" "$goal"
    fi
  done
done
