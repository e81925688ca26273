#!/usr/bin/env bash
# The scaling picture (issues 19 and 30): runs the cost benchmarks for clusters of 10, 100, 1,000
# and 5,000 nodes, then draws each cost against the cluster size as PNGs under target/scaling/
# (overview.png and one per series) and refreshes the README's table. The agent's footprint and
# the gossip bench run what one agent of such a cluster sees: its gossip cell (one per 100 nodes,
# the chart's sizing; GKE-style names, SCALING_NAMES) with three coordinator replicas in it. The
# freshness bench runs whole flat meshes (SCALING_FRESHNESS_MEMBERS, default 10 and 100: 1,000
# takes 45 minutes).
#
#   scripts/scaling.sh                                  # every bench, every size
#   SCALING_ONLY="extender gossip" scripts/scaling.sh   # a subset; the others' last output is kept
#   SCALING_MEMBERS="10 100" SCALING_NODES="100 1000" scripts/scaling.sh
#   SCALING_README=0 scripts/scaling.sh                 # leave README.md as it is
#
# Benches build with the bench profile as released (fat LTO: the first build takes about 15
# minutes on 2 cores); SCALING_QUICK=1 builds the benches without LTO for a quicker, slower-code
# look (the caption above the table says which, with the load average). The agent whose footprint
# is measured is always built as shipped (the `agent` profile). A cell is about 120 members on
# this machine's cores, on the wall clock: run it on an otherwise idle machine (the agent's CPU,
# the gossip convergence and the extender's latencies are wall-clock figures).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${SCALING_OUT:-target/scaling}
members=${SCALING_MEMBERS:-10 100 1000 5000}
freshness_members=${SCALING_FRESHNESS_MEMBERS:-10 100}
names=${SCALING_NAMES:-gke}
nodes=${SCALING_NODES:-100 1000 5000}
only=${SCALING_ONLY:-footprint gossip extender freshness}
readme=${SCALING_README:-1}
mkdir -p "$out/raw"

if [[ ${SCALING_QUICK:-0} == 1 ]]; then
    export CARGO_PROFILE_BENCH_LTO=off CARGO_PROFILE_BENCH_CODEGEN_UNITS=16
    profile="benches without LTO (SCALING_QUICK=1), not the released code; the agent as shipped (\`agent\` profile)"
else
    profile="bench profile as released (fat LTO); the agent as shipped (\`agent\` profile)"
fi

comma() { tr ' ' ',' <<<"$*"; }

# Runs one bench, its output to $out/raw/<name>.txt (replacing that bench's previous output only).
run() {
    local name=$1
    shift
    local started=$SECONDS
    echo "== $name: $*" >&2
    "$@" 2>"$out/raw/$name.stderr" | tee "$out/raw/$name.txt.part"
    mv "$out/raw/$name.txt.part" "$out/raw/$name.txt"
    echo "== $name: done in $((SECONDS - started)) s (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}

wants() { [[ " $only " == *" $1 "* ]]; }

if wants footprint; then
    # The agent measured is the one shipped (the `agent` profile, agent/Containerfile), not the
    # bench profile's build of it, which unwinds on panic and carries more code; SCALING_QUICK
    # does not change it, since its code pages are part of what is measured.
    cargo build -q --profile agent -p telemesh-agent --bin telemesh-agent
    agent=$(realpath "${CARGO_TARGET_DIR:-target}/agent/telemesh-agent")
    : >"$out/raw/footprint.txt.all"
    for n in $members; do
        # The agent as node 0 of an n-node cluster: its cell's members and the replicas, every
        # one at 1 s rounds as in production.
        run "footprint-$n" env CLUSTER="$n" NAMES="$names" FOOTPRINT_AGENT="$agent" \
            cargo bench -q -p telemesh-agent --bench footprint
        cat "$out/raw/footprint-$n.txt" >>"$out/raw/footprint.txt.all"
    done
    mv "$out/raw/footprint.txt.all" "$out/raw/footprint.txt"
    rm -f "$out"/raw/footprint-*.txt
fi
if wants gossip; then
    spec=$(for n in $members; do printf 'cell%s@1000,' "$n"; done)
    run gossip env GOSSIP_BENCH="${spec%,}" GOSSIP_BENCH_NAMES="$names" \
        cargo bench -q -p telemesh-runtime --bench gossip
fi
if wants extender; then
    run extender env EXTENDER_NODES="$(comma $nodes)" \
        cargo bench -q -p telemesh-coordinator --bench extender
fi
if wants freshness; then
    run freshness env FRESHNESS_MEMBERS="$(comma $freshness_members)" \
        cargo bench -q -p telemesh-coordinator --bench freshness
fi

shopt -s nullglob
inputs=("$out"/raw/*.txt)
if ((${#inputs[@]} == 0)); then
    echo "no bench output under $out/raw: nothing to draw" >&2
    exit 1
fi
readme_args=()
[[ $readme == 1 ]] && readme_args=(--readme README.md)
caption="Measured $(date -u +%Y-%m-%d) by \`scripts/scaling.sh\` on $(nproc) cores, $profile; \
load average at the end $(cut -d' ' -f1-3 /proc/loadavg). Empty cells: sizes not run."
cargo run -q -p telemesh-scaling -- "${inputs[@]}" --out "$out" --caption "$caption" "${readme_args[@]}"
