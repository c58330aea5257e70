"""What another window does shows in ``dex-agents chat`` while one of its prompts waits.

A second client on the same database file acts as the other window (the console,
an API call); the chat runs in a pseudo-terminal, as a person runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from dex_agents.app.session_client import PortableSessionClient
from dex_agents.domain.messages import MessageRole
from tests.cli.cli_support import Chat, demo_sessions, pending_interrupt_ids, tool_log
from tests.cli.pty_support import Terminal
from tests.cli.terminal_screen import COLUMNS, screen, up_to_last_written

REFUND = '{"order_id": "7", "amount_cents": 1500}'
APPROVAL_PROMPT = f"approve refund_order {REFUND}? [y/n] "
_T = TypeVar("_T")


def elsewhere(db: Path, act: Callable[[PortableSessionClient], Awaitable[_T]]) -> _T:
    """Run ``act`` in another window: a client of its own on the chat's database file."""

    async def run() -> _T:
        async with demo_sessions(db) as sessions:
            return await act(sessions)

    return asyncio.run(run())


async def _only_interrupt(sessions: PortableSessionClient) -> str:
    (interrupt,) = (await sessions.get_agent_snapshot("pty")).pending_interrupts
    return interrupt.interrupt_id


def _resolved_elsewhere(db: Path, approved: bool) -> bool:
    """Approve or decline the chat's one pending approval or question in another window."""

    async def resolve(sessions: PortableSessionClient) -> bool:
        return await sessions.resolve_interrupt("pty", await _only_interrupt(sessions), approved)

    return elsewhere(db, resolve)


def _answered_elsewhere(db: Path, answer: str) -> bool:
    """Answer the chat's one pending question in another window."""

    async def resolve(sessions: PortableSessionClient) -> bool:
        return await sessions.answer_question("pty", await _only_interrupt(sessions), answer)

    return elsewhere(db, resolve)


@contextmanager
def _chat_asking(tmp_path: Path, message: str, prompt: str) -> Iterator[Terminal]:
    """The chat in a terminal, asking at ``prompt`` once ``message`` was sent."""
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.send(message)
        chat.expect(prompt)
        yield chat


@contextmanager
def _chat_typing(tmp_path: Path, typed: str) -> Iterator[Terminal]:
    """The chat in a terminal, its message prompt holding ``typed``, not sent."""
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect(typed)  # read by the prompt, not left in the terminal
        yield chat


def _user_texts(db: Path) -> list[str | None]:
    async def read(sessions: PortableSessionClient) -> list[str | None]:
        snapshot = await sessions.get_agent_snapshot("pty")
        return [m.text for m in snapshot.messages if m.role is MessageRole.USER]

    return elsewhere(db, read)


def test_a_message_sent_elsewhere_shows_above_the_prompt_and_keeps_what_was_typed(
    tmp_path: Path,
) -> None:
    with _chat_typing(tmp_path, "where is") as chat:
        assert elsewhere(chat.db, lambda s: s.send_user_message("pty", "hello from the console"))
        # Before, nothing showed until Enter was pressed.
        chat.expect("you (elsewhere)> hello from the console\n")
        chat.expect("agent> Demo reply: hello from the console.")
        chat.expect("you> where is")  # drawn again with what was typed so far
        chat.send(" order 7")
        chat.expect("tool> lookup_order -> succeeded")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert _user_texts(tmp_path / "db.sqlite3") == ["hello from the console", "where is order 7"]
    assert tool_log(tmp_path) == ["lookup_order 7"]


def test_a_typed_line_longer_than_the_terminal_is_drawn_again_whole_below_what_arrived(
    tmp_path: Path,
) -> None:
    typed = " ".join(f"word{n}" for n in range(20))  # wraps: longer than a row
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect(typed[-20:])
        assert elsewhere(chat.db, lambda s: s.send_user_message("pty", "hello from the console"))
        chat.expect("you (elsewhere)> hello from the console\n")
        chat.expect(f"you> {typed}")
        rows = up_to_last_written(screen(chat.raw))
        prompt = f"you> {typed}"
        # Nothing is left of the prompt as it was before the new lines were printed above it.
        assert rows[-2:] == [prompt[:COLUMNS], prompt[COLUMNS:]]
        # The prompt's row now shows what arrived, and the prompt follows it.
        below = rows.index("type a message; /help lists the commands") + 1
        assert rows[below] == "you (elsewhere)> hello from the console"
        assert rows[below + 1].startswith("agent> Demo reply: hello from the console.")
        assert sum(row.count("word19") for row in rows) == 1
        chat.send("")
        chat.expect(f"agent> Demo reply: {typed}.")
        assert chat.quit() == 0


def test_an_approval_answered_elsewhere_ends_its_prompt_with_a_line_saying_so(
    tmp_path: Path,
) -> None:
    with _chat_asking(tmp_path, "refund order 7", APPROVAL_PROMPT) as chat:
        assert _resolved_elsewhere(chat.db, approved=True)
        # Before, the prompt waited for y or n, and only then said "already answered".
        chat.expect("this approval was answered elsewhere: approved\n")
        assert "refunded 1500 cents on order 7" in chat.expect("you> ")
        assert chat.quit() == 0
    assert tool_log(tmp_path) == ["refund_order 7 1500"]


def test_a_question_answered_elsewhere_ends_its_prompt_and_drops_what_was_typed(
    tmp_path: Path,
) -> None:
    with _chat_asking(tmp_path, "change the address of order 7", "question> ") as chat:
        chat.type("3 Old")
        chat.expect("3 Old")  # read by the prompt, not left in the terminal
        assert _answered_elsewhere(chat.db, "2 New Road")
        chat.expect("this question was answered elsewhere\n")
        shown = chat.expect("you> ")
        assert "order 7 now ships to 2 New Road" in shown
        assert chat.quit() == 0  # the answer's start was not kept for the message prompt
    assert tool_log(tmp_path) == ["update_shipping_address 7 2 New Road"]


