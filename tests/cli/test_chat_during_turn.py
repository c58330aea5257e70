"""What a person types in ``dex-agents chat`` while a turn runs.

The chat runs in a pseudo-terminal on a model served on loopback (``ProviderServer``,
in a thread of its own), whose answer pauses mid-stream until the test lets it go on.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.transitions import stop_flow
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.ports.flow_store import StoreTransaction
from tests.adapters.litellm.provider_scripts import chat_reply, chat_stream
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.cli.cli_support import DEADLINE_SECONDS, user_texts
from tests.cli.pty_support import COLUMNS, Terminal, screen, up_to_last_written
from tests.cli.test_chat_elsewhere import elsewhere

ANSWER = "Order 7 shipped on Monday and arrives on Friday."
PAUSED_AFTER = "agent> Order 7 shipped "


@dataclass
class _PausedModel:
    """A model whose first answer (``ANSWER``) stops after ``PAUSED_AFTER`` until ``go_on``."""

    server: ProviderServer
    loop: asyncio.AbstractEventLoop
    gate: asyncio.Event

    def go_on(self) -> None:
        self.loop.call_soon_threadsafe(self.gate.set)

    def env(self) -> dict[str, str]:
        return {
            "DEX_AGENTS_MODEL": "hosted_vllm/my-model",
            "DEX_AGENTS_API_BASE": self.server.url + "/v1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }


@contextmanager
def _paused_model(*later: str, answer: str = ANSWER, pause_at: int = 4) -> Iterator[_PausedModel]:
    """The model; ``later`` are its next answers, each sent at once. Its first,
    ``answer``, pauses before its event ``pause_at`` (0 is the role, then one word each)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="provider", daemon=True)
    thread.start()

    async def start() -> _PausedModel:
        gate = asyncio.Event()

        async def before_event(index: int) -> None:
            if index == pause_at:  # by default after "Order ", "7 ", "shipped "
                await gate.wait()

        server = ProviderServer()
        server.script(sse_reply(chat_stream(answer), before_event=before_event))
        server.script(*(chat_reply(text) for text in later))
        await server.__aenter__()
        return _PausedModel(server, loop, gate)

    model = asyncio.run_coroutine_threadsafe(start(), loop).result(DEADLINE_SECONDS)
    try:
        yield model
    finally:
        model.go_on()
        stop = model.server.__aexit__(None, None, None)
        asyncio.run_coroutine_threadsafe(stop, loop).result(DEADLINE_SECONDS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(DEADLINE_SECONDS)
        loop.close()


@contextmanager
def _chat_mid_turn(tmp_path: Path, *later: str) -> Iterator[tuple[Terminal, _PausedModel]]:
    """The chat, its first message sent and the model's answer paused mid-stream."""
    with _paused_model(*later) as model, Terminal(tmp_path, env=model.env()) as chat:
        chat.expect("you> ")
        chat.send("where is order 7?")
        chat.expect(PAUSED_AFTER)
        yield chat, model


def test_what_is_typed_while_the_model_writes_stays_below_its_text_and_enter_queues_it(
    tmp_path: Path,
) -> None:
    with _chat_mid_turn(tmp_path, "Noted.") as (chat, model):
        chat.type("and the invoice")
        chat.expect("and the invoice")
        model.go_on()
        chat.expect("Friday.")
        # Before, the terminal echoed what was typed into the middle of the model's text.
        chat.expect_last_rows([f"agent> {ANSWER}", "you> and the invoice"])
        chat.type("\r")  # Enter: sent now, as the next message
        chat.expect("agent> Noted.")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?", "and the invoice"]


def test_a_line_sent_while_the_model_writes_shows_where_it_was_typed(tmp_path: Path) -> None:
    with _chat_mid_turn(tmp_path, "Noted.") as (chat, model):
        chat.send("and the invoice")
        chat.expect("you> and the invoice\n")
        model.go_on()
        chat.expect("agent> Noted.")
        chat.expect("you> ")
        rows = up_to_last_written(screen(chat.raw))
        # The model's text goes on below the sent line, on a line of its own.
        sent = rows.index("you> and the invoice")
        assert rows[sent - 1 : sent + 3] == [
            PAUSED_AFTER.rstrip(),
            "you> and the invoice",
            "agent> on Monday and arrives on Friday.",
            "agent> Noted.",
        ]
        assert chat.quit() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?", "and the invoice"]


def test_a_paragraph_pasted_while_the_model_writes_is_one_message(tmp_path: Path) -> None:
    with _chat_mid_turn(tmp_path, "Noted.") as (chat, model):
        chat.paste("hello\nthere")
        chat.expect("there")
        chat.type("\r")
        model.go_on()
        chat.expect("agent> Noted.")
        chat.expect("you> ")
        assert chat.quit() == 0
    # Before, the terminal read each pasted line as a line of its own: two messages.
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?", "hello\nthere"]


def test_ctrl_c_while_the_model_writes_leaves_with_what_was_typed_shown(tmp_path: Path) -> None:
    with _chat_mid_turn(tmp_path) as (chat, _):
        chat.type("half typed")
        chat.expect("half typed")
        chat.interrupt()
        assert chat.process.wait(timeout=DEADLINE_SECONDS) == 130
        rows = up_to_last_written(screen(chat.raw + chat.rest()))
        assert rows[-2:] == [PAUSED_AFTER.rstrip(), "you> half typed"]
        assert chat.line_mode()
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?"]


def test_ctrl_d_while_the_model_writes_leaves_with_the_terminal_in_line_mode(
    tmp_path: Path,
) -> None:
    with _chat_mid_turn(tmp_path) as (chat, _):
        chat.end_input()
        assert chat.process.wait(timeout=DEADLINE_SECONDS) == 0
        rows = up_to_last_written(screen(chat.raw + chat.rest()))
        assert rows[-2:] == [PAUSED_AFTER.rstrip(), "you>"]
        assert chat.line_mode()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=lambda n: n.name)
