#!/usr/bin/env bash
# The README's test command: installs what the tests need beyond the Rust toolchain (the
# official Kubernetes Python client, for the client-compatibility test), builds the binaries
# the end-to-end tests start, and runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import kubernetes' 2>/dev/null; then
  echo "installing the Kubernetes Python client (kubernetes==37.0.2) for the client-compatibility test"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check kubernetes==37.0.2
fi

cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
