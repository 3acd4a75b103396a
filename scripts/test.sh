#!/usr/bin/env bash
# Runs every test: native unit tests of the libraries, and the component tests
# that drive the real .wasm files through the wasmtime host.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_wasm_target
build_components "${APP_COMPONENTS[@]}" "${TEST_COMPONENTS[@]}"
precompress_static

log "running tests"
cargo test --profile host --workspace --exclude static-files --exclude probe "$@"
