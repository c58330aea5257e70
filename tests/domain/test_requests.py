"""The session RPCs' request values: called as the spec calls them."""

from __future__ import annotations

from typing import Any

import pytest

from dex_agents.domain.requests import (
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    ResolveInterruptRequest,
)
from dex_agents.domain.wire import from_json, to_json


def test_execute_plan_request_takes_the_revision_positionally() -> None:
    # Spec, "Plans and plan mode": execute_plan(ExecutePlanRequest(revision)).
    request = ExecutePlanRequest(3)
    assert request.revision == 3
    assert request == ExecutePlanRequest(revision=3)
    assert from_json(to_json(request), ExecutePlanRequest) == request


@pytest.mark.parametrize(
    ("request_type", "arguments"),
    [
        (CancelTurnRequest, ("turn-1",)),
        (DeleteQueuedMessageRequest, ("message-1",)),
        (AnswerQuestionRequest, ("call-1", "yes")),
        (ResolveInterruptRequest, ("call-1", True)),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_requests_the_spec_never_calls_positionally_take_keywords(
    request_type: type[Any], arguments: tuple[Any, ...]
) -> None:
    with pytest.raises(TypeError):
        request_type(*arguments)
