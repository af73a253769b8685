#!/usr/bin/env bash
# The one entry point for developers and CI: formatting, lints with warnings denied, and
# every test (the fuzz targets' decoders also run as ordinary tests over random inputs).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
