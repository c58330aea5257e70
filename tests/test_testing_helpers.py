"""``dex_agents.testing``'s own helpers: deadlines, gates, invocation logs and the stack."""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dex_agents.testing import (
    DATABASE_ENV,
    LEASE_SECONDS_ENV,
    POLL_SECONDS_ENV,
    RETRY_INTERVAL_SCALE_ENV,
    AgentTestStack,
    FileGate,
    Invocation,
    InvocationLog,
    run_agent_worker,
    wait_until,
)
from tests.my_agent import build_flow

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def counting_probe(values: list[object], asynchronous: bool) -> Callable[[], object]:
    """A probe that returns ``values`` one per call."""
    remaining = list(values)

    def sync() -> object:
        return remaining.pop(0)

    async def async_() -> object:
        return remaining.pop(0)

    return async_ if asynchronous else sync


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    ("values", "expected"),
    [([None, False, "found"], "found"), ([False, 0], 0), ([None, []], []), ([True], True)],
)
async def test_wait_until_returns_the_first_value_that_is_not_none_or_false(
    values: list[object], expected: object, asynchronous: bool
) -> None:
    assert await wait_until("a value", counting_probe(values, asynchronous)) == expected


async def test_wait_until_times_out_naming_what_it_waited_for() -> None:
    with pytest.raises(TimeoutError) as raised:
        await wait_until("the moon", lambda: None, timeout=0.05)
    assert str(raised.value) == "timed out after 0.05 s waiting for the moon"


async def test_wait_until_times_out_when_an_async_probe_never_returns() -> None:
    async def blocked() -> bool:
        await asyncio.Event().wait()  # nobody sets it
        return True

    with pytest.raises(TimeoutError) as raised:
        _: bool = await asyncio.wait_for(wait_until("the moon", blocked, timeout=0.05), 5)
    assert str(raised.value) == (
        "timed out after 0.05 s waiting for the moon (the probe had not returned)"
    )


async def test_wait_until_passes_on_a_probes_own_timeout_error() -> None:
    async def probe() -> bool:
        raise TimeoutError("the server said so")

    with pytest.raises(TimeoutError) as raised:
        _: bool = await wait_until("the moon", probe)
    assert str(raised.value) == "the server said so"


@pytest.mark.parametrize(
    ("seconds", "error"),
    [
        (math.nan, ValueError("timeout must be a number of seconds, not NaN")),
        (None, TypeError("timeout must be a number of seconds, not NoneType")),
        (-5, ValueError("timeout must not be negative, not -5")),
    ],
)
async def test_wait_until_refuses_a_timeout_that_never_passes(
    seconds: object, error: Exception
) -> None:
    with pytest.raises(type(error)) as raised:
        await asyncio.wait_for(wait_until("the moon", lambda: None, seconds), 5)  # type: ignore[arg-type]
    assert str(raised.value) == str(error)


def test_an_invocation_log_counts_calls_across_processes(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "calls.log")
    assert log.entries() == []
    log.record("refund order 7")
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dex_agents.testing import InvocationLog; "
            "InvocationLog(sys.argv[1]).record('refund order 7'); print(__import__('os').getpid())",
            str(log.path),
        ],
        cwd=PACKAGE_DIR,
        capture_output=True,
        check=True,
        text=True,
    )
    log.record("lookup")
    assert log.entries() == [
        Invocation(os.getpid(), "refund order 7"),
        Invocation(int(child.stdout), "refund order 7"),
        Invocation(os.getpid(), "lookup"),
    ]
    assert log.count("refund order 7") == 2
    assert log.count("lookup") == 1
    assert log.count("refund") == 0


def test_an_invocation_log_makes_its_directory_as_a_gate_does(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "state" / "logs" / "calls.log")
    log.record("refund order 7")
    assert log.entries() == [Invocation(os.getpid(), "refund order 7")]


def test_an_invocation_name_may_hold_any_character_but_a_newline(tmp_path: Path) -> None:
    log = InvocationLog(tmp_path / "calls.log")
    names = ["carriage\rreturn", "line\u2028separator", "form\x0cfeed", "tab\tand space"]
    for name in names:
        log.record(name)
    assert [entry.name for entry in log.entries()] == names
    assert log.count("carriage\rreturn") == 1


@pytest.mark.parametrize("name", ["", "two\nlines"])
def test_an_invocation_name_must_be_one_non_empty_line(tmp_path: Path, name: str) -> None:
    message = f"an invocation name must be non-empty and one line: {name!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        InvocationLog(tmp_path / "calls.log").record(name)


