"""``dex-agents``: chat with a durable demo agent, list sessions, and show one.

Everything runs in this process on the embedded engine over a local SQLite
file, so a killed ``chat`` resumes where the durable state says it is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.cli import terminal
from dex_agents.cli.demo_agent import DEMO_FLOW_TYPE, build_demo_agent
from dex_agents.domain.errors import DexAgentsError
from dex_agents.domain.events import AgentEventType, TextDeltaPayload
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentStatus
from dex_agents.ports.errors import FlowNotFoundError, StreamReadTimeoutError
from dex_agents.ports.flow_client import StreamMessage

DEFAULT_DB = "dex-agents.sqlite3"
"""The SQLite file of every command when ``--db`` is not given."""

DEFAULT_SESSION = "demo"
"""The session of ``dex-agents chat`` when ``--session`` is not given."""

# Short, so a chat killed during a Step resumes it within seconds of a restart.
_LEASE_DURATION = timedelta(seconds=3)
_POLL_SECONDS = 0.1
_NO_WAIT = timedelta(milliseconds=1)
_LONG_POLL = timedelta(seconds=5)


class CliError(Exception):
    """An error ``dex-agents`` reports as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block.
        self.exit(2, f"{self.prog}: error: {message}\n")


@dataclass
class _Stack:
    client: AgentSessionClient
    flow_client: LocalFlowClient
    flow: AgentSessionFlow
    worker: LocalWorker | None


def _database_path(db: str, *, must_exist: bool) -> Path:
    path = Path(db)
    if must_exist and not path.is_file():
        raise CliError(f"no database at {db}")
    if path.is_dir():
        raise CliError(f"{db} is a directory, not a database file")
    return path


@contextlib.asynccontextmanager
async def _open(db: str, *, run_worker: bool, must_exist: bool) -> AsyncIterator[_Stack]:
    path = _database_path(db, must_exist=must_exist)
    flow: AgentSessionFlow = builtin_agent_session_flow(
        build_demo_agent(), flow_type=DEMO_FLOW_TYPE
    )
    store = SqliteFlowStore(path)
    engine = LocalEngine(store, [flow], lease_duration=_LEASE_DURATION)
    flow_client = LocalFlowClient(engine)
    worker = LocalWorker(engine) if run_worker else None
    task = asyncio.create_task(worker.run()) if worker is not None else None
    try:
        yield _Stack(AgentSessionClient(flow_client, flow), flow_client, flow, worker)
    finally:
        if worker is not None and task is not None:
            await worker.stop()
            with contextlib.suppress(Exception):
                await task
        engine.close()
        store.close()


async def _read_line(prompt: str) -> str | None:
    print(prompt, end="", flush=True)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not future.done():
            future.set_result(line)

    def read() -> None:
        line = sys.stdin.readline()
        # The loop may be gone after Ctrl-C; the line is not needed then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver, line)

    # A daemon thread, not the loop's executor, so Ctrl-C does not wait for Enter.
    threading.Thread(target=read, name="dex-agents-stdin", daemon=True).start()
    line = await future
    if not line:
        print(flush=True)
        return None
    return line.rstrip("\r\n")


class _LiveText:
    """Follows the session's Stream in the background and collects model text as it arrives,
    so the chat shows an answer while the model still writes it."""

    def __init__(self, stack: _Stack, session_id: str) -> None:
        self._stack = stack
        self._session = session_id
        self._token = ""
        self._arrived: list[str] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Skip the events already on the Stream, then follow new ones."""
        while True:
            try:
                message = await self._read(_NO_WAIT)
            except StreamReadTimeoutError:
                break
            self._token = message.resume_token
        self._task = asyncio.create_task(self._follow())

    async def _read(self, poll: timedelta) -> StreamMessage[Any]:
        return await self._stack.flow_client.read_stream(
            self._stack.flow, self._session, self._token, poll_timeout=poll
        )

    async def _follow(self) -> None:
        while True:
            try:
                message = await self._read(_LONG_POLL)
            except StreamReadTimeoutError:
                continue
            self._token = message.resume_token
            event = message.value
            if event.type == AgentEventType.TEXT_DELTA and isinstance(
                event.payload, TextDeltaPayload
            ):
                self._arrived.append(event.payload.text)

    def take(self) -> list[str]:
        """The text that arrived since the last call."""
        taken, self._arrived = self._arrived, []
        return taken

    async def stop(self) -> None:
        """Stop following the Stream."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class _Follower:
    """Prints what changes in a session: live text, new assistant text and tool call statuses."""

    def __init__(self, client: AgentSessionClient, session_id: str, live: _LiveText) -> None:
        self._client = client
        self._session = session_id
        self._live = live
        self._shown_live: list[str] = []
        self._last_sequence = 0
        self._statuses: dict[str, str] = {}

    def mark_seen(self, snapshot: AgentSnapshot) -> None:
        self._last_sequence = max((m.sequence for m in snapshot.messages), default=0)
        self._statuses = {call.tool_call_id: call.status for call in snapshot.tool_calls}

    def _print_changes(self, snapshot: AgentSnapshot, live_text: list[str]) -> None:
        for call in snapshot.tool_calls:
            if self._statuses.get(call.tool_call_id) != call.status:
                self._statuses[call.tool_call_id] = call.status
                print(terminal.tool_call_line(call), flush=True)
        fresh: list[AgentMessage] = [
            m for m in snapshot.messages if m.sequence > self._last_sequence
        ]
        pending = list(live_text)
        for message in fresh:
            self._last_sequence = max(self._last_sequence, message.sequence)
            if message.role == MessageRole.USER:
                continue
            lines = terminal.message_lines(message)
            if message.text and message.text in pending:
                pending.remove(message.text)  # stored already: print it in its place
            elif message.text and message.text in self._shown_live:
                # Its text was shown live as it arrived; keep only its tool call line.
                self._shown_live.remove(message.text)
                lines = lines[1:]
            for line in lines:
                print(line, flush=True)
        for text in pending:  # text of a model call that is still running
            print(f"agent> {text}", flush=True)
            self._shown_live.append(text)

    async def follow(self, turns_before: int | None) -> bool:
        """Follow until the session waits for a user message; ``False`` on end of input."""
        while True:
            # Text taken before the snapshot was written before it, so the snapshot already
            # shows every tool call that ended before that text: the lines keep their order.
            live_text = self._live.take()
            snapshot = await self._client.get_agent_snapshot(self._session)
            self._print_changes(snapshot, live_text)
            if snapshot.pending_interrupts:
                if not await self._ask(snapshot.pending_interrupts[0]):
                    return False
                continue
            state = snapshot.state
            idle = (
                state is not None
                and state.status == AgentStatus.WAITING_FOR_USER_MESSAGE
                and state.active_turn_id is None
                and snapshot.queued_message_count == 0
                and (turns_before is None or state.turn_count > turns_before)
            )
            if idle:
                if state is not None and state.last_turn_error:
                    print(f"turn failed: {state.last_turn_error}", flush=True)
                return True
            await asyncio.sleep(_POLL_SECONDS)

    async def _ask(self, interrupt: AgentInterrupt) -> bool:
        if interrupt.kind == InterruptKind.QUESTION:
            print(f"agent asks: {interrupt.question or ''}", flush=True)
            if interrupt.choices:
                print(f"choices: {', '.join(interrupt.choices)}", flush=True)
            answer = await _read_line(terminal.QUESTION_PROMPT)
            if answer is None:
                return False
            if not await self._client.answer_question(
                self._session, interrupt.interrupt_id, answer
            ):
                print("that answer was not accepted", flush=True)
            return True
        reply = await _read_line(terminal.approval_prompt(interrupt))
        if reply is None:
            return False
        approved = reply.strip().lower() in ("y", "yes")
        await self._client.resolve_interrupt(self._session, interrupt.interrupt_id, approved)
        return True


