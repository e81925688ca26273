#!/usr/bin/env bash
# kubeRL's demo, measured (issue "Rewards"): a dev cluster where sim-node-1 crashes pods of type D
# every 10 s and sim-node-2 every 60 s. New D pods are placed one by one through the scheduler
# (sim's stand-in; the real kube-scheduler with `--control-plane real`) and the coordinators'
# extender; the script prints the share that lands on the failing nodes before any failure, while
# the agents learn, once they have learnt (target at most 2 %), for another type E, and one reward
# half-life (60 s here) after the faults stop. Exit 0 when every target was met. Takes about four
# minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
exec "${CARGO_TARGET_DIR:-target}/debug/telemesh-sim" dev --story rewards --for 600s \
  --dir "${CARGO_TARGET_DIR:-target}/dev-rewards" "$@"
