#!/usr/bin/env bash
# The main job on a fresh machine: install the locked runtime dependencies (not the
# dev group: no pytest, mypy or ruff), then talk to a durable agent session on the
# embedded engine (a local SQLite file), with the scripted demo model. Arguments go
# to `dex-agents chat` (--session ID, --db PATH).
#
# Without `uv` on PATH, scripts/find-uv.sh installs it into a private virtual
# environment (no pip install into the system Python, no PATH changes needed).
# The sync is --inexact, so it keeps what ./ci.sh installed into the same .venv.
set -euo pipefail
# The chat runs where it was started, so a relative --db (and the default file) is the
# caller's path; only uv's sync and run look at the repository.
caller="$PWD"
cd "$(dirname "$0")"
repository="$PWD"

uv="$(scripts/find-uv.sh)" || { echo "demo.sh: could not find or install uv" >&2; exit 1; }

export UV_LINK_MODE=copy
sync=("$uv" sync --locked --no-dev --inexact)
# `--check` changes nothing; it fails when something is missing (also on a uv too old
# to know it, which then syncs, cheaply, on every run). The real sync shows uv's errors.
if ! "${sync[@]}" --check >/dev/null 2>&1; then
    echo "installing dependencies (first run only)..." >&2
    "${sync[@]}" --quiet
fi
cd "$caller"
exec "$uv" run --project "$repository" --frozen --no-dev --no-sync dex-agents chat "$@"
