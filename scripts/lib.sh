# Shared set-up for scripts/serve.sh and scripts/test.sh. Every step is
# idempotent, so both commands work on a fresh machine and stay fast after.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

# Every component, the test-only probe and the portable console included. They
# are always built together, in one cargo invocation: cargo unifies a shared
# dependency's features over the packages it builds at once, so another
# selection would build other .wasm files.
COMPONENTS=(static-files debug-api simulator playground probe ratatoskr-console)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ensure_wasm_target() {
    if ! rustup target list --installed | grep -qx wasm32-wasip2; then
        log "installing the wasm32-wasip2 Rust target"
        rustup target add wasm32-wasip2
    fi
}

# rustfmt and clippy for the gates (rustup's default profile has them; a minimal one does not).
ensure_lint_tools() {
    local have
    have="$(rustup component list --installed)"
    for c in rustfmt clippy; do
        if ! grep -q "^$c" <<<"$have"; then
            log "installing the $c component"
            rustup component add "$c"
        fi
    done
}

build_components() {
    log "building components: ${COMPONENTS[*]}"
    cargo build --release --target wasm32-wasip2 $(printf -- '-p %s ' "${COMPONENTS[@]}")
}

# Brotli/gzip variants + metadata for the static component, refreshed only
# where static/ changed (see crates/static-core).
precompress_static() {
    log "precompressing static/"
    cargo run --quiet --profile host -p static-core --bin precompress -- static target/static-precompressed
}

# Every native crate the tests use goes through cargo with this one package
# selection, so features unify the same way each time and wasmtime is built once
# (`-p ratatoskr-host` alone resolves other features and built it a second time).
NATIVE=(--profile host --workspace --exclude static-files --exclude probe --exclude ratatoskr-console)

# The host binary (target/host/ratatoskr-host) that serve.sh runs and the browser
# tests start, with the test binaries of the same build: the same selection
# every time (`--bins` alone, or `-p ratatoskr-host`, unify other features and
# build another host).
build_host() {
    log "building the host and the tests"
    cargo build "${NATIVE[@]}" --bins --tests
}

# Everything both README commands run: one build, whichever comes first.
build_app() {
    ensure_wasm_target
    build_components
    precompress_static
    build_host
}

