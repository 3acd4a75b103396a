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
# CPython 3.11), so it fits CI. Every check (`--checks all`): the answers'
# conformance (status, content type, headers, body and every event of a
# stream against its OpenAPI 3.2 itemSchema), no 5xx (but the gateway statuses
# of the two proxying operations: scripts/schemathesis.toml), and that the
# schemas are the server's rules: schema-valid requests are accepted
# (positive_data_acceptance), schema-invalid ones refused
# (negative_data_rejection), missing credentials refused (ignored_auth).
#
# An admin key is set, so the admin-scoped console routes answer 200: the
# endless admin event stream is read for three events or one second per call
# (scripts/schemathesis.toml). The stateful phase follows the document's links
# with real ids: the config's first agent -> a new session -> its turns,
# tools, Bifrost state, admin event filter and cancel; the gateway list ->
# token mint, search probe, trace list -> trace reads. Logout and logout-all
# revoke the session they are called with (logout-all every session of the
# user), so they run last, each alone on a session of its own.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SEED="${FUZZ_SEED:-20261203}"
MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-100}"
CHECKS=all

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
admin_key="fuzz-admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# Only the variables given here: none from the caller's shell.
env $(env | grep -o '^SPIN_VARIABLE_[A-Z_]*' | sed 's/^/-u /') \
    "$host_bin" up --listen 127.0.0.1:0 --runtime-config-file "$work/runtime-config.toml" \
    --variable seed_demo_data=true --variable "demo_password=$demo_password" \
    --variable "admin_key=$admin_key" > "$work/host.log" 2>&1 &
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
# Three sessions up front: the fuzzed sign-ins soon hit the per-address rate limit.
session="$(login)"
logout_session="$(login)"
logout_all_session="$(login)"
[[ -n "$session" && -n "$logout_session" && -n "$logout_all_session" ]] ||
    { echo "could not sign in as platform@demo.test" >&2; cat "$work/host.log" >&2; exit 1; }
# A gateway token (30 minutes) for the inference pass-through's bearer scheme.
gateway_token="$(curl -sS -H "Authorization: Bearer $session" -H 'content-type: application/json' \
    --data '{"gateway_id":"gw_acme_main"}' "$base/admin/v1/playground/token" | grep -o 'myra_[0-9a-f]*' || true)"
[[ -n "$gateway_token" ]] || { echo "could not mint a gateway token" >&2; cat "$work/host.log" >&2; exit 1; }

# Credentials go by the document's security schemes (scripts/schemathesis.toml
# reads these): the session bearer on the Playground routes, the gateway token
# on the inference pass-through, nothing on the console routes.
export FUZZ_GATEWAY_TOKEN="$gateway_token"
run_st() {
    local name="$1"
    export FUZZ_SESSION_TOKEN="$2"
    shift 2
    log "schemathesis: $name (seed $SEED, at most $MAX_EXAMPLES cases per operation and phase)"
    local started=$SECONDS
    local rc=0
    rm -rf "$REPO_ROOT/target/fuzz-report/$name"
    # From target/: Schemathesis keeps its working files (.schemathesis/) in the current directory.
    (cd "$REPO_ROOT/target" && "$venv/bin/st" --config-file "$REPO_ROOT/scripts/schemathesis.toml" \
        run "$REPO_ROOT/static/openapi.yaml" --url "$base" \
        --checks "$CHECKS" --seed "$SEED" --max-examples "$MAX_EXAMPLES" \
        --request-timeout 20 --workers 1 --no-shrink --suppress-health-check all --generation-database none \
        --report junit,ndjson --report-dir "$REPO_ROOT/target/fuzz-report/$name" \
        "$@") || rc=$?
    log "schemathesis: $name took $((SECONDS - started))s"
    return "$rc"
}

status=0
run_st all-but-logout "$session" --exclude-operation-id logout --exclude-operation-id logoutAll || status=$?
# One operation alone has no links to follow: no stateful phase.
run_st logout "$logout_session" --include-operation-id logout --phases examples,coverage,fuzzing || status=$?
run_st logout-all "$logout_all_session" --include-operation-id logoutAll --phases examples,coverage,fuzzing || status=$?
# What the app saw, from its request log: requests per operation and status.
log "requests per operation (host log), by status"
"$venv/bin/python" - static/openapi.yaml "$work/host.log" <<'PY'
import collections, re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
ops = [(m.upper(), t, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]*", t) + "$"))
       for t, item in doc["paths"].items() for m in item if m in ("get", "post")]
seen = collections.defaultdict(collections.Counter)
for line in open(sys.argv[2], errors="replace"):
    m = re.match(r"^(\S+) (/\S*) -> \S+ (\d{3}) ", line)
    if not m or not m.group(2).startswith(("/api/", "/admin/v1/")):
        continue
    method, path, status = m.groups()
    name = next((f"{om} {t}" for om, t, rx in ops if om == method and rx.match(path)), f"(other) {method}")
    seen[name][status] += 1
for name in sorted(seen):
    statuses = " ".join(f"{s}:{n}" for s, n in sorted(seen[name].items()))
    print(f"  {sum(seen[name].values()):6d}  {name}  ({statuses})")
PY
# The links the stateful phase followed (from Schemathesis' event report), with
# the statuses they met: calls with ids taken from earlier answers.
log "links followed by the stateful phase, by status"
"$venv/bin/python" - "$REPO_ROOT/target/fuzz-report/all-but-logout" <<'PY'
import collections, glob, json, os, sys
report = max(glob.glob(os.path.join(sys.argv[1], "*.ndjson")), key=os.path.getmtime)
calls = collections.defaultdict(collections.Counter)
for line in open(report):
    event = json.loads(line).get("ScenarioFinished")
    if not event or event["phase"] != "stateful":
        continue
    recorder = event.get("recorder") or {}
    for case_id, case in (recorder or {}).get("cases", {}).items():
        link = case.get("transition")
        if not link or not case.get("is_transition_applied"):
            continue
        response = (recorder.get("interactions", {}).get(case_id) or {}).get("response") or {}
        calls[link["id"]][str(response.get("status_code", "-"))] += 1
for link in sorted(calls):
    statuses = " ".join(f"{s}:{n}" for s, n in sorted(calls[link].items()))
    print(f"  {sum(calls[link].values()):5d}  {link}  ({statuses})")
PY
exit "$status"
