#!/usr/bin/env bash
# Builds the kit of real MCP servers that tests/it/gateway.rs fronts, and
# prints its directory: a venv of the system's Python with the official
# MCP SDK and the PyPI servers, and the npm servers of package-lock.json.
# Outside the checkout and readable by anyone, because skilld starts each
# server sandboxed as an unprivileged user, who may not reach a checkout
# in root's home. Built once per set of pins; .ci/run calls it and
# exports SKILLD_UPSTREAMS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pins=(
    "mcp==2.3.0"
    "mcp-server-time==2026.10.19"
    "mcp-server-git==2026.10.19"
)
key=$( { printf '%s\n' "${pins[@]}"; cat "$here/package-lock.json"; } | sha256sum | cut -c1-16)
kit="${SKILLD_UPSTREAMS_ROOT:-/tmp}/skilld-upstreams-$key"
mkdir -p "$kit"
chmod 755 "$kit"
(
    flock 9
    if [[ ! -f "$kit/.ready" ]]; then
        # The system's Python: the venv's interpreter is a link to it,
        # which the sandbox's user can run (a pyenv one in root's home it
        # could not).
        /usr/bin/python3 -m venv --clear "$kit/venv"
        "$kit/venv/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off "${pins[@]}" >&2
        "$kit/venv/bin/python" -c 'import mcp, mcp_server_time, mcp_server_git'
        cp "$here/package.json" "$here/package-lock.json" "$kit/"
        (cd "$kit" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2)
        chmod -R o+rX "$kit"
        touch "$kit/.ready"
    fi
) 9>"$kit/.lock"
echo "$kit"
