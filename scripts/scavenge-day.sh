#!/usr/bin/env bash
# Issue 17's day replay: a day of arrivals in sim, in accelerated time, run twice — the extender
# ranking preemption victims by unsaved work, then upstream's plain victim choice — with the real
# agents, coordinator and kube-scheduler (sim's own scheduler, which preempts as upstream does,
# when ../shared/tools/kube-scheduler is absent). An ordinary Deployment follows a daily curve
# (6 one-CPU pods of 32 CPUs at night, 22 within the hour from 7:30, swinging by up to 3 pods
# every quarter hour by day), a nightly ETL batch runs six two-CPU pods at 1:00, 3:00 and 5:00;
# ScavengerJobs (1-3 pods of 1-2 CPUs, 1-6 h of work, checkpoints every 5 min to 2 h) arrive
# every 15 minutes on average.
# Prints requested CPU use with and without scavengers (and while scavengers waited, against the
# 70 % threshold), and the CPU-seconds preemption wasted under each victim choice.
# DAY_SECONDS (default 600) is the real time one simulated day takes; each run takes that long.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
TELEMESH_SCAVENGE_DAY=${DAY_SECONDS:-600} exec cargo test -p telemesh-tests --test scavenge_day \
  -- --nocapture --test-threads=1
