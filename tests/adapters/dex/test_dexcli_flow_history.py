"""``parse_flow_history``: what the Dex test stack reads from ``dexcli flow history``.

The parser keeps the completed and failed Step executions of the JSON document and
names what is malformed, to the field.
"""

from __future__ import annotations

import json
import re

import pytest

from dex_agents.adapters.dex.integration_stack import parse_flow_history
from dex_agents.ports.flow_client import StepHistoryEntry
from tests.adapters.dex.fake_dexcli import SAMPLE_ENTRIES, SAMPLE_HISTORY


def document(*events: object) -> str:
    return json.dumps({"flowId": "s", "events": list(events)})


def execute_completed(context: object) -> dict[str, object]:
    return {"type": "StepExecuteCompleted", "payload": {"context": context}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(SAMPLE_HISTORY), SAMPLE_ENTRIES),
        (document(), []),
        (document({"type": "FlowClosed", "payload": None}), []),
        (
            document(
                execute_completed({"stepType": "A", "stepExecutionId": "A-7", "finalAttempt": 12})
            ),
            [StepHistoryEntry("EXECUTE_COMPLETED", "A", "A-7", 12)],
        ),
    ],
)
def test_the_history_parser_keeps_completed_and_failed_step_executions(
    text: str, expected: list[StepHistoryEntry]
) -> None:
    assert parse_flow_history(text) == expected


OK_CONTEXT = {"stepType": "A", "stepExecutionId": "A-1", "finalAttempt": 1}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "dexcli flow history printed no JSON: Expecting value at line 1 column 1: ''"),
        (
            "Error: flow not found",
            "dexcli flow history printed no JSON: Expecting value at line 1 column 1: "
            "'Error: flow not found'",
        ),
        ("[]", "dexcli flow history printed no object with an 'events' list: '[]'"),
        (
            '{"events": {}}',
            "dexcli flow history printed no object with an 'events' list: '{\"events\": {}}'",
        ),
        (document(1), "dexcli flow history event 0 is not an object: 1"),
        (document({"payload": {}}), "dexcli flow history event 0 has no 'type' string"),
        (
            document({"type": "StepExecuteFailed"}),
            "dexcli flow history event 0 (StepExecuteFailed) has no 'payload.context' object",
        ),
        (
            document({"type": "FlowClosed"}, execute_completed([])),
            "dexcli flow history event 1 (StepExecuteCompleted) has no 'payload.context' object",
        ),
        (
            document(execute_completed({**OK_CONTEXT, "stepType": None})),
            "dexcli flow history event 0 (StepExecuteCompleted) has no "
            "'payload.context.stepType' string",
        ),
        (
            document(execute_completed({**OK_CONTEXT, "stepExecutionId": ""})),
            "dexcli flow history event 0 (StepExecuteCompleted) has no "
            "'payload.context.stepExecutionId' string",
        ),
        *[
            (
                document(execute_completed({**OK_CONTEXT, "finalAttempt": attempt})),
                "dexcli flow history event 0 (StepExecuteCompleted) has a "
                f"'payload.context.finalAttempt' that is not a whole number: {attempt!r}",
            )
            for attempt in [-1, True, 1.5, "x", None]
        ],
    ],
)
def test_the_history_parser_names_what_is_malformed(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)) as raised:
        parse_flow_history(text)
    assert str(raised.value) == error
