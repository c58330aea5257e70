"""Integration tests on a private ``dexcli dev --engine zd``: the Dex mode of ``dex_agents.testing``.

UNVERIFIED: no ``dexcli`` or Dex server could be installed where this was
written. The plumbing is tested with fake ``dexcli`` executables (finding the
binaries, the config file, a dev server that exits early, the health-check
wait, a real ``AsyncWorker`` in a Worker child against a fake FlowService, the
history parser, the shutdown). How the stack runs ``dexcli`` and reads what it
prints is ``dexcli``'s (that module's names are re-exported here). The
``-zd-config`` file holds ``dev.durabilityMode: processCrashSafe``; a
``server_zd_config`` of the caller replaces it.

Every Worker child binds the same loopback port, which the test process's
client advertises as its ``WorkerTarget``, so a replacement Worker takes over
the address of a killed one. Two live Workers bind it together through gRPC's
``SO_REUSEPORT`` (tested); how Dex spreads calls over them is not. The test
process waits for the server with ``AsyncClient.health_check()`` under a
deadline; a Worker child writes the same ready file as the embedded mode once
its ``AsyncWorker`` serves (``WorkerChildren`` starts, kills and reads them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import dex

from dex_agents.adapters.dex.dexcli import (
    DEX_SERVER_STOP_TIMEOUT_SECONDS,
    DEX_SERVER_ZD_BINARY_ENV,
    DEX_SERVER_ZD_BINARY_NAME,
    DEXCLI_COMMAND_TIMEOUT_SECONDS,
    DEXCLI_ENV,
    LOOPBACK,
    dex_dev_command,
    flow_history_command,
    parse_flow_history,
    read_flow_history,
    resolve_dex_server_zd,
    resolve_dexcli,
    start_dex_dev,
    stop_dex_dev,
)
from dex_agents.adapters.dex.flow_client import DexFlowClient
from dex_agents.adapters.local.probes import wait_until, write_atomically
from dex_agents.adapters.local.worker_children import (
    READY_DIR_ENV,
    WORKER_DIR_NAME,
    WORKER_START_TIMEOUT_SECONDS,
    WorkerChildren,
    WorkerChildrenOwner,
    end_with_parent,
    ready_file,
)
from dex_agents.ports.engine import FlowDefinition
from dex_agents.ports.flow_client import StepHistoryEntry

SERVER_ADDRESS_ENV = "DEX_AGENTS_TEST_DEX_SERVER_ADDRESS"
"""The variable naming the Dex server a Worker child serves; set, it makes the child a Dex Worker."""

WORKER_BIND_ADDRESS_ENV = "DEX_AGENTS_TEST_DEX_WORKER_BIND_ADDRESS"
"""The ``host:port`` every Dex Worker child listens on, the target the client advertises."""

ZD_CONFIG_NAME = "dex-zd-config.yaml"
"""The ``-zd-config`` file the stack writes into ``tmp_path``."""

DEFAULT_ZD_CONFIG = "dev:\n  durabilityMode: processCrashSafe\n"
"""The engine config: no fsync, yet a process kill loses nothing."""

DEX_DEV_LOG_NAME = "dexcli-dev.log"
"""The dev server's output in ``tmp_path``."""

DEX_SERVER_START_TIMEOUT_SECONDS = 60.0
"""How long ``__aenter__`` waits for the dev server to answer a health check."""

HEALTH_CHECK_TIMEOUT_SECONDS = 2.0
"""The deadline of one health check."""

BLOB_CACHE_BYTES = 64 * 1024 * 1024
"""The size of each process's Dex blob cache."""


