"""The ``timeout`` request option on a Gemini stream, which LiteLLM 1.105 sends without it.

Without the client's own bound, a Gemini provider that never answered, or
stopped mid-answer, held the call whatever ``timeout`` said.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import litellm
import pytest

from dex_agents.adapters.litellm.read_timeouts import unsent_read_timeout
from dex_agents.adapters.litellm.routing import route_model
from dex_agents.domain.model_io import ModelRequest, UserTextItem
from dex_agents.litellm import LiteLLMModelClient, ModelProviderError, ModelStreamInterruptedError
from tests.adapters.litellm.provider_scripts import gemini_stream
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.session_support import KEY

litellm.suppress_debug_info = True

REQUEST = ModelRequest(instructions="Be brief.", items=(UserTextItem(text="Hi"),))
TIMEOUT = {"timeout": 0.3}


def _gemini(url: str) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "gemini/gemini-2.5-pro", api_base=url, api_key_provider=lambda: KEY, request_options=TIMEOUT
    )


@pytest.mark.parametrize(
    ("provider", "provider_model", "timeout", "bound"),
    [
        ("gemini", "gemini-2.5-pro", 1.5, 1.5),
        ("vertex_ai", "gemini-2.5-flash", 20, 20.0),
        ("vertex_ai", "claude-sonnet-4-5", 20, None),  # LiteLLM's Anthropic route applies it
        ("openai", "gpt-4.1", 20, None),
        ("anthropic", "claude-sonnet-4-5", 20, None),
        ("gemini", "gemini-2.5-pro", None, None),
        ("gemini", "gemini-2.5-pro", True, None),
        ("gemini", "gemini-2.5-pro", 0, None),
        ("gemini", "gemini-2.5-pro", math.inf, None),
        ("gemini", "gemini-2.5-pro", httpx.Timeout(5.0), None),
    ],
)
def test_which_calls_the_client_bounds_itself(
    provider: str, provider_model: str, timeout: Any, bound: float | None
) -> None:
    route = route_model(f"{provider}/{provider_model}", provider, provider_model, None)
    options = {} if timeout is None else {"timeout": timeout}
    assert unsent_read_timeout(route, options) == bound


@asynccontextmanager
async def _silent_provider() -> AsyncIterator[str]:
    """A provider that takes the request and never answers, until the test is done."""
    release = asyncio.Event()
    handlers: list[asyncio.Task[Any]] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        await release.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        release.set()
        await asyncio.gather(*handlers)
    assert handlers  # the request came


async def test_a_gemini_call_with_no_answer_within_its_timeout_fails_as_timed_out(
    output: RecordingOutput,
) -> None:
    async with _silent_provider() as url:
        with pytest.raises(ModelProviderError) as caught:
            await _gemini(url).call_model(REQUEST, output)
    assert (caught.value.status_code, caught.value.retryable) == (None, True)
    assert str(caught.value) == "gemini model call failed: timed out before the provider answered"


async def test_a_gemini_stream_that_stops_mid_answer_breaks_at_its_timeout(
    server: ProviderServer, output: RecordingOutput
) -> None:
    resume = asyncio.Event()

    async def stall(index: int) -> None:
        if index == 2:
            await resume.wait()

    events = gemini_stream([{"text": "Half of an answer that stops here."}])
    server.script(sse_reply(events, before_event=stall))
    with pytest.raises(ModelStreamInterruptedError) as caught:
        await _gemini(server.url).call_model(REQUEST, output)
    resume.set()
    assert str(caught.value) == (
        "the gemini stream broke before the answer ended: the next piece of the answer "
        "did not come within the timeout of 0.3 seconds"
    )
    assert output.deltas  # the answer had started
