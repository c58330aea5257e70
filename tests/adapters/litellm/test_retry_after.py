"""A provider's ``Retry-After``: read from its answer, shown in the error, and waited for.

A 429 or 503 may say when to come back, in seconds, in milliseconds
(``retry-after-ms``) or as an HTTP date. The client's error carries the wait as
``retry_after`` and names it; ``RunModel``'s next attempt then waits that long,
and a wait past its retry budget fails the turn after one request.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import litellm
import pytest
from litellm.exceptions import RateLimitError

from dex_agents.adapters.litellm.error_translation import translate_error
from dex_agents.adapters.litellm.retry_after import parse_retry_after
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.domain.model_io import ModelRequest, UserTextItem
from dex_agents.litellm import ModelProviderError
from tests.adapters.litellm.provider_server import ProviderServer, Reply, json_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.session_support import loopback_client, one_turn

litellm.suppress_debug_info = True

REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "20"}, timedelta(seconds=20)),
        ({"Retry-After": " 1.5 "}, timedelta(seconds=1.5)),
        ({"retry-after-ms": "7500", "retry-after": "60"}, timedelta(milliseconds=7500)),
        ({"retry-after-ms": "soon", "retry-after": "60"}, timedelta(seconds=60)),
        ({"retry-after": "Sun, 01 Mar 2026 12:02:00 GMT"}, timedelta(minutes=2)),
        # A date counts from the answer's own Date, not from this Worker's clock.
        (
            {"retry-after": "Sun, 01 Mar 2026 12:02:00 GMT", "date": "Sun, 01 Mar 2026 12:01:30 GMT"},
            timedelta(seconds=30),
        ),
        ({"retry-after": "Sun, 01 Mar 2026 11:00:00 GMT"}, None),
        ({"retry-after": "0"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "later"}, None),
        ({"retry-after": "nan"}, None),
        # Longer than any wait can be: still a wait, so the turn fails instead of retrying
        # at the policy's interval while the provider refuses.
        ({"retry-after": "1e300"}, timedelta.max),
        ({"retry-after": "inf"}, None),
        ({"x-ratelimit-reset-requests": "2s"}, None),
    ],
)  # fmt: skip
def test_the_wait_a_provider_asks_for(headers: dict[str, str], wait: timedelta | None) -> None:
    assert parse_retry_after(headers, NOW) == wait


def _refusal(api: str, status: int, message: str, headers: tuple[tuple[str, str], ...]) -> Reply:
    if api == "anthropic":
        body: object = {"type": "error", "error": {"type": "rate_limit_error", "message": message}}
    elif api == "gemini":
        body = {"error": {"code": status, "message": message, "status": "RESOURCE_EXHAUSTED"}}
    else:
        body = {"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}}
    return json_reply(status, body, headers)


APIS = ["responses", "chat", "anthropic", "gemini"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        (429, (("retry-after", "20"),), 20),
        (
            503,
            (
                ("retry-after", "Sun, 01 Mar 2026 12:02:00 GMT"),
                ("date", "Sun, 01 Mar 2026 12:00:00 GMT"),
            ),
            120,
        ),
    ],
    ids=["429-seconds", "503-date"],
)
async def test_a_refusal_for_now_carries_and_names_the_providers_wait(
    server: ProviderServer,
    output: RecordingOutput,
    api: str,
    status: int,
    headers: tuple[tuple[str, str], ...],
    wait: int,
) -> None:
    server.script(_refusal(api, status, "Slow down.", headers))
    client = loopback_client(server, api)
    with pytest.raises(ModelProviderError) as caught:
        await client.call_model(REQUEST, output)
    error = caught.value
    assert (error.status_code, error.retryable) == (status, True)
    assert error.retry_after == timedelta(seconds=wait)
    assert str(error) == (
        f"{client.provider} model call failed with HTTP {status}: Slow down. "
        f"(the provider asked to retry after {wait} seconds)"
    )
    server.assert_script_used()


async def test_a_request_no_retry_can_fix_has_no_wait(
    server: ProviderServer, output: RecordingOutput
) -> None:
    server.script(json_reply(400, {"error": {"message": "Bad input."}}, (("retry-after", "20"),)))
    with pytest.raises(ModelProviderError) as caught:
        await loopback_client(server, "chat").call_model(REQUEST, output)
    assert (caught.value.retryable, caught.value.retry_after) == (False, None)
    assert str(caught.value) == "openai model call failed with HTTP 400: Bad input."


async def test_a_wait_past_run_models_budget_fails_the_turn_after_one_request(
    server: ProviderServer,
) -> None:
    # The default budget is 30 minutes; retrying sooner than asked is refused again.
    server.script(_refusal("responses", 429, "Rate limit reached.", (("retry-after", "3600"),)))
    model = loopback_client(server, "responses")
    agent = AgentDefinition(name="support", instructions="Help.", model=model)
    flow = builtin_agent_session_flow(agent, flow_type="RateLimited")
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error == (
        "openai model call failed with HTTP 429: Rate limit reached. "
        "(the provider asked to retry after 3600 seconds)"
    )
    assert len(server.requests) == 1
    server.assert_script_used()


def test_the_wait_is_found_behind_a_placeholder_response_without_it() -> None:
    # LiteLLM's error may hold a response of its own with headers but no wait;
    # the HTTP client's error it chains holds the provider's answer.
    request = httpx.Request("POST", "https://api.example.com/v1/responses")
    answered = httpx.Response(429, headers={"retry-after": "7"}, request=request)
    cause = httpx.HTTPStatusError("HTTP 429", request=request, response=answered)
    placeholder = httpx.Response(429, headers={"content-type": "application/json"}, request=request)
    error = RateLimitError("Slow down.", llm_provider="openai", model="gpt-5", response=placeholder)
    error.__cause__ = cause
    translated = translate_error(error, provider="openai", secrets=())
    assert translated is not None
    assert translated.retry_after == timedelta(seconds=7)
