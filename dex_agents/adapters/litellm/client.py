"""``LiteLLMModelClient``: a ``ModelClient`` on LiteLLM ("Model clients").

One request per call, with LiteLLM's own retries off, so ``RunModel``'s retry
policy is the only one; the whole input every time, with no provider-side
state; output items provider-exact. The Responses API serves OpenAI models and
streaming Chat Completions every other provider, unless ``api=`` says which.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import attrs
import litellm

from dex_agents.adapters.litellm.answer_ids import litellm_names_the_answer, reads_as_anthropic
from dex_agents.adapters.litellm.answered_errors import answered_failure, raised_by_litellm
from dex_agents.adapters.litellm.anthropic_stop import AnthropicStopWatch
from dex_agents.adapters.litellm.batched_output import BatchedOutput
from dex_agents.adapters.litellm.bedrock_stop import BedrockStreamWatch
from dex_agents.adapters.litellm.body_watch import (
    BodyWatch,
    watch_response,
    watched_http_client,
    watching,
)
from dex_agents.adapters.litellm.call_ids import conversation_tool_call_ids
from dex_agents.adapters.litellm.chat_request import chat_arguments
from dex_agents.adapters.litellm.error_chains import scrub_exception_chain
from dex_agents.adapters.litellm.error_translation import translate_error
from dex_agents.adapters.litellm.errors import ModelProviderError, ModelStreamInterruptedError
from dex_agents.adapters.litellm.estimates import estimate_input_tokens
from dex_agents.adapters.litellm.gemini_finish import GeminiFinishWatch
from dex_agents.adapters.litellm.options import check_options, merged_options
from dex_agents.adapters.litellm.read_timeouts import ReadTimedStream, unsent_read_timeout
from dex_agents.adapters.litellm.redaction import environment_secrets, redact_url
from dex_agents.adapters.litellm.responses_request import responses_arguments
from dex_agents.adapters.litellm.routing import (
    RESPONSES_API,
    ModelApi,
    ModelRoute,
    route_model,
)
from dex_agents.adapters.litellm.streams import read_chat_stream, read_responses_stream
from dex_agents.adapters.litellm.tool_choice import accepts_forced_tool_choice
from dex_agents.domain.model_io import ModelRequest, ModelResponse
from dex_agents.domain.runner_outcomes import ModelCallMetadata
from dex_agents.ports.model_client import ModelOutputWriter

ApiKeyProvider: TypeAlias = Callable[[], "str | Awaitable[str]"]
"""``api_key_provider``: a sync or async function that returns the key for one call."""

NO_RETRIES: Mapping[str, int] = {"num_retries": 0, "max_retries": 0}
"""LiteLLM's retries and the provider SDK's, both off: ``RunModel`` retries."""

HOOKED_CHAT_PROVIDERS = frozenset({"anthropic"})
"""Chat Completions providers whose body the client watches through its own HTTP client.

