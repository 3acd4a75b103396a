#!/usr/bin/env bash
# Runs every test: native unit tests of the libraries, the component tests
# that drive the real .wasm files through the wasmtime host, and the browser
# tests of the operator console (tests/browser: Node's test runner with
# playwright-core driving Debian's Chromium against the real host binary),
# and the same browser behind real nginx, Caddy and HAProxy (tests/proxies).
# Then the real-Spin lane: where a spin binary is at hand (SPIN_BIN, or the
# shared Spin 4.0.2 build), `spin build`, and the component and browser suites
# again with every app under `spin up`, and the libSQL check (two instances on
# one libSQL server, tests/libsql); and the portable lanes, the console as
# one wasi:http component on wasmtime serve and on jco serve.
# rustfmt and clippy (warnings denied, native and wasm) gate it too. Last, the
# API contract: static/openapi.yaml validated and fuzzed (scripts/fuzz-api.sh).
# Arguments go to `cargo test`. The exit code fails if any suite or gate failed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_lint_tools
build_app
built="$(artefact_hashes)"

status=0
log "format and lint gates (rustfmt, clippy -D warnings, native and wasm)"
cargo fmt --all -- --check || status=$?
cargo clippy "${NATIVE[@]}" --all-targets -- -D warnings || status=$?
cargo clippy --release --target wasm32-wasip2 $(printf -- '-p %s ' "${COMPONENTS[@]}") -- -D warnings || status=$?

log "running tests"
cargo test "${NATIVE[@]}" "$@" || status=$?

ensure_chromium
ensure_browser_test_deps
ensure_otlp_proto
log "running browser tests (tests/browser)"
node --test --test-concurrency=1 tests/browser/ || status=$?

# The proxy lane: the README's nginx, Caddy and HAProxy snippets, each a real
# proxy from Debian's packages in front of the app with TLS (tests/proxies).
ensure_proxies
log "proxy lane: nginx, Caddy and HAProxy in front (tests/proxies)"
node --test --test-concurrency=1 tests/proxies/ || status=$?

spin_bin="$(find_spin)" || status=$?
if [[ -z "$spin_bin" ]]; then
    log "real-Spin lane SKIPPED: no spin binary (set SPIN_BIN=/path/to/spin to run it)"
    log "libSQL check (tests/libsql) SKIPPED: it needs spin"
else
    log "real-Spin lane: $("$spin_bin" --version)"
    "$spin_bin" build --from spin.toml || status=$?
    skips="$REPO_ROOT/target/spin-lane-skips.txt"
    rm -f "$skips"
    export RATATOSKR_TEST_RUNTIME=spin SPIN_BIN="$spin_bin" RATATOSKR_SKIP_LOG="$skips"
    log "real-Spin lane: component tests under spin up"
    cargo test "${NATIVE[@]}" --no-fail-fast --test '*' "$@" || status=$?
    log "real-Spin lane: browser tests under spin up"
    node --test --test-concurrency=1 tests/browser/ || status=$?
    log "real-Spin lane: the proxy lane under spin up"
    node --test --test-concurrency=1 tests/proxies/ || status=$?
    # Two spin up sharing the Playground's database through a libSQL server:
    # where that stops today is docs/libsql.md. The test starts and stops its own servers.
    ensure_libsql_deps
    log "real-Spin lane: the Playground on two instances over libSQL (tests/libsql)"
    timeout 600 node --test tests/libsql/ || status=$?
    if [[ -s "$skips" ]]; then
        log "real-Spin lane: $(wc -l < "$skips") test(s) need the repo's host and ran there only:"
        sort "$skips" >&2
    fi
    unset RATATOSKR_TEST_RUNTIME RATATOSKR_SKIP_LOG
fi

# The portable lanes: ratatoskr_console.wasm, the console in one wasi:http
# component, on wasmtime serve (WASMTIME_BIN, or the shared wasmtime-cli 48.0.8)
# and on jco serve (Node's WASI 0.2 shim, pinned in tests/runtimes): the
# console's component tests that apply, then its browser tests against the
# mock upstream. What does not apply there is listed at the end of each lane.
PORTABLE_TESTS=(--test portable --test debug_api --test canary --test lan --test alerts)
PORTABLE_BROWSER=(tests/browser/flight-recorder.test.js tests/browser/xss.test.js tests/browser/lifecycle.test.js tests/browser/bidi.test.js tests/browser/alerts.test.js tests/browser/watch.test.js)
portable_lane() {
    local runtime="$1" skips="$REPO_ROOT/target/$1-lane-skips.txt" threads=()
    # jco serve applies the tests' 300 ms upstream timeouts as idle timeouts:
    # one test at a time, so that no other test's start starves a stream that long.
    [[ "$runtime" == jco ]] && threads=(-- --test-threads=1)
    rm -f "$skips"
    export RATATOSKR_TEST_RUNTIME="$runtime" RATATOSKR_SKIP_LOG="$skips"
    log "portable lane ($runtime): component tests"
    cargo test "${NATIVE[@]}" --no-fail-fast "${PORTABLE_TESTS[@]}" "${threads[@]}" || status=$?
    log "portable lane ($runtime): browser tests"
    node --test --test-concurrency=1 "${PORTABLE_BROWSER[@]}" || status=$?
    if [[ -s "$skips" ]]; then
        log "portable lane ($runtime): $(wc -l < "$skips") test(s) do not apply to the portable console there:"
        sort "$skips" >&2
    fi
    unset RATATOSKR_TEST_RUNTIME RATATOSKR_SKIP_LOG
}
wasmtime_bin="$(find_wasmtime)" || status=$?
if [[ -z "$wasmtime_bin" ]]; then
    log "portable lane (wasmtime serve) SKIPPED: no wasmtime binary (set WASMTIME_BIN=/path/to/wasmtime to run it)"
else
    export WASMTIME_BIN="$wasmtime_bin"
    log "portable lane: $("$wasmtime_bin" --version) serve"
    portable_lane wasmtime-serve
fi
ensure_runtime_deps
log "portable lane: jco $(node tests/runtimes/node_modules/@bytecodealliance/jco/dist/jco.js --version) serve"
portable_lane jco

# The API contract: static/openapi.yaml validated, and every operation fuzzed by
# Schemathesis against the app on the simulator (its own script: it runs alone too).
log "API contract: openapi-spec-validator and Schemathesis (scripts/fuzz-api.sh)"
"$REPO_ROOT/scripts/fuzz-api.sh" || status=$?

# One build: serve.sh and `spin build` (above, in the real-Spin lane) build
# exactly what the tests ran, byte for byte.
log "one build: the artefacts of serve.sh and spin build against the tested ones"
RATATOSKR_BUILD_ONLY=1 "$REPO_ROOT/scripts/serve.sh" || status=$?
if diff <(echo "$built") <(artefact_hashes); then
    echo "one build: $(wc -l <<<"$built") artefacts identical (components, host, precompressed site)"
else
    echo "one build: FAILED, the artefacts above differ from the ones the tests ran" >&2
    status=1
fi

exit "$status"
