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
# DAY_SECONDS (default 600) is the real time one simulated day takes; each run takes that long.
# At 600 a 5-minute checkpoint interval is 2.1 s of real time, against a few hundred
# milliseconds for a checkpoint to reach the extender (marker poll, gossip): the estimates the
# ranking uses stay within ~15 % of the work really lost. Faster days distort that, and below
# 288 the shortest interval falls under the CRD's 1 s minimum.
# TRACE_DIR=<dir> keeps each run's timeline, ledger and logs (with a debug line per preempt
# candidate) for reading the decisions against what they cost.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
if [[ -n "${TRACE_DIR:-}" ]]; then
  export TELEMESH_SCAVENGE_DAY_TRACE="$TRACE_DIR"
  export TELEMESH_TEST_COORDINATOR_LOG="info,telemesh_coordinator::extender=debug"
fi
# The machine's load before and after: the replay runs in real time, so a loaded machine
# stretches every lag it measures.
uptime
status=0
TELEMESH_SCAVENGE_DAY=${DAY_SECONDS:-600} cargo test -p telemesh-tests --test scavenge_day \
  -- --nocapture --test-threads=1 || status=$?
uptime
exit "$status"
