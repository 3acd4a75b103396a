#!/usr/bin/env bash
# Validates static/openapi.yaml (openapi-spec-validator) and fuzzes every
# operation in it with Schemathesis against the app on the built-in simulator:
# the repo's host (target/host/ratatoskr-host, built by scripts/test.sh) with the
# Playground's demo world and a signed-in platform admin's session as a bearer.
# Both tools are pinned in a venv under target/ (ensure_schemathesis).
#
#   scripts/fuzz-api.sh                 # after scripts/test.sh (or build_components + build_host)
#   FUZZ_MAX_EXAMPLES=200 FUZZ_SEED=7 scripts/fuzz-api.sh   # a longer, different run
#
# Fixed seed, bounded budget (FUZZ_MAX_EXAMPLES cases per operation and phase;
# one worker, since Hypothesis' lambda introspection is not thread-safe on
# CPython 3.11), so it fits CI. Checks: not_a_server_error,
# status_code_conformance, content_type_conformance,
# response_schema_conformance, response_headers_conformance (the gateway
# statuses of the two proxying operations: scripts/schemathesis.toml).
#
# Without an admin key the two admin-scoped console routes answer their typed
# 400 (the admin event stream is endless by design: a fuzzer cannot read it to
# its end); their 200s are checked by the component tests' conformance proxy.
# Logout revokes the session it is called with, so it runs last, alone, on a
# session of its own.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SEED="${FUZZ_SEED:-20261203}"
MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-100}"
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance

ensure_schemathesis
venv="$REPO_ROOT/target/fuzz-venv"

log "validating static/openapi.yaml (openapi-spec-validator)"
"$venv/bin/openapi-spec-validator" static/openapi.yaml

host_bin="$REPO_ROOT/target/host/ratatoskr-host"
[[ -x "$host_bin" ]] || { echo "$host_bin is missing: run scripts/test.sh (or build_host) first" >&2; exit 1; }
for wasm in static_files debug_api simulator playground; do
    [[ -f "target/wasm32-wasip2/release/$wasm.wasm" ]] || { echo "$wasm.wasm is missing: build the components first" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/ratatoskr-fuzz-XXXXXX")"
host_pid=""
cleanup() {
    if [[ -n "$host_pid" ]]; then kill "$host_pid" 2>/dev/null || true; wait "$host_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

printf '[key_value_store.default]\ntype = "spin"\n\n[sqlite_database.default]\ntype = "spin"\npath = "sqlite_db.db"\n' > "$work/runtime-config.toml"
demo_password="fuzz-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
# Only the variables given here: none from the caller's shell.
env $(env | grep -o '^SPIN_VARIABLE_[A-Z_]*' | sed 's/^/-u /') \
    "$host_bin" up --listen 127.0.0.1:0 --runtime-config-file "$work/runtime-config.toml" \
    --variable seed_demo_data=true --variable "demo_password=$demo_password" > "$work/host.log" 2>&1 &
host_pid=$!
base=""
for _ in $(seq 1 600); do
    base="$(grep -o 'Serving http://[^ ]*' "$work/host.log" | head -n 1 | cut -d' ' -f2 || true)"
    [[ -n "$base" ]] && break
    kill -0 "$host_pid" 2>/dev/null || { cat "$work/host.log" >&2; exit 1; }
    sleep 0.1
done
[[ -n "$base" ]] || { echo "the app did not start:" >&2; cat "$work/host.log" >&2; exit 1; }
base="${base%/}"
log "app on $base"

# A platform admin's session token, read from the login's Set-Cookie.
login() {
    curl -sS -D - -o /dev/null -H 'content-type: application/json' \
        --data "{\"email\":\"platform@demo.test\",\"password\":\"$demo_password\"}" "$base/admin/v1/auth/login" |
        grep -io 'ratatoskr_admin_session=sess_[0-9a-f]*' | cut -d= -f2
}
# Two sessions up front: the fuzzed sign-ins soon hit the per-address rate limit.
session="$(login)"
logout_session="$(login)"
[[ -n "$session" && -n "$logout_session" ]] || { echo "could not sign in as platform@demo.test" >&2; cat "$work/host.log" >&2; exit 1; }

run_st() {
    local name="$1"
    shift
    log "schemathesis: $name (seed $SEED, at most $MAX_EXAMPLES cases per operation and phase)"
    local started=$SECONDS
    local rc=0
    # From target/: Schemathesis keeps its working files (.schemathesis/) in the current directory.
    (cd "$REPO_ROOT/target" && "$venv/bin/st" --config-file "$REPO_ROOT/scripts/schemathesis.toml" \
        run "$REPO_ROOT/static/openapi.yaml" --url "$base" \
        --checks "$CHECKS" --seed "$SEED" --max-examples "$MAX_EXAMPLES" \
        --request-timeout 20 --workers 1 --no-shrink --suppress-health-check all --generation-database none \
        --report junit --report-dir "$REPO_ROOT/target/fuzz-report/$name" \
        "$@") || rc=$?
    log "schemathesis: $name took $((SECONDS - started))s"
    return "$rc"
}

status=0
run_st all-but-logout -H "Authorization: Bearer $session" --exclude-operation-id logout || status=$?
run_st logout -H "Authorization: Bearer $logout_session" --include-operation-id logout || status=$?
# What the app saw, from its request log: requests and 5xx answers per operation.
log "requests per operation (host log), and 5xx answers"
"$venv/bin/python" - static/openapi.yaml "$work/host.log" <<'PY'
import collections, re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
ops = [(m.upper(), t, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]*", t) + "$"))
       for t, item in doc["paths"].items() for m in item if m in ("get", "post")]
seen, errors = collections.Counter(), collections.Counter()
for line in open(sys.argv[2], errors="replace"):
    m = re.match(r"^(\S+) (/\S*) -> \S+ (\d{3}) ", line)
    if not m or not m.group(2).startswith(("/api/", "/admin/v1/")):
        continue
    method, path, status = m.groups()
    name = next((f"{om} {t}" for om, t, rx in ops if om == method and rx.match(path)), f"(other) {method}")
    seen[name] += 1
    if status.startswith("5"):
        errors[f"{name} -> {status}"] += 1
for name in sorted(seen):
    print(f"  {seen[name]:6d}  {name}")
for name, n in sorted(errors.items()):
    print(f"  5xx: {n} x {name}")
PY
exit "$status"
