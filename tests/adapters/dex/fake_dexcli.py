"""Fake ``dexcli`` executables for the Dex mode of ``dex_agents.testing``.

:func:`fake_dexcli` writes a shell ``dexcli`` that runs a given body (to test how the
stack fails); :func:`serving_dexcli` writes a Python one whose ``dev`` serves the
in-process fake FlowService (``fake_dex_server``) and whose ``flow history`` prints
:data:`SAMPLE_HISTORY`. Both record nothing of a real Dex server's behaviour.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from dex_agents.ports.flow_client import StepHistoryEntry

REPO_ROOT = Path(__file__).resolve().parents[3]

SAMPLE_HISTORY = {
    "flowId": "session-1",
    "runId": "run-1",
    "nextPageToken": "",
    "events": [
        {"eventId": "1", "type": "FlowStartedOrContinued", "payload": {}},
        {
            "eventId": "2",
            "type": "StepWaitForCompleted",
            "payload": {"context": {"stepType": "Start", "stepExecutionId": "Start-1"}},
        },
        {
            "eventId": "3",
            "type": "StepExecuteCompleted",
            "payload": {
                "context": {"stepType": "Start", "stepExecutionId": "Start-1", "finalAttempt": 1}
            },
        },
        {"eventId": "4", "type": "RpcExecutionCompleted", "payload": {"rpcName": "x"}},
        {
            "eventId": "5",
            "type": "StepExecuteFailed",
            "payload": {
                "context": {"stepType": "Tool", "stepExecutionId": "Tool-2", "finalAttempt": "3"}
            },
        },
        {
            "eventId": "6",
            "type": "StepExecuteCompleted",
            "payload": {"context": {"stepType": "Model", "stepExecutionId": "Model-1"}},
        },
    ],
}
SAMPLE_ENTRIES = [
    StepHistoryEntry("EXECUTE_COMPLETED", "Start", "Start-1", 1),
    StepHistoryEntry("EXECUTE_FAILED", "Tool", "Tool-2", 3),
    StepHistoryEntry("EXECUTE_COMPLETED", "Model", "Model-1", 0),
]
"""The Step executions ``parse_flow_history`` keeps from :data:`SAMPLE_HISTORY`."""


def executable(path: Path, text: str) -> Path:
    """Write an executable script."""
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_dexcli(directory: Path, body: str) -> Path:
    """A shell ``dexcli`` running ``body``, with a ``dex-server-zd`` next to it."""
    directory.mkdir(parents=True, exist_ok=True)
    executable(directory / "dex-server-zd", "#!/bin/sh\nexit 0\n")
    return executable(directory / "dexcli", f"#!/bin/sh\n{body}\n")


_SERVING_DEXCLI = '''#!{python}
"""A fake dexcli: `dev` serves the fake FlowService, `flow history` prints a document."""
import asyncio, json, signal, sys
from pathlib import Path

sys.path.insert(0, {root!r})
HERE = Path(__file__).parent
with (HERE / "calls.jsonl").open("a") as calls:
    calls.write(json.dumps(sys.argv[1:]) + "\\n")


async def serve(port):
    import grpc
    from dex.dexpb import dex_pb2 as pb, dex_pb2_grpc
    from tests.adapters.dex.fake_dex_server import FakeFlowService

    class Healthy(FakeFlowService):
        async def HealthCheck(self, request, context):
            return pb.HealthInfo()

    server = grpc.aio.server()
    dex_pb2_grpc.add_FlowServiceServicer_to_server(Healthy(), server)
    server.add_insecure_port(f"127.0.0.1:{{port}}")
    await server.start()
    print("fake dex serving", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(None)
    print("fake dex stopped", flush=True)


if sys.argv[1] == "dev":
    asyncio.run(serve(int(sys.argv[sys.argv.index("--dex-port") + 1])))
elif sys.argv[1:3] == ["flow", "history"]:
    print((HERE / "history.json").read_text())
'''


def serving_dexcli(directory: Path) -> Path:
    """A Python ``dexcli`` serving the fake FlowService, with a ``dex-server-zd`` next to it.

    Each run appends its arguments to ``calls.jsonl`` beside it; ``flow history`` prints
    :data:`SAMPLE_HISTORY`.
    """
    dexcli = fake_dexcli(directory, "")
    executable(dexcli, _SERVING_DEXCLI.format(python=sys.executable, root=str(REPO_ROOT)))
    (directory / "history.json").write_text(json.dumps(SAMPLE_HISTORY), encoding="utf-8")
    return dexcli
