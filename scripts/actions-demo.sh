#!/usr/bin/env bash
# WAM's demo against Telemesh (issue 16, `telemesh-sim dev --story actions`): a dev cluster with
# WAM's demo objects in namespace ul (devcluster/dev/actions-demo.yaml), then the seed's calls in the
# seed's order through the coordinators' API Service (POST /rpc, WAM's exact body shape), each
# outcome checked through the API and told as it happens. The seed's k3d-aces-agent-7, -4 and -6
# are sim-node-3, -0 and -2 with the default 4 nodes. Headless (the default here, `--for 600s`)
# it exits 0 only when every action ended as it should. Interactive instead: scripts/dev.sh --story actions
# On the upstream control plane: scripts/actions-demo.sh --control-plane real
# While it runs: kubectl --kubeconfig target/dev-actions/kubeconfig get wa,pods -n ul -o wide
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
exec "${CARGO_TARGET_DIR:-target}/debug/telemesh-sim" dev --story actions --for 600s \
  --dir "${CARGO_TARGET_DIR:-target}/dev-actions" "$@"