# The build's artefacts and their sha256, one per line: the test that
# serve.sh and `spin build` build exactly what the tests ran compares them.
# The precompressed site is a tree (static/js/ holds the console's modules).
artefact_hashes() {
    (cd "$REPO_ROOT" && {
        sha256sum target/wasm32-wasip2/release/*.wasm target/host/ratatoskr-host
        find target/static-precompressed -type f -exec sha256sum {} +
    } | sort -k2)
}

# Debian's Chromium for the browser tests; a fresh machine lacks it.
ensure_chromium() {
    if [[ ! -x /usr/bin/chromium ]]; then
        log "installing chromium (browser tests)"
        apt_install chromium
    fi
}

# The proxy lane's real reverse proxies, from Debian's packages (tests/proxies):
# nginx, Caddy and HAProxy, each started by the test with a config of its own;
# openssl makes the test's certificate. A package's own service is not started.
ensure_proxies() {
    local missing=()
    for tool in nginx:nginx caddy:caddy haproxy:haproxy openssl:openssl; do
        command -v "${tool%%:*}" >/dev/null 2>&1 || [[ -x "/usr/sbin/${tool%%:*}" ]] || missing+=("${tool#*:}")
    done
    if ((${#missing[@]})); then
        log "installing the proxy lane's proxies (${missing[*]})"
        # policy-rc.d 101: the packages' init scripts leave their services stopped.
        local policy=/usr/sbin/policy-rc.d added=""
        if [[ ! -e "$policy" && $EUID -eq 0 ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added=1; fi
        apt_install "${missing[@]}"
        [[ -n "$added" ]] && rm -f "$policy"
    fi
    return 0
}

# playwright-core, pinned by tests/browser/package-lock.json (it drives the
# system Chromium; it downloads no browser of its own).
ensure_browser_test_deps() {
    log "installing browser-test dependencies (npm ci)"
    (cd tests/browser && npm ci --no-audit --no-fund --prefer-offline)
}

# The real spin CLI for the real-Spin lane: $SPIN_BIN, else the shared build of
# Spin 4.0.2 (../shared/tools/spin, on developer and CI machines only).
# Prints the binary's path, or nothing (with the reason on stderr) when there is none.
find_spin() {
    find_tool spin SPIN_BIN
}

# The wasmtime CLI for the portable lane (`wasmtime serve`): $WASMTIME_BIN, else
# the shared build of wasmtime-cli 48.0.8 (../shared/tools/wasmtime), as find_spin.
find_wasmtime() {
    find_tool wasmtime WASMTIME_BIN
}

# $<VAR> if set, else ../shared/tools/<name>/<name>-*-linux-x86_64.xz unpacked once
# into target/<name> and checked against the sha256 its README gives.
find_tool() {
    local name="$1" var="$2"
    if [[ -n "${!var:-}" ]]; then
        if [[ -x "${!var}" ]]; then echo "${!var}"; else echo "$var=${!var} is not an executable file" >&2; fi
        return 0
    fi
    local shared="$REPO_ROOT/../shared/tools/$name" packed
    packed="$(ls "$shared"/"$name"-*-linux-x86_64.xz 2>/dev/null | head -n 1 || true)"
    if [[ -z "$packed" ]]; then
        echo "no $name binary: $var is unset and ../shared/tools/$name has none" >&2
        return 0
    fi
    local bin="$REPO_ROOT/target/$name"
    if [[ ! -x "$bin" || "$packed" -nt "$bin" ]]; then
        command -v xz >/dev/null || apt_install xz-utils
        mkdir -p "$REPO_ROOT/target"
        xz -dc "$packed" > "$bin.partial" && chmod +x "$bin.partial" && mv "$bin.partial" "$bin"
    fi
    local want
    want="$(grep -A1 -i 'sha256 of the unpacked binary' "$shared/README.md" 2>/dev/null | tail -n 1 | tr -d '[:space:]')"
    if [[ -n "$want" && "$(sha256sum "$bin" | cut -d' ' -f1)" != "$want" ]]; then
        echo "target/$name does not match the sha256 in $shared/README.md" >&2
        return 1
    fi
    echo "$bin"
}

# jco (`jco serve`, Node's WASI 0.2 shim) for the portable lane, pinned with its
# preview2-shim by tests/runtimes/package-lock.json.
ensure_runtime_deps() {
    log "installing the portable lane's jco (npm ci in tests/runtimes)"
    (cd tests/runtimes && npm ci --no-audit --no-fund --prefer-offline)
}

# The Turso CLI (tursodb --sync-server, pinned by tests/libsql/package-lock.json):
# the libSQL server of the real-Spin lane's libSQL check (docs/libsql.md).
ensure_libsql_deps() {
    log "installing the libSQL check's turso CLI (npm ci in tests/libsql)"
    (cd tests/libsql && npm ci --no-audit --no-fund --prefer-offline)
}

apt_install() {
    local sudo=()
    [[ $EUID -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# Schemathesis and openapi-spec-validator for scripts/fuzz-api.sh, pinned, in a
# venv under target/ (python3 -m venv; pip from PyPI), installed once.
# openapi-spec-validator 0.9.0 (the latest) validates OpenAPI 3.2 documents
# against the official 3.2 schema (spec.openapis.org/oas/3.2/schema/2025-11-23);
# Schemathesis 4.32.5 reads 3.2 streams' itemSchema and links.
SCHEMATHESIS_VERSION=4.32.5
OPENAPI_SPEC_VALIDATOR_VERSION=0.9.0
ensure_schemathesis() {
    local venv="$REPO_ROOT/target/fuzz-venv"
    local want="schemathesis==$SCHEMATHESIS_VERSION openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION"
    # A venv copied or moved from elsewhere keeps dead interpreter paths: it must run here.
    if [[ -x "$venv/bin/st" && "$(cat "$venv/.pinned" 2>/dev/null)" == "$want" ]] &&
        "$venv/bin/python" -c '' 2>/dev/null && "$venv/bin/openapi-spec-validator" --help >/dev/null 2>&1; then
        return 0
    fi
    log "installing $want (venv target/fuzz-venv)"
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check $want
    echo "$want" > "$venv/.pinned"
}

# The OpenTelemetry protobuf classes the browser tests check the console's OTLP/JSON
# export with (google.protobuf.json_format, ExportTraceServiceRequest): target/otlp-venv.
OTLP_PROTO_VERSION=1.45.2
ensure_otlp_proto() {
    local venv="$REPO_ROOT/target/otlp-venv"
    local want="opentelemetry-proto==$OTLP_PROTO_VERSION"
    if [[ "$(cat "$venv/.pinned" 2>/dev/null)" == "$want" ]] &&
        "$venv/bin/python" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
        return 0
    fi
    log "installing $want (venv target/otlp-venv)"
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$want"
    echo "$want" > "$venv/.pinned"
}
