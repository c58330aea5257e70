#!/usr/bin/env bash
# Print the path of a working uv, installing it first when there is none.
# Run by demo.sh and ci.sh, so a fresh machine needs only python3 with venv.
#
# Without `uv` on PATH it installs uv into a private virtual environment,
# ${XDG_CACHE_HOME:-~/.cache}/dex-agents/uv-venv, and prints its absolute path:
# this needs neither pip's script folder on PATH nor a system Python that allows
# pip installs (PEP 668), only `python3 -m venv`.
set -euo pipefail

uv_venv="${XDG_CACHE_HOME:-$HOME/.cache}/dex-agents/uv-venv"

install_uv() {
    if ! command -v python3 >/dev/null 2>&1; then
        echo "needs uv, or python3 to install it: https://docs.astral.sh/uv/getting-started/installation/" >&2
        exit 1
    fi
    echo "installing uv (first run only)..." >&2
    rm -rf "$uv_venv"
    mkdir -p "$(dirname "$uv_venv")"
    if ! python3 -m venv "$uv_venv" >/dev/null 2>&1; then
        rm -rf "$uv_venv"
        local venv_package
        venv_package="$(python3 -c 'import sys; print(f"python3.{sys.version_info[1]}-venv")' 2>/dev/null || echo python3-venv)"
        echo "python3 cannot create a virtual environment to install uv into: install its venv module (Debian/Ubuntu: apt install $venv_package), or install uv: https://docs.astral.sh/uv/getting-started/installation/" >&2
        exit 1
    fi
    PIP_USER=0 "$uv_venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.5" >&2
}

if command -v uv >/dev/null 2>&1; then
    command -v uv
else
    if ! "$uv_venv/bin/uv" --version >/dev/null 2>&1; then
        install_uv
    fi
    echo "$uv_venv/bin/uv"
fi
