"""Worker child processes of a test stack: ``python -m <worker_module>`` a test can SIGKILL.

Each child runs in its own session, so it leads a process group and
``WorkerProcess.kill()`` takes down anything its Worker started too. The child
writes ``worker-<pid>.ready`` into the directory ``DEX_AGENTS_TEST_READY_DIR``
names once its Worker runs; ``WorkerChildren.start`` waits for that file. A
child ends itself once the test process that started it is gone
(``end_with_parent``), so a test process killed before its stack's block ended
leaves no Worker behind. Both
engines' test stacks (``LocalAgentTestStack``, ``DexAgentTestStack``) start
their children through ``WorkerChildren``, each with its own environment
variables, and share their Worker surface (``start_worker``, ``kill_all``,
``worker_logs``, ``workers``, ``worker_dir``) through ``WorkerChildrenOwner``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path

from dex_agents.adapters.local.probes import wait_until

READY_DIR_ENV = "DEX_AGENTS_TEST_READY_DIR"
"""The variable that names the directory where a Worker child writes ``worker-<pid>.ready``."""

PARENT_PID_ENV = "DEX_AGENTS_TEST_PARENT_PID"
"""The variable naming the test process that started a Worker child, which ends with it."""

PARENT_CHECK_SECONDS = 0.2
"""How often a Worker child looks whether the test process that started it is still there."""

WORKER_START_TIMEOUT_SECONDS = 20.0
"""How long ``start_worker`` waits for a child's Worker to run."""

WORKER_DIR_NAME = "dex-agents-workers"
"""The directory in ``tmp_path`` with each child's output and ready file."""

# A failure message shows the last 4000 characters of a child's output.
_OUTPUT_TAIL = 4000


class WorkerProcess:
    """A running Worker child; ``kill()`` SIGKILLs its process group and reaps it."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group ID."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once it ended (``-9`` after ``kill``), else ``None``."""
        return self.process.poll()

    def kill(self) -> None:
        """SIGKILL the child's whole process group at once and wait until it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def output(self) -> str:
        """What the child wrote to stdout and stderr so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


def end_with_parent(env: Mapping[str, str]) -> None:
    """In a Worker child: SIGKILL its process group once the test process that started it is gone.

    The stack kills its children when its block ends, but a test process that is
    itself SIGKILLed (a CI timeout, a second Ctrl-C) never gets there; its
    children, each in a session of its own, then served the test's database
    forever. ``PARENT_PID_ENV`` names the test process; without it (a Worker not
    started by a stack) nothing is watched.
    """
    raw = env.get(PARENT_PID_ENV)
    # Not handed down: a process the Worker starts has another parent, and one that
    # called this would end itself at once.
    os.environ.pop(PARENT_PID_ENV, None)
    if not raw:
        return
    try:
        parent = int(raw)
    except ValueError:
        raise ValueError(f"{PARENT_PID_ENV} must be a process ID, not {raw!r}") from None

    def watch() -> None:
        # A child whose parent ended is handed to another process: its parent ID changes.
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        group = os.getpgrp()
        # As WorkerProcess.kill(): the whole group, so what the Worker started ends too.
        if group == os.getpid():
            os.killpg(group, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="dex-agents-test-parent-watch", daemon=True).start()


def ready_file(ready_dir: Path, pid: int) -> Path:
    """The file a Worker child writes once its Worker runs."""
    return ready_dir / f"worker-{pid}.ready"


class WorkerChildren:
    """The Worker children of one test stack, oldest first in ``workers``.

    Each is ``python -m <worker_module>`` run in ``worker_cwd``, writing its
    output to ``worker-<n>.log`` in ``worker_dir`` (which the stack creates) and
    its ready file there too. An empty ``worker_module`` is a ``ValueError``.
    """

    def __init__(
        self,
        worker_module: str,
        worker_dir: Path,
        worker_cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if not worker_module:
            raise ValueError("worker_module must name a module to run with python -m")
        self.worker_module = worker_module
        self.worker_dir = worker_dir
        self.worker_cwd = None if worker_cwd is None else Path(worker_cwd)
        self.workers: list[WorkerProcess] = []

    def _spawn(self, env: Mapping[str, str]) -> WorkerProcess:
        # Its own session makes the child a process group leader, so kill() takes
        # down anything the Worker started too.
        log_path = self.worker_dir / f"worker-{len(self.workers) + 1}.log"
        with log_path.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", self.worker_module],
                cwd=self.worker_cwd,
                env={
                    **os.environ,
                    **env,
                    READY_DIR_ENV: str(self.worker_dir),
                    PARENT_PID_ENV: str(os.getpid()),
                },
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(process, log_path)
        self.workers.append(worker)
        return worker

    async def start(self, env: Mapping[str, str]) -> WorkerProcess:
        """Start a child with ``env`` over this process's environment; return once its Worker runs.

        ``DEX_AGENTS_TEST_READY_DIR`` is set to ``worker_dir`` whatever ``env``
        says. A child that exits first raises ``RuntimeError`` with its exit
        status and output; one not ready within ``WORKER_START_TIMEOUT_SECONDS``
        raises ``TimeoutError``.
        """
        worker = self._spawn(env)
        process = worker.process

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(
                    f"worker {process.pid} ({self.worker_module}) exited with "
                    f"{process.returncode}:\n{worker.output()[-_OUTPUT_TAIL:]}"
                )
            return ready_file(self.worker_dir, process.pid).exists()

        await wait_until(f"worker {process.pid} to run", ready, WORKER_START_TIMEOUT_SECONDS)
        return worker

    def kill_all(self) -> None:
        """SIGKILL every child still running."""
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.kill()

    def logs(self) -> str:
        """Every child's output, for a failure message."""
        return "\n".join(
            f"--- worker {worker.pid} ({worker.log_path.name})\n{worker.output()[-_OUTPUT_TAIL:]}"
            for worker in self.workers
        )


class WorkerChildrenOwner(ABC):
    """The Worker-children surface both test stacks share, over their ``children``.

    A stack sets ``children`` in its ``__init__`` and gives, in
    ``_worker_child_env``, the variables its engine's Worker child needs.
    """

    children: WorkerChildren

    @abstractmethod
    def _worker_child_env(self) -> dict[str, str]:
        """The child's variables; ``RuntimeError`` outside the stack's ``async with`` block."""

    @property
    def worker_module(self) -> str:
        """The module each Worker child runs with ``python -m``."""
        return self.children.worker_module

    @property
    def worker_cwd(self) -> Path | None:
        """The directory the Worker children run in (this process's when ``None``)."""
        return self.children.worker_cwd

    @property
    def worker_dir(self) -> Path:
        """The directory with each Worker child's output and ready file."""
        return self.children.worker_dir

    @property
    def workers(self) -> list[WorkerProcess]:
        """Every Worker child started so far, oldest first."""
        return self.children.workers

    async def start_worker(self) -> WorkerProcess:
        """Start ``python -m <worker_module>`` in its own process group; return once its Worker runs."""
        return await self.children.start(self._worker_child_env())

    def kill_all(self) -> None:
        """SIGKILL every Worker child still running."""
        self.children.kill_all()

    def worker_logs(self) -> str:
        """Every child's output, for a failure message."""
        return self.children.logs()
