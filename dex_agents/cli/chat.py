"""``dex-agents chat``: talk to the durable demo agent, resuming the session it finds.

The session lives in the database, not in this process: a chat killed at any
point resumes where the durable state says it is, and leaving (``/quit``,
Ctrl-D, Ctrl-C) at any prompt decides nothing that is pending. What another
window does shows as it happens, above a waiting prompt too (``line_input``). An
answer another window gave first wins: the prompt that asked it ends with a line
saying so (or this chat's refused answer says so), then what happened shows; a
turn another window cancelled ends with ``turn cancelled elsewhere``. At a terminal,
a message prompt waits below a running turn's text too: a line typed there is sent
at once, to wait in the session's queue for the next turn, and what is typed but not
sent comes back at the message prompt after the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from dex_agents.app.session_client import PortableSessionClient
from dex_agents.cli import prompts, terminal
from dex_agents.cli.database import demo_flow, open_chat_runtime
from dex_agents.cli.demo_agent import DEMO_FLOW_TYPE
from dex_agents.cli.errors import CliError
from dex_agents.cli.follower import Follower
from dex_agents.cli.interrupt_texts import (
    TURN_WAS_CANCELLED,
    answered_elsewhere_text,
    gone_reason,
    refusal_reason,
)
from dex_agents.cli.line_input import open_line_input
from dex_agents.cli.listing import ended_status
from dex_agents.cli.live_text import LiveText
from dex_agents.cli.log_lines import records_shown_by
from dex_agents.cli.mcp_servers import describe_servers, mcp_tool_source
from dex_agents.cli.real_model import real_model_client
from dex_agents.cli.typed_lines import LineInput
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.session_ids import validate_session_id
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import FlowNotFoundError

_T = TypeVar("_T")
# What the chat does as it starts following the session again: send a message or an
# answer, or say why a prompt ended.
_Action = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class _Ended:
    """A prompt ended by the session, not by a typed line: ``snapshot`` no longer asks it."""

    snapshot: AgentSnapshot


class _Chat:
    def __init__(
        self,
        client: PortableSessionClient,
        session_id: str,
        follower: Follower,
        lines: LineInput,
    ):
        self._client = client
        self._session = session_id
        self._follower = follower
        self._lines = lines

    async def _while_following(
        self, asking: Coroutine[Any, Any, _T], interrupt: AgentInterrupt | None
    ) -> _T | _Ended:
        """Run the prompt ``asking`` while the follower shows what changes above it; end it
        when the session no longer asks what it asks (``_Ended``)."""
        prompt = asyncio.create_task(asking, name="dex-agents prompt")
        watch = asyncio.create_task(
            self._follower.while_prompt(interrupt), name="dex-agents prompt watch"
        )
        try:
            await asyncio.wait((prompt, watch), return_when=asyncio.FIRST_COMPLETED)
            if watch.done() and not watch.cancelled() and watch.exception() is not None:
                # The chat ends on the watch's error (the session stopped): what was typed
                # stays shown above the error, so it is not lost unseen.
                self._lines.end_on_error()
        except asyncio.CancelledError:
            # Ctrl-C: the prompt stays shown, and the chat's last line break ends it.
            self._lines.leave()
            raise
        finally:
            for task in (prompt, watch):
                task.cancel()
            # Both end here: the next prompt goes on reading keys where this one stopped,
            # and the chat's end puts the terminal back in its line mode (``keys_held``).
            await asyncio.gather(prompt, watch, return_exceptions=True)
        # What was typed wins a tie: it is sent, and a refusal says why.
        if not prompt.cancelled():
            return prompt.result()
        if watch.cancelled():
            raise asyncio.CancelledError
        return _Ended(watch.result())

    async def run(self, *, resumed: bool) -> int:
        snapshot = await self._client.get_agent_snapshot(self._session)
        if resumed:
            print("\n".join(terminal.resume_lines(snapshot)), flush=True)
        self._follower.mark_seen(snapshot)
        first: _Action | None = None  # done as the next turn is followed
        while True:
            followed = await self._follow_turn(first)
            if followed is None:
                return 0
            first = None
            if followed.pending_interrupts:
                first = await self._answer(followed.pending_interrupts[0])
                if first is None:
                    return 0
                continue
            text = await self._while_following(prompts.ask_message(self._lines), None)
            if text is None:
                return 0
            if not isinstance(text, _Ended):  # else the session asks for a decision now
                first = functools.partial(self._send, text)

    async def _follow_turn(self, first: _Action | None) -> AgentSnapshot | None:
        """Do ``first``, if any (send a message or an answer), and show what the session
        does until it needs a person; that snapshot, or ``None`` when the person leaves.
        Where the input reads during turns, a message prompt waits below what shows, from
        before ``first`` is done (a key pressed meanwhile is the prompt's, not the
        terminal's to echo), and each line typed there is sent at once."""
        if not self._lines.reads_during_turns:
            if first is not None:
                await first()
            return await self._follower.until_person()
        prompt = self._turn_prompt()
        watch: asyncio.Task[AgentSnapshot] | None = None
        try:
            if first is not None:
                await first()
            watch = self._watch_turn()
            while True:
                await asyncio.wait((prompt, watch), return_when=asyncio.FIRST_COMPLETED)
                if not prompt.done():
                    if watch.exception() is not None:
                        self._lines.end_on_error()  # what was typed stays shown, above the error
                    break
                text = prompt.result()
                if text is None:
                    return None
                # Open before the line is sent: a key pressed meanwhile is the prompt's, not
                # the terminal's to echo, and a paste stays one message.
                prompt = self._turn_prompt()
                await self._send(text)
                if watch.done():  # what was sent starts a turn of its own: follow it
                    watch = self._watch_turn()
        except asyncio.CancelledError:
            # Ctrl-C: the prompt stays shown, and the chat's last line break ends it.
            self._lines.leave()
            raise
        except Exception:
            # A send the session or the store refused ends the chat on its error: what was
            # typed at the prompt meanwhile stays shown, above the error, not erased unseen.
            self._lines.end_on_error()
            raise
        finally:
            tasks = (prompt,) if watch is None else (prompt, watch)
            for task in tasks:
                task.cancel()
            # Cancelled, the prompt keeps what was typed for the next message prompt.
            await asyncio.gather(*tasks, return_exceptions=True)
        return watch.result()

    def _turn_prompt(self) -> asyncio.Task[str | None]:
        asking = prompts.ask_message(self._lines, during_turn=True)
        return asyncio.create_task(asking, name="dex-agents turn prompt")

    def _watch_turn(self) -> asyncio.Task[AgentSnapshot]:
        return asyncio.create_task(self._follower.until_person(), name="dex-agents turn")

    async def _send(self, text: str) -> None:
        if await self._client.send_user_message(self._session, text):
            self._follower.sent(text)
        else:
            self._follower.say("the session did not accept that message")

    async def _answer(self, interrupt: AgentInterrupt) -> _Action | None:
        """Ask about ``interrupt``; what sends the reply, or says why the prompt ended,
        done once the prompt below the turn waits (``_follow_turn``); ``None`` when the
        person leaves."""
        if interrupt.kind == InterruptKind.QUESTION:
            reply = await self._while_following(
                prompts.ask_answer(self._lines, interrupt), interrupt
            )
            if isinstance(reply, _Ended):
                return functools.partial(self._say_gone, interrupt, reply.snapshot)
            if reply is None:
                return None
            return functools.partial(self._send_answer, interrupt, reply)
        decision = await self._while_following(
            prompts.ask_approval(self._lines, interrupt), interrupt
        )
        if isinstance(decision, _Ended):
            return functools.partial(self._say_gone, interrupt, decision.snapshot)
        if decision is None:
            return None
        return functools.partial(self._send_decision, interrupt, decision)

    async def _send_answer(self, interrupt: AgentInterrupt, reply: prompts.QuestionReply) -> None:
        if reply.declined:
            accepted = await self._client.resolve_interrupt(
                self._session, interrupt.interrupt_id, False
            )
        else:
            accepted = await self._client.answer_question(
                self._session, interrupt.interrupt_id, reply.answer
            )
        if not accepted:
            await self._explain_refusal(interrupt, None if reply.declined else reply.answer)

    async def _send_decision(self, interrupt: AgentInterrupt, approved: bool) -> None:
        if not await self._client.resolve_interrupt(
            self._session, interrupt.interrupt_id, approved
        ):
            await self._explain_refusal(interrupt, None)

    async def _say_gone(self, interrupt: AgentInterrupt, snapshot: AgentSnapshot) -> None:
        """Say why the prompt of ``interrupt`` ended before anything was typed: another
        window answered it, or its turn ended."""
        what = "question" if interrupt.kind == InterruptKind.QUESTION else "approval"
        gone = await self._gone_reason(interrupt, snapshot, datetime.now(UTC))
        if gone is None:
            # What the other window decided shows next, as the session carries it out.
            resolved = self._follower.resolution(interrupt)
            self._follower.say(answered_elsewhere_text(interrupt, resolved))
            return
        self._follower.say(f"this {what} was withdrawn: {gone}")
        if gone == TURN_WAS_CANCELLED:  # said once: not again when the chat is idle
            self._follower.cancellation_shown(interrupt.turn_id)

    async def _explain_refusal(self, interrupt: AgentInterrupt, answer: str | None) -> None:
        snapshot = await self._client.get_agent_snapshot(self._session)
        now = datetime.now(UTC)
        pending = next(
            (i for i in snapshot.pending_interrupts if i.interrupt_id == interrupt.interrupt_id),
            None,
        )
        if pending is not None:
            reason = refusal_reason(pending, answer, now)
            self._follower.say(f"this answer was not accepted: {reason}")
        elif (gone := await self._gone_reason(interrupt, snapshot, now)) is not None:
            self._follower.say(f"this answer was not accepted: {gone}")
            if gone == TURN_WAS_CANCELLED:  # said once: not again when the chat is idle
                self._follower.cancellation_shown(interrupt.turn_id)
        else:
            # What the other window decided shows next, as the session carries it out.
            self._follower.say("already answered elsewhere")

    async def _gone_reason(
        self, interrupt: AgentInterrupt, snapshot: AgentSnapshot, now: datetime
    ) -> str | None:
        gone = gone_reason(interrupt, snapshot, now)
        if gone is None:
            # A cancelled or steered turn may have ended already, taking its call records
            # with it: only its interrupt_resolved event still says why.
            cancelled = await self._follower.cancellation_reason(interrupt)
            gone = gone_reason(interrupt, snapshot, now, cancelled)
        return gone


async def _check_session(runtime: LocalRuntime, session_id: str) -> None:
    """Refuse, before anything is typed, a session the demo agent cannot talk in."""
    try:
        info = await runtime.flow_client.describe_flow(session_id)
    except FlowNotFoundError:
        return
    shown = terminal.escaped(session_id)
    if info.flow_type != DEMO_FLOW_TYPE:
        raise CliError(
            f"session '{shown}' is a {terminal.escaped(info.flow_type)} session; chat talks "
            f"to {DEMO_FLOW_TYPE} sessions only (choose another --session)"
        )
    if info.status != "running":
        # A failed one says why, which a person otherwise learns only from show.
        raise CliError(f"session '{shown}' is {ended_status(info)} (choose another --session)")


async def run_chat(
    db: str | os.PathLike[str],
    session_id: str,
    *,
    model: str | None = None,
    api_base: str | None = None,
    mcp_stdio: Sequence[str] = (),
    mcp_urls: Sequence[str] = (),
) -> int:
    """``dex-agents chat``: start or resume ``session_id`` in ``db``; the exit code.

    With ``model`` the demo agent runs on that LiteLLM model instead of the
    scripted one (``real_model_client`` checks it before anything opens).
    ``mcp_stdio`` commands and ``mcp_urls`` attach MCP servers' tools
    (``mcp_tool_source``, also checked first).
    """
    validate_session_id(session_id)
    client_model = None if model is None else real_model_client(model, api_base)
    source = mcp_tool_source(mcp_stdio, mcp_urls)
    flow = demo_flow(client_model, () if source is None else (source,))
    try:
        async with open_chat_runtime(db, flow) as runtime:
            await _check_session(runtime, session_id)
            client = runtime.sessions(flow)
            started = await client.open_session(session_id)
            verb = "started" if started else "resuming"
            shown = terminal.escaped(session_id)
            print(f"{verb} session {shown} in {terminal.escaped(os.fspath(db))}", flush=True)
            if model is not None:
                print(f"model: {terminal.escaped(model)}", flush=True)
            if source is not None:
                for line in describe_servers(source):
                    print(terminal.escaped(line), flush=True)
            print("type a message; /help lists the commands", flush=True)
            live = LiveText(runtime.flow_client, flow, session_id)
            await live.start()
            try:
                lines = open_line_input()
                follower = Follower(client, session_id, live, lines.write, lines.open_line_ended)
                chat = _Chat(client, session_id, follower, lines)
                # A record written to stderr would land in a prompt below a turn.
                records = records_shown_by(follower.say) if lines.reads_during_turns else None
                with records or contextlib.nullcontext(), lines.keys_held():
                    return await chat.run(resumed=not started)
            finally:
                await live.stop()
    finally:
        if source is not None:
            await source.aclose()