LiteLLM returns their stream with the HTTP response out of reach
(``body_watch``), and takes a LiteLLM HTTP client (``client=``) for them; so
it does for Claude on Vertex AI and Azure AI, which it reads as Anthropic's
(``reads_as_anthropic``).
"""


def _provider_of(model: str, api_base: str | None) -> tuple[str, str]:
    try:
        provider_model, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception as error:
        raise ValueError(f"LiteLLM names no provider for model {model!r}") from error
    if not provider_model:
        # "openai/" names a provider but no model, which the provider would refuse per call.
        raise ValueError(f"model {model!r} names no model after its provider")
    return str(provider), str(provider_model)


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port that is not a number from 0 to 65535
        return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


class LiteLLMModelClient:
    """``LiteLLMModelClient(model, api=None, api_base=None, api_key_provider=None,
    request_options=None)``: a ``ModelClient`` on LiteLLM.

    ``model`` is a LiteLLM model name (``openai/gpt-5-mini``,
    ``anthropic/claude-sonnet-4-5``). ``api`` is ``"responses"`` or
    ``"chat_completions"``; ``None`` uses the Responses API for OpenAI models, with
    ``store=False`` and ``include=["reasoning.encrypted_content"]``, and streaming
    Chat Completions for every other provider. ``api_base``, an ``http://`` or
    ``https://`` URL, points LiteLLM at another endpoint. Credentials come from the
    Worker's environment, as LiteLLM reads them, or from ``api_key_provider``, a
    sync or async function called for every call; an exception it raises
    propagates with credentials scrubbed from its text. ``request_options`` are
    further keyword arguments for LiteLLM, such as ``timeout`` (which the client
    applies itself to a Gemini stream, whose request LiteLLM sends without it);
    the agent's model settings go over them. Neither may set what the client
    sets, nor hold a credential. ``repr`` shows no secret.
    """

    def __init__(
        self,
        model: str,
        api: ModelApi | None = None,
        api_base: str | None = None,
        api_key_provider: ApiKeyProvider | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, not {model!r}")
        if api_base is not None and (not isinstance(api_base, str) or not api_base):
            raise ValueError("api_base must be None or a non-empty string")
        if api_base is not None and not _is_http_url(api_base):
            # "localhost:8000/v1" failed every call as a retryable "HTTP 500:
            # Connection error.", and the HTTP client's error quoted the URL's query.
            raise ValueError(
                f"api_base must be an http:// or https:// URL with a host, "
                f"not {redact_url(api_base)!r}"
            )
        if api_key_provider is not None and not callable(api_key_provider):
            raise TypeError(
                f"api_key_provider must be callable, not {type(api_key_provider).__name__}"
            )
        if request_options is not None and not isinstance(request_options, Mapping):
            raise TypeError(
                f"request_options must be a mapping, not {type(request_options).__name__}"
            )
        options = dict(request_options or {})
        check_options("request_options", options)
        provider, provider_model = _provider_of(model, api_base)
        self._route: ModelRoute = route_model(
            model,
            provider,
            provider_model,
            api,
            api_base=api_base,
            base_model=options.get("base_model"),
        )
        self._api_base = api_base
        self._api_key_provider = api_key_provider
        self._options = options

    @property
    def model(self) -> str:
        """The model, as given."""
        return self._route.model

    @property
    def api(self) -> str:
        """``"responses"`` or ``"chat_completions"``: the API every call uses."""
        return self._route.api

    @property
    def provider(self) -> str:
        """LiteLLM's name for the model's provider, which output items carry."""
        return self._route.provider

    @property
    def route(self) -> ModelRoute:
        """How each call is made."""
        return self._route

    def __repr__(self) -> str:
        api_base = None if self._api_base is None else redact_url(self._api_base)
        key = None if self._api_key_provider is None else "<set>"
        return (
            f"LiteLLMModelClient(model={self.model!r}, api={self.api!r}, api_base={api_base!r}, "
            f"api_key_provider={key}, request_options={sorted(self._options)!r})"
        )

    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        """``False`` for Claude Opus 5.5 and Sonnet 5.5, and for Claude with extended thinking."""
        return accepts_forced_tool_choice(self._route, {**self._options, **settings})

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        """The input tokens of ``request``, with 1600 for each image the client sends."""
        return estimate_input_tokens(request, self._route)

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        """Make one streaming request and return its output items; see the class docstring.

        Text and reasoning pieces read from the provider in one go are written
        to ``output`` as one delta, and a piece read alone at once
        (``BatchedOutput``). A provider error raises ``ModelProviderError``,
        whose ``retryable`` says whether a retry can help, with the provider's
        message and no credential.
        """
        route = self._route
        options = merged_options(self._options, request.settings)
        if route.api == RESPONSES_API:
            arguments = responses_arguments(request, route, options)
        else:
            arguments = chat_arguments(request, route, options)
        api_key = await self._api_key()
        if api_key is not None:
            arguments["api_key"] = api_key
        if self._api_base is not None:
            arguments["api_base"] = self._api_base
        arguments.update(NO_RETRIES)
        read_timeout = unsent_read_timeout(route, options)
        streaming = False
        batched = BatchedOutput(output)
        taken_ids = conversation_tool_call_ids(request.items)
        # LiteLLM keeps neither whether Gemini finished the answer nor the error a
        # provider answered with HTTP 200: the call reads its body (body_watch).
        chat = route.api != RESPONSES_API
        watch: BodyWatch
        if chat and route.gemini:
            watch = GeminiFinishWatch()
        elif chat and route.provider == "bedrock":
            watch = BedrockStreamWatch()
        elif chat and (route.provider in HOOKED_CHAT_PROVIDERS or reads_as_anthropic(route)):
            watch = AnthropicStopWatch()
        else:
            watch = BodyWatch()
        hooked = "client" not in arguments and (
            isinstance(watch, (GeminiFinishWatch, BedrockStreamWatch, AnthropicStopWatch))
        )
        if hooked:
            arguments["client"] = watched_http_client()
        with watching(watch if hooked else None):
            try:
                if route.api == RESPONSES_API:
                    stream: Any = await litellm.aresponses(**arguments)
                    streaming = True
                    watch_response(getattr(stream, "response", None), watch)
                    if read_timeout is not None:
                        stream = ReadTimedStream(stream, read_timeout)
                    answer = await read_responses_stream(stream, batched, route.provider, taken_ids)
                else:
                    stream = await litellm.acompletion(**arguments)
                    streaming = True
                    # The stream under LiteLLM's holds the unread response: the OpenAI
                    # SDK's as ``response``, LiteLLM's own HTTP handler's as ``http_response``.
                    sdk_stream = getattr(stream, "completion_stream", None)
                    if not watch_response(getattr(sdk_stream, "response", None), watch):
                        watch_response(getattr(sdk_stream, "http_response", None), watch)
                    if read_timeout is not None:
                        stream = ReadTimedStream(stream, read_timeout)
                    answer = await read_chat_stream(
                        stream, batched, route.provider, taken_ids, watch.refusal
                    )
                    if watch.failed_finish is not None:
                        raise ModelStreamInterruptedError(
                            f"the {route.provider} stream broke before the answer ended: "
                            f"the provider ended it with finish reason {watch.failed_finish!r}",
                            provider=route.provider,
                        )
                    if isinstance(watch, GeminiFinishWatch) and watch.cut:
                        raise ModelStreamInterruptedError(
                            f"the {route.provider} stream ended before the answer finished",
                            provider=route.provider,
                        )
                    if watch.finish_reason is not None:
                        answer = attrs.evolve(answer, finish_reasons=(watch.finish_reason,))
                    if watch.failed_reason:
                        raise ModelProviderError(
                            f"{route.provider} model call failed: the model failed to make "
                            f"its answer (finish reason {watch.failed_reason})",
                            provider=route.provider,
                            status_code=None,
                            retryable=True,
                        )
            except Exception as error:
                secrets = environment_secrets(os.environ)
                if api_key is not None:
                    secrets.append(api_key)
                translated = translate_error(
                    error, provider=route.provider, secrets=secrets, streaming=streaming
                )
                if watch.error is not None and (
                    isinstance(translated, ModelStreamInterruptedError)
                    or (translated is None and raised_by_litellm(error))
                ):
                    # LiteLLM read the provider's error as a stream that ended or
                    # broke, or failed on its own while it filed it.
                    translated = answered_failure(
                        watch.error, provider=route.provider, secrets=secrets
                    )
                if translated is None or translated is error:
                    raise
                raise translated from error
            finally:
                batched.flush()  # the writer drops what comes after the call
        return ModelResponse(
            output=answer.output,
            usage=answer.usage,
            model_call_metadata=ModelCallMetadata(
                request_model=route.model,
                response_model=answer.response_model,
                provider_name=route.provider,
                # An ID LiteLLM made up finds nothing in the provider's records.
                response_id=(
                    None
                    if litellm_names_the_answer(route, answer.answer_url)
                    else answer.response_id
                ),
                finish_reasons=answer.finish_reasons,
            ),
        )

    async def _api_key(self) -> str | None:
        if self._api_key_provider is None:
            return None
        try:
            key: object = self._api_key_provider()
            if inspect.isawaitable(key):
                key = await key
        except Exception as error:
            # A secret store's error may quote what it was asked for, and the
            # session shows the text as last_turn_error: scrub it like a provider's.
            scrub_exception_chain(error, environment_secrets(os.environ))
            raise
        if not isinstance(key, str) or not key:
            # Never the value: it may be a key of the wrong type.
            raise TypeError(
                f"api_key_provider of {self.model} returned {type(key).__name__}, "
                "not a non-empty string"
            )
        if any(character.isspace() or not character.isprintable() for character in key):
            # A key read from a file keeps its newline: the HTTP client refuses the
            # header with no request made, which read as a retryable HTTP 500.
            raise ValueError(
                f"api_key_provider of {self.model} returned a key with whitespace "
                "or control characters"
            )
        return key
