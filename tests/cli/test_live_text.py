"""The chat shows a model's text while the model still writes it, on one line, and only once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.adapters.local.transitions import cancel_steps
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.cli.database import demo_flow
from dex_agents.cli.errors import CliError
from dex_agents.cli.follower import Follower
from dex_agents.cli.live_text import LiveText
from dex_agents.domain.messages import FrameworkMessage, MessageRole, QueuedUserMessage
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.flow_rows import FlowStatus
from dex_agents.ports.flow_store import StoreTransaction
from dex_agents.ports.runner import AgentTurnContext
from tests.app.scripted_runner import ScriptedRunner

DEADLINE_SECONDS = 10.0


class HeldModel(ScriptedRunner):
    """Writes its answer as live text in two parts, holding the model call after each."""

    def __init__(self) -> None:
        super().__init__()
        self.releases = [asyncio.Event(), asyncio.Event()]

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta("thinking about ")
        await self.releases[0].wait()
        turn.events.write_text_delta("order 7")
        await self.releases[1].wait()
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item="{}", text="thinking about order 7"
        )
        return TurnCompleted(new_messages=[answer], usage=AgentUsage(model_calls=1))


@dataclass
class _WaitingChat:
    """A chat's follower waiting on the turn of its message "where is order 7", whose
    model ``runner`` holds; ``following`` is its wait (``Follower.until_person``), and
    ``shown`` what it has written so far."""

    runner: HeldModel
    runtime: LocalRuntime
    client: PortableSessionClient
    live: LiveText
    follower: Follower
    following: asyncio.Task[AgentSnapshot]
    capsys: pytest.CaptureFixture[str]
    shown: list[str] = field(default_factory=list)

    async def shows(self, text: str) -> None:
        """Wait until the chat has written ``text``."""
        deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
        while text not in "".join(self.shown):
            assert asyncio.get_running_loop().time() < deadline, "".join(self.shown)
            await asyncio.sleep(0.02)  # capsys cannot be awaited; the deadline bounds the wait
            self.shown.append(self.capsys.readouterr().out)

    async def followed(self) -> AgentSnapshot:
        """The snapshot the follower's wait ends with, once all it wrote is in ``shown``."""
        snapshot = await asyncio.wait_for(self.following, DEADLINE_SECONDS)
        self.shown.append(self.capsys.readouterr().out)
        return snapshot

    async def turn_ends(self) -> AgentSnapshot:
        """Let the model answer, then wait as ``followed`` does."""
        for release in self.runner.releases:
            release.set()
        return await self.followed()

    async def queue(self, *texts: str) -> tuple[QueuedUserMessage, ...]:
        """Send ``texts`` while the turn runs, as the person does; the queue they wait in."""
        for text in texts:
            assert await self.client.send_user_message("s1", text)
            self.follower.sent(text)
        return (await self.client.get_agent_snapshot("s1")).queued_messages

    def screen(self) -> str:
        """All the chat has written."""
        return "".join(self.shown)


@contextlib.asynccontextmanager
async def _chat_waiting_on_a_turn(
    capsys: pytest.CaptureFixture[str],
) -> AsyncIterator[_WaitingChat]:
    runner = HeldModel()
    flow = AgentSessionFlow(runner, flow_type="LiveAgent")
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        client = runtime.sessions(flow)
        live = LiveText(runtime.flow_client, flow, "s1")
        try:
            await client.start_session("s1")
            await live.start()
            follower = Follower(client, "s1", live)
            follower.mark_seen(await client.get_agent_snapshot("s1"))
            assert await client.send_user_message("s1", "where is order 7")
            follower.sent("where is order 7")  # as the chat does: the person typed it
            following = asyncio.create_task(follower.until_person())
            yield _WaitingChat(runner, runtime, client, live, follower, following, capsys)
        finally:
            for release in runner.releases:
                release.set()
            await live.stop()


async def test_live_text_grows_on_one_line_before_the_turn_ends_and_is_not_repeated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        chat.runner.releases[0].set()
        await chat.shows("agent> thinking about order 7")
        # The model call is still held: the text came from the Stream, not the transcript.
        assert not chat.following.done()
        snapshot = await chat.turn_ends()
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is None
        assert chat.screen() == "agent> thinking about order 7\n"


@pytest.mark.parametrize("reader_lags", [False, True], ids=["reader-current", "reader-lags"])
async def test_a_turn_another_window_cancels_is_said_to_be_cancelled(
    capsys: pytest.CaptureFixture[str], reader_lags: bool
) -> None:
    # Before, the chat went back to its prompt as after a completed turn: an idle
    # snapshot did not say that the turn was cancelled (now its cancelled_turn_id does).
    # It then waited 500 ms for the turn_cancelled event, and a Stream reader that had
    # not caught up by then left the cancel unsaid.
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        if reader_lags:
            await chat.live.stop()  # a reader far behind: no later event of the turn reaches it
        snapshot = await chat.client.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        # Another window (the console, an API call) cancels the turn the chat waits on.
        assert await chat.client.cancel_turn("s1", snapshot.state.active_turn_id)
        idle = await chat.followed()
        assert idle.state is not None
        assert idle.state.active_turn_id is None
        assert chat.screen() == "agent> thinking about \nturn cancelled elsewhere\n"


