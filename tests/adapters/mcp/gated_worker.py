"""The Worker child of the MCP phase crash tests: ``python -m tests.adapters.mcp.gated_worker``.

Three agents on the Streamable HTTP test server at ``$MCP_TEST_TASK_URL``, each
stopping at a ``FileGate`` in ``$MCP_GATED_STATE_DIR`` where a test SIGKILLs the
Worker, and recording in its ``invocations.log``:

- ``PictureAgent`` calls ``picture`` once; its images go to a
  ``LocalDirectoryMediaStore`` under ``<state dir>/media``, which stops at gate
  ``put-renaming`` once an image's temporary file is written and synced, before
  its rename, then records ``put <sha256>`` and stops at gate ``put-stored`` once
  the image is stored, before the tool's result commits;
- ``GatedTaskAgent`` calls ``build_report`` once, which records ``call
  attempt=<n>`` and stops at gate ``task-started`` once the server returned its
  task (its ID saved as the heartbeat checkpoint), before the call's Step
  commits, and polls its task; each poll records ``poll attempt=<n>``, and a poll that read the task completed stops at
  gate ``poll-completed`` before its result commits. Cancelling its task
  records ``cancel attempt=<n>`` and stops at gate ``cancel-sent`` once
  ``tasks/cancel`` is sent;
- ``AccountAgent`` calls ``choose_account``, whose task asks the user; a poll
  that sent the user's answer (``tasks/update``) stops at gate ``answer-sent``
  before its result commits.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.probes import POLL_SECONDS, write_atomically
from dex_agents.builtin_loop import (
    AgentDefinition,
    LocalDirectoryMediaStore,
    builtin_agent_session_flow,
)
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.runner_outcomes import (
    DeferredToolOutcome,
    ToolExecutionResult,
    ToolTaskPending,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from dex_agents.ports.runner import DeferredToolExecution, ToolTaskCancellation, ToolTaskPoll
from dex_agents.testing import FileGate, InvocationLog, run_agent_worker
from tests.adapters.mcp.session_support import calls_then_answer
from tests.adapters.mcp.task_worker import REPORT_NAME, URL_ENV

STATE_DIR_ENV = "MCP_GATED_STATE_DIR"
_TEMPORARY = re.compile(r"\.[0-9a-f]{64}\.[0-9a-f]{16}\.tmp")
"""The name of an image's temporary file in ``LocalDirectoryMediaStore``."""


def invocation_log(state_dir: Path) -> InvocationLog:
    """The log of real uploads and polls under a state directory."""
    return InvocationLog(state_dir / "invocations.log")


def gate(state_dir: Path, name: str) -> FileGate:
    """The gate ``put-renaming``, ``put-stored``, ``task-started``, ``poll-completed``,
    ``cancel-sent`` or ``answer-sent``."""
    return FileGate(state_dir, name)


def media_root(state_dir: Path) -> Path:
    """Where the picture agent's media store keeps its images."""
    return state_dir / "media"


def _state_dir() -> Path:
    # Read at call time: the test process builds the Flows too, without the variable.
    return Path(os.environ[STATE_DIR_ENV])


class GatedMediaStore(LocalDirectoryMediaStore):
    """A local directory store that stops once an image is stored, before the Step commits."""

    async def put_image(self, data: bytes) -> AgentImageReference:
        reference = await super().put_image(data)
        invocation_log(_state_dir()).record(f"put {reference.sha256}")
        await gate(_state_dir(), "put-stored").wait_for_release()
        return reference


def stop_before_renaming_images() -> None:
    """Make every rename of an image's temporary file in this process stop at gate
    ``put-renaming`` first (the Worker child only).

    The store's put writes the temporary file and renames it inside one thread call,
    so ``os.rename``, which it calls with the file's bare name, is the one place
    between the two. The thread blocks; the test kills the process there.
    """
    rename = os.rename

    def gated(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None) -> None:
        if isinstance(src, str) and _TEMPORARY.fullmatch(src):
            renaming = gate(_state_dir(), "put-renaming")
            write_atomically(renaming.reached_path, str(os.getpid()))
            while not renaming.released_path.exists():
                time.sleep(POLL_SECONDS)
        rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    os.rename = gated


