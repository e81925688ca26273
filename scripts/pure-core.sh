#!/usr/bin/env bash
# telemesh-core is the pure crate: decisions and wire types, no runtime. Fails when anything it
# builds with (normal dependencies, its own features only) is a runtime, a transport or the kube
# client; those belong in telemesh-runtime (docs/architecture.md, "Layout").
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tokio|tokio-util|quinn|chitchat|axum|hyper|hyper-util|tower|kube-client|kube-runtime|reqwest) '
found=$(cargo tree -p telemesh-core -e normal --prefix none --no-dedupe | grep -E "$forbidden" | sort -u || true)
if [[ -n "$found" ]]; then
    echo "telemesh-core must stay pure, but it builds with:" >&2
    echo "$found" >&2
    echo "move the code that needs them to telemesh-runtime (runtime/)" >&2
    exit 1
fi
echo "telemesh-core builds without tokio, quinn, chitchat, axum, hyper or the kube client"
