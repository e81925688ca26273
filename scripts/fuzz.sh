#!/usr/bin/env bash
# Runs the cargo-fuzz targets under fuzz/ (docs/fuzzing.md), each for SECONDS (default 300),
# one after another, nice'd; prints executions per target and any crash found.
#
#   scripts/fuzz.sh [--ci] [SECONDS] [TARGET...]
#
# Each target's corpus is fuzz/corpus/<target> (kept between runs, not committed), seeded from
# fuzz/seeds/<target> and the repo's fixtures (agent/tests/fixtures, deploy/examples). A crash
# leaves its input in fuzz/artifacts/<target>/ and makes the script exit 1.
# cargo-fuzz itself is installed when missing (the pinned CARGO_FUZZ_VERSION from crates.io,
# --locked, into target/tools, kept between runs: 70 s of CPU, 40 s of wall time on 2 cores).
# --ci: skip (exit 0, saying so) when the nightly toolchain is missing or cargo-fuzz cannot be
# installed, and build for a short run: no sanitizer (our crates forbid unsafe code) and no optimization (the build,
# not the run, is most of the cost; docs/fuzzing.md has the figures).
# FUZZ_SANITIZER=address|none and FUZZ_PROFILE=release|dev override (default: address and
# release; none and dev with --ci). FUZZ_TARGET_DIR: where to build (target/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

ci=false
if [[ "${1:-}" == "--ci" ]]; then
  ci=true
  shift
fi
seconds=${1:-300}
shift || true

missing() {
  if $ci; then
    echo "fuzz: SKIPPED: $1"
    exit 0
  fi
  echo "fuzz: $1" >&2
  exit 1
}
cargo +nightly --version >/dev/null 2>&1 ||
  missing "no nightly toolchain (rustup toolchain install nightly)"
# The project's own copy of cargo-fuzz comes first, so a fresh machine needs nothing by hand.
CARGO_FUZZ_VERSION=0.13.2
tools=$PWD/target/tools
export PATH="$tools/bin:$PATH"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION into $tools (once; kept between runs)"
  nice cargo install --quiet --locked --version "$CARGO_FUZZ_VERSION" --root "$tools" cargo-fuzz ||
    missing "installing cargo-fuzz failed (cargo install cargo-fuzz --version $CARGO_FUZZ_VERSION)"
fi

sanitizer=${FUZZ_SANITIZER:-$($ci && echo none || echo address)}
profile=${FUZZ_PROFILE:-$($ci && echo dev || echo release)}
flags=(--fuzz-dir fuzz --target-dir "${FUZZ_TARGET_DIR:-$PWD/target/fuzz}" --sanitizer "$sanitizer")
if [[ $profile == dev ]]; then flags+=(--dev); fi
targets=("$@")
all=false
if [[ ${#targets[@]} -eq 0 ]]; then
  all=true
  mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi

# Seeds: the committed ones, then the fixtures with the selector byte each target reads first.
seed() { # seed TARGET NAME SELECTOR FILE
  local dir=fuzz/corpus/$1
  mkdir -p "$dir"
  { printf "\\x$(printf %02x "$3")"; cat "$4"; } >"$dir/$2"
}
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  if [[ -d fuzz/seeds/$t ]]; then cp -n fuzz/seeds/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true; fi
done
fixtures=agent/tests/fixtures
for host in host-a host-a-t2; do
  p=$fixtures/$host/proc
  seed telemetry_files "$host-stat" 0 "$p/stat"
  seed telemetry_files "$host-loadavg" 1 "$p/loadavg"
  seed telemetry_files "$host-meminfo" 2 "$p/meminfo"
  seed telemetry_files "$host-diskstats" 3 "$p/diskstats"
  seed telemetry_files "$host-net-dev" 4 "$p/net/dev"
  seed telemetry_files "$host-psi-cpu" 5 "$p/pressure/cpu"
  seed telemetry_files "$host-psi-memory" 5 "$p/pressure/memory"
  seed telemetry_files "$host-cgroup-cpu-stat" 6 "$fixtures/$host/sys/fs/cgroup/cpu.stat"
  seed telemetry_files "$host-llc" 9 "$fixtures/$host/sys/fs/resctrl/mon_data/mon_L3_00/llc_occupancy"
  seed telemetry_files "$host-mon-features" 10 "$fixtures/$host/sys/fs/resctrl/info/L3_MON/mon_features"
done
n=0
while IFS= read -r f; do
  n=$((n + 1))
  case "$f" in
  */memory.current | */memory.usage_in_bytes) seed telemetry_files "cgroup-u64-$n" 7 "$f" ;;
  */memory.events) seed telemetry_files "cgroup-events-$n" 8 "$f" ;;
  */temp*_input) seed telemetry_files "hwmon-$n" 12 "$f" ;;
  esac
done < <(find "$fixtures" -type f)
for f in "$fixtures"/prom/*; do seed telemetry_files "prom-$(basename "$f")" 11 "$f"; done
# The CRD objects: deploy/examples as JSON, each document with its kind's selector.
python3 - <<'PY'
import glob, json, os, yaml
selector = {"TASPolicy": 0, "WorkloadAction": 1, "ScavengerJob": 2}
os.makedirs("fuzz/corpus/crd_objects", exist_ok=True)
for path in sorted(glob.glob("deploy/examples/*.yaml") + glob.glob("devcluster/dev/*.yaml")):
    with open(path) as f:
        for i, doc in enumerate(yaml.safe_load_all(f)):
            if isinstance(doc, dict) and doc.get("kind") in selector:
                name = f"fuzz/corpus/crd_objects/{os.path.basename(path)}-{i}"
                with open(name, "wb") as out:
                    out.write(bytes([selector[doc["kind"]]]) + json.dumps(doc).encode())
PY

started=$(date +%s)
build() { nice cargo +nightly fuzz build "${flags[@]}" "$@"; }
if $all; then
  build # every target in one build
else
  for t in "${targets[@]}"; do build "$t"; done
fi
echo "fuzz: built ${#targets[@]} targets ($profile, sanitizer $sanitizer) in $(($(date +%s) - started)) s"

failed=()
mkdir -p target
for t in "${targets[@]}"; do
  log=target/fuzz-$t.log
  set +e
  nice cargo +nightly fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
  if [[ $status -eq 0 ]]; then
    echo "fuzz: $t: ${execs:-?} executions in ${seconds} s, corpus $corpus inputs, no crash"
  else
    echo "fuzz: $t: CRASH after ${execs:-?} executions (exit $status); input in fuzz/artifacts/$t/, log $log"
    grep -m5 -E "panicked|ERROR: libFuzzer|SUMMARY" "$log" | sed 's/^/  /' || true
    failed+=("$t")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: crashes in: ${failed[*]}"
  exit 1
fi