def test_a_signal_that_ends_the_chat_while_the_model_writes_leaves_the_terminal_in_line_mode(
    tmp_path: Path, number: signal.Signals
) -> None:
    with _chat_mid_turn(tmp_path) as (chat, _):
        chat.type("half typed")
        chat.expect("half typed")
        assert not chat.line_mode()  # the prompt below the turn reads key by key
        chat.process.send_signal(number)
        assert chat.process.wait(timeout=DEADLINE_SECONDS) == -number
        assert chat.line_mode()


def test_a_model_line_wider_than_the_terminal_goes_on_above_what_is_typed(
    tmp_path: Path,
) -> None:
    answer = " ".join(f"word{n}" for n in range(30)) + "."  # three rows
    paused = _paused_model(answer=answer, pause_at=16)  # after word14, on the second row
    with paused as model, Terminal(tmp_path, env=model.env()) as chat:
        chat.expect("you> ")
        chat.send("hello")
        chat.expect("word14 ")
        chat.type("and the invoice")
        chat.expect("and the invoice")
        model.go_on()
        chat.expect("word29.")
        shown = f"agent> {answer}"
        # Each piece wrote the model's line again whole: none of its rows is left twice.
        rows = chat.expect_last_rows(
            [
                shown[:COLUMNS].rstrip(),
                shown[COLUMNS : 2 * COLUMNS].rstrip(),
                shown[2 * COLUMNS :],
                "you> and the invoice",
            ]
        )
        assert sum(row.count("word0 ") for row in rows) == 1
        chat.send("\x15/quit")
        assert chat.exit_code() == 0


def test_a_session_stopped_elsewhere_while_the_model_writes_leaves_what_was_typed_shown(
    tmp_path: Path,
) -> None:
    with _chat_mid_turn(tmp_path) as (chat, _):
        chat.type("half typed")
        chat.expect("half typed")

        async def stop(sessions: PortableSessionClient) -> None:
            await sessions.flow_client.stop_flow("pty", "stopped in another window")

        elsewhere(chat.db, stop)
        chat.expect("error: session 'pty' is stopped")
        assert chat.exit_code() == 1
        assert up_to_last_written(screen(chat.raw))[-3:] == [
            PAUSED_AFTER.rstrip(),
            "you> half typed",
            "dex-agents: error: session 'pty' is stopped",
        ]
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?"]


