#!/usr/bin/env bash
# Builds Telemesh's container images, either from their Containerfiles with whichever engine can
# build here (docker with a reachable daemon, podman, or buildah, tried in that order), or
# hermetically (--hermetic): cargo builds static binaries on this machine and buildah puts each
# into an image made FROM scratch, with no registry and no network.
#
#   scripts/images.sh [--dry-run] [--engine docker|podman|buildah] [--push]
#   scripts/images.sh --hermetic [--profile PROFILE] [--dry-run] [--push]
#
#   --dry-run   print the commands instead of running them (works without any engine)
#   --engine    use this engine instead of the first one that works
#   --push      push each image after building it
#   --hermetic  build the binaries here and assemble the images with buildah (needs only buildah
#               and the Rust toolchain): the binaries link statically, with the musl target when
#               its standard library is installed, else glibc's static build (crt-static); each
#               image holds what its Containerfile's runtime base gives the binary (see
#               `base_files`), the same entrypoint, user and OCI labels
#   --profile   (hermetic) build every binary with this cargo profile instead of the shipped ones
#               (the agent's `agent` profile, `release` for the rest); the README's test command
#               builds its smoke images with `dev`, to keep CI short
#
# Environment: REGISTRY (default `telemesh`, the chart's image repositories' prefix), TAG (default
# the workspace version, which is the chart's appVersion and so its default image tag), PLATFORM
# (e.g. linux/arm64; default the engine's own; not with --hermetic, which builds for this
# machine), CONTAINER_ENGINES (the engines to try, default "docker podman buildah"). The images
# carry the commit as telemesh_build_info{revision} and the OCI labels
# org.opencontainers.image.{source,revision,version}.
#
# Prints, for each image built, a line `built NAME:TAG SIZE DIGEST` (hermetic mode). Exits 0 when every image was built (or, with --dry-run, printed), 3 when no engine can
# build here, saying why, and with the engine's or cargo's status when a build fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# One row per image: name, Containerfile, package, binary, shipped cargo profile, the binary's
# path in the image, and the runtime base the Containerfile's final stage starts from (`static`:
# distroless/static, `scratch`: nothing). The chart's agent.image.repository and
# coordinator.image.repository are ${REGISTRY}/telemesh-agent and ${REGISTRY}/telemesh-coordinator
# with the default REGISTRY. tests/tests/images.rs checks each row against its Containerfile.
IMAGES=(
  "telemesh-agent agent/Containerfile telemesh-agent telemesh-agent agent /usr/local/bin/telemesh-agent static"
  "telemesh-coordinator coordinator/Containerfile telemesh-coordinator telemesh-coordinator release /usr/local/bin/telemesh-coordinator static"
  "telemesh-sim devcluster/Containerfile telemesh-devcluster telemesh-sim release /usr/local/bin/telemesh-sim static"
  "telemesh-checkpoint-demo demo/checkpoint/Containerfile telemesh-checkpoint-demo telemesh-checkpoint-demo release /telemesh-checkpoint-demo scratch"
)
# Every image runs as distroless's "nonroot" user; the chart sets its own runAsUser on top.
USER_ID=65532

dry_run=false
push=false
hermetic=false
engine=""
profile=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=true ;;
    --push) push=true ;;
    --hermetic) hermetic=true ;;
    --engine) engine="${2:?--engine needs docker, podman or buildah}"; shift ;;
    --engine=*) engine="${1#--engine=}" ;;
    --profile) profile="${2:?--profile needs a cargo profile (dev, release, agent)}"; shift ;;
    --profile=*) profile="${1#--profile=}" ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "images.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done
if [ -n "$profile" ] && ! $hermetic; then
  echo "images.sh: --profile applies to --hermetic builds only (a Containerfile names its own profile)" >&2
  exit 64
fi
if $hermetic && [ -n "$engine" ] && [ "$engine" != buildah ]; then
  echo "images.sh: --hermetic assembles images with buildah; --engine $engine does not apply" >&2
  exit 64
fi
$hermetic && engine=buildah

registry="${REGISTRY:-telemesh}"
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
source_url="$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository *= *"\(.*\)"/\1/p' Cargo.toml)"
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

if $hermetic; then
  if ! $dry_run && ! usable buildah; then
    echo "images.sh: --hermetic needs buildah, which cannot build images here: ${reasons[0]}" >&2
    echo "Install it (Debian: apt-get install buildah; scripts/test.sh does as root); --dry-run prints the commands." >&2
    exit 3
  fi
else
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
fi

platform_args=()
[ -n "${PLATFORM:-}" ] && platform_args=(--platform "$PLATFORM")
if $hermetic && [ -n "${PLATFORM:-}" ]; then
  echo "images.sh: --hermetic builds for this machine; PLATFORM=$PLATFORM needs the Containerfiles (without --hermetic)" >&2
  exit 64
fi

run() {
  if $dry_run; then
    printf '%q ' "$@" | sed 's/ $//'
    echo
  else
    echo "+ $*" >&2
    "$@"
  fi
}

labels=(
  "org.opencontainers.image.source=$source_url"
  "org.opencontainers.image.revision=$revision"
  "org.opencontainers.image.version=$version"
)

# Prints `built REF SIZE DIGEST` for an image in buildah's store (the size as buildah reports
# it, uncompressed, in units of 10^6 bytes; the digest is the manifest's).
report() {
  local ref="$1" size digest
  size="$(buildah images --noheading --format '{{.Size}}' "$ref" | tr -d ' ')"
  digest="$(buildah inspect --type image --format '{{.FromImageDigest}}' "$ref")"
  echo "built $ref $size $digest"
}

