#!/usr/bin/env bash
# Instructions per extender call, counted by callgrind: a figure that does not move with the
# machine's load, beside the extender bench's wall-clock percentiles (issue 31, item 4).
#
#   scripts/extender-instructions.sh
#
# Builds the extender bench (bench profile: release, fat LTO) and runs each row once under
# `valgrind --tool=callgrind --toggle-collect=*counted*`: the bench (EXTENDER_INSTRUCTIONS=N)
# calls the verb once to warm up, then N times inside its `counted` function, and only what runs
# inside it is counted. Rows: nodeCacheCapable without rewards (`cache`), with rewards for 8 pod
# types and the reward floor (`cache+rw`), full-node mode (`full-node`) and, for the full-node
# ratio, serde_json parsing the same body into `IgnoredAny` (`ignored`).
#
# Environment: EXTENDER_NODES (default 100,1000,5000), EXTENDER_MODES (default
# cache,cache+rw,full-node), EXTENDER_CALLS (calls counted per row, default 20). Valgrind runs
# the bench about 50 times slower: at 5,000 nodes a row takes about a minute, mostly building
# the view and the bodies.
#
# Prints a table and one FIGURE line per row: `extender_<verb>_minstr` (`cache+rw`),
# `extender_<verb>_names_minstr` (`cache`), `extender_fullnode_<verb>_minstr` and the ratio
# `extender_fullnode_instr_ratio_<verb>` (full-node over the IgnoredAny parse), in millions of
# instructions per call. Exits 3 without valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
  echo "extender-instructions.sh: valgrind is missing (Debian: apt-get install valgrind)" >&2
  exit 3
fi
nodes="${EXTENDER_NODES:-100,1000,5000}"
modes="${EXTENDER_MODES:-cache,cache+rw,full-node}"
calls="${EXTENDER_CALLS:-20}"

bench="$(cargo bench -p telemesh-coordinator --bench extender --no-run 2>&1 \
  | sed -n 's/.*Executable.*(\(.*\))$/\1/p' | tail -1)"
if [ -z "$bench" ] || [ ! -x "$bench" ]; then
  echo "extender-instructions.sh: cargo did not say where the extender bench is" >&2
  exit 1
fi
out_dir="target/extender-instructions"
mkdir -p "$out_dir"

# Millions of instructions per call in one row (mode, verb) at $1 nodes.
count() {
  local n="$1" mode="$2" verb="$3" out
  out="$out_dir/callgrind.$n.$mode.$verb"
  EXTENDER_INSTRUCTIONS="$calls" EXTENDER_NODES="$n" EXTENDER_MODES="$mode" EXTENDER_VERBS="$verb" \
    EXTENDER_PREEMPT=0 valgrind --tool=callgrind --toggle-collect='*counted*' \
    --callgrind-out-file="$out" "$bench" >"$out.log" 2>&1 \
    || { echo "callgrind failed on $n $mode $verb: see $out.log" >&2; exit 1; }
  grep -q "^counted $n $mode $verb $calls" "$out.log" \
    || { echo "the bench did not run $n $mode $verb: see $out.log" >&2; exit 1; }
  awk -v calls="$calls" '/^(summary|totals):/ { printf "%.3f\n", $2 / calls / 1e6; exit }' "$out"
}

printf '%6s %-10s %-10s %12s\n' nodes mode verb "M instr/call"
IFS=',' read -ra node_list <<<"$nodes"
IFS=',' read -ra mode_list <<<"$modes"
for n in "${node_list[@]}"; do
  for mode in "${mode_list[@]}"; do
    ignored=""
    if [ "$mode" = full-node ]; then
      ignored="$(count "$n" full-node ignored)"
      printf '%6s %-10s %-10s %12s\n' "$n" "$mode" ignored "$ignored"
    fi
    for verb in filter prioritize; do
      m="$(count "$n" "$mode" "$verb")"
      printf '%6s %-10s %-10s %12s\n' "$n" "$mode" "$verb" "$m"
      case "$mode" in
        cache) echo "FIGURE extender_${verb}_names_minstr $n $m Minstr" ;;
        cache+rw) echo "FIGURE extender_${verb}_minstr $n $m Minstr" ;;
        full-node)
          echo "FIGURE extender_fullnode_${verb}_minstr $n $m Minstr"
          echo "FIGURE extender_fullnode_instr_ratio_$verb $n $(awk -v a="$m" -v b="$ignored" 'BEGIN { printf "%.3f", a / b }') x" ;;
      esac
    done
  done
done
