"""The chat's rules without a terminal: what a typed line means, escaping, refusal reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dex_agents.cli.commands import (
    LineKind,
    Prompt,
    TypedLine,
    approval_decision,
    help_lines,
    parse_line,
)
from dex_agents.cli.interrupt_texts import answered_elsewhere_text, gone_reason, refusal_reason
from dex_agents.cli.prompts import not_sent_text
from dex_agents.cli.terminal import (
    escaped,
    last_exchange,
    message_lines,
    plan_approved_line,
)
from dex_agents.domain.events import InterruptResolvedPayload
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.plans import executed_plan_revision, executing_turn_user_message
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect

NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize("prompt", list(Prompt))
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/quit", TypedLine(LineKind.LEAVE)),
        ("  EXIT ", TypedLine(LineKind.LEAVE)),
        ("quit", TypedLine(LineKind.LEAVE)),
        ("/help", TypedLine(LineKind.HELP)),
        ("Help", TypedLine(LineKind.HELP)),
        ("/frob now", TypedLine(LineKind.UNKNOWN_COMMAND, "/frob")),
        ("//etc/hosts", TypedLine(LineKind.TEXT, "/etc/hosts")),
        ("quit smoking", TypedLine(LineKind.TEXT, "quit smoking")),
        ("", TypedLine(LineKind.EMPTY)),
        ("   ", TypedLine(LineKind.EMPTY)),
    ],
)
def test_commands_mean_the_same_at_every_prompt(
    prompt: Prompt, line: str, expected: TypedLine
) -> None:
    assert parse_line(line, prompt) == expected


def test_decline_is_a_command_only_at_a_question() -> None:
    assert parse_line("/decline", Prompt.QUESTION) == TypedLine(LineKind.DECLINE)
    assert parse_line("/decline", Prompt.APPROVAL) == TypedLine(
        LineKind.UNKNOWN_COMMAND, "/decline"
    )


def test_decline_with_a_reason_says_it_takes_none() -> None:
    typed = parse_line("/decline not telling", Prompt.QUESTION)
    assert typed == TypedLine(
        LineKind.MISUSED_COMMAND,
        "/decline takes no reason; type /decline alone to decline the question",
    )


@pytest.mark.parametrize("prompt", list(Prompt))
@pytest.mark.parametrize("command", ["/quit", "/exit", "/help"])
def test_a_known_command_with_arguments_is_not_called_unknown(prompt: Prompt, command: str) -> None:
    assert parse_line(f"{command.upper()} now", prompt) == TypedLine(
        LineKind.MISUSED_COMMAND, f"{command} takes no arguments; type {command} alone"
    )


@pytest.mark.parametrize(
    ("text", "decision"),
    [("y", True), ("YES", True), (" Yes ", True), ("n", False), ("No", False)]
    + [(text, None) for text in ("", "yess", "ok", "nope", "y n", "1")],
)
def test_an_approval_takes_only_yes_or_no(text: str, decision: bool | None) -> None:
    assert approval_decision(text) is decision


def test_help_says_how_to_leave_and_what_the_prompt_takes() -> None:
    for prompt in Prompt:
        text = "\n".join(help_lines(prompt))
        assert "/quit" in text
        assert "quit or exit typed alone" in text
        assert "Ctrl-C" in text
    assert "y or yes approves" in "\n".join(help_lines(Prompt.APPROVAL))
    assert "/decline" in "\n".join(help_lines(Prompt.QUESTION))


@pytest.mark.parametrize("prompt", list(Prompt))
def test_help_fits_a_terminal_80_columns_wide(prompt: Prompt) -> None:
    # Before, the message prompt's last line was 131 characters, which the terminal broke
    # mid-word ('refund order 7\n') where the lines above it were broken between words.
    assert [line for line in help_lines(prompt) if len(line) > 80] == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain-id", "plain-id"),
        ("évite-🙂", "évite-🙂"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\rb\nc\td", "a\\x0db\\x0ac\\x09d"),
        ("right\u202eto left", "right\\u202eto left"),
        ("del\x7f c1\x9b", "del\\x7f c1\\x9b"),
        ("lone\udc80", "lone\\udc80"),
    ],
)
def test_escaped_leaves_nothing_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert escaped(text) == shown


def test_escaped_can_keep_line_breaks_but_never_a_carriage_return() -> None:
    assert escaped("one\ntwo\tthree\r\x1b", keep_newlines=True) == "one\ntwo\tthree\\x0d\\x1b"


def _question(**fields: object) -> AgentInterrupt:
    values: dict[str, object] = {
        "interrupt_id": "c1",
        "tool_call_id": "c1",
        "tool_name": "ask_user",
        "kind": InterruptKind.QUESTION,
        "turn_id": "turn-1",
        "question": "Which colour?",
    }
    values.update(fields)
    return AgentInterrupt(**values)  # type: ignore[arg-type]


def test_refusal_reasons_name_the_deadline_or_the_choices() -> None:
    late = _question(deadline=NOW - timedelta(seconds=1))
    assert refusal_reason(late, "red", NOW) == "its deadline passed at 2025-01-01 11:59:59 UTC"
    strict = _question(choices=("red", "blue"), allows_free_text=False)
    assert refusal_reason(strict, "green", NOW) == "the question takes one of: red, blue"
    assert refusal_reason(_question(), "red", NOW).startswith("the session refused it")
    assert refusal_reason(_question(kind=InterruptKind.APPROVAL), None, NOW).startswith(
        "the session refused it"
    )


def test_an_interrupt_gone_by_its_deadline_or_a_cancelled_turn_was_not_answered_elsewhere() -> None:
    late = _question(deadline=NOW - timedelta(seconds=1))
    assert gone_reason(late, AgentSnapshot(state=None), NOW) is not None
    call = AgentToolCall(
        tool_call_id="c1",
        tool_name="ask_user",
        arguments="{}",
        turn_id="turn-1",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.REJECTED,
        deferral_order=0,
        cancellation_reason=CancellationReason.TURN_CANCELLED,
    )
    cancelled = AgentSnapshot(state=None, tool_calls=(call,))
    assert gone_reason(_question(), cancelled, NOW) == "its turn was cancelled"
    assert gone_reason(_question(), AgentSnapshot(state=None), NOW) is None
    # Once the turn ended its call left the snapshot; the Stream's reason still says why.
    steered = CancellationReason.STEERED
    assert gone_reason(_question(), AgentSnapshot(state=None), NOW, steered) == (
        "its turn was steered by a newer message"
    )


@pytest.mark.parametrize(
    ("kind", "approved", "answered", "text"),
    [
        (InterruptKind.APPROVAL, True, False, "this approval was answered elsewhere: approved"),
        (InterruptKind.APPROVAL, False, False, "this approval was answered elsewhere: rejected"),
        (InterruptKind.QUESTION, True, True, "this question was answered elsewhere"),
        (InterruptKind.QUESTION, False, False, "this question was declined elsewhere"),
    ],
)
def test_an_interrupt_resolved_elsewhere_says_how(
    kind: InterruptKind, approved: bool, answered: bool, text: str
) -> None:
    resolved = InterruptResolvedPayload(
        interrupt_id="i1",
        approved=approved,
        rejection_message=None,
        kind=kind,
        answered=answered,
    )
    assert answered_elsewhere_text(_question(kind=kind), resolved) == text


def test_an_interrupt_resolved_elsewhere_that_the_stream_has_not_reported_is_answered() -> None:
    approval = _question(kind=InterruptKind.APPROVAL)
    assert answered_elsewhere_text(approval, None) == "this approval was answered elsewhere"
    assert answered_elsewhere_text(_question(), None) == "this question was answered elsewhere"


def test_an_answer_that_is_not_sent_says_why() -> None:
    assert not_sent_text(_question(), "  ").startswith("an empty answer is not sent; ")
    strict = _question(choices=("red", "blue"), allows_free_text=False)
    assert not_sent_text(strict, "green").startswith(
        "this question takes one of the choices: red, blue; "
    )


def _message(sequence: int, role: MessageRole, text: str) -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role=role, framework_item="{}", text=text
    )


def test_a_plan_approval_is_shown_as_one_not_as_the_users_words() -> None:
    approval = _message(5, MessageRole.USER, executing_turn_user_message(3))
    # Before, "you> [Dex] The user approved plan revision 3. Execute it ...".
    assert message_lines(approval) == ["plan revision 3 approved; the agent executes it"]
    assert plan_approved_line(3, elsewhere=True) == (
        "plan revision 3 approved elsewhere; the agent executes it"
    )
    # Anything else a person typed is theirs, even when it starts the same way.
    typed = executing_turn_user_message(3) + " Then stop."
    assert message_lines(_message(6, MessageRole.USER, typed)) == [f"you> {typed}"]
    assert executed_plan_revision(typed) is None


def test_the_last_exchange_starts_at_the_last_user_message() -> None:
    messages = [
        _message(1, MessageRole.USER, "hi"),
        _message(2, MessageRole.ASSISTANT, "hello"),
        _message(3, MessageRole.USER, "refund"),
        _message(4, MessageRole.ASSISTANT, "done"),
    ]
    assert [m.text for m in last_exchange(messages)] == ["refund", "done"]
    assert last_exchange([]) == []
