"""Shared pieces of the reliability suite: a small agent and file systems a test can break."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, BuiltInTool, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id} shipped"


def reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    last = ScriptedModelClient.user_texts(request)[-1]
    if results:
        return ScriptedModelReply(text=f"done: {results[-1].output}")
    if last.startswith("wait"):
        wait = {"duration_seconds": 1, "reason": "let the test break the disk meanwhile"}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.DURABLE_WAIT, wait),))
    if last.startswith("look"):
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("lookup", {"order_id": "7"}),))
    return ScriptedModelReply(text=f"echo: {last}")


def reliability_flow() -> AgentSessionFlow:
    """A session Flow with one read tool and an echoing scripted model."""
    agent = AgentDefinition(
        name="reliability",
        instructions="Answer.",
        model=ScriptedModelClient(reply),
        tools=[lookup],
        built_in_tools=frozenset({BuiltInTool.DURABLE_WAIT}),
    )
    return builtin_agent_session_flow(agent, flow_type="ReliabilityAgent")


class SmallFileSystem:
    """A tmpfs mounted at ``path`` that a test fills up and frees again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / "filler.bin"

    def fill(self) -> None:
        """Write zeros until the file system is full (it may be full already)."""
        block = b"\0" * 65536
        try:
            with self._filler.open("ab") as filler:
                while True:
                    filler.write(block)
                    filler.flush()
        except OSError:
            pass

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFileSystem]:
    """A 16 MiB tmpfs of the test's own; skipped where this process cannot mount one."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    path = tmp_path / "fs"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield SmallFileSystem(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
