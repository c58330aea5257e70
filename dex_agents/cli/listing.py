"""``dex-agents sessions`` and ``dex-agents show``: read the sessions in a database.

Both open the file with no worker and never create it. ``sessions`` lists every
session of every Flow type in it; ``show`` prints one session of any session
Flow type. IDs and Flow types come from the file, which other programs write,
so they are printed escaped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from dex_agents.adapters.local.store_errors import StoreCorruptError
from dex_agents.cli import terminal
from dex_agents.cli.database import Reader, open_reader
from dex_agents.cli.errors import CliError
from dex_agents.domain.attention import SessionAttention, last_turn_cancelled, session_attention
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.ports.errors import FlowNotFoundError
from dex_agents.ports.flow_client import FlowInfo

SESSIONS_HEADER = ("ID", "FLOW TYPE", "STATUS", "LAST STEP (UTC)")
"""The columns of ``dex-agents sessions``. The last is when a Step of the session was
last scheduled or finished: the last time the session did anything."""

_STARTING = "StartAgentSession"
_QUESTION_WIDTH = 40
_REASON_WIDTH = 60
_PAGE = 200
_FAILED_STEP = re.compile(r"\AStep \S+ failed after \d+ attempts?: ")
"""How the embedded engine begins the reason of a session whose Step failed for good
(``failure_routing.fail_execution``): the error after it says more in a short column."""


def closed_status(info: FlowInfo) -> str:
    """The status of a session that no longer runs: a failed one says briefly why
    (``FlowInfo.failure_reason``, cut short; ``show`` and the console's page give it whole).

    A stop's reason is the stopper's own words, not shown in a list of every session.
    """
    if info.status != "failed" or not info.failure_reason:
        return info.status
    return f"failed: {_short(_FAILED_STEP.sub('', info.failure_reason), _REASON_WIDTH)}"


def ended_status(info: FlowInfo) -> str:
    """How a session that no longer runs ended, for a command that refuses it: a failed
    one's whole ``failure_reason``, as a message sent to it is refused with."""
    if info.status != "failed" or not info.failure_reason:
        return info.status
    return f"failed: {' '.join(info.failure_reason.split())}"


def step_status(info: FlowInfo) -> str:
    """What a session waits for, from its Flow run alone (the Steps it is active in).

    For sessions whose state this program cannot read.
    """
    if info.status != "running":
        return closed_status(info)
    steps = set(info.active_step_types)
    if _STARTING in steps:
        return "starting"
    if "AwaitToolApproval" in steps:
        return "waiting for approval"
    if "AwaitQuestionAnswer" in steps:
        return "waiting for an answer to a question"
    if steps == {"AwaitUserMessage"}:
        return "waiting for a message"
    return "working"


def _short(text: str, width: int = _QUESTION_WIDTH) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= width:
        return one_line
    return one_line[: width - 3] + "..."


def snapshot_status(info: FlowInfo, snapshot: AgentSnapshot) -> str:
    """What a session waits for, from its snapshot."""
    if info.status != "running":
        return closed_status(info)
    if snapshot.pending_interrupts:
        first = snapshot.pending_interrupts[0]
        if first.kind == InterruptKind.QUESTION:
            status = f"waiting for an answer to {_short(first.question or first.tool_name)!r}"
        else:
            status = f"waiting for {first.kind} of {first.tool_name}"
        more = len(snapshot.pending_interrupts) - 1
        return status + (f" (and {more} more)" if more else "")
    attention = session_attention(snapshot)
    if attention is SessionAttention.IDLE:
        if snapshot.state is not None and last_turn_cancelled(snapshot.state):
            return "waiting for a message (its last turn was cancelled)"
        return "waiting for a message"
    if attention is SessionAttention.TURN_FAILED:
        return "waiting for a message (its last turn failed)"
    if snapshot.state is None:
        return "starting"
    return f"working ({snapshot.state.status})"


def table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the header first) escaped and aligned in columns, two spaces apart."""
    shown = [[terminal.escaped(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in shown) for column in range(len(shown[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in shown
    ]


def _time(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def _row(info: FlowInfo, snapshot: AgentSnapshot | None, last_activity: datetime) -> list[str]:
    if snapshot is None or snapshot.state is None:
        status = step_status(info)
    else:
        status = snapshot_status(info, snapshot)
    return [info.flow_id, info.flow_type, status, _time(last_activity)]


async def run_sessions(db: str | os.PathLike[str]) -> int:
    """``dex-agents sessions``: every session in ``db`` and what it waits for."""
    async with open_reader(db) as reader:
        infos = await reader.runtime.flow_client.list_flows()
        if not infos:
            print(f"no sessions in {terminal.escaped(os.fspath(db))}")
            return 0
        snapshots = await reader.attention_snapshots(infos)
        activities = await reader.last_activities(infos)
        rows = [list(SESSIONS_HEADER)]
        rows.extend(_row(i, snapshots.get(i.flow_id), activities[i.flow_id]) for i in infos)
    print("\n".join(table_lines(rows)))
    return 0


async def _all_messages(
    reader: Reader, flow_type: str, session_id: str
) -> tuple[list[AgentMessage], int | None]:
    """Every kept message, oldest first, and the sequence below which retention deleted them."""
    client = reader.runtime.sessions(reader.flows[flow_type])
    messages: list[AgentMessage] = []
    # Page forward from the oldest: with no cursor a page is the newest messages, and
    # paging after it found nothing, so a session past one page lost its beginning.
    after = 0
    while True:
        page = await client.list_agent_messages(session_id, after_sequence=after, limit=_PAGE)
        messages.extend(page.messages)
        if not page.has_more or not page.messages:
            return messages, page.deleted_before_sequence
        after = page.messages[-1].sequence


async def run_show(db: str | os.PathLike[str], session_id: str) -> int:
    """``dex-agents show ID``: the transcript, tool calls, plan and usage of one session."""
    validate_session_id(session_id)
    shown = terminal.escaped(session_id)
    async with open_reader(db) as reader:
        try:
            info = await reader.runtime.flow_client.describe_flow(session_id)
        except FlowNotFoundError:
            raise CliError(
                f"no session with ID '{shown}' in {terminal.escaped(os.fspath(db))}"
            ) from None
        flow_type = terminal.escaped(info.flow_type)
        try:
            snapshot = await reader.snapshot(info)
        except StoreCorruptError:
            if info.failure_reason is None:
                raise
            # It failed because its state could not be read: the reason names the value,
            # and says that the session is over, which the read's own error did not.
            raise CliError(
                f"session '{shown}' {info.status}: {terminal.escaped(info.failure_reason)}"
            ) from None
        if snapshot is not None and snapshot.state is None and info.failure_reason is not None:
            # Its start was refused (or its first Step failed) before any state was written:
            # there is nothing to show but why.
            raise CliError(f"session '{shown}' {terminal.escaped(ended_status(info))}")
        # With no AgentState and no StartAgentSession to write it, this is some other Flow.
        if snapshot is None or (snapshot.state is None and _STARTING not in info.active_step_types):
            raise CliError(
                f"'{shown}' is a {flow_type} Flow run that dex-agents cannot read as an agent "
                f"session ({step_status(info)})"
            )
        try:
            messages, deleted_before = await _all_messages(reader, info.flow_type, session_id)
        except DexAgentsError as error:
            raise CliError(f"cannot read the messages of session '{shown}': {error}") from error
    lines = terminal.show_lines(
        session_id,
        info.flow_type,
        snapshot,
        messages,
        deleted_before=deleted_before,
    )
    if info.status != "running":
        # Its state still reads as it was when it ended: waiting, or at work.
        why = "" if info.failure_reason is None else f": {info.failure_reason}"
        lines.insert(1, terminal.escaped(f"the session {info.status}{why}"))
    print("\n".join(lines))
    return 0
