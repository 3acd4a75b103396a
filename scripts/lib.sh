# Shared set-up for scripts/serve.sh and scripts/test.sh. Every step is
# idempotent, so both commands work on a fresh machine and stay fast after.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

# The Spin components, and the test-only fixture components.
APP_COMPONENTS=(static-files debug-api simulator playground)
TEST_COMPONENTS=(probe)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ensure_wasm_target() {
    if ! rustup target list --installed | grep -qx wasm32-wasip2; then
        log "installing the wasm32-wasip2 Rust target"
        rustup target add wasm32-wasip2
    fi
}

build_components() {
    local args=()
    for c in "$@"; do args+=(-p "$c"); done
    log "building components: $*"
    cargo build --release --target wasm32-wasip2 "${args[@]}"
}

# Brotli/gzip variants + metadata for the static component, refreshed only
# where static/ changed (see crates/static-core).
precompress_static() {
    log "precompressing static/"
    cargo run --quiet --profile host -p static-core --bin precompress -- static target/static-precompressed
}

# The host binary the browser tests start (target/host/ratatoskr-host).
build_host() {
    log "building the host"
    cargo build --profile host -p ratatoskr-host
}

# Debian's Chromium for the browser tests; a fresh machine lacks it.
ensure_chromium() {
    if [[ ! -x /usr/bin/chromium ]]; then
        log "installing chromium (browser tests)"
        local sudo=()
        [[ $EUID -ne 0 ]] && sudo=(sudo)
        "${sudo[@]}" apt-get update
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
    fi
}

# playwright-core, pinned by tests/browser/package-lock.json (it drives the
# system Chromium; it downloads no browser of its own).
ensure_browser_test_deps() {
    log "installing browser-test dependencies (npm ci)"
    (cd tests/browser && npm ci --no-audit --no-fund --prefer-offline)
}
