#!/usr/bin/env bash
# The README's dev command: builds every binary, then runs the local dev cluster
# (`telemesh-sim dev`): sim with simulated nodes, an agent per node, two coordinators, the TAS
# policy examples and a demo, with the story told as it happens. Flags go to `telemesh-sim dev`
# (`--nodes N`, `--for 90s` for headless, `--scenario FILE`, `--kube-scheduler PATH` to run the real
# kube-scheduler in place of sim's stand-in, `--control-plane real` to run it all on the upstream
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler with Telemesh installed from
# deploy/manifests/telemesh.yaml; see `--help`). Ctrl-C stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
exec "${CARGO_TARGET_DIR:-target}/debug/telemesh-sim" dev "$@"
