#!/usr/bin/env bash
# The README's test command: installs what the tests need beyond the Rust toolchain (the
# official Kubernetes Python client, for the client-compatibility test; Prometheus, for the
# dashboard test; Debian's chromium, for the live page's browser test; buildah, for the image
# tests), builds the images and the binaries the end-to-end tests start, and runs every test in
# the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import kubernetes' 2>/dev/null; then
  echo "installing the Kubernetes Python client (kubernetes==37.0.2) for the client-compatibility test"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check kubernetes==37.0.2
fi

# Installs Debian's package $1 for $2 (the tests that need it) when we may (root, apt-get present),
# trying the package lists as they are first, then refreshed; says $3 (what those tests do
# without it) when it cannot.
install_for_tests() {
  local package="$1" needed_by="$2" without="$3"
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "no $package, and not root or no apt-get: $without (apt-get install $package)"
    return 0
  fi
  echo "installing Debian's $package (apt-get install -y $package) for $needed_by"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; } \
    || echo "could not install $package: $without"
}

# The dashboard test (tests/tests/dashboard.rs) evaluates every Grafana query with the real
# Prometheus: Debian's package (2.42), installed when missing and we may (root, apt reachable).
if ! command -v prometheus >/dev/null 2>&1 && [ -z "${TELEMESH_PROMETHEUS:-}" ]; then
  install_for_tests prometheus "the dashboard test" "the dashboard test skips its Prometheus half"
fi

# The live page's browser test (tests/tests/page.rs) drives Debian's chromium; it says SKIPPED
# when there is none and we cannot install it.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${TELEMESH_CHROMIUM:-}" ]; then
  install_for_tests chromium "the live page's browser test" "the live page's browser test will say SKIPPED"
fi

# The tests on a real control plane (etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler v1.36) use $TELEMESH_CONTROL_PLANE, a folder of those executables (any upstream
# v1.33+ release binaries), else the xz-compressed copies our machines keep beside the workspace,
# unpacked once into target/control-plane (shared/ is read-only in CI). Without either, those
# tests say SKIPPED.
if [ -z "${TELEMESH_CONTROL_PLANE:-}" ] && [ -f ../shared/tools/control-plane/unpack.sh ]; then
  echo "unpacking the control-plane binaries from ../shared/tools/control-plane into target/control-plane"
  TELEMESH_CONTROL_PLANE=$(bash ../shared/tools/control-plane/unpack.sh target/control-plane)
  export TELEMESH_CONTROL_PLANE
fi

# The images (tests/tests/images.rs): built hermetically (scripts/images.sh --hermetic: static
# binaries, FROM scratch, no registry) with Debian's buildah, installed when missing and we may,
# then run with `buildah run --isolation chroot`. They are built from the dev profile, so that CI
# compiles the binaries once more without optimising (about 4 minutes on 2 cores) rather than
# the shipped profiles' fat LTO; the tag says so. Without buildah the image tests say SKIPPED; a
# build that fails fails this command.
if ! command -v buildah >/dev/null 2>&1; then
  install_for_tests buildah "the image tests" "the image tests will say SKIPPED"
fi
if [ -n "${TELEMESH_IMAGE_TAG:-}" ]; then
  # Images already built (e.g. the shipped ones: scripts/images.sh --hermetic, then
  # TELEMESH_IMAGE_TAG=<version>): the tests run those.
  echo "testing the images tagged $TELEMESH_IMAGE_TAG (TELEMESH_IMAGE_TAG), not building any"
elif command -v buildah >/dev/null 2>&1 && buildah info >/dev/null 2>&1; then
  version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
  TELEMESH_IMAGE_TAG="$version-dev"
  export TELEMESH_IMAGE_TAG
  echo "building the images (scripts/images.sh --hermetic --profile dev, tag $TELEMESH_IMAGE_TAG)"
  started=$SECONDS
  TAG="$TELEMESH_IMAGE_TAG" scripts/images.sh --hermetic --profile dev
  echo "the images took $((SECONDS - started)) s"
elif command -v buildah >/dev/null 2>&1; then
  echo "buildah cannot run here (buildah info fails): the image tests will say SKIPPED"
fi

cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