@pytest.mark.parametrize("name", ["", "a/b", ".hidden", "two\nlines", "nul\0byte"])
def test_a_gate_name_must_be_a_plain_file_name(tmp_path: Path, name: str) -> None:
    message = (
        "a gate name must be non-empty, not start with '.', and hold no '/', newline "
        f"or NUL: {name!r}"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        FileGate(tmp_path, name)


async def test_a_gate_holds_its_waiter_until_released(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "refund")
    assert gate.reached_by() is None
    waiter = asyncio.create_task(gate.wait_for_release())
    assert await gate.wait_until_reached() == os.getpid()
    assert not waiter.done()
    gate.release()
    await asyncio.wait_for(waiter, 5)
    # A released gate lets later waiters straight through.
    await asyncio.wait_for(FileGate(tmp_path, "refund").wait_for_release(), 5)


async def test_a_gate_nobody_reaches_times_out(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError) as raised:
        await FileGate(tmp_path, "never").wait_until_reached(timeout=0.05)
    assert str(raised.value) == "timed out after 0.05 s waiting for gate 'never' to be reached"


async def test_the_stack_kills_every_worker_on_exit(tmp_path: Path) -> None:
    flow = build_flow()
    stack = AgentTestStack(
        tmp_path, [flow], "tests.my_worker", worker_cwd=PACKAGE_DIR, worker_env={}
    )
    async with stack:
        one = await stack.start_worker()
        two = await stack.start_worker()
        assert [one.returncode, two.returncode] == [None, None]
        one.kill()
        assert one.returncode == -9
        assert stack.database_path.parent == tmp_path
    assert two.returncode == -9
    with pytest.raises(RuntimeError) as raised:
        await stack.start_worker()
    assert str(raised.value) == "use the test stack inside 'async with' first"


# A test process that starts a Worker and is SIGKILLed, so its stack's block never ends.
_KILLED_TEST_PROCESS = """
import asyncio, os, signal, sys
from dex_agents.testing import AgentTestStack
from tests.my_agent import build_flow

async def main() -> None:
    async with AgentTestStack(sys.argv[1], [build_flow()], "tests.my_worker") as stack:
        print((await stack.start_worker()).pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped yet is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_a_worker_ends_when_the_test_process_that_started_it_is_killed(
    tmp_path: Path,
) -> None:
    killed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_TEST_PROCESS,
        str(tmp_path),
        cwd=PACKAGE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await killed.communicate()
    assert killed.returncode == -9, err.decode()
    orphan = int(out)
    try:
        await wait_until(f"worker {orphan} to end", lambda: not is_running(orphan))
    finally:
        if is_running(orphan):  # it served the database forever
            os.killpg(orphan, signal.SIGKILL)


async def test_a_worker_that_exits_fails_start_worker_with_its_output(tmp_path: Path) -> None:
    async with AgentTestStack(
        tmp_path, [build_flow()], "tests.no_such_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        with pytest.raises(RuntimeError) as raised:
            await stack.start_worker()
    message = str(raised.value)
    assert "(tests.no_such_worker) exited with 1" in message
    assert "No module named tests.no_such_worker" in message


async def test_the_stack_prints_worker_output_when_its_block_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pids: list[int] = []

    async def fail_inside_the_stack() -> None:
        async with AgentTestStack(
            tmp_path, [build_flow()], "tests.my_worker", worker_cwd=PACKAGE_DIR
        ) as stack:
            pids.append((await stack.start_worker()).pid)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await fail_inside_the_stack()
    assert f"--- worker {pids[0]} (worker-1.log)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env", "error"),
    [
        (
            {},
            RuntimeError(
                f"{DATABASE_ENV} is not set: run the Worker through AgentTestStack.start_worker"
            ),
        ),
        (
            {DATABASE_ENV: "x.db", LEASE_SECONDS_ENV: "soon"},
            ValueError(f"{LEASE_SECONDS_ENV} must be a number of seconds, not 'soon'"),
        ),
        (
            {DATABASE_ENV: "x.db", LEASE_SECONDS_ENV: "0"},
            ValueError(f"{LEASE_SECONDS_ENV} must be positive, not '0'"),
        ),
        (
            {DATABASE_ENV: "x.db", LEASE_SECONDS_ENV: "nan"},
            ValueError(f"{LEASE_SECONDS_ENV} must be a finite number of seconds, not 'nan'"),
        ),
        (
            {DATABASE_ENV: "x.db", POLL_SECONDS_ENV: "inf"},
            ValueError(f"{POLL_SECONDS_ENV} must be a finite number of seconds, not 'inf'"),
        ),
        (
            {DATABASE_ENV: "x.db", RETRY_INTERVAL_SCALE_ENV: "fast"},
            ValueError(f"{RETRY_INTERVAL_SCALE_ENV} must be a number, not 'fast'"),
        ),
        *(
            (
                {DATABASE_ENV: "x.db", RETRY_INTERVAL_SCALE_ENV: raw},
                ValueError(
                    f"{RETRY_INTERVAL_SCALE_ENV} must be above 0 and at most 1, not {raw!r}"
                ),
            )
            for raw in ("0", "2", "nan")
        ),
    ],
)
def test_run_agent_worker_needs_the_stack_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], error: Exception
) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(type(error)) as raised:
        run_agent_worker([build_flow()])
    assert str(raised.value) == str(error)
