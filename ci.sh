#!/usr/bin/env bash
# The one gate, run the same way by a developer and by CI: install the locked
# dependencies, then format, lint, strict types, import contracts and tests.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v uv >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check "uv>=0.5"
fi
export UV_LINK_MODE=copy
uv sync --locked --quiet

echo "== ruff check";  uv run --frozen ruff check .
echo "== ruff format"; uv run --frozen ruff format --check .
echo "== mypy";        uv run --frozen mypy dex_agents tests
echo "== import contracts"; uv run --frozen lint-imports
echo "== pytest";      uv run --frozen pytest "$@"
