"""The ``dexcli`` command line as the Dex mode of ``dex_agents.testing`` uses it.

Finding ``dexcli`` and ``dex-server-zd``, starting and stopping ``dexcli dev``,
and running ``dexcli flow history`` and reading what it prints. UNVERIFIED: no
``dexcli`` could be installed where this was written; the flags and the output
format are this module's best reading of the spec and of the public ``dexcli``
source:

- ``dexcli dev --engine zd -zd-config <file> --open=false --bind-address
  127.0.0.1 --dex-port <p> --web-port <q>`` starts the server, with
  ``dex-server-zd`` next to ``DEXCLI`` or at ``DEX_SERVER_ZD_BINARY`` (passed on
  in its environment); SIGTERM stops it and the server it started.
- ``dexcli flow history --server <address> --output json --all --no-hydrate
  <flow_id>`` prints ``{"events": [{"type": "StepExecuteCompleted", "payload":
  {"context": {"stepType", "stepExecutionId", "finalAttempt"}}}, ...]}``
  (protobuf JSON of ``FlowHistoryEvent``, as the public ``dexcli`` source
  prints it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dex_agents.ports.flow_client import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    StepHistoryEntry,
)

DEXCLI_ENV = "DEXCLI"
"""The variable naming the ``dexcli`` executable; when set, ``AgentTestStack`` runs on Dex."""

DEX_SERVER_ZD_BINARY_ENV = "DEX_SERVER_ZD_BINARY"
"""The variable naming ``dex-server-zd`` when it is not next to ``dexcli``."""

DEX_SERVER_ZD_BINARY_NAME = "dex-server-zd"
"""The server binary ``dexcli dev --engine zd`` runs."""

LOOPBACK = "127.0.0.1"
"""The only interface the dev server and the Workers listen on."""

DEX_SERVER_STOP_TIMEOUT_SECONDS = 10.0
"""How long the dev server may take to stop on SIGTERM before its process group is SIGKILLed."""

DEXCLI_COMMAND_TIMEOUT_SECONDS = 60.0
"""How long one ``dexcli flow history`` may run."""

_STEP_EVENTS = {
    "StepExecuteCompleted": EXECUTE_COMPLETED_EVENT,
    "StepExecuteFailed": EXECUTE_FAILED_EVENT,
}


def resolve_dexcli(value: str | os.PathLike[str]) -> Path:
    """The ``dexcli`` executable ``DEXCLI`` names; ``RuntimeError`` naming it if there is none."""
    path = Path(value)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(f"{DEXCLI_ENV} names no executable file: {str(path)!r}")
    return path


def resolve_dex_server_zd(dexcli: Path, env: Mapping[str, str]) -> Path:
    """``DEX_SERVER_ZD_BINARY``, else ``dex-server-zd`` next to ``dexcli``; it must exist."""
    named = env.get(DEX_SERVER_ZD_BINARY_ENV)
    path = Path(named) if named else dexcli.parent / DEX_SERVER_ZD_BINARY_NAME
    if not path.is_file():
        where = f"{DEX_SERVER_ZD_BINARY_ENV}={named!r}" if named else f"next to {DEXCLI_ENV}"
        raise RuntimeError(f"no {DEX_SERVER_ZD_BINARY_NAME} at {str(path)!r} ({where})")
    return path


def dex_dev_command(dexcli: Path, zd_config: Path, dex_port: int, web_port: int) -> list[str]:
    """The ``dexcli dev`` command line of a private engine on loopback (flags unverified)."""
    engine = ["dev", "--engine", "zd", "-zd-config", str(zd_config), "--open=false"]
    ports = ["--bind-address", LOOPBACK, "--dex-port", str(dex_port), "--web-port", str(web_port)]
    return [str(dexcli), *engine, *ports]


def start_dex_dev(
    command: Sequence[str], server_zd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Run ``command`` (``dex_dev_command``) with ``DEX_SERVER_ZD_BINARY`` set to ``server_zd``.

    The process runs in its own session, its stdout and stderr going to ``log_path``.
    """
    # Its own session lets the stack stop dexcli and the server it started together.
    with log_path.open("wb") as output:
        return subprocess.Popen(
            command,
            env={**os.environ, DEX_SERVER_ZD_BINARY_ENV: str(server_zd)},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def stop_dex_dev(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the dev server's process group, SIGKILL it after ``DEX_SERVER_STOP_TIMEOUT_SECONDS``,
    and wait until ``dexcli`` is gone."""
    # SIGTERM lets dexcli stop the server it started; SIGKILL then ends whatever stayed.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(process.wait, DEX_SERVER_STOP_TIMEOUT_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await asyncio.to_thread(process.wait)


def flow_history_command(dexcli: Path, server_address: str, flow_id: str) -> list[str]:
    """The ``dexcli flow history`` command line listing every event of a Flow (flags unverified)."""
    options = ["--server", server_address, "--output", "json", "--all", "--no-hydrate"]
    return [str(dexcli), "flow", "history", *options, flow_id]


def _context_field(index: int, kind: str, context: Mapping[str, Any], name: str) -> str:
    value = context.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"dexcli flow history event {index} ({kind}) has no 'payload.context.{name}' string"
        )
    return value


def _final_attempt(index: int, kind: str, context: Mapping[str, Any]) -> int:
    # Protobuf JSON leaves a zero int32 out and may print an integer as a string.
    value = context.get("finalAttempt", 0)
    if isinstance(value, str) and value.isdecimal():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(
        f"dexcli flow history event {index} ({kind}) has a 'payload.context.finalAttempt' "
        f"that is not a whole number: {value!r}"
    )


def parse_flow_history(text: str) -> list[StepHistoryEntry]:
    """The completed and failed Step executions in ``dexcli flow history`` JSON, oldest first.

    ``StepExecuteCompleted`` becomes ``EXECUTE_COMPLETED``, ``StepExecuteFailed``
    ``EXECUTE_FAILED``; other events (WaitFor, RPCs, Flow start and close) are
    skipped. Anything else than the expected shape raises ``ValueError`` naming
    the event and the field. The format is read from ``dexcli``'s source, not
    from a run (unverified).
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"dexcli flow history printed no JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}: {text[:200]!r}"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        raise ValueError(
            f"dexcli flow history printed no object with an 'events' list: {text[:200]!r}"
        )
    entries = []
    for index, event in enumerate(document["events"]):
        if not isinstance(event, dict):
            raise ValueError(f"dexcli flow history event {index} is not an object: {event!r}")
        kind = event.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"dexcli flow history event {index} has no 'type' string")
        event_type = _STEP_EVENTS.get(kind)
        if event_type is None:
            continue
        payload = event.get("payload")
        context = payload.get("context") if isinstance(payload, dict) else None
        if not isinstance(context, dict):
            raise ValueError(
                f"dexcli flow history event {index} ({kind}) has no 'payload.context' object"
            )
        entries.append(
            StepHistoryEntry(
                event_type=event_type,
                step_type=_context_field(index, kind, context, "stepType"),
                step_execution_id=_context_field(index, kind, context, "stepExecutionId"),
                final_attempt=_final_attempt(index, kind, context),
            )
        )
    return entries


async def read_flow_history(
    dexcli: Path, server_address: str, flow_id: str
) -> list[StepHistoryEntry]:
    """Run ``dexcli flow history`` for ``flow_id`` and parse what it prints (unverified).

    A ``dexcli`` that exits with a non-zero status raises ``RuntimeError`` with
    the command line and the end of its stderr; one that runs longer than
    ``DEXCLI_COMMAND_TIMEOUT_SECONDS`` raises ``subprocess.TimeoutExpired``.
    """
    command = flow_history_command(dexcli, server_address, flow_id)
    done = await asyncio.to_thread(
        subprocess.run,
        command,
        capture_output=True,
        text=True,
        timeout=DEXCLI_COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} exited with {done.returncode}:\n{done.stderr[-4000:]}"
        )
    return parse_flow_history(done.stdout)
