#!/usr/bin/env bash
# Sim at scale (5,000 nodes, 50,000 pods, 5,000 node-filtered watchers); prints its figures.
# NODES=500 PODS_PER_NODE=10 scripts/bench-sim.sh for a quick run.
set -euo pipefail
cd "$(dirname "$0")/.."
# Two sockets per watcher (client and sim, in two processes): raise the soft limit if we may.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cargo bench -p telemesh-devcluster --bench scale
