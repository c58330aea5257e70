"""The texts of a summary request: the fixed lines, transcript blocks and the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.context_summary import ContextSummary, ContextSummaryRequest
from dex_agents.domain.context_summary_prompt import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
    build_context_summary_note,
    build_context_summary_omission_note,
    build_context_summary_prompt,
    render_transcript_message,
)
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.token_estimates import estimate_text_tokens

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
USER, ASSISTANT, TOOL = MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL


def _m(
    sequence: int, turn: int, role: MessageRole = USER, *, call: str | None = None, **fields: Any
) -> AgentMessage:
    # The prompt renders the provider-neutral fields only, so framework_item is a stand-in.
    return AgentMessage(
        sequence=sequence,
        turn_id=f"turn-{turn}",
        role=role,
        framework_item="x",
        tool_call_id=call,
        **fields,
    )


def _summary(last: int, text: str) -> ContextSummary:
    return ContextSummary(generation=1, last_sequence=last, text=text, created_at=NOW)


def test_texts() -> None:
    assert CONTEXT_SUMMARY_NOTE_HEADER == "[Dex] Summary of the earlier conversation:"
    assert build_context_summary_note(_summary(3, "abc")) == f"{CONTEXT_SUMMARY_NOTE_HEADER}\nabc"
    assert CONTEXT_SUMMARY_TRANSCRIPT_HEADER.startswith("[Dex] ")
    assert CONTEXT_SUMMARY_INSTRUCTIONS.startswith("[Dex] ")


@pytest.mark.parametrize(
    ("count", "note"),
    [
        (1, "[Dex] 1 earlier messages did not fit in this request and are left out."),
        (12, "[Dex] 12 earlier messages did not fit in this request and are left out."),
    ],
)
def test_omission_note(count: int, note: str) -> None:
    assert build_context_summary_omission_note(count) == note


@pytest.mark.parametrize("count", [0, -1])
def test_omission_note_needs_a_positive_count(count: int) -> None:
    with pytest.raises(ValueError, match="omitted_count must be a positive int"):
        build_context_summary_omission_note(count)


IMAGE = AgentImageReference(uri="s3://m/1", mime_type="image/png", sha256="ab", size_bytes=3)


@pytest.mark.parametrize(
    ("message", "block"),
    [
        (_m(1, 1, USER, text="Where is order 7?"), "user: Where is order 7?"),
        (_m(2, 1, ASSISTANT, text="Checking."), "assistant: Checking."),
        (
            _m(3, 1, ASSISTANT, call="c1", tool_name="lookup", tool_arguments='{"id":"7"}'),
            'assistant called lookup: {"id":"7"}',
        ),
        (_m(4, 1, ASSISTANT, call="c1"), "assistant called a tool: {}"),
        (
            _m(5, 1, TOOL, call="c1", tool_name="lookup", tool_output="shipped"),
            "tool result of lookup: shipped",
        ),
        (_m(6, 1, TOOL, call="c1", text="fallback"), "tool result of a tool: fallback"),
        (_m(7, 1, USER, text="see", images=(IMAGE,)), "user: see\n[1 image(s) not shown]"),
        (_m(8, 1, ASSISTANT), None),  # a reasoning item: nothing provider-neutral to show
    ],
)
def test_transcript_blocks(message: AgentMessage, block: str | None) -> None:
    assert render_transcript_message(message) == block


def _request(
    messages: Sequence[AgentMessage], budget: int, previous: ContextSummary | None = None
) -> ContextSummaryRequest:
    return ContextSummaryRequest(
        flow_id="session-1",
        turn_id="turn-2",
        messages=tuple(messages),
        through_sequence=messages[-1].sequence if messages else 0,
        input_token_budget=budget,
        previous_summary=previous,
    )


TRANSCRIPT = (
    _m(3, 1, USER, text="Where is order 7?"),
    _m(4, 1, ASSISTANT, call="c1", tool_name="lookup", tool_arguments='{"id":"7"}'),
    _m(5, 1, TOOL, call="c1", tool_name="lookup", tool_output="shipped"),
    _m(6, 1, ASSISTANT, text="It shipped."),
)
FULL_PROMPT = "\n\n".join(
    [
        CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
        f"{CONTEXT_SUMMARY_NOTE_HEADER}\nThe user asked about orders.",
        "user: Where is order 7?",
        'assistant called lookup: {"id":"7"}',
        "tool result of lookup: shipped",
        "assistant: It shipped.",
        CONTEXT_SUMMARY_INSTRUCTIONS,
    ]
)


def test_summary_prompt_with_everything_fitting() -> None:
    previous = _summary(2, text="The user asked about orders.")
    prompt = build_context_summary_prompt(_request(TRANSCRIPT, 100_000, previous))
    assert prompt == FULL_PROMPT


def test_summary_prompt_leaves_out_the_oldest_messages_to_fit() -> None:
    full = estimate_text_tokens(FULL_PROMPT)
    previous = _summary(2, text="The user asked about orders.")
    assert build_context_summary_prompt(_request(TRANSCRIPT, full, previous)) == FULL_PROMPT
    prompt = build_context_summary_prompt(_request(TRANSCRIPT, full - 1, previous))
    assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER + "\n\n")
    # The note is longer than the oldest blocks, so three of the four messages make room.
    assert (
        "\n\n[Dex] 3 earlier messages did not fit in this request and are left out.\n\n" in prompt
    )
    assert "tool result of lookup" not in prompt
    assert "\n\nassistant: It shipped.\n\n" in prompt
    assert estimate_text_tokens(prompt) <= full - 1


def test_summary_prompt_with_no_room_leaves_out_every_message() -> None:
    prompt = build_context_summary_prompt(_request(TRANSCRIPT, 1))
    assert prompt == "\n\n".join(
        [
            CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
            "[Dex] 4 earlier messages did not fit in this request and are left out.",
            CONTEXT_SUMMARY_INSTRUCTIONS,
        ]
    )


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=20),
    budget=st.integers(0, 3_000),
)
def test_summary_prompt_fits_whenever_anything_can(texts: list[str], budget: int) -> None:
    messages = [_m(sequence, 1, USER, text=text) for sequence, text in enumerate(texts, start=1)]
    prompt = build_context_summary_prompt(_request(messages, budget))
    assert prompt.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER)
    assert prompt.endswith(CONTEXT_SUMMARY_INSTRUCTIONS)
    if estimate_text_tokens(prompt) > budget:
        assert f"[Dex] {len(texts)} earlier messages did not fit" in prompt
    body = prompt.removeprefix(CONTEXT_SUMMARY_TRANSCRIPT_HEADER + "\n\n")
    kept = [text for text in texts if f"user: {text}" in body]
    if "earlier messages did not fit" not in prompt:
        assert body == "\n\n".join(
            [*(f"user: {text}" for text in texts), CONTEXT_SUMMARY_INSTRUCTIONS]
        )
    else:
        # The left-out messages are the oldest: the newest message survives whenever one does.
        assert not kept or f"user: {texts[-1]}" in body
