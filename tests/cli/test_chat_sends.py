"""What a person types in ``dex-agents chat`` while a message or an answer is being sent.

The chat runs in a pseudo-terminal; another writer holds the database file, so a
send waits for it, as it does behind a busy worker, and the test types meanwhile.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.transitions import stop_flow
from dex_agents.ports.flow_store import StoreTransaction
from tests.cli.cli_support import DEADLINE_SECONDS, user_texts
from tests.cli.paused_model import chat_mid_turn
from tests.cli.pty_support import Terminal
from tests.cli.terminal_screen import screen, up_to_last_written


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


def test_a_paragraph_pasted_while_a_line_typed_below_the_turn_is_being_sent_is_one_message(
    tmp_path: Path,
) -> None:
    with chat_mid_turn(tmp_path, "Noted.", "Noted again.") as (chat, model):
        holder = sqlite3.connect(chat.db, timeout=DEADLINE_SECONDS)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            chat.send("and the invoice")
            chat.expect("you> and the invoice\n")
            # Before, the terminal was in its line mode until the line was sent: what was
            # typed meanwhile was the terminal's, echoed and split into lines.
            chat.expect_paste_marks()
            assert not chat.line_mode()
            chat.paste("hello\nthere")
            chat.expect("there")
        finally:
            holder.rollback()
            holder.close()
        chat.type("\r")
        chat.expect("you> hello")
        model.go_on()
        chat.expect("agent> Noted again.")
        chat.expect("you> ")
        assert chat.quit() == 0
    texts = ["where is order 7?", "and the invoice", "hello\nthere"]
    assert user_texts(tmp_path / "db.sqlite3", "pty") == texts