async def test_a_message_another_window_steers_in_is_shown_before_its_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before, the chat showed only the agent's answer to it: user messages were never
    # shown, as the chat's own were typed, so the person saw replies to words never seen.
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        # Another window steers the turn the chat waits on.
        assert await chat.client.steer_user_message("s1", text="use the staging account")
        await chat.turn_ends()
        assert chat.screen() == (
            "agent> thinking about order 7\n"
            "you (elsewhere)> use the staging account\n"
            "agent> thinking about order 7\n"
        )


async def test_a_queued_message_another_window_deletes_is_said_to_be_deleted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before, nothing was said: the person waited for an answer to a message that was gone.
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        # The person sends another message while the turn runs: it waits in the queue.
        (queued,) = await chat.queue("and order 8")
        # Another window deletes it.
        assert await chat.client.delete_queued_message("s1", queued.message_id)
        await chat.shows("your queued message was deleted elsewhere: and order 8\n")
        await chat.turn_ends()
        assert chat.screen() == (
            "agent> thinking about \n"
            "your queued message was deleted elsewhere: and order 8\n"
            "agent> order 7\n"
        )


async def test_a_queued_message_steered_ahead_of_an_earlier_one_is_not_taken_for_a_deletion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before, the second message stored first made the first count as deleted, and when
    # its turn came it showed as another window's: "you (elsewhere)> and order 8".
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        queued = await chat.queue("and order 8", "and order 9")
        # Another window steers the turn with the second one.
        assert await chat.client.steer_user_message("s1", message_id=queued[1].message_id)
        idle = await chat.turn_ends()
        texts = [m.text for m in idle.messages if m.role is MessageRole.USER]
        assert texts == ["where is order 7", "and order 9", "and order 8"]
        assert "elsewhere" not in chat.screen()


async def test_a_session_another_window_stops_ends_the_wait_on_its_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before, the chat waited for ever: a stopped session writes no more events, and its
    # snapshot still shows the turn it was running.
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")
        await chat.runtime.flow_client.stop_flow("s1", "stopped in another window")
        with pytest.raises(CliError, match=r"^session 's1' is stopped$"):
            await asyncio.wait_for(chat.following, DEADLINE_SECONDS)


async def test_a_session_that_fails_while_followed_ends_the_wait_saying_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before, the chat said only that the session is failed, and a person had to run
    # show to learn why.
    async with _chat_waiting_on_a_turn(capsys) as chat:
        await chat.shows("agent> thinking about ")

        def fail(tx: StoreTransaction) -> None:
            # As the engine fails a session whose Step failed with no failure route.
            row = tx.get_flow("s1")
            assert row is not None
            row.status, row.failure_reason = FlowStatus.FAILED, "Step RunModel failed: boom"
            tx.update_flow(row)
            cancel_steps(tx, "s1", None, datetime.now(UTC), None)

        await chat.runtime.flow_client._engine.run(fail)
        expected = r"^session 's1' is failed: Step RunModel failed: boom$"
        with pytest.raises(CliError, match=expected):
            await asyncio.wait_for(chat.following, DEADLINE_SECONDS)


async def test_a_followed_chat_forgets_the_tool_calls_of_turns_it_has_shown(tmp_path: Path) -> None:
    # A chat that follows a session for days kept three entries for every tool call.
    flow = demo_flow()
    async with LocalRuntime(tmp_path / "chat.db", [flow], workers=1) as runtime:
        client = runtime.sessions(flow)
        await client.open_session("s1")
        live = LiveText(runtime.flow_client, flow, "s1")
        await live.start()
        shown: list[str] = []
        follower = Follower(client, "s1", live, write=shown.append)
        try:
            for number in range(1, 11):
                text = f"where is order {number}"
                follower.sent(text)
                await client.send_user_message("s1", text)
                await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
                assert follower.kept_calls == 0
        finally:
            await live.stop()
    # Each call's result is still shown once, with its status.
    tools = [line for line in "".join(shown).splitlines() if line.startswith("tool> ")]
    assert len(tools) == 10
    for number, line in enumerate(tools, start=1):
        assert line.startswith("tool> lookup_order -> succeeded: ")
        assert f'"order_id": "{number}"' in line


