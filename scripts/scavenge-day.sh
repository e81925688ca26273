#!/usr/bin/env bash
# Issue 17's day replay: a day of arrivals in sim, in accelerated time, run twice — the extender
# ranking preemption victims by unsaved work, then upstream's plain victim choice — with the real
# agents, coordinator and kube-scheduler (sim's own scheduler, which preempts as upstream does,
# when ../shared/tools/kube-scheduler is absent). An ordinary Deployment follows a daily curve
# (6 one-CPU pods of 32 CPUs at night, 22 within the hour from 7:30, swinging by up to 3 pods
# every quarter hour by day), a nightly ETL batch runs eight two-CPU pods at 1:00, 3:00 and 5:00;
# ScavengerJobs (1-3 pods of 1-2 CPUs, 1-6 h of work, checkpoints every 5 min to 2 h) arrive
# every 15 minutes on average, and those of the evening before still wait at midnight.
# Prints requested CPU use with and without scavengers (and while scavengers waited, against the
# 70 % threshold), and the CPU-seconds preemption wasted under each victim choice, with preempt
# calls, answers kube-scheduler refused, interrupted runs and the most one run lost.
#
# Several days (issue 32): DAYS seeded days of the same generator, day i (from 0) with seed
# DAY_SEED+i (default DAY_SEED 20261124, the day of docs/scavenger-jobs.md; DAYS default 1), each
# under SCAVENGER_QUEUE (`strict`, the default, `backfill`, or `both`: each day under strict,
# then under backfill). Each day prints a `DAY seed=… queue=… ranked=… plain=… ratio=…` line; at
# the end a table of the days and, per queue mode, the spread of the ratio (min, median, max)
# and how many days met the ≤ 1/3 target. Wall time: 2 × DAY_SECONDS per day and queue mode,
# plus a few seconds of start-up per run.
#
# DAY_SECONDS (default 600) is the real time one simulated day takes; each run takes that long.
# At 600 a 5-minute checkpoint interval is 2.1 s of real time, against a few hundred
# milliseconds for a checkpoint to reach the extender (marker poll, gossip): the estimates the
# ranking uses stay within ~15 % of the work really lost. Faster days distort that, and below
# 288 the shortest interval falls under the CRD's 1 s minimum.
# TRACE_DIR=<dir> keeps each run's timeline, ledger and logs (with a debug line per preempt
# candidate) for reading the decisions against what they cost, in <dir>/<queue>-<seed>/.
#
# The binaries are built once and copied aside before the first day, so a rebuild in the shared
# target/ while the days run (hours at DAY_SECONDS=600) does not change what later days run.
set -euo pipefail
cd "$(dirname "$0")/.."
DAY_SECONDS=${DAY_SECONDS:-600}
DAY_SEED=${DAY_SEED:-20261124}
DAYS=${DAYS:-1}
case "${SCAVENGER_QUEUE:-strict}" in
  strict) queues=(strict) ;;
  backfill) queues=(backfill) ;;
  both) queues=(strict backfill) ;;
  *) echo "SCAVENGER_QUEUE must be strict, backfill or both" >&2; exit 64 ;;
esac
[[ "$DAYS" =~ ^[1-9][0-9]*$ ]] || { echo "DAYS must be a positive integer" >&2; exit 64; }
[[ "$DAY_SEED" =~ ^[0-9]+$ ]] || { echo "DAY_SEED must be an unsigned integer" >&2; exit 64; }

cargo build --workspace --bins
test_exe=$(cargo test -p telemesh-tests --test scavenge_day --no-run --message-format=json \
  | jq -r 'select(.reason == "compiler-artifact" and .target.name == "scavenge_day"
            and .profile.test) | .executable' | tail -n 1)
[[ -x "$test_exe" ]] || { echo "cannot find the scavenge_day test executable" >&2; exit 1; }
# The harness finds the agent and coordinator beside the test executable's deps/ directory.
snapshot=$(mktemp -d "${TMPDIR:-/tmp}/scavenge-day.XXXXXX")
trap 'rm -rf "$snapshot"' EXIT
mkdir -p "$snapshot/debug/deps"
cp "$test_exe" "$snapshot/debug/deps/"
cp "$(dirname "$test_exe")/../telemesh-agent" "$(dirname "$test_exe")/../telemesh-coordinator" \
  "$snapshot/debug/"
exe="$snapshot/debug/deps/$(basename "$test_exe")"

if [[ -n "${TRACE_DIR:-}" ]]; then
  export TELEMESH_TEST_COORDINATOR_LOG="info,telemesh_coordinator::extender=debug"
fi
export TELEMESH_SCAVENGE_DAY=$DAY_SECONDS
results=$(mktemp "${TMPDIR:-/tmp}/scavenge-day-results.XXXXXX")
trap 'rm -rf "$snapshot" "$results"' EXIT
status=0
for ((i = 0; i < DAYS; i++)); do
  seed=$((DAY_SEED + i))
  for queue in "${queues[@]}"; do
    echo "=== day $((i + 1)) of $DAYS: seed $seed, --scavenger-queue=$queue ==="
    # The machine's load before and after: the replay runs in real time, so a loaded machine
    # stretches every lag it measures.
    uptime
    if [[ -n "${TRACE_DIR:-}" ]]; then
      export TELEMESH_SCAVENGE_DAY_TRACE="$TRACE_DIR/$queue-$seed"
    fi
    # strict is the coordinator's default: the day runs it without the flag.
    queue_flag=$queue
    [[ $queue == strict ]] && queue_flag=
    if ! TELEMESH_SCAVENGE_DAY_SEED=$seed TELEMESH_SCAVENGE_DAY_QUEUE=$queue_flag \
      "$exe" --nocapture --test-threads=1 2>&1 | tee -a "$results"; then
      echo "day $seed ($queue) failed"
      status=1
    fi
    uptime
  done
done

echo
echo "=== $DAYS day(s) from seed $DAY_SEED at DAY_SECONDS=$DAY_SECONDS ==="
grep '^DAY ' "$results" | awk '
  {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    printf "  seed %-10s %-9s ranked %8s  plain %8s  ratio %6s  runs interrupted %s\n",
      f["seed"], f["queue"], f["ranked"], f["plain"], f["ratio"], f["runs_interrupted"]
    q = f["queue"]; n[q]++; r[q, n[q]] = f["ratio"] + 0
    if (f["ratio"] + 0 <= 1 / 3 && f["ratio"] != "NaN") met[q]++
  }
  END {
    for (q in n) {
      # Insertion sort of the ratios of queue mode q.
      for (i = 1; i <= n[q]; i++) s[i] = r[q, i]
      for (i = 2; i <= n[q]; i++) {
        v = s[i]; j = i - 1
        while (j > 0 && s[j] > v) { s[j + 1] = s[j]; j-- }
        s[j + 1] = v
      }
      m = n[q] % 2 ? s[(n[q] + 1) / 2] : (s[n[q] / 2] + s[n[q] / 2 + 1]) / 2
      printf "SPREAD queue=%s days=%d min=%.3f median=%.3f max=%.3f under_one_third=%d/%d\n",
        q, n[q], s[1], m, s[n[q]], met[q] + 0, n[q]
    }
  }'
exit "$status"