def test_a_question_declined_elsewhere_is_not_said_to_be_answered(tmp_path: Path) -> None:
    with _chat_asking(tmp_path, "change the address of order 7", "question> ") as chat:
        assert _resolved_elsewhere(chat.db, approved=False)
        # Before, it said "this question was answered elsewhere".
        chat.expect("this question was declined elsewhere\n")
        assert "tool> ask_user -> rejected: The user declined to answer." in chat.expect("you> ")
        assert chat.quit() == 0
    assert tool_log(tmp_path) == []


def test_an_approval_whose_turn_is_cancelled_elsewhere_is_withdrawn_at_once(
    tmp_path: Path,
) -> None:
    with _chat_asking(tmp_path, "refund order 7", APPROVAL_PROMPT) as chat:

        async def cancel(sessions: PortableSessionClient) -> bool:
            snapshot = await sessions.get_agent_snapshot("pty")
            assert snapshot.state is not None
            assert snapshot.state.active_turn_id is not None
            return await sessions.cancel_turn("pty", snapshot.state.active_turn_id)

        assert elsewhere(chat.db, cancel)
        shown = chat.expect("you> ")
        assert "this approval was withdrawn: its turn was cancelled\n" in shown
        assert "turn cancelled elsewhere" not in shown  # said once
        assert chat.quit() == 0
    assert tool_log(tmp_path) == []


def test_a_session_stopped_elsewhere_ends_the_chat_at_its_prompt(tmp_path: Path) -> None:
    with _chat_typing(tmp_path, "half a mess") as chat:

        async def stop(sessions: PortableSessionClient) -> None:
            await sessions.flow_client.stop_flow("pty", "stopped in another window")

        elsewhere(chat.db, stop)
        chat.expect("error: session 'pty' is stopped")
        assert chat.exit_code() == 1
        # Before, the prompt was erased with what was typed at it, which the person then
        # no longer saw, nor that it was never sent.
        assert up_to_last_written(screen(chat.raw))[-2:] == [
            "you> half a mess",
            "dex-agents: error: session 'pty' is stopped",
        ]


def test_a_turn_started_elsewhere_that_asks_an_approval_takes_over_the_message_prompt(
    tmp_path: Path,
) -> None:
    with _chat_typing(tmp_path, "where is") as chat:
        assert elsewhere(chat.db, lambda s: s.send_user_message("pty", "refund order 7"))
        chat.expect("you (elsewhere)> refund order 7\n")
        chat.expect(APPROVAL_PROMPT)
        chat.send("n")
        chat.expect("tool> refund_order -> rejected")
        chat.expect("you> where is")  # the message typed before the approval came back
        chat.send(" order 7")
        chat.expect("tool> lookup_order -> succeeded")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert pending_interrupt_ids(tmp_path / "db.sqlite3", "pty") == []
    assert tool_log(tmp_path) == ["lookup_order 7"]


def test_a_plan_executed_elsewhere_is_shown_as_an_approval_not_as_a_user_message(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.send("make a plan")
        chat.expect("tool> write_todos -> succeeded")
        chat.expect("you> ")
        assert elsewhere(chat.db, lambda s: s.execute_plan("pty", 1))
        shown = chat.expect("plan revision 1 approved elsewhere; the agent executes it\n")
        # Before, it showed as "you (elsewhere)> [Dex] The user approved plan revision 1 ...".
        assert "[Dex]" not in shown
        assert "[Dex]" not in chat.expect("agent> Done.")
        assert chat.quit() == 0


def test_on_pipes_an_approval_answered_elsewhere_ends_its_prompt_and_the_next_line_waits(
    tmp_path: Path,
) -> None:
    chat = Chat(tmp_path, session="pty")
    try:
        chat.expect("you> ")
        chat.send("refund order 7")
        chat.expect(APPROVAL_PROMPT)
        assert _resolved_elsewhere(tmp_path / "db.sqlite3", approved=True)
        assert chat.expect("this approval was answered elsewhere: approved\n") == (
            "\nthis approval was answered elsewhere: approved\n"  # a line of its own
        )
        chat.expect("refunded 1500 cents on order 7")
        chat.expect("you> ")
        # The line the ended prompt never read goes to the next prompt, not to nobody.
        chat.send("where is order 7")
        chat.expect("tool> lookup_order -> succeeded")
        chat.expect("you> ")
        assert chat.quit() == 0
    finally:
        if chat.process.poll() is None:
            chat.kill()
    assert tool_log(tmp_path) == ["refund_order 7 1500", "lookup_order 7"]


def test_a_typed_line_whose_wide_character_wraps_early_is_erased_whole(tmp_path: Path) -> None:
    # "you> " and 74 letters leave one column: the wide character starts the next row, so
    # the line takes three rows, one more than its 160 columns make on an 80-column terminal.
    typed = "a" * 74 + "界" + "b" * 79
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.type(typed)
        chat.expect("b" * 79)
        assert elsewhere(chat.db, lambda s: s.send_user_message("pty", "hello from the console"))
        chat.expect("you (elsewhere)> hello from the console\n")
        chat.expect(f"you> {typed}")
        rows = up_to_last_written(screen(chat.raw))
        # Before, the prompt's first row was left above what arrived.
        assert rows[-3:] == ["you> " + "a" * 74, "界" + "b" * 78, "b"]
        below = rows.index("type a message; /help lists the commands") + 1
        assert rows[below] == "you (elsewhere)> hello from the console"
        chat.send("\x15/quit")  # Ctrl-U drops what was typed
        assert chat.exit_code() == 0
