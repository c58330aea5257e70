"""Probes for tests with Worker child processes: file gates, invocation logs, deadlines.

``FileGate`` stops a tool or a model call inside a Worker child at an exact
point, ``InvocationLog`` counts real calls across processes, and ``wait_until``
and ``wait_for_agent_snapshot`` poll with a deadline instead of sleeping. They
work through files, so they work across any processes that share a directory.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, cast

from dex_agents.domain.requests import AgentSnapshot

T = TypeVar("T")

DEFAULT_WAIT_TIMEOUT_SECONDS = 10.0
"""How long ``wait_until``, ``wait_for_agent_snapshot`` and ``wait_until_reached`` wait by default."""

POLL_SECONDS = 0.02
"""How often the probes look again."""


def _keeps_waiting(value: object) -> bool:
    return value is None or value is False


async def wait_until(
    description: str,
    probe: Callable[[], T | Awaitable[T | None] | None],
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,  # noqa: ASYNC109 - the spec's signature
) -> T:
    """Poll ``probe`` (sync or async) every 20 ms until it returns a value other than
    ``None`` or ``False``, and return that value.

    Raises ``TimeoutError`` naming ``description`` after ``timeout`` seconds, also
    when an async probe has not returned by then; a ``timeout`` that is not a
    number, or is NaN or negative, is a ``TypeError`` or ``ValueError``.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if math.isnan(timeout):
        raise ValueError("timeout must be a number of seconds, not NaN")  # it never passes
    if timeout < 0:
        # It was taken, and the first probe's miss read "timed out after -5 s".
        raise ValueError(f"timeout must not be negative, not {timeout}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = probe()
        if inspect.isawaitable(outcome):
            # An async probe that never returns (a read blocked on a lock or a dead
            # server) hung the test forever instead of failing it at the deadline.
            limit = asyncio.timeout_at(deadline)
            try:
                async with limit:
                    outcome = await outcome
            except TimeoutError:
                if not limit.expired():
                    raise  # the probe's own TimeoutError
                raise TimeoutError(
                    f"timed out after {timeout:g} s waiting for {description} "
                    "(the probe had not returned)"
                ) from None
        if not _keeps_waiting(outcome):
            return cast(T, outcome)
        if loop.time() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {description}")
        await asyncio.sleep(POLL_SECONDS)


class SnapshotReader(Protocol):
    """What ``wait_for_agent_snapshot`` reads: an ``AgentSessionClient``."""

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """The session's snapshot."""
        ...


async def wait_for_agent_snapshot(
    sessions: SnapshotReader,
    session_id: str,
    probe: Callable[[AgentSnapshot], T | None],
    *,
    description: str = "the agent snapshot",
    timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,  # noqa: ASYNC109 - the spec's signature
) -> T:
    """Poll ``get_agent_snapshot`` until ``probe`` returns a value other than ``None`` or
    ``False``, and return it; ``TimeoutError`` with the last snapshot after ``timeout`` seconds."""
    last: list[AgentSnapshot] = []

    async def check() -> T | None:
        snapshot = await sessions.get_agent_snapshot(session_id)
        last[:] = [snapshot]
        return probe(snapshot)

    try:
        return await wait_until(f"{description} in session {session_id!r}", check, timeout)
    except TimeoutError as error:
        seen = repr(last[0])[:4000] if last else "none"
        raise TimeoutError(f"{error}; last snapshot: {seen}") from None


def _check_file_name(kind: str, name: str) -> None:
    # A NUL was kept, and the gate failed later in the child with "embedded null byte".
    if not name or "/" in name or "\n" in name or "\0" in name or name.startswith("."):
        raise ValueError(
            f"{kind} name must be non-empty, not start with '.', and hold no '/', "
            f"newline or NUL: {name!r}"
        )


class FileGate:
    """A point inside a Worker child where a tool or a model call stops until the test says go.

    In the child, ``await gate.wait_for_release()`` marks the gate reached (with
    the child's pid) and polls for its release. In the test, ``await
    gate.wait_until_reached()`` returns once it is reached; the test kills the
    Worker there, or calls ``release()``. The gate is two files in ``state_dir``:
    ``<name>.reached`` and ``<name>.released``.
    """

    def __init__(self, state_dir: str | os.PathLike[str], name: str) -> None:
        _check_file_name("a gate", name)
        self.state_dir = Path(state_dir)
        self.name = name
        self.reached_path = self.state_dir / f"{name}.reached"
        self.released_path = self.state_dir / f"{name}.released"

    async def wait_for_release(self, poll_interval: float = POLL_SECONDS) -> None:
        """Mark the gate reached and wait until the test releases it (in the Worker child)."""
        write_atomically(self.reached_path, str(os.getpid()))
        # Another process releases the gate, so no Event could tell; a stat every
        # 20 ms costs nothing.
        while not self.released_path.exists():  # noqa: ASYNC110
            await asyncio.sleep(poll_interval)

    def reached_by(self) -> int | None:
        """The pid of the process that reached the gate last, or ``None`` before any did."""
        try:
            return int(self.reached_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    async def wait_until_reached(
        self,
        timeout: float = DEFAULT_WAIT_TIMEOUT_SECONDS,  # noqa: ASYNC109 - the spec's signature
    ) -> int:
        """Wait until a process reached the gate; return that process's pid."""
        return await wait_until(f"gate {self.name!r} to be reached", self.reached_by, timeout)

    def release(self) -> None:
        """Let every waiter at the gate, now and later, go on."""
        write_atomically(self.released_path, "released")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader in another process sees all of it or no file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


@dataclass(frozen=True)
class Invocation:
    """One line of an ``InvocationLog``: which process made which call."""

    pid: int
    name: str


class InvocationLog:
    """Real tool and model calls, counted across Worker processes in one append-only file.

    ``record(name)`` appends ``<pid> <name>`` in one ``O_APPEND`` write, so the
    lines of concurrent processes never interleave; it creates the file's
    directory first, as ``FileGate`` does its own.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def record(self, name: str) -> None:
        """Append one invocation of ``name`` by this process."""
        if not name or "\n" in name:
            raise ValueError(f"an invocation name must be non-empty and one line: {name!r}")
        line = f"{os.getpid()} {name}\n".encode()
        # Without it a log under a directory no one had made yet failed the tool or
        # model call that recorded it, inside the Worker child, with FileNotFoundError.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)

    def entries(self) -> list[Invocation]:
        """Every recorded invocation, oldest first."""
        try:
            # Bytes, not read_text(): universal newlines would turn a "\r" into "\n".
            text = self.path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return []
        entries = []
        # Split on "\n" only, the one separator record() refuses in a name:
        # splitlines() also split a name at "\r" or "\u2028", and entries() then
        # failed with "not enough values to unpack".
        for line in text.split("\n")[:-1]:
            pid, name = line.split(" ", 1)
            entries.append(Invocation(int(pid), name))
        return entries

    def count(self, name: str) -> int:
        """How many times ``name`` was recorded, by any process."""
        return sum(1 for entry in self.entries() if entry.name == name)
