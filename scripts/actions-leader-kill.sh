#!/usr/bin/env bash
# Issue 16's fault test at scale: 1,000 action.Create calls (20 Deployments, 4 nodes) sent to
# POST /rpc of one of two real coordinators while the other, the leader, runs them; the leader is
# killed with SIGKILL mid-flight, the standby takes the Lease and finishes. Prints the counts and
# exits 0 only when every action ended Succeeded exactly once: each Deployment's replicas and
# live pods equal the Creates that succeeded on it, no pod is claimed by two actions.
# The same test runs with 200 actions in the test suite (tests/tests/actions.rs). Needs the
# kube-scheduler binary from ../shared/tools (the test says SKIPPED without it).
# ACTIONS (default 1000, a multiple of 20) changes the count.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins
TELEMESH_LEADER_KILL_ACTIONS=${ACTIONS:-1000} exec cargo test -p telemesh-tests --test actions \
  killing_the_leader_loses_no_action_and_applies_no_step_twice -- --nocapture --test-threads=1