async def test_a_followed_chat_forgets_the_approvals_and_plans_of_turns_it_has_shown(
    tmp_path: Path,
) -> None:
    # A chat that follows a session for days kept every interrupt's resolution and every
    # plan approval it read from the Stream.
    flow = demo_flow()
    async with LocalRuntime(tmp_path / "chat.db", [flow], workers=1) as runtime:
        client = runtime.sessions(flow)
        await client.open_session("s1")
        live = LiveText(runtime.flow_client, flow, "s1")
        await live.start()
        shown: list[str] = []
        follower = Follower(client, "s1", live, write=shown.append)
        kept: list[int] = []
        try:
            for number in range(1, 9):
                await client.send_user_message("s1", f"refund order {number}")
                asking = await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
                (approval,) = asking.pending_interrupts
                assert await client.resolve_interrupt("s1", approval.interrupt_id, True)
                await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
                await client.send_user_message("s1", "make a plan")
                planned = await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
                assert planned.plan is not None
                assert await client.execute_plan("s1", planned.plan.revision)
                await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
                kept.append(follower.kept_entries)
        finally:
            await live.stop()
    # What a turn keeps, it keeps until the next one: no more after eight of each.
    assert max(kept) <= 4, kept
    lines = "".join(shown).splitlines()
    # Each plan approval still shows as one, not as the session's words for it.
    approved = [line for line in lines if line.startswith("plan revision ")]
    assert len(approved) == 8
    assert not [line for line in lines if "[Dex]" in line]


class RetriedModel(ScriptedRunner):
    """Writes "Hel", then fails once ``fail`` is set; its retry answers "Hello"."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = asyncio.Event()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.attempt == 1:
            turn.events.write_text_delta("Hel")
            await self.fail.wait()
            error = ModelCallError("the stream dropped")
            error.retry_after = timedelta(milliseconds=10)
            raise error
        turn.events.write_text_delta("Hello")
        answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text="Hello")
        return TurnCompleted(new_messages=[answer], usage=AgentUsage(model_calls=1))


@contextlib.asynccontextmanager
async def _followed(
    runner: ScriptedRunner,
) -> AsyncIterator[tuple[PortableSessionClient, Follower, list[str]]]:
    """Session "s1" of ``runner``, followed by a chat's ``Follower``; the list is what it
    has written so far."""
    flow = AgentSessionFlow(runner, flow_type="LiveAgent")
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        client = runtime.sessions(flow)
        await client.start_session("s1")
        live = LiveText(runtime.flow_client, flow, "s1")
        await live.start()
        shown: list[str] = []
        try:
            yield client, Follower(client, "s1", live, write=shown.append), shown
        finally:
            await live.stop()


async def _written(shown: list[str], text: str) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
    while text not in "".join(shown):
        assert asyncio.get_running_loop().time() < deadline, "".join(shown)
        await asyncio.sleep(0.02)  # ``shown`` cannot be awaited; the deadline bounds the wait


async def test_a_retried_model_call_shows_the_retry_once_below_the_failed_ones_text() -> None:
    runner = RetriedModel()
    async with _followed(runner) as (client, follower, shown):
        follower.sent("hi")
        await client.send_user_message("s1", "hi")
        following = asyncio.create_task(follower.until_person())
        await _written(shown, "agent> Hel")
        runner.fail.set()
        await asyncio.wait_for(following, DEADLINE_SECONDS)
    # Before, the failed attempt's text took the stored one: 'agent> lo' showed too.
    assert "".join(shown).splitlines() == ["agent> Hel", "agent> Hello"]


async def test_a_followed_chat_forgets_the_turns_cancelled_elsewhere() -> None:
    # A chat that follows a session for days kept the text of each cancelled turn's model
    # call, and that it said the turn was cancelled.
    kept: list[int] = []
    async with _followed(StreamingUntilCancelled()) as (client, follower, shown):
        # A session with no turn yet is idle, with no turn cancelled.
        await asyncio.wait_for(follower.until_person(), DEADLINE_SECONDS)
        for number in range(1, 13):
            text = f"where is order {number}"
            follower.sent(text)
            await client.send_user_message("s1", text)
            following = asyncio.create_task(follower.until_person())
            await _written(shown, f"agent> looking for order {number}")
            snapshot = await client.get_agent_snapshot("s1")
            assert snapshot.state is not None
            turn = snapshot.state.active_turn_id
            assert turn is not None
            assert await client.cancel_turn("s1", turn)
            await asyncio.wait_for(following, DEADLINE_SECONDS)
            kept.append(follower.kept_entries)
    assert max(kept) <= 3, kept
    cancelled = [line for line in "".join(shown).splitlines() if line == "turn cancelled elsewhere"]
    assert len(cancelled) == 12


class StreamingUntilCancelled(ScriptedRunner):
    """Writes a first piece of its answer as live text, then waits until cancelled."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        asked = next(m.text or "" for m in reversed(turn.messages) if m.role is MessageRole.USER)
        turn.events.write_text_delta(f"looking for order {asked.rpartition(' ')[2]}")
        await asyncio.Event().wait()
        raise AssertionError("never answers")
