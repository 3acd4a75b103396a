#!/usr/bin/env bash
# Builds everything and serves the console on http://127.0.0.1:3000 against the
# built-in upstream simulator. Extra arguments go to the host, e.g.
#   scripts/serve.sh --listen 0.0.0.0:3000
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The same build as scripts/test.sh (lib.sh: build_app), so either command is
# fast after the other and serves exactly what the tests ran.
build_app
[[ -n "${RATATOSKR_BUILD_ONLY:-}" ]] && exit 0

# A fresh admin key per run: the simulator and the console share it server-side,
# so the admin panes work, and it never has to be typed or shown anywhere.
if [[ -z "${SPIN_VARIABLE_ADMIN_KEY:-}" ]]; then
    SPIN_VARIABLE_ADMIN_KEY="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    export SPIN_VARIABLE_ADMIN_KEY
fi

# The Playground's demo world (docs/playground.md), so every role can be tried at once.
export SPIN_VARIABLE_SEED_DEMO_DATA="${SPIN_VARIABLE_SEED_DEMO_DATA:-true}"

# Without a demo_password of yours, the demo users get a random password that
# is printed once below; a bind beyond loopback does not seed at all then, so
# the first visitor from the network never finds demo accounts waiting.
listen="" own_demo_password="${SPIN_VARIABLE_DEMO_PASSWORD:-}"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --listen) listen="${args[i + 1]:-}" ;;
        --listen=*) listen="${args[i]#--listen=}" ;;
        --variable) [[ "${args[i + 1]:-}" == demo_password=?* ]] && own_demo_password=set ;;
        --variable=demo_password=?*) own_demo_password=set ;;
    esac
done
is_loopback_listen() {
    local host="${1%:*}"
    case "$host" in
        "" | localhost | 127.* | "[::1]" | ::1) return 0 ;;
        *) return 1 ;;
    esac
}
if [[ -n "$listen" ]] && ! is_loopback_listen "$listen" && [[ -z "$own_demo_password" ]] &&
    [[ "${SPIN_VARIABLE_SEED_DEMO_DATA,,}" =~ ^(true|1|yes|on)$ ]]; then
    export SPIN_VARIABLE_SEED_DEMO_DATA=false
    log "demo data NOT seeded: --listen $listen reaches beyond loopback and no demo password is set; set SPIN_VARIABLE_DEMO_PASSWORD (12+ characters) to seed demo users that sign in with it"
fi

# Where the app's state lives: runtime-config.toml (.spin/ in the repo), unless
# RATATOSKR_RUNTIME_CONFIG names another (the README-commands test's scratch one).
log "serving (Ctrl-C to stop)"
exec "$REPO_ROOT/target/host/ratatoskr-host" up --runtime-config-file "${RATATOSKR_RUNTIME_CONFIG:-runtime-config.toml}" "$@"