if ! $hermetic; then
  label_args=()
  for l in "${labels[@]}"; do label_args+=(--label "$l"); done
  for entry in "${IMAGES[@]}"; do
    read -r name file _ <<<"$entry"
    ref="$registry/$name:$tag"
    case "$engine" in
      buildah) run buildah bud "${platform_args[@]}" --build-arg "REVISION=$revision" --build-arg "VERSION=$version" --build-arg "SOURCE=$source_url" -f "$file" -t "$ref" . ;;
      *) run "$engine" build "${platform_args[@]}" --build-arg "REVISION=$revision" --build-arg "VERSION=$version" --build-arg "SOURCE=$source_url" -f "$file" -t "$ref" . ;;
    esac
    if $push; then
      run "$engine" push "$ref"
    fi
  done
  exit 0
fi

# --- hermetic: static binaries from this machine, FROM scratch images assembled by buildah ---

host="$(rustc -vV | sed -n 's/^host: //p')"
arch="${host%%-*}"
musl="$arch-unknown-linux-musl"
if [ -d "$(rustc --print sysroot)/lib/rustlib/$musl/lib" ]; then
  # musl links statically by default.
  target="$musl"
  static_flags=""
else
  # No musl standard library here (rustup target add needs the network): glibc's static build.
  # Its resolver reads /etc/hosts and /etc/resolv.conf itself (glibc 2.34+ has the files and dns
  # lookups in libc), which is all a pod's name resolution needs.
  target="$arch-unknown-linux-gnu"
  static_flags="-C target-feature=+crt-static"
fi
out_dir() { case "$1" in dev) echo debug ;; *) echo "$1" ;; esac; }

# The binaries, one cargo build per profile. RUSTFLAGS with an explicit --target reach only the
# target's code, not build scripts and proc macros (which run on this machine and cannot be static).
declare -A by_profile=()
for entry in "${IMAGES[@]}"; do
  read -r _ _ package bin shipped _ _ <<<"$entry"
  p="${profile:-$shipped}"
  by_profile[$p]+=" -p $package --bin $bin"
done
for p in "${!by_profile[@]}"; do
  # shellcheck disable=SC2086
  run env RUSTFLAGS="${RUSTFLAGS:-} $static_flags" TELEMESH_REVISION="$revision" \
    cargo build --locked --target "$target" --profile "$p" ${by_profile[$p]}
done

# What the Containerfiles' runtime bases give the binaries, for `static` images: the CA bundle
# (kubeconfigs and callback URLs may name servers with public certificates; rustls-native-certs
# reads /etc/ssl/certs/ca-certificates.crt), /etc/passwd and /etc/group with the nonroot user
# (distroless's uid and gid 65532, home /home/nonroot), and a writable /tmp.
base_dir="target/images/base"
ca_bundle="/etc/ssl/certs/ca-certificates.crt"
if ! $dry_run; then
  if [ ! -s "$ca_bundle" ]; then
    echo "images.sh: $ca_bundle is missing: install the ca-certificates package (apt-get install ca-certificates)" >&2
    exit 1
  fi
  rm -rf "$base_dir"
  mkdir -p "$base_dir/etc/ssl/certs" "$base_dir/tmp" "$base_dir/home/nonroot"
  cp "$ca_bundle" "$base_dir/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' \
    "$USER_ID" "$USER_ID" >"$base_dir/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:%s:\n' "$USER_ID" >"$base_dir/etc/group"
  chmod 1777 "$base_dir/tmp"
fi

for entry in "${IMAGES[@]}"; do
  read -r name _ _ bin shipped dest base <<<"$entry"
  p="${profile:-$shipped}"
  ref="$registry/$name:$tag"
  binary="target/$target/$(out_dir "$p")/$bin"
  # The working container is named after the image, so a run that failed half-way leaves one
  # to remove by name, and the next run removes it.
  ctr="$name-build"
  $dry_run || buildah rm "$ctr" >/dev/null 2>&1 || true
  if $dry_run; then run buildah from --quiet --name "$ctr" scratch; else run buildah from --quiet --name "$ctr" scratch >/dev/null; fi
  $dry_run || trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  config=(--user "$USER_ID:$USER_ID" --entrypoint "[\"$dest\"]" --cmd "")
  if [ "$base" = static ]; then
    run buildah copy --quiet "$ctr" "$base_dir/etc" /etc
    run buildah copy --quiet --chmod 1777 "$ctr" "$base_dir/tmp" /tmp
    run buildah copy --quiet --chown "$USER_ID:$USER_ID" "$ctr" "$base_dir/home/nonroot" /home/nonroot
    # As distroless/static-debian12:nonroot sets them.
    config+=(--workingdir /home/nonroot --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
      --env "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
  else
    config+=(--workingdir /)
  fi
  run buildah copy --quiet --chmod 0755 "$ctr" "$binary" "$dest"
  for l in "${labels[@]}"; do config+=(--label "$l" --annotation "$l"); done
  run buildah config "${config[@]}" "$ctr"
  # The previous image of this name and tag, removed once the new one holds the tag (it would
  # otherwise stay in the store, untagged).
  old=""
  $dry_run || old="$(buildah inspect --type image --format '{{.FromImageID}}' "$ref" 2>/dev/null || true)"
  if $dry_run; then run buildah commit --quiet --rm "$ctr" "$ref"; else run buildah commit --quiet --rm "$ctr" "$ref" >/dev/null; fi
  $dry_run || trap - EXIT
  if [ -n "$old" ]; then
    new="$(buildah inspect --type image --format '{{.FromImageID}}' "$ref")"
    [ "$old" = "$new" ] || buildah rmi "$old" >/dev/null 2>&1 || true
  fi
  $dry_run || report "$ref"
  if $push; then
    run buildah push "$ref"
  fi
done
