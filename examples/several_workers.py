"""Several worker processes on one session database: the file is the server.

This process opens ``several-workers.sqlite3`` with ``LocalRuntime`` (a client
and one worker), then starts two more worker processes on the same file: this
script again, with the ``worker`` argument, which calls
``dex_agents.local.run_workers``. It runs four sessions at once; each calls a
slow read tool that reports the process it ran in (``os.getpid()``). Every
worker takes one Step at a time here, so the tool calls spread over the
processes. At the end it stops the extra workers with SIGTERM, which they
handle by no longer claiming work and exiting. A worker also stops when this
process ends in any other way, even ``kill -9``: its stdin, a pipe from this
process, then reaches its end.

Run it with ``uv run python examples/several_workers.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections import Counter

from dex_agents import ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.local import LocalRuntime, run_workers

DATABASE = "several-workers.sqlite3"
SESSIONS = [f"customer-{n}" for n in range(1, 5)]
SCRIPT = os.path.abspath(__file__)


@function_tool(effect=ToolEffect.READ)
def lookup_order(order_id: str) -> str:
    """Look up an order; slowly, so that the other workers take the next calls."""
    time.sleep(0.5)
    return f"order {order_id} looked up by process {os.getpid()}"


def scripted_model(request: ModelRequest) -> ScriptedModelReply:
    """Look the order up, then answer with what the tool returned."""
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=results[-1].output)
    order_id = ScriptedModelClient.user_texts(request)[-1].split()[-1]
    return ScriptedModelReply(
        tool_calls=(ScriptedToolCall("lookup_order", {"order_id": order_id}),)
    )


agent = AgentDefinition(
    name="orders",
    instructions="You look orders up.",
    model=ScriptedModelClient(scripted_model),
    tools=[lookup_order],
)
flow = builtin_agent_session_flow(agent, flow_type="OrdersAgent")


async def start_worker_process() -> asyncio.subprocess.Process:
    """This script with ``worker``: a process that serves the sessions of ``DATABASE``."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        SCRIPT,
        "worker",
        stdin=asyncio.subprocess.PIPE,  # held open until this process ends
        stdout=asyncio.subprocess.PIPE,
    )
    assert worker.stdout is not None
    await worker.stdout.readline()  # "ready": it is about to serve
    return worker


def stop_when_the_parent_ends() -> None:
    """SIGTERM this worker once stdin ends: the process that started it has exited."""
    while os.read(sys.stdin.fileno(), 4096):  # unbuffered: no lock held at exit
        pass
    os.kill(os.getpid(), signal.SIGTERM)


async def ask(runtime: LocalRuntime, session_id: str, order_id: str) -> str:
    sessions = runtime.sessions(flow)
    await sessions.open_session(session_id)
    await sessions.send_user_message(session_id, f"Where is order {order_id}")
    snapshot = await sessions.wait_for_user(session_id)
    return snapshot.messages[-1].text or ""


async def main() -> None:
    async with LocalRuntime(DATABASE, [flow], max_concurrent_tasks=1) as runtime:
        # The file exists now, so the worker processes can open it.
        workers = await asyncio.gather(start_worker_process(), start_worker_process())
        print(f"this process {os.getpid()}; worker processes {[w.pid for w in workers]}")
        try:
            answers = await asyncio.gather(
                *(ask(runtime, session, str(n)) for n, session in enumerate(SESSIONS, start=1))
            )
        finally:
            for worker in workers:
                if worker.returncode is None:
                    worker.send_signal(signal.SIGTERM)
            codes = [await worker.wait() for worker in workers]
    for session, answer in zip(SESSIONS, answers, strict=True):
        print(f"{session}: {answer}")
    per_process = Counter(answer.rsplit(" ", 1)[-1] for answer in answers)
    print(f"tool calls per process: {dict(sorted(per_process.items()))}")
    print(f"worker processes stopped with exit codes {codes}")


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        # Without this, a worker whose parent was killed would serve the file forever.
        threading.Thread(target=stop_when_the_parent_ends, daemon=True).start()
        print("ready", flush=True)
        run_workers(DATABASE, [flow], max_concurrent_tasks=1)
    else:
        asyncio.run(main())
