#!/usr/bin/env bash
# The main job on a fresh machine: install the locked runtime dependencies (not the
# dev group: no pytest, mypy or ruff), then talk to a durable agent session on the
# embedded engine (a local SQLite file), with the scripted demo model. Arguments go
# to `dex-agents chat` (--session ID, --db PATH).
#
# Without `uv` on PATH it installs uv into a private virtual environment,
# ${XDG_CACHE_HOME:-~/.cache}/dex-agents/uv-venv, and runs it from there by absolute
# path: this needs neither pip's script folder on PATH nor a system Python that
# allows pip installs (PEP 668), only `python3 -m venv`.
# The sync is --inexact, so it keeps what ./ci.sh installed into the same .venv.
set -euo pipefail
cd "$(dirname "$0")"

uv_venv="${XDG_CACHE_HOME:-$HOME/.cache}/dex-agents/uv-venv"

install_uv() {
    if ! command -v python3 >/dev/null 2>&1; then
        echo "demo.sh: needs uv, or python3 to install it: https://docs.astral.sh/uv/getting-started/installation/" >&2
        exit 1
    fi
    echo "installing uv (first run only)..." >&2
    rm -rf "$uv_venv"
    mkdir -p "$(dirname "$uv_venv")"
    if ! python3 -m venv "$uv_venv" >/dev/null 2>&1; then
        rm -rf "$uv_venv"
        local venv_package
        venv_package="$(python3 -c 'import sys; print(f"python3.{sys.version_info[1]}-venv")' 2>/dev/null || echo python3-venv)"
        echo "demo.sh: python3 cannot create a virtual environment to install uv into: install its venv module (Debian/Ubuntu: apt install $venv_package), or install uv: https://docs.astral.sh/uv/getting-started/installation/" >&2
        exit 1
    fi
    PIP_USER=0 "$uv_venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.5"
}

if command -v uv >/dev/null 2>&1; then
    uv=uv
else
    uv="$uv_venv/bin/uv"
    if ! "$uv" --version >/dev/null 2>&1; then
        install_uv
    fi
fi

export UV_LINK_MODE=copy
sync=("$uv" sync --locked --no-dev --inexact)
# `--check` changes nothing; it fails when something is missing (also on a uv too old
# to know it, which then syncs, cheaply, on every run). The real sync shows uv's errors.
if ! "${sync[@]}" --check >/dev/null 2>&1; then
    echo "installing dependencies (first run only)..." >&2
    "${sync[@]}" --quiet
fi
exec "$uv" run --frozen --no-dev --no-sync dex-agents chat "$@"
