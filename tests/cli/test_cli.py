"""``dex-agents`` end to end: the chat program in a subprocess over a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dex_agents.cli.demo_agent import demo_reply
from dex_agents.domain.model_io import ModelRequest, ToolResultItem, UserTextItem
from tests.cli.cli_support import Chat, run_cli, tool_log

REFUND_7 = '{"order_id": "7", "amount_cents": 1200}'


def test_chat_answers_looks_up_and_refunds_after_approval(tmp_path: Path) -> None:
    chat = Chat(tmp_path)
    chat.expect("started session s1 in")
    chat.expect("you> ")
    chat.send("hello")
    assert "agent> Demo reply: hello." in chat.expect("you> ")
    chat.send("where is order 7")
    seen = chat.expect("you> ")
    assert seen.splitlines()[:2] == [
        'agent> calls lookup_order {"order_id": "7"}',
        'tool> lookup_order -> succeeded: {"order_id": "7", "status": "shipped", '
        '"total_cents": 4200, "shipping_address": "1 Demo Street, Springfield"}',
    ]
    chat.send("refund order 7 $12")
    # The call the model asked for comes first, then its status, then the question.
    assert chat.expect(f"approve refund_order {REFUND_7}? [y/n] ").splitlines() == [
        f"agent> calls refund_order {REFUND_7}",
        "tool> refund_order -> awaiting_approval",
        f"approve refund_order {REFUND_7}? [y/n] ",
    ]
    chat.send("Yes")
    # "approved" shows too when a snapshot is read before the refund ran. The final status
    # shows even when the turn ended before the chat looked again (its record is gone
    # then, and the status comes from the call's tool_call_finished event).
    assert [line for line in chat.expect("you> ").splitlines() if "approved" not in line] == [
        "tool> refund_order -> succeeded: refunded 1200 cents on order 7",
        "agent> Done. refund_order: refunded 1200 cents on order 7",
        "you> ",
    ]
    chat.send("change the address of order 7")
    assert "agent asks: What is the new shipping address for order 7?" in chat.expect("question> ")
    chat.send("2 New Road")
    assert "order 7 now ships to 2 New Road" in chat.expect("you> ")
    chat.send("make a plan")
    chat.expect("you> ")
    assert chat.quit() == 0
    assert tool_log(tmp_path) == [
        "lookup_order 7",
        "refund_order 7 1200",
        "update_shipping_address 7 2 New Road",
    ]

    show = run_cli(tmp_path, "show", "s1", "--db", str(tmp_path / "db.sqlite3"))
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith(
        "session s1 (DemoSupportAgent): waiting_for_user_message, waits for a user message\n"
        "transcript:\n  you> hello\n"
    )
    assert "  tool> refund_order -> refunded 1200 cents on order 7\n" in show.stdout
    assert "plan (revision 1, active):\n  [completed] Look up order 7\n" in show.stdout
    assert "usage: 10 model calls" in show.stdout


def test_an_approval_asks_again_until_it_reads_yes_or_no(tmp_path: Path) -> None:
    chat = Chat(tmp_path)
    chat.expect("you> ")
    chat.send("refund order 7 $12")
    prompt = f"approve refund_order {REFUND_7}? [y/n] "
    chat.expect(prompt)
    for reply in ("", "maybe", "yess", "/frob"):
        chat.send(reply)
        chat.expect(prompt)
    assert tool_log(tmp_path) == []
    chat.send("NO")
    assert "tool> refund_order -> rejected" in chat.expect("you> ")
    assert chat.quit() == 0
    assert tool_log(tmp_path) == []


def test_an_empty_answer_to_a_question_is_not_sent(tmp_path: Path) -> None:
    chat = Chat(tmp_path)
    chat.expect("you> ")
    chat.send("change the address of order 7")
    chat.expect("question> ")
    chat.send("   ")
    assert "an empty answer is not sent" in chat.expect("question> ")
    chat.send("/decline")
    assert "tool> ask_user -> rejected: The user declined to answer." in chat.expect("you> ")
    assert chat.quit() == 0
    assert tool_log(tmp_path) == []


@pytest.mark.parametrize("errors", ["surrogateescape", "strict"])
def test_a_line_that_is_not_utf8_is_sent_with_replacement_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: str
) -> None:
    # Python reads a terminal with either handler, depending on the locale.
    monkeypatch.setenv("PYTHONIOENCODING", f"utf-8:{errors}")
    chat = Chat(tmp_path)
    chat.expect("you> ")
    assert chat.process.stdin is not None
    chat.process.stdin.write(b"hello \xff\xfe world\n")
    chat.process.stdin.flush()
    assert "agent> Demo reply: hello \ufffd\ufffd world." in chat.expect("you> ")
    assert chat.quit() == 0


def test_text_the_terminal_cannot_encode_is_shown_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = Chat(tmp_path)
    chat.expect("you> ")
    chat.send("caf\u00e9 \u65e5")
    chat.expect("you> ")
    assert chat.quit() == 0
    monkeypatch.setenv("PYTHONIOENCODING", "ascii")
    show = run_cli(tmp_path, "show", "s1", "--db", str(tmp_path / "db.sqlite3"))
    assert show.returncode == 0, show.stderr
    assert "  you> caf\\xe9 \\u65e5\n" in show.stdout
    chat = Chat(tmp_path)
    assert "  you> caf\\xe9 \\u65e5" in chat.expect("waiting for: a user message")
    chat.expect("you> ")
    chat.send("hello")
    assert "agent> Demo reply: hello." in chat.expect("you> ")
    assert chat.quit() == 0


def test_a_killed_chat_asks_the_pending_approval_again_and_refunds_once(tmp_path: Path) -> None:
    db = str(tmp_path / "db.sqlite3")
    chat = Chat(tmp_path)
    chat.expect("you> ")
    chat.send("refund order 9 $5")
    chat.expect('approve refund_order {"order_id": "9", "amount_cents": 500}? [y/n] ')
    chat.kill()

    sessions = run_cli(tmp_path, "sessions", "--db", db)
    assert sessions.returncode == 0, sessions.stderr
    header, row = sessions.stdout.splitlines()
    assert header.split("  ")[:2] == ["ID", "FLOW TYPE"]
    assert row.startswith("s1  DemoSupportAgent  waiting for approval of refund_order  20")

    again = Chat(tmp_path)
    again.expect("resuming session s1 in")
    again.expect('approve refund_order {"order_id": "9", "amount_cents": 500}? [y/n] ')
    again.send("y")
    assert "refunded 500 cents on order 9" in again.expect("you> ")
    assert again.quit() == 0
    assert tool_log(tmp_path) == ["refund_order 9 500"]

    sessions = run_cli(tmp_path, "sessions", "--db", db)
    assert "s1  DemoSupportAgent  waiting for a message  20" in sessions.stdout
    show = run_cli(tmp_path, "show", "s1", "--db", db)
    assert show.stdout.count("tool> refund_order -> refunded 500 cents on order 9") == 1


def _request(text: str, *results: ToolResultItem) -> ModelRequest:
    return ModelRequest(instructions="", items=(UserTextItem(text=text), *results))


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("where is order 7", "lookup_order", {"order_id": "7"}),
        ("refund order 12 $3.5", "refund_order", {"order_id": "12", "amount_cents": 350}),
        ("refund order 4", "refund_order", {"order_id": "4", "amount_cents": 1500}),
        (
            "new address for order 3",
            "ask_user",
            {"question": "What is the new shipping address for order 3?"},
        ),
    ],
)
def test_the_demo_model_calls_a_tool_on_its_keywords(
    text: str, tool: str, arguments: dict[str, object]
) -> None:
    reply = demo_reply(_request(text))
    assert [(call.name, json.loads(call.arguments)) for call in reply.tool_calls] == [
        (tool, arguments)
    ]


def test_the_demo_model_answers_plain_text_and_summarizes_results() -> None:
    assert demo_reply(_request("hi")).text == (
        "Demo reply: hi. Try 'where is order 7', 'refund order 7', "
        "'change the address of order 7' or 'make a plan'."
    )
    result = ToolResultItem(tool_call_id="c1", tool_name="lookup_order", output="found")
    assert demo_reply(_request("where is order 7", result)).text == "Done. lookup_order: found"
    answer = ToolResultItem(
        tool_call_id="c2", tool_name="ask_user", output='{"status":"answered","answer":"Elm St"}'
    )
    followup = demo_reply(_request("address of order 5", answer))
    assert [(call.name, json.loads(call.arguments)) for call in followup.tool_calls] == [
        ("update_shipping_address", {"order_id": "5", "address": "Elm St"})
    ]