class GatedTaskSource(McpToolSource):
    """An MCP tool source whose call stops once the server returned its task, whose poll
    stops once it read the task completed, and whose cancellation stops once it is sent."""

    async def execute_deferred_tool_call(
        self, call: DeferredToolExecution, *, request_meta: Mapping[str, Any] | None = None
    ) -> DeferredToolOutcome:
        invocation_log(_state_dir()).record(f"call attempt={call.attempt}")
        outcome = await super().execute_deferred_tool_call(call, request_meta=request_meta)
        if isinstance(outcome, ToolTaskStarted):
            await gate(_state_dir(), "task-started").wait_for_release()
        return outcome

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        invocation_log(_state_dir()).record(f"poll attempt={poll.attempt}")
        outcome = await super().poll_tool_task(poll)
        if isinstance(outcome, ToolExecutionResult):
            await gate(_state_dir(), "poll-completed").wait_for_release()
        return outcome

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        invocation_log(_state_dir()).record(f"cancel attempt={cancellation.attempt}")
        await super().cancel_tool_task(cancellation)
        await gate(_state_dir(), "cancel-sent").wait_for_release()


class GatedAccountSource(McpToolSource):
    """An MCP tool source whose poll stops once it sent the user's answer to its task."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        outcome = await super().poll_tool_task(poll)
        # Only a first attempt with an answer the task still waited for sends it.
        sent = poll.pending_answer is not None and poll.attempt == 1
        if sent and isinstance(outcome, ToolTaskPending):
            await gate(_state_dir(), "answer-sent").wait_for_release()
        return outcome


def build_picture_flow(url: str, state_dir: Path) -> AgentSessionFlow:
    """The picture agent's Flow, identical in the test process and the Worker child."""
    store = GatedMediaStore(media_root(state_dir))
    source = McpToolSource(
        [McpStreamableHttpServerConfig(name="notes", url=url)], media_store=store
    )
    agent = AgentDefinition(
        name="pictures",
        instructions="You show pictures.",
        model=calls_then_answer(("notes__picture", {})),
        tool_sources=[source],
    )
    return builtin_agent_session_flow(agent, flow_type="PictureAgent", media_store=store)


def build_gated_task_flow(url: str) -> AgentSessionFlow:
    """The task agent's Flow, identical in the test process and the Worker child."""
    source = GatedTaskSource([McpStreamableHttpServerConfig(name="notes", url=url)])
    agent = AgentDefinition(
        name="reports",
        instructions="You build reports.",
        model=calls_then_answer(("notes__build_report", {"name": REPORT_NAME})),
        tool_sources=[source],
    )
    return builtin_agent_session_flow(agent, flow_type="GatedTaskAgent")


def build_account_flow(url: str) -> AgentSessionFlow:
    """The account agent's Flow, identical in the test process and the Worker child."""
    source = GatedAccountSource([McpStreamableHttpServerConfig(name="notes", url=url)])
    agent = AgentDefinition(
        name="accounts",
        instructions="You choose accounts.",
        model=calls_then_answer(("notes__choose_account", {})),
        tool_sources=[source],
    )
    return builtin_agent_session_flow(agent, flow_type="AccountAgent")


def build_gated_flows(url: str, state_dir: Path) -> list[AgentSessionFlow]:
    """The three agents' Flows: pictures, the gated task, accounts."""
    return [build_picture_flow(url, state_dir), build_gated_task_flow(url), build_account_flow(url)]


if __name__ == "__main__":
    flows = build_gated_flows(os.environ[URL_ENV], _state_dir())
    # After the stores are built: they check that os.rename takes directory descriptors.
    stop_before_renaming_images()
    run_agent_worker(flows)
