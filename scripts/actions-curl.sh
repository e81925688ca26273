#!/usr/bin/env bash
# The curl calls of WAM's README (seed 000), verbatim, against a Telemesh dev cluster holding WAM's
# demo objects: start one with `scripts/dev.sh --story actions-objects` (or let
# devcluster/tests/dev.rs do it), then run this script. Only the host and port (WAM's
# localhost:3030 -> the coordinators' API Service) and the node names are adapted:
#
#   k3d-aces-agent-7 -> $NODE_7 (sim-node-3)   k3d-aces-agent-4 -> $NODE_4 (sim-node-0)
#   k3d-aces-agent-6 -> $NODE_6 (sim-node-2)   (the dev cluster's 4 nodes, as --story actions maps them)
#
# and the seed's Redeploy target, a CronJob pod named literally, is a pod of scheduled-test here
# (the dev cluster runs no CronJob controller). The seed finds the pod to bind as the newest by
# creationTimestamp, which has one-second resolution: sim's rollout creates the next pod within the
# same second as the one just bound, so the script also asks for pods on no node
# (--field-selector=spec.nodeName=), which is what the seed means. Where the seed has a person look before the next
# call ("See that a new pending pod ... was created"), the script waits for the same thing.
#
# What is added around the seed's lines: each call's reply is kept (curl is wrapped only for
# that), its actionId waited for with action.Wait and its phase read with kubectl; the script
# stops at the first action that does not end Succeeded, and at the end checks that the calls did
# what they say (pods on the named nodes, replica counts). Exit 0 when all of that holds.
#
# Environment: RPC (default http://127.0.0.1:9080/rpc), KUBECONFIG (default target/dev/kubeconfig),
# NODE_7, NODE_4, NODE_6.
set -euo pipefail
cd "$(dirname "$0")/.."
RPC=${RPC:-http://127.0.0.1:9080/rpc}
export KUBECONFIG=${KUBECONFIG:-target/dev/kubeconfig}
NODE_7=${NODE_7:-sim-node-3}
NODE_4=${NODE_4:-sim-node-0}
NODE_6=${NODE_6:-sim-node-2}
reply=$(mktemp)
trap 'rm -f "$reply"' EXIT

# Keeps each reply for `settle`; the call itself is the seed's.
curl() { command curl -sS "$@" | tee "$reply"; echo; }

# Waits (action.Wait) for the action the last reply accepted, then requires Succeeded.
settle() {
  local id phase deadline=$((SECONDS + 90))
  id=$(sed -n 's/.*"actionId":"\([^"]*\)".*/\1/p' "$reply")
  if [ -z "$id" ]; then
    echo "FAILED: no actionId in the reply: $(cat "$reply")" >&2
    exit 1
  fi
  while :; do
    phase=$(kubectl get wa -n ul "$id" -o jsonpath='{.status.phase}')
    case "$phase" in
      Succeeded) echo "OK  action $id Succeeded: $(kubectl get wa -n ul "$id" -o jsonpath='{.status.message}')"; return 0 ;;
      Failed|RolledBack) echo "FAILED: action $id ended $phase: $(kubectl get wa -n ul "$id" -o jsonpath='{.status.message}')" >&2; exit 1 ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAILED: action $id still ${phase:-Pending} after 90 s" >&2
      exit 1
    fi
    command curl -sS -o /dev/null -X POST -H "Content-Type: application/json" \
      -d "{\"method\":\"action.Wait\",\"params\":[{\"actionId\":\"$id\",\"namespace\":\"ul\",\"timeoutSeconds\":20}],\"id\":\"1\"}" \
      "$RPC"
  done
}

# Waits until `kubectl get pods -n ul $1` lists a pod without a node whose cpu request is $2.
until_pending_pod_with_cpu() {
  local deadline=$((SECONDS + 90))
  until kubectl get pods -n ul -l "$1" -o jsonpath='{range .items[*]}{.spec.nodeName}/{.spec.containers[0].resources.requests.cpu}{"\n"}{end}' | grep -qx "/$2"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAILED: no pending pod $1 with cpu request $2 after 90 s" >&2
      exit 1
    fi
    sleep 0.5
  done
}

# Prints how many Running pods of selector $1 are on node $2.
running_on() {
  kubectl get pods -n ul -l "$1" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -cx "$2" || true
}

#### action.Create

# create a replica of A on node 7
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Create","params":[{"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-a"}, "node": {"name": "'"$NODE_7"'"}}], "id":"1"}' \
  "$RPC"
settle

# create a replica of A on node 4
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Create","params":[{"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-a"}, "node": {"name": "'"$NODE_4"'"}}], "id":"1"}' \
  "$RPC"
settle

#### action.Delete

# delete a replica of A on node 7
export pod_to_delete=$(kubectl get pods -l 'app.kubernetes.io/name=test-a' -n ul -o wide | grep "$NODE_7" | awk '{print $1}' | head -n 1)
echo "$pod_to_delete"
curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Delete\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$pod_to_delete\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

#### action.Move

# move a replica of A from node 4 to node 7
export pod_to_move=$(kubectl get pods -l 'app.kubernetes.io/name=test-a' -n ul -o wide | grep "$NODE_4" | awk '{print $1}' | head -n 1)
echo "$pod_to_move"
curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Move\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$pod_to_move\"}, \"node\": {\"name\": \"$NODE_7\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

