#!/usr/bin/env bash
# Builds everything and serves the console on http://127.0.0.1:3000 against the
# built-in upstream simulator. Extra arguments go to the host, e.g.
#   scripts/serve.sh --listen 0.0.0.0:3000
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_wasm_target
build_components "${APP_COMPONENTS[@]}"
precompress_static

# A fresh admin key per run: the simulator and the console share it server-side,
# so the admin panes work, and it never has to be typed or shown anywhere.
if [[ -z "${SPIN_VARIABLE_ADMIN_KEY:-}" ]]; then
    SPIN_VARIABLE_ADMIN_KEY="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    export SPIN_VARIABLE_ADMIN_KEY
fi

# The Playground's demo world (README), so every role can be tried at once.
export SPIN_VARIABLE_SEED_DEMO_DATA="${SPIN_VARIABLE_SEED_DEMO_DATA:-true}"

log "serving (Ctrl-C to stop)"
exec cargo run --profile host -p ratatoskr-host -- up --runtime-config-file runtime-config.toml "$@"
