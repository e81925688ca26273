#!/usr/bin/env bash
# Builds Telemesh's container images from their Containerfiles with whichever engine can build
# here: docker (with a reachable daemon), podman, or buildah, tried in that order.
#
#   scripts/images.sh [--dry-run] [--engine docker|podman|buildah] [--push]
#
#   --dry-run  print the commands instead of running them (works without any engine)
#   --engine   use this engine instead of the first one that works
#   --push     push each image after building it
#
# Environment: REGISTRY (default `telemesh`, the chart's image repositories' prefix), TAG (default
# the workspace version, which is the chart's appVersion and so its default image tag), PLATFORM
# (e.g. linux/arm64; default the engine's own), CONTAINER_ENGINES (the engines to try, default
# "docker podman buildah"). The images carry the commit as telemesh_build_info{revision}.
#
# Exits 0 when every image was built (or, with --dry-run, printed), 3 when no engine can build
# here, saying why, and with the engine's status when a build fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# image name, Containerfile: the chart's agent.image.repository and coordinator.image.repository
# are ${REGISTRY}/telemesh-agent and ${REGISTRY}/telemesh-coordinator with the default REGISTRY.
IMAGES=(
  "telemesh-agent agent/Containerfile"
  "telemesh-coordinator coordinator/Containerfile"
  "telemesh-sim sim/Containerfile"
  "telemesh-checkpoint-demo demo/checkpoint/Containerfile"
)

dry_run=false
push=false
engine=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=true ;;
    --push) push=true ;;
    --engine) engine="${2:?--engine needs docker, podman or buildah}"; shift ;;
    --engine=*) engine="${1#--engine=}" ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "images.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

registry="${REGISTRY:-telemesh}"
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
tag="${TAG:-$version}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"

# Why each engine cannot build, for the message when none can.
reasons=()
usable() {
  local e="$1"
  if ! command -v "$e" >/dev/null 2>&1; then
    reasons+=("$e is not installed")
    return 1
  fi
  case "$e" in
    docker)
      if ! docker info >/dev/null 2>&1; then
        reasons+=("docker is installed but its daemon is not reachable (docker info fails)")
        return 1
      fi ;;
    podman)
      if ! podman info >/dev/null 2>&1; then
        reasons+=("podman is installed but cannot run here (podman info fails)")
        return 1
      fi ;;
    buildah)
      if ! buildah info >/dev/null 2>&1; then
        reasons+=("buildah is installed but cannot run here (buildah info fails)")
        return 1
      fi ;;
    *)
      reasons+=("$e is not an engine this script knows (docker, podman, buildah)")
      return 1 ;;
  esac
}

if [ -z "$engine" ]; then
  for e in ${CONTAINER_ENGINES:-docker podman buildah}; do
    if usable "$e"; then engine="$e"; break; fi
  done
fi
if [ -z "$engine" ]; then
  if $dry_run; then
    engine=docker
    echo "# no container engine can build here ($(IFS=';'; echo "${reasons[*]}")); printing docker's commands" >&2
  else
    echo "images.sh: no container engine can build images here:" >&2
    printf '  - %s\n' "${reasons[@]}" >&2
    echo "Install podman or buildah, or start a docker daemon; --dry-run prints the commands." >&2
    exit 3
  fi
fi

platform_args=()
[ -n "${PLATFORM:-}" ] && platform_args=(--platform "$PLATFORM")

run() {
  if $dry_run; then
    echo "$*"
  else
    echo "+ $*" >&2
    "$@"
  fi
}

for entry in "${IMAGES[@]}"; do
  read -r name file <<<"$entry"
  ref="$registry/$name:$tag"
  case "$engine" in
    buildah) run buildah bud "${platform_args[@]}" --build-arg "REVISION=$revision" -f "$file" -t "$ref" . ;;
    *) run "$engine" build "${platform_args[@]}" --build-arg "REVISION=$revision" -f "$file" -t "$ref" . ;;
  esac
  if $push; then
    run "$engine" push "$ref"
  fi
done
