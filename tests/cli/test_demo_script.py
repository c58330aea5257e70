"""``./demo.sh`` on a fresh machine: no ``uv`` on PATH and a ``python3`` that refuses pip.

One real run in a copy of the repository: it installs uv from PyPI into a private virtual
environment and the locked runtime dependencies into an environment under ``tmp_path``,
so it leaves this checkout's ``.venv`` alone.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 180.0
INSTALLING_UV = "installing uv (first run only)..."
INSTALLING_DEPENDENCIES = "installing dependencies (first run only)..."
DEV_TOOLS = ("pytest", "py.test", "mypy", "ruff", "hypothesis", "lint-imports")
DEV_MODULES = ("pytest", "mypy", "ruff", "hypothesis", "importlinter")

# A system Python under PEP 668: it refuses pip, as Debian's does outside a virtual
# environment. It never is one (it runs the base interpreter), so it refuses every pip.
PEP_668_PYTHON = """\
#!/bin/sh
printf '%s\\n' "$*" >> '{log}'
case " $* " in
    *" -m pip "*)
        echo "error: externally-managed-environment" >&2
        exit 1
        ;;
esac
exec '{python}' "$@"
"""


def _reaches_pypi() -> bool:
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY")):
        return True
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


def _copy_repository(target: Path) -> Path:
    """The working tree's files as git sees them (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def _path_without_uv(bin_dir: Path, log: Path) -> str:
    """One directory: the fake ``python3``, then every command on PATH but ``uv`` and ``uvx``."""
    bin_dir.mkdir()
    python3 = bin_dir / "python3"
    python3.write_text(
        PEP_668_PYTHON.format(log=log, python=Path(sys.executable).resolve()), encoding="utf-8"
    )
    python3.chmod(0o755)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for entry in Path(directory).iterdir():
            link = bin_dir / entry.name
            if entry.name in ("uv", "uvx") or link.exists() or link.is_symlink():
                continue
            if entry.is_file() and os.access(entry, os.X_OK):
                link.symlink_to(entry)
    return str(bin_dir)


def _installs(calls: Path) -> list[str]:
    """The fake ``python3``'s venv and pip calls (uv also runs it, to learn what it is)."""
    lines = calls.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.startswith(("-m venv", "-m pip")) or " pip " in line]


def _fresh_env(tmp_path: Path, path: str, environment: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV")
    }
    home = tmp_path / "home"
    env.update(
        PATH=path,
        HOME=str(home),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        UV_PROJECT_ENVIRONMENT=str(environment),
    )
    return env


def _demo(repo: Path, env: dict[str, str], db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo / "demo.sh"), "--db", str(db)],
        cwd=repo,
        env=env,
        input="/quit\n",
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


def test_demo_bootstraps_uv_and_installs_no_dev_tool(tmp_path: Path) -> None:
    if not _reaches_pypi():
        pytest.skip("no network: the demo installs uv and the dependencies from PyPI")
    repo = _copy_repository(tmp_path / "repo")
    calls = tmp_path / "python3-calls.log"
    environment = tmp_path / "env"
    env = _fresh_env(tmp_path, _path_without_uv(tmp_path / "bin", calls), environment)
    assert shutil.which("uv", path=env["PATH"]) is None
    db = tmp_path / "db.sqlite3"

    first = _demo(repo, env, db)

    output = f"stdout:\n{first.stdout}\nstderr:\n{first.stderr}"
    assert first.returncode == 0, output
    assert INSTALLING_UV in first.stderr, output
    assert INSTALLING_DEPENDENCIES in first.stderr, output
    assert f"started session demo in {db}" in first.stdout, output
    assert db.exists()
    assert (tmp_path / "home/cache/dex-agents/uv-venv/bin/uv").exists()
    python3_calls = _installs(calls)
    assert python3_calls == [f"-m venv {tmp_path / 'home/cache/dex-agents/uv-venv'}"]

    assert (environment / "bin" / "dex-agents").exists()
    assert [tool for tool in DEV_TOOLS if (environment / "bin" / tool).exists()] == []
    found = subprocess.run(
        [
            str(environment / "bin" / "python"),
            "-c",
            "import importlib.util, sys; "
            "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))",
            *DEV_MODULES,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert found.stdout.split() == []

    again = _demo(repo, env, db)

    output = f"stdout:\n{again.stdout}\nstderr:\n{again.stderr}"
    assert again.returncode == 0, output
    assert INSTALLING_UV not in again.stderr, output
    assert INSTALLING_DEPENDENCIES not in again.stderr, output
    assert f"resuming session demo in {db}" in again.stdout, output
    assert _installs(calls) == python3_calls


# uv's stand-in: `sync` finds everything installed; `run` runs the CLI of this checkout in
# the directory it was started in, as `uv run` does.
FAKE_UV = """\
#!/bin/sh
case "$1" in
    sync) exit 0 ;;
esac
while [ "$1" != dex-agents ]; do shift; done
shift
PYTHONPATH='{root}' exec '{python}' -m dex_agents.cli "$@"
"""


def test_a_relative_db_is_the_callers_path_when_run_from_another_directory(
    tmp_path: Path,
) -> None:
    # demo.sh changes to the repository to sync it; the chat ran there too, so a relative
    # --db named a file in the repository and "started session demo in <path>" misled.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV.format(root=ROOT, python=sys.executable), encoding="utf-8")
    uv.chmod(0o755)
    caller = tmp_path / "caller"
    (caller / "data").mkdir(parents=True)
    name = "data/demo.sqlite3"  # the repository has no data/: there the chat failed
    run = subprocess.run(
        [str(ROOT / "demo.sh"), "--db", name],
        cwd=caller,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        input="/quit\n",
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )
    output = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.returncode == 0, output
    assert f"started session demo in {name}" in run.stdout, output
    assert (caller / name).exists(), output
