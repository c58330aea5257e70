"""The Dex mode of ``dex_agents.testing``: what runs without a real ``dexcli``.

``DEXCLI`` picks the engine; a missing or broken ``dexcli`` fails ``__aenter__``
with a clear error; the ``-zd-config`` file and the ``dexcli`` command lines are
pinned (the ``dexcli flow history`` parser is table-tested in
``test_dexcli_flow_history``). A fake ``dexcli`` that serves the in-process fake
FlowService (``fake_dex_server``) drives the whole stack: the health-check wait, a
real ``AsyncWorker`` in a Worker child, ``read_step_history`` and the shutdown. None
of it proves what a real Dex server does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.dex.integration_stack import (
    DEFAULT_ZD_CONFIG,
    DEX_SERVER_ZD_BINARY_ENV,
    DEXCLI_ENV,
    SERVER_ADDRESS_ENV,
    WORKER_BIND_ADDRESS_ENV,
    DexAgentTestStack,
)
from dex_agents.adapters.local.integration_stack import LocalAgentTestStack, ready_file
from dex_agents.testing import AgentTestStack, run_agent_worker
from tests.adapters.dex.fake_dexcli import REPO_ROOT, SAMPLE_ENTRIES, fake_dexcli, serving_dexcli
from tests.adapters.engine_flows import EngineTestFlow
from tests.my_agent import build_flow


def stack(tmp_path: Path, **options: Any) -> AgentTestStack:
    return AgentTestStack(
        tmp_path / "test", [build_flow()], "tests.my_worker", worker_cwd=REPO_ROOT, **options
    )


@pytest.fixture(autouse=True)
def no_dex_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (DEXCLI_ENV, DEX_SERVER_ZD_BINARY_ENV, SERVER_ADDRESS_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("dexcli", "backend"),
    [(None, LocalAgentTestStack), ("", LocalAgentTestStack), ("/x/dexcli", DexAgentTestStack)],
)
def test_dexcli_chooses_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dexcli: str | None, backend: type[object]
) -> None:
    if dexcli is not None:
        monkeypatch.setenv(DEXCLI_ENV, dexcli)
    assert type(stack(tmp_path).backend) is backend


def test_the_dex_mode_needs_dex_flows(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as raised:
        DexAgentTestStack(tmp_path, [EngineTestFlow()], "tests.my_worker", dexcli="/x/dexcli")
    assert str(raised.value) == (
        "the Dex mode needs dex.Flow instances such as AgentSessionFlow, "
        "not EngineTestFlow (EngineTest)"
    )


def test_the_dex_mode_has_no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEXCLI_ENV, "/x/dexcli")
    with pytest.raises(RuntimeError) as raised:
        _ = stack(tmp_path).database_path
    assert str(raised.value) == "the Dex mode (DEXCLI is set) has no SQLite database"


@pytest.mark.parametrize("kind", ["missing", "directory", "not executable"])
async def test_a_dexcli_that_is_no_executable_fails_on_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    path = tmp_path / "dexcli"
    if kind == "directory":
        path.mkdir()
    elif kind == "not executable":
        path.write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.setenv(DEXCLI_ENV, str(path))
    test_stack = stack(tmp_path)
    with pytest.raises(RuntimeError) as raised:
        async with test_stack:
            pytest.fail("entered without a dexcli")
    assert str(raised.value) == f"DEXCLI names no executable file: {str(path)!r}"


async def test_a_missing_dex_server_zd_fails_on_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dexcli = fake_dexcli(tmp_path / "bin", "exit 0")
    (tmp_path / "bin" / "dex-server-zd").unlink()
    monkeypatch.setenv(DEXCLI_ENV, str(dexcli))
    with pytest.raises(RuntimeError) as raised:
        async with stack(tmp_path):
            pytest.fail("entered without a dex-server-zd")
    server = tmp_path / "bin" / "dex-server-zd"
    assert str(raised.value) == f"no dex-server-zd at {str(server)!r} (next to DEXCLI)"

    monkeypatch.setenv(DEX_SERVER_ZD_BINARY_ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(RuntimeError) as raised:
        async with stack(tmp_path):
            pytest.fail("entered without a dex-server-zd")
    elsewhere = str(tmp_path / "elsewhere")
    assert str(raised.value) == (
        f"no dex-server-zd at {elsewhere!r} (DEX_SERVER_ZD_BINARY={elsewhere!r})"
    )


async def test_a_dev_server_that_exits_fails_on_enter_with_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.txt"
    dexcli = fake_dexcli(
        tmp_path / "bin",
        f'echo "$@" > {calls}\necho "zd binary $DEX_SERVER_ZD_BINARY" >> {calls}\n'
        'echo "dexcli version 9.9.9-fake"\necho "unknown flag: --engine" >&2\nexit 3',
    )
    monkeypatch.setenv(DEXCLI_ENV, str(dexcli))
    with pytest.raises(RuntimeError) as raised:
        async with stack(tmp_path):
            pytest.fail("entered although dexcli dev exited")
    message = str(raised.value)
    assert re.fullmatch(
        r"dexcli dev exited with 3 before it answered on 127\.0\.0\.1:\d+; its output:\n"
        r"dexcli version 9\.9\.9-fake\nunknown flag: --engine\n",
        message,
    ), message

    config = tmp_path / "test" / "dex-zd-config.yaml"
    argv, zd_binary = calls.read_text(encoding="utf-8").splitlines()
    assert re.fullmatch(
        f"dev --engine zd -zd-config {re.escape(str(config))} --open=false "
        r"--bind-address 127\.0\.0\.1 --dex-port \d+ --web-port \d+",
        argv,
    ), argv
    assert zd_binary == f"zd binary {tmp_path / 'bin' / 'dex-server-zd'}"


async def test_the_zd_config_asks_for_process_crash_safe_durability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert DEFAULT_ZD_CONFIG == "dev:\n  durabilityMode: processCrashSafe\n"
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(DEXCLI_ENV, str(fake_dexcli(tmp_path / "bin", f'echo "$@" > {calls}')))
    with pytest.raises(RuntimeError):
        async with stack(tmp_path):
            pass
    written = tmp_path / "test" / "dex-zd-config.yaml"
    assert written.read_text(encoding="utf-8") == DEFAULT_ZD_CONFIG
    assert f"-zd-config {written} " in calls.read_text(encoding="utf-8")


async def test_a_server_zd_config_of_ones_own_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(DEXCLI_ENV, str(fake_dexcli(tmp_path / "bin", f'echo "$@" > {calls}')))
    own = tmp_path / "mine.yaml"
    with pytest.raises(RuntimeError) as raised:
        async with stack(tmp_path, server_zd_config=own):
            pass
    assert str(raised.value) == f"server_zd_config names no file: {str(own)!r}"

    own.write_text("dev:\n  durabilityMode: processCrashSafe\n  extra: 1\n", encoding="utf-8")
    with pytest.raises(RuntimeError):
        async with stack(tmp_path, server_zd_config=own):
            pass
    assert f"-zd-config {own} " in calls.read_text(encoding="utf-8")
    assert not (tmp_path / "test" / "dex-zd-config.yaml").exists()


@pytest.mark.parametrize(
    "env",
    [
        {SERVER_ADDRESS_ENV: "127.0.0.1:1"},
        {SERVER_ADDRESS_ENV: "127.0.0.1:1", WORKER_BIND_ADDRESS_ENV: ""},
    ],
)
def test_a_dex_worker_child_needs_both_addresses(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.delenv(WORKER_BIND_ADDRESS_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError) as raised:
        run_agent_worker([build_flow()])
    assert str(raised.value) == (
        f"{SERVER_ADDRESS_ENV} and {WORKER_BIND_ADDRESS_ENV} must both be set: "
        "run the Worker through AgentTestStack.start_worker"
    )


async def test_the_stack_runs_a_dex_worker_against_a_fake_dexcli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    dexcli = serving_dexcli(bin_dir)
    monkeypatch.setenv(DEXCLI_ENV, str(dexcli))
    test_stack = stack(tmp_path, worker_env={"MY_STATE_DIR": str(tmp_path)})
    backend = test_stack.backend
    assert isinstance(backend, DexAgentTestStack)

    async with test_stack:
        assert isinstance(test_stack.client, DexFlowClient)
        assert test_stack.client.client is backend.dex_client
        first = await test_stack.start_worker()
        # A second live Worker shares the advertised port; a replacement takes it over.
        second = await test_stack.start_worker()
        first.kill()
        replacement = await test_stack.start_worker()
        assert [second.process.poll(), replacement.process.poll()] == [None, None]
        assert await test_stack.read_step_history("session-1") == SAMPLE_ENTRIES
        server = backend.server_process
        assert server is not None
        assert server.poll() is None
    assert [first.returncode, second.returncode, replacement.returncode] == [-9, -9, -9]
    assert backend.server_process is None
    assert server.returncode == 0
    assert "fake dex stopped" in backend.server_output()

    calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    assert [call[:2] for call in calls] == [["dev", "--engine"], ["flow", "history"]]
    assert calls[1] == [
        "flow",
        "history",
        "--server",
        backend.server_address,
        "--output",
        "json",
        "--all",
        "--no-hydrate",
        "session-1",
    ]
    assert backend.worker_address != backend.server_address
    worker_dir = tmp_path / "test" / "dex-agents-workers"
    assert all(ready_file(worker_dir, worker.pid).exists() for worker in backend.workers)
