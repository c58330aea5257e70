"""What a person types in ``dex-agents chat`` while a turn runs.

The chat runs in a pseudo-terminal on a model whose answer pauses mid-stream until the
test lets it go on (``paused_model``).
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.session_client import PortableSessionClient
from dex_agents.cli.demo_agent import DEMO_FLOW_TYPE
from tests.cli.cli_support import DEADLINE_SECONDS, user_texts
from tests.cli.paused_model import ANSWER, PAUSED_AFTER, chat_mid_turn, paused_model
from tests.cli.pty_support import Terminal
from tests.cli.terminal_screen import COLUMNS, screen, up_to_last_written
from tests.cli.test_chat_elsewhere import elsewhere


def test_what_is_typed_while_the_model_writes_stays_below_its_text_and_enter_queues_it(
    tmp_path: Path,
) -> None:
    with chat_mid_turn(tmp_path, "Noted.") as (chat, model):
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
    with chat_mid_turn(tmp_path, "Noted.") as (chat, model):
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
    with chat_mid_turn(tmp_path, "Noted.") as (chat, model):
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
    with chat_mid_turn(tmp_path) as (chat, _):
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
    with chat_mid_turn(tmp_path) as (chat, _):
        chat.end_input()
        assert chat.process.wait(timeout=DEADLINE_SECONDS) == 0
        rows = up_to_last_written(screen(chat.raw + chat.rest()))
        assert rows[-2:] == [PAUSED_AFTER.rstrip(), "you>"]
        assert chat.line_mode()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=lambda n: n.name)
def test_a_signal_that_ends_the_chat_while_the_model_writes_leaves_the_terminal_in_line_mode(
    tmp_path: Path, number: signal.Signals
) -> None:
    with chat_mid_turn(tmp_path) as (chat, _):
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
    paused = paused_model(answer=answer, pause_at=16)  # after word14, on the second row
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
    with chat_mid_turn(tmp_path) as (chat, _):
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


def test_a_warning_logged_while_something_is_typed_below_the_turn_shows_above_the_prompt(
    tmp_path: Path,
) -> None:
    with chat_mid_turn(tmp_path) as (chat, model):
        chat.type("half typed")
        chat.expect("half typed")
        # Another program writes an event the chat cannot read: reading the Stream for the
        # model's words, the chat logs that it skipped it. (Not a write lock held past the
        # busy timeout, which the worker logs too, but only after 10 s.)
        store = SqliteFlowStore(chat.db)
        try:
            store.run(
                lambda tx: tx.append_event(
                    DEMO_FLOW_TYPE, "pty", '"not an event"', "elsewhere", datetime.now(UTC)
                )
            )
        finally:
            store.close()
        chat.expect("which no longer decodes")
        model.go_on()
        chat.expect("Friday.")
        rows = chat.expect_last_rows(["agent> on Monday and arrives on Friday.", "you> half typed"])
        # Before, the record was written to the terminal in the middle of the prompt's row.
        assert [row for row in rows if "half typed" in row] == ["you> half typed"]
        warned = next(n for n, row in enumerate(rows) if row.startswith("dex-agents: warning: "))
        # On a line of its own: the model's text goes on below it.
        assert rows[warned - 1] == PAUSED_AFTER.rstrip()
        chat.send("\x15/quit")
        assert chat.exit_code() == 0
    assert user_texts(tmp_path / "db.sqlite3", "pty") == ["where is order 7?"]


def _rows(text: str, columns: int) -> list[str]:
    return [text[n : n + columns].rstrip() for n in range(0, len(text), columns)]


@pytest.mark.parametrize(
    ("columns", "pause_at", "paused_after"),
    # Paused after word10 the model's line takes one row at 80 and 100 columns, two at 60;
    # after word13, two at 60 and 80, one at 120.
    [(60, 12, "word10 "), (120, 15, "word13 "), (60, 15, "word13 "), (100, 12, "word10 ")],
    ids=["narrower", "wider", "narrower-same-rows", "wider-same-rows"],
)
def test_a_terminal_resized_while_the_model_writes_keeps_every_row_above_its_line(
    tmp_path: Path, columns: int, pause_at: int, paused_after: str
) -> None:
    answer = " ".join(f"word{n}" for n in range(30)) + "."
    paused = paused_model(answer=answer, pause_at=pause_at)
    with paused as model, Terminal(tmp_path, env=model.env()) as chat:
        chat.expect("you> ")
        chat.send("hello")
        open_line = chat.expect(paused_after).rpartition("\n")[2]
        chat.type("and the invoice")
        chat.expect("and the invoice")
        # The terminal cuts its rows to the new width, as xterm does, rather than rewrap them.
        chat.resize(columns)
        model.go_on()
        chat.expect("word29.")
        if len(_rows(open_line, COLUMNS)) == len(_rows(open_line, columns)):
            # Its rows are as many either way: what continues it draws it again whole.
            line = _rows(f"agent> {answer}", columns)
        else:
            # Before, what continued the line went back up into it as many rows as the new
            # width lays it out: narrower, two where the terminal kept one, erasing "you>
            # hello"; wider, one where it kept two, leaving the line's start twice. Now the
            # line ends where the resize found it, its rows as the terminal keeps them, and
            # what continues it starts a line of its own.
            drawn = [row[:columns].rstrip() for row in _rows(open_line, COLUMNS)]
            go_on = "agent> " + answer.partition(paused_after)[2]
            line = drawn + _rows(go_on, columns)
        chat.expect_last_rows(["you> hello", *line, "you> and the invoice"])
        chat.send("\x15/quit")
        assert chat.exit_code() == 0