async def _chat(db: str, session_id: str) -> int:
    async with _open(db, run_worker=True, must_exist=False) as stack:
        client = stack.client
        try:
            await stack.flow_client.describe_flow(session_id)
            print(f"resuming session {session_id} in {db}", flush=True)
        except FlowNotFoundError:
            await client.start_session(session_id)
            print(f"started session {session_id} in {db}", flush=True)
        print("type a message, /quit to leave", flush=True)
        live = _LiveText(stack, session_id)
        await live.start()
        try:
            return await _converse(client, session_id, _Follower(client, session_id, live))
        finally:
            await live.stop()


async def _converse(client: AgentSessionClient, session_id: str, follower: _Follower) -> int:
    follower.mark_seen(await client.get_agent_snapshot(session_id))
    if not await follower.follow(None):
        return 0
    while True:
        line = await _read_line(terminal.USER_PROMPT)
        if line is None or line.strip() == "/quit":
            return 0
        if not line.strip():
            continue
        before = await client.get_agent_snapshot(session_id)
        turns = before.state.turn_count if before.state is not None else 0
        if not await client.send_user_message(session_id, line):
            print("the session did not accept that message", flush=True)
            continue
        if not await follower.follow(turns):
            return 0


async def _sessions(db: str) -> int:
    async with _open(db, run_worker=False, must_exist=True) as stack:
        flows = await stack.flow_client.list_flows(DEMO_FLOW_TYPE)
        if not flows:
            print("no sessions")
        for info in flows:
            snapshot = await stack.client.get_agent_snapshot(info.flow_id)
            print("\n".join(terminal.session_lines(info.flow_id, snapshot)))
    return 0


async def _show(db: str, session_id: str) -> int:
    async with _open(db, run_worker=False, must_exist=True) as stack:
        client = stack.client
        snapshot = await client.get_agent_snapshot(session_id)
        messages: list[AgentMessage] = []
        after: int | None = None
        while True:
            page = await client.list_agent_messages(session_id, after_sequence=after, limit=200)
            messages.extend(page.messages)
            if not page.has_more or not page.messages:
                break
            after = page.messages[-1].sequence
        print("\n".join(terminal.show_lines(session_id, snapshot, messages)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``dex-agents`` argument parser."""
    parser = _Parser(prog="dex-agents", description="Talk to a durable demo agent, no key needed.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    chat = commands.add_parser("chat", help="chat with the demo agent (resumes the session)")
    chat.add_argument("--session", default=DEFAULT_SESSION, help="session ID (default: demo)")
    chat.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file (default: {DEFAULT_DB})")
    sessions = commands.add_parser("sessions", help="list sessions and what each waits for")
    sessions.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file (default: {DEFAULT_DB})")
    show = commands.add_parser("show", help="print a session's transcript, tools, plan, usage")
    show.add_argument("session", metavar="ID", help="session ID")
    show.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file (default: {DEFAULT_DB})")
    return parser


def _error_text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dex-agents``; errors are one line on stderr and a non-zero exit code."""
    arguments = build_parser().parse_args(argv)
    runs: dict[str, Callable[[], Coroutine[Any, Any, int]]] = {
        "chat": lambda: _chat(arguments.db, arguments.session),
        "sessions": lambda: _sessions(arguments.db),
        "show": lambda: _show(arguments.db, arguments.session),
    }
    try:
        return asyncio.run(runs[arguments.command]())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except (CliError, DexAgentsError, sqlite3.Error, OSError, ValueError) as error:
        print(f"dex-agents: error: {_error_text(error)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