def free_loopback_port() -> int:
    """A TCP port on ``127.0.0.1`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def dex_flows(flows: Sequence[FlowDefinition]) -> list[dex.Flow[Any]]:
    """``flows`` as ``dex.Flow``s (an ``AgentSessionFlow`` is one); ``TypeError`` for any other."""
    checked: list[dex.Flow[Any]] = []
    for flow in flows:
        if not isinstance(flow, dex.Flow):
            raise TypeError(
                f"the Dex mode needs dex.Flow instances such as AgentSessionFlow, "
                f"not {type(flow).__name__} ({flow.flow_type})"
            )
        checked.append(flow)
    return checked


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-4000:]
    except FileNotFoundError:
        return ""


class DexAgentTestStack(WorkerChildrenOwner):
    """A private ``dexcli dev --engine zd``, this process's Dex client, and Worker children.

    The same surface as ``LocalAgentTestStack``: an async context manager whose
    ``client`` is a ``FlowClient`` (``DexFlowClient`` over ``dex_client``, a
    ``dex.AsyncClient``), ``start_worker``, ``kill_all``, ``worker_logs`` and
    ``read_step_history``. On exit it kills the Workers, closes the client,
    stops the dev server and closes the blob cache. Unverified against a real
    server (see the module docstring).
    """

    def __init__(
        self,
        tmp_path: str | os.PathLike[str],
        flows: Sequence[FlowDefinition],
        worker_module: str,
        *,
        dexcli: str | os.PathLike[str],
        worker_cwd: str | os.PathLike[str] | None = None,
        worker_env: Mapping[str, str] | None = None,
        server_zd_config: str | os.PathLike[str] | None = None,
    ) -> None:
        self.tmp_path = Path(tmp_path)
        self.children = WorkerChildren(worker_module, self.tmp_path / WORKER_DIR_NAME, worker_cwd)
        self.flows = dex_flows(flows)
        self.dexcli = Path(dexcli)
        self.worker_env = dict(worker_env or {})
        self.server_zd_config = None if server_zd_config is None else Path(server_zd_config)
        self.zd_config_path = self.tmp_path / ZD_CONFIG_NAME
        self.server_log_path = self.tmp_path / DEX_DEV_LOG_NAME
        self.server_address = ""
        self.worker_address = ""
        self._server: subprocess.Popen[bytes] | None = None
        self._cache: dex.BlobCache | None = None
        self._dex_client: dex.AsyncClient | None = None
        self._client: DexFlowClient | None = None

    @property
    def dex_client(self) -> dex.AsyncClient:
        """This process's ``dex.AsyncClient`` (inside the ``async with`` block only)."""
        if self._dex_client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return self._dex_client

    @property
    def client(self) -> DexFlowClient:
        """This process's engine client, a ``FlowClient`` over ``dex_client``."""
        if self._client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return self._client

    @property
    def server_process(self) -> subprocess.Popen[bytes] | None:
        """The ``dexcli dev`` process while the stack runs, else ``None``."""
        return self._server

    def server_output(self) -> str:
        """The last 4000 characters the dev server wrote."""
        return _tail(self.server_log_path)

    def _zd_config(self) -> Path:
        if self.server_zd_config is not None:
            if not self.server_zd_config.is_file():
                raise RuntimeError(
                    f"server_zd_config names no file: {str(self.server_zd_config)!r}"
                )
            return self.server_zd_config
        self.zd_config_path.write_text(DEFAULT_ZD_CONFIG, encoding="utf-8")
        return self.zd_config_path

    async def __aenter__(self) -> Self:
        dexcli = resolve_dexcli(self.dexcli)
        server_zd = resolve_dex_server_zd(dexcli, os.environ)
        self.worker_dir.mkdir(parents=True, exist_ok=True)
        zd_config = self._zd_config()
        dex_port, web_port = free_loopback_port(), free_loopback_port()
        self.server_address = f"{LOOPBACK}:{dex_port}"
        self.worker_address = f"{LOOPBACK}:{free_loopback_port()}"
        try:
            self._cache = dex.open_blob_cache(
                dex.BlobCacheConfig(str(self.tmp_path / "dex-blob-cache"), BLOB_CACHE_BYTES)
            )
            options = dex.ClientOptions(
                server_address=self.server_address,
                worker_target=dex.WorkerTarget(address=self.worker_address),
            )
            registry = dex.Registry(self.flows, allow_async_handlers=True)
            self._dex_client = dex.AsyncClient(registry, self._cache, options)
            command = dex_dev_command(dexcli, zd_config, dex_port, web_port)
            self._server = start_dex_dev(command, server_zd, self.server_log_path)
            await self._wait_until_answering(self._server, self._dex_client)
            self._client = DexFlowClient(self._dex_client)
        except BaseException:
            await self._shut_down()
            raise
        return self

    async def _wait_until_answering(
        self, server: subprocess.Popen[bytes], client: dex.AsyncClient
    ) -> bool:
        async def answers() -> bool:
            if server.poll() is not None:
                raise RuntimeError(
                    f"dexcli dev exited with {server.returncode} before it answered on "
                    f"{self.server_address}; its output:\n{self.server_output()}"
                )
            try:
                return await asyncio.wait_for(client.health_check(), HEALTH_CHECK_TIMEOUT_SECONDS)
            except (dex.DexServiceError, TimeoutError):
                return False

        description = f"dexcli dev to answer on {self.server_address}"
        try:
            return await wait_until(description, answers, DEX_SERVER_START_TIMEOUT_SECONDS)
        except TimeoutError as error:
            raise TimeoutError(f"{error}; its output:\n{self.server_output()}") from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.kill_all()
            print(self.worker_logs(), file=sys.stderr)
            print(f"--- dexcli dev\n{self.server_output()}", file=sys.stderr)
        await self._shut_down()

    async def _shut_down(self) -> None:
        self.kill_all()
        client, self._dex_client, self._client = self._dex_client, None, None
        if client is not None:
            await client.close()
        server, self._server = self._server, None
        if server is not None:
            await stop_dex_dev(server)
        cache, self._cache = self._cache, None
        if cache is not None:
            cache.close()

    def _worker_child_env(self) -> dict[str, str]:
        if self._client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return {
            **self.worker_env,
            SERVER_ADDRESS_ENV: self.server_address,
            WORKER_BIND_ADDRESS_ENV: self.worker_address,
        }

    async def read_step_history(self, session_id: str) -> list[StepHistoryEntry]:
        """The session's completed Steps, oldest first, through ``dexcli flow history`` (unverified)."""
        if self._client is None:
            raise RuntimeError("use the test stack inside 'async with' first")
        return await read_flow_history(self.dexcli, self.server_address, session_id)