def test_a_paragraph_pasted_while_the_message_is_being_sent_is_one_message(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        # Another writer holds the database: sending the message waits for it.
        holder = sqlite3.connect(chat.db, timeout=DEADLINE_SECONDS)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            chat.send("first")
            chat.expect("first\n")
            # Before, the terminal was in its line mode until the message was sent: what was
            # typed meanwhile was the terminal's, echoed and split into lines.
            chat.expect_paste_marks()
            assert not chat.line_mode()
            chat.paste("hello\nthere")
            chat.expect("there")
            chat.type("\r")
            chat.expect("you> hello")
        finally:
            holder.rollback()
            holder.close()
        chat.expect("agent> Demo reply: hello\nthere.")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["first", "hello\nthere"]


@pytest.mark.parametrize(
    ("message", "prompt", "answer"),
    [
        ("refund order 7", "[y/n] ", "y"),
        ("change the address of order 7", "question> ", "/decline"),
    ],
    ids=["approval", "question"],
)
def test_a_paragraph_pasted_while_an_answer_is_being_sent_is_one_message(
    tmp_path: Path, message: str, prompt: str, answer: str
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        chat.send(message)
        chat.expect(prompt)
        # Another writer holds the database: sending the answer waits for it.
        holder = sqlite3.connect(chat.db, timeout=DEADLINE_SECONDS)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            chat.send(answer)
            chat.expect(answer + "\n")
            # Before, the terminal was in its line mode until the answer was sent: what was
            # typed meanwhile was the terminal's, echoed and split into lines.
            chat.expect_paste_marks()
            assert not chat.line_mode()
            chat.paste("hello\nthere")
        finally:
            holder.rollback()
            holder.close()
        chat.expect("there")
        chat.type("\r")
        chat.expect("agent> Demo reply: hello\nthere.")
        chat.expect("you> ")
        assert chat.quit() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == [message, "hello\nthere"]


def test_a_warning_logged_while_something_is_typed_below_the_turn_shows_above_the_prompt(
    tmp_path: Path,
) -> None:
    with _chat_mid_turn(tmp_path) as (chat, model):
        chat.type("half typed")
        chat.expect("half typed")
        # Another writer holds the database past its busy timeout: the worker, writing the
        # model's next words, logs that the session database failed.
        holder = sqlite3.connect(chat.db, timeout=DEADLINE_SECONDS)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            model.go_on()
            chat.expect("the session database failed")
        finally:
            holder.rollback()
            holder.close()
        chat.expect("Friday.")
        rows = chat.expect_last_rows(["agent> on Monday and arrives on Friday.", "you> half typed"])
        # Before, the record was written to the terminal in the middle of the prompt's row.
        assert [row for row in rows if "half typed" in row] == ["you> half typed"]
        failed = next(n for n, row in enumerate(rows) if row.startswith("dex-agents: error: "))
        # On a line of its own: the model's text goes on below it.
        assert rows[failed - 1] == PAUSED_AFTER.rstrip()
        chat.send("\x15/quit")
        assert chat.exit_code() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?"]


@contextmanager
def _stopped_once_let_go(db: Path) -> Iterator[threading.Event]:
    """Another writer holds the database, and stops the session in the transaction it
    holds once the yielded event is set: a send that waits for the database meanwhile
    finds the session stopped."""
    held, go = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def stop(tx: StoreTransaction) -> None:
        held.set()
        assert go.wait(DEADLINE_SECONDS)
        stop_flow(tx, "pty", "stopped in another window", datetime.now(UTC), None)

    def hold() -> None:
        store = SqliteFlowStore(db)
        try:
            store.run(stop)
        except BaseException as error:
            failures.append(error)
            held.set()
        finally:
            store.close()

    holder = threading.Thread(target=hold, name="holder", daemon=True)
    holder.start()
    try:
        assert held.wait(DEADLINE_SECONDS)
        yield go
    finally:
        go.set()
        holder.join(DEADLINE_SECONDS)
    assert not failures


def test_a_message_the_session_refuses_leaves_what_was_typed_meanwhile_shown(
    tmp_path: Path,
) -> None:
    with Terminal(tmp_path) as chat:
        chat.expect("you> ")
        with _stopped_once_let_go(chat.db) as go:
            chat.send("first")
            chat.expect("first\n")
            chat.expect_paste_marks()  # the prompt below the turn reads keys
            chat.type("half typed")
            chat.expect("half typed")
            go.set()
        chat.expect("error: session 'pty' is stopped")
        assert chat.exit_code() == 1
        # Before, the prompt was erased with what was typed at it, and the error shown alone.
        assert up_to_last_written(screen(chat.raw))[-3:] == [
            "you> first",
            "you> half typed",
            "dex-agents: error: session 'pty' is stopped: stopped in another window",
        ]
    assert user_texts(tmp_path / "db.sqlite3", "pty") == []
