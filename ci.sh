#!/usr/bin/env bash
# The one gate, run the same way by a developer and by CI: install the locked
# dependencies, then format, lint, strict types, import contracts and tests.
set -euo pipefail
cd "$(dirname "$0")"

uv="$(scripts/find-uv.sh)" || { echo "ci.sh: could not find or install uv" >&2; exit 1; }
# The console's browser tests drive Debian's chromium (no browser download); where
# it cannot be installed (not root, no apt) those tests skip and say why.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium for the console's browser tests"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
        || echo "ci.sh: could not install chromium; the browser tests will skip" >&2
fi
export UV_LINK_MODE=copy
# Every extra: the adapters' tests run them against real local peers. Compiled to
# bytecode once here, since hundreds of test children (chats, serve, Workers) import
# LiteLLM and the package, and where PYTHONDONTWRITEBYTECODE is set each of them
# compiled both again (5.4 s of CPU a child against 3.1 s; tests/cli/test_cli_model.py
# and tests/test_examples.py took 42 s before and 28 s after).
"$uv" sync --locked --all-extras --quiet --compile-bytecode
"$uv" run --frozen python -m compileall -q dex_agents >/dev/null

echo "== ruff check";  "$uv" run --frozen ruff check .
echo "== ruff format"; "$uv" run --frozen ruff format --check .
echo "== mypy";        "$uv" run --frozen mypy dex_agents tests
echo "== import contracts"; "$uv" run --frozen lint-imports
echo "== pytest";      "$uv" run --frozen pytest "$@"