def _serving(worker: dex.AsyncWorker, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
        raise RuntimeError("the Dex Worker stopped before it served")
    # SDK 1.23.0 has no public "listening" signal; its state turns "running" once bound.
    return getattr(worker, "_state", None) == "running"


async def serve_dex_agent_worker(
    flows: Sequence[FlowDefinition],
    server_address: str,
    bind_address: str,
    *,
    ready_dir: Path | None = None,
    blob_cache_dir: Path | None = None,
) -> None:
    """Serve ``flows`` in a ``dex.AsyncWorker`` listening on ``bind_address`` until SIGTERM or SIGINT.

    It writes ``worker-<pid>.ready`` into ``ready_dir`` once the Worker serves;
    ``blob_cache_dir`` (a temporary directory by default) holds its blob cache.
    """
    registry = dex.Registry(dex_flows(flows), allow_async_handlers=True)
    with contextlib.ExitStack() as cleanup:
        if blob_cache_dir is None:
            blob_cache_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory()))
        cache = dex.open_blob_cache(dex.BlobCacheConfig(str(blob_cache_dir), BLOB_CACHE_BYTES))
        cleanup.callback(cache.close)
        options = dex.WorkerOptions(server_address=server_address, bind_address=bind_address)
        worker = dex.AsyncWorker(registry, cache, options)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
            cleanup.callback(loop.remove_signal_handler, signum)
        serving = asyncio.create_task(worker.start())
        try:
            await wait_until(
                f"the Dex Worker on {bind_address} to serve",
                lambda: _serving(worker, serving),
                WORKER_START_TIMEOUT_SECONDS,
            )
            if ready_dir is not None:
                write_atomically(ready_file(ready_dir, os.getpid()), "ready")
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
        finally:
            await worker.close()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


def run_dex_agent_worker(flows: Sequence[FlowDefinition], env: Mapping[str, str]) -> None:
    """The Dex Worker child's entry point: ``env`` names the server, the bind address and
    the ready directory (``start_worker`` sets them); it ends once the test process
    that started it is gone."""
    server_address = env.get(SERVER_ADDRESS_ENV, "")
    bind_address = env.get(WORKER_BIND_ADDRESS_ENV, "")
    if not server_address or not bind_address:
        raise RuntimeError(
            f"{SERVER_ADDRESS_ENV} and {WORKER_BIND_ADDRESS_ENV} must both be set: "
            "run the Worker through AgentTestStack.start_worker"
        )
    ready = env.get(READY_DIR_ENV)
    ready_dir = Path(ready) if ready else None
    end_with_parent(env)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s pid {os.getpid()} %(name)s: %(message)s"
    )
    asyncio.run(
        serve_dex_agent_worker(
            flows,
            server_address,
            bind_address,
            ready_dir=ready_dir,
            blob_cache_dir=None if ready_dir is None else ready_dir / f"blob-cache-{os.getpid()}",
        )
    )


__all__ = [
    "BLOB_CACHE_BYTES",
    "DEFAULT_ZD_CONFIG",
    "DEXCLI_COMMAND_TIMEOUT_SECONDS",
    "DEXCLI_ENV",
    "DEX_DEV_LOG_NAME",
    "DEX_SERVER_START_TIMEOUT_SECONDS",
    "DEX_SERVER_STOP_TIMEOUT_SECONDS",
    "DEX_SERVER_ZD_BINARY_ENV",
    "DEX_SERVER_ZD_BINARY_NAME",
    "HEALTH_CHECK_TIMEOUT_SECONDS",
    "LOOPBACK",
    "SERVER_ADDRESS_ENV",
    "WORKER_BIND_ADDRESS_ENV",
    "ZD_CONFIG_NAME",
    "DexAgentTestStack",
    "dex_dev_command",
    "dex_flows",
    "flow_history_command",
    "free_loopback_port",
    "parse_flow_history",
    "resolve_dex_server_zd",
    "resolve_dexcli",
    "run_dex_agent_worker",
    "serve_dex_agent_worker",
]
