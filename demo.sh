#!/usr/bin/env bash
# The main job on a fresh machine: install the locked dependencies, then talk to a
# durable agent session on the embedded engine (a local SQLite file), with the
# scripted demo model. Arguments go to `dex-agents chat` (--session ID, --db PATH).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v uv >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "uv>=0.5"
fi
export UV_LINK_MODE=copy
uv sync --locked --quiet
exec uv run --frozen dex-agents chat "$@"
