#!/usr/bin/env bash
# Every component's build command in spin.toml (`spin build`): all components in
# one cargo invocation and the site's precompression, as scripts/serve.sh and
# scripts/test.sh build them, so the .wasm files are the same byte for byte.
# After the first component's run, the others find nothing to do.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
build_components
precompress_static
