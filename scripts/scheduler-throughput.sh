#!/usr/bin/env bash
# The real kube-scheduler (v1.32.5) against sim: pods/s with no extender, with the coordinator's
# extender over HTTP, over HTTPS with a client certificate as shipped before issue 15 (h2 offered)
# and as shipped now (http/1.1 only), and with TAS's opt-in for pods that do not opt in (the
# chart's scheduler.pods: optedIn), and each one's ratio to no extender.
#   NODES=500 PODS=2000 MODES=none,http,https-h2,https,https-opted-in TELEMESH_KUBE_SCHEDULER=PATH scripts/scheduler-throughput.sh
# The binary defaults to ../shared/tools/kube-scheduler; without it the bench says SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p telemesh-coordinator --bench scheduler_throughput