#### action.Swap

# create a replica of B on node 4
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Create","params":[{"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-b"}, "node": {"name": "'"$NODE_4"'"}}], "id":"1"}' \
  "$RPC"
settle

# create another replica of B on node 4
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Create","params":[{"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-b"}, "node": {"name": "'"$NODE_4"'"}}], "id":"1"}' \
  "$RPC"
settle

# swap replica of A (node 7) with replicas of B (node 4)
export pod_to_swap_A=$(kubectl get pods -l 'app.kubernetes.io/name=test-a' -n ul -o wide | grep "$NODE_7" | awk '{print $1}' | head -n 1)
export pod_to_swap_B=$(kubectl get pods -l 'app.kubernetes.io/name=test-b' -n ul -o wide | grep "$NODE_4" | awk '{print $1}' | sort | head -n 1)
echo "$pod_to_swap_A"
echo "$pod_to_swap_B"
curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Swap\",\"params\":[{\"x\": {\"namespace\": \"ul\", \"name\": \"$pod_to_swap_A\"}, \"y\": {\"namespace\": \"ul\", \"name\": \"$pod_to_swap_B\"}}], \"id\": \"1\"}" \
  "$RPC"
settle

#### action.Bind

# Fetch one such pending pod
export pod_to_bind="test-c-0"
echo $pod_to_bind

# For example, bind such pod to node 6.
curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Bind\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$pod_to_bind\"}, \"node\": {\"name\": \"$NODE_6\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

#### action.Redeploy

export pod_to_redeploy=$(kubectl get pods -n ul -l app=scheduled-test -o jsonpath='{.items[0].metadata.name}')
curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Redeploy\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$pod_to_redeploy\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

#### action.UpdateResources

# This will update cpu request and cpu limits
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.UpdateResources","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"pending-test"},"resources":{"container_name":"example-container","cpu_request":"50m","cpu_limit":"200m"}}], "id":"1"}' \
  "$RPC"
settle

# See that a new pending pod with new resource was created.
until_pending_pod_with_cpu app=pending-test 50m

# Let's bind pods with new resources
export new_resources_pod=$(kubectl get pods -n ul -lapp=$(kubectl get deployment -n ul 'pending-test' -o jsonpath='{.spec.selector.matchLabels.app}') \
    --field-selector=spec.nodeName= --sort-by=.metadata.creationTimestamp \
    -o jsonpath='{.items[-1].metadata.name}')
echo $new_resources_pod

curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Bind\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$new_resources_pod\"}, \"node\": {\"name\": \"$NODE_6\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

until_pending_pod_with_cpu app=pending-test 50m

export new_resources_pod2=$(kubectl get pods -n ul -lapp=$(kubectl get deployment -n ul 'pending-test' -o jsonpath='{.spec.selector.matchLabels.app}') \
    --field-selector=spec.nodeName= --sort-by=.metadata.creationTimestamp \
    -o jsonpath='{.items[-1].metadata.name}')
echo $new_resources_pod2

curl -X POST -H "Content-Type: application/json" \
  -d "{\"method\":\"action.Bind\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"$new_resources_pod2\"}, \"node\": {\"name\": \"$NODE_6\"}}], \"id\":\"1\"}" \
  "$RPC"
settle

#### action.Scale

# This will scale the deployment to 1.
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Scale","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"scheduled-test"}, "replicas": 1}], "id":"1"}' \
  "$RPC"
settle

# Now let's scale up to 4 replicas.
curl -X POST -H "Content-Type: application/json" \
  -d '{"method":"action.Scale","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"scheduled-test"}, "replicas": 4}], "id":"1"}' \
  "$RPC"
settle

#### Did the calls do what they say? (The seed leaves this to a person looking.)
check() {
  local what=$1 want=$2 deadline=$((SECONDS + 60)) have
  while :; do
    have=$(eval "$3")
    [ "$have" = "$want" ] && { echo "OK  $what: $have"; return 0; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAILED: $what: $have, not $want" >&2
      exit 1
    fi
    sleep 0.5
  done
}
check "test-a pods Running on $NODE_4 (moved to $NODE_7, then swapped back to $NODE_4)" 1 \
  "running_on app.kubernetes.io/name=test-a $NODE_4"
check "test-a replicas" 1 "kubectl get deploy -n ul test-a -o jsonpath='{.spec.replicas}'"
check "test-b pods Running on $NODE_7 (swapped in)" 1 "running_on app.kubernetes.io/name=test-b $NODE_7"
check "test-b pods Running on $NODE_4" 1 "running_on app.kubernetes.io/name=test-b $NODE_4"
check "test-c-0's node" "$NODE_6" "kubectl get pod -n ul test-c-0 -o jsonpath='{.spec.nodeName}'"
check "pending-test pods Running on $NODE_6 with the new resources" "2 2" \
  "echo \$(running_on app=pending-test $NODE_6) \$(kubectl get pods -n ul -l app=pending-test -o jsonpath='{range .items[*]}{.spec.containers[0].resources.requests.cpu}{\"\\n\"}{end}' | grep -cx 50m)"
check "scheduled-test pods Running" 4 \
  "kubectl get pods -n ul -l app=scheduled-test --field-selector=status.phase=Running -o name | wc -l | tr -d ' '"
echo "every call of the seed did what it says"
