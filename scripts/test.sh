#!/usr/bin/env bash
# Runs every test: native unit tests of the libraries, the component tests
# that drive the real .wasm files through the wasmtime host, and the browser
# tests of the operator console (tests/browser: Node's test runner with
# playwright-core driving Debian's Chromium against the real host binary).
# Arguments go to `cargo test`. The exit code fails if either suite failed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_wasm_target
build_components "${APP_COMPONENTS[@]}" "${TEST_COMPONENTS[@]}"
precompress_static
build_host

status=0
log "running tests"
cargo test --profile host --workspace --exclude static-files --exclude probe "$@" || status=$?

ensure_chromium
ensure_browser_test_deps
log "running browser tests (tests/browser)"
node --test --test-concurrency=1 tests/browser/ || status=$?

exit "$status"
