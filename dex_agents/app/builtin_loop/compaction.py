"""``BuiltinLoopCompaction``: the built-in loop's ``ContextCompactionRunner`` ("Compaction").

The model input starts with ``CONTEXT_SUMMARY_NOTE_HEADER`` and the summary once
one exists (``context_summary_items``). Cutoffs fall only between model
responses whose tool calls all have stored results
(``select_model_response_cutoff``), so a turn with many tool calls compacts
mid-turn without separating a call from its result. The summary call uses
``CONTEXT_SUMMARY_INSTRUCTIONS``, no tools, and a text-only prompt
(``build_context_summary_prompt``) that fits the request's
``input_token_budget`` together with the definition's ``max_output_tokens``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import attrs

from dex_agents.app.builtin_loop.definition import AgentDefinition, InstructionContext
from dex_agents.app.builtin_loop.request_prefixes import REQUEST_PREFIXES, ItemsPrefix
from dex_agents.domain.compaction import (
    estimate_stored_input_tokens,
    model_response_cuts,
    select_model_response_cutoff,
)
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.context_summary_prompt import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
    build_context_summary_note,
    build_context_summary_omission_note,
    build_context_summary_prompt,
)
from dex_agents.domain.model_io import (
    CONTENT_FILTER_TURN_ERROR,
    ModelInputItem,
    ModelRequest,
    ModelResponse,
    UserTextItem,
)
from dex_agents.domain.runner_outcomes import ContextSummaryResult
from dex_agents.domain.token_estimates import estimate_text_tokens
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.model_client import ModelClient
from dex_agents.ports.runner import AgentTurnContext

if TYPE_CHECKING:
    from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner

# Large enough that build_context_summary_prompt never leaves a message out by itself:
# the runner chooses the omitted messages at model-response boundaries instead.
_UNLIMITED_BUDGET = sys.maxsize // 8


def context_summary_items(turn: AgentTurnContext) -> list[ModelInputItem]:
    """The first model input item once the session has compacted: the summary note, else none."""
    if turn.context_summary is None:
        return []
    return [UserTextItem(text=build_context_summary_note(turn.context_summary))]


class _DiscardedOutput:
    """The summary call streams nowhere: its text is no part of the turn's answer."""

    def write_text_delta(self, text: str) -> None:
        """Drop a piece of the summary."""

    def write_reasoning_delta(self, text: str) -> None:
        """Drop a piece of the summary call's reasoning."""


def _estimator(client: ModelClient) -> Callable[[ModelRequest], object] | None:
    estimate = getattr(client, "estimate_input_tokens", None)
    return estimate if callable(estimate) else None


def _count(value: object, client: ModelClient) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"estimate_input_tokens of {type(client).__name__} returned "
            f"{type(value).__name__}, not an int"
        )
    return value


def _prompt_omitting(request: ContextSummaryRequest, omitted: int) -> str:
    """``build_context_summary_prompt`` of the messages after the ``omitted`` oldest ones.

    The omission note goes where ``build_context_summary_prompt`` puts its own:
    after the header and the previous summary, before the first message.
    """
    kept = attrs.evolve(
        request, messages=request.messages[omitted:], input_token_budget=_UNLIMITED_BUDGET
    )
    prompt = build_context_summary_prompt(kept)
    if omitted == 0:
        return prompt
    head = CONTEXT_SUMMARY_TRANSCRIPT_HEADER
    if request.previous_summary is not None:
        head += "\n\n" + build_context_summary_note(request.previous_summary)
    if not prompt.startswith(head + "\n\n"):
        raise AssertionError("build_context_summary_prompt no longer starts with its header")
    return f"{head}\n\n{build_context_summary_omission_note(omitted)}{prompt[len(head) :]}"


class BuiltinLoopCompaction:
    """The ``ContextCompactionRunner`` methods of ``BuiltinLoopAgentRunner``."""

    definition: AgentDefinition

    def next_model_request(self, turn: AgentTurnContext) -> ModelRequest:
        """The request the turn's next model call would send, without image bytes.

        It offers the function and built-in tools the call may offer, and each tool
        source's tools as its ``cached_tools()`` or the runner's last listing of it
        has them (``cached_tool_listing``), since a listing needs I/O.
        """
        return self._next_model_request(turn)[0]

    def _next_model_request(
        self, turn: AgentTurnContext
    ) -> tuple[ModelRequest, ItemsPrefix | None]:
        """``next_model_request``, and where its items hold a kept walk (``request_prefixes``)."""
        # The conversation module imports this one for the summary note, so it is
        # imported here.
        from dex_agents.app.builtin_loop.conversation import turn_conversation
        from dex_agents.app.builtin_loop.tool_sources import cached_tool_listing

        runner = cast("BuiltinLoopAgentRunner", self)
        definition = self.definition
        instructions = definition.instructions_for(
            InstructionContext(
                flow_id=turn.flow_id,
                turn_id=turn.turn_id,
                session_settings=turn.session_settings,
                interaction_mode=turn.interaction_mode,
            )
        )
        conversation = turn_conversation(turn)
        request = ModelRequest(
            instructions=instructions,
            items=tuple(conversation.items),
            tools=tuple(
                runner._tools(
                    turn,
                    True,
                    cached_tool_listing(turn, definition.tool_sources, runner._last_listings),
                )
            ),
            settings=definition.model_settings,
            max_output_tokens=definition.max_output_tokens,
        )
        return request, conversation.prefix

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """The resolved model client's estimate of the next request, without image bytes.

        A client without ``estimate_input_tokens`` gets ``estimate_stored_input_tokens``
        with the instructions as fixed tokens.
        """
        client = self.definition.model_for(turn.session_settings)
        request, prefix = self._next_model_request(turn)
        estimate = _estimator(client)
        if estimate is None:
            return estimate_stored_input_tokens(
                turn, fixed_input_tokens=estimate_text_tokens(request.instructions)
            )
        with REQUEST_PREFIXES.noting(request.items, prefix):
            return _count(estimate(request), client)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """``select_model_response_cutoff``: only between model responses whose calls have results."""
        return select_model_response_cutoff(turn, retained_token_budget)

    def context_summary_request(
        self, request: ContextSummaryRequest, client: ModelClient
    ) -> ModelRequest:
        """The summary call's request: the instructions, no tools, and one text-only prompt.

        When the prompt plus ``max_output_tokens`` would exceed
        ``request.input_token_budget``, the oldest messages are left out, up to the
        earliest cut that keeps each model response and each call with its result.
        """
        messages = request.messages
        cuts: Sequence[int] = (
            0,
            *model_response_cuts(messages, running_turn_id=request.turn_id),
            len(messages),
        )
        output_tokens = self.definition.max_output_tokens or 0
        estimate = _estimator(client)

        def build(omitted: int) -> ModelRequest:
            return ModelRequest(
                instructions=CONTEXT_SUMMARY_INSTRUCTIONS,
                items=(UserTextItem(text=_prompt_omitting(request, omitted)),),
                settings=self.definition.model_settings,
                max_output_tokens=self.definition.max_output_tokens,
            )

        def fits(candidate: ModelRequest) -> bool:
            if estimate is None:
                texts = (candidate.instructions, *candidate.user_texts)
                tokens = sum(estimate_text_tokens(text) for text in texts)
            else:
                tokens = _count(estimate(candidate), client)
            return tokens + output_tokens <= request.input_token_budget

        # Fewer messages never estimate higher, so the earliest fitting cut is found by halves.
        low, high = 0, len(cuts) - 1
        if fits(build(cuts[low])):
            return build(cuts[low])
        while high - low > 1:
            middle = (low + high) // 2
            if fits(build(cuts[middle])):
                high = middle
            else:
                low = middle
        return build(cuts[high])

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One model call with ``CONTEXT_SUMMARY_INSTRUCTIONS`` and no tools; returns its text."""
        definition = self.definition
        client = definition.model_for(request.session_settings)
        model_request = self.context_summary_request(request, client)
        response = await client.call_model(model_request, _DiscardedOutput())
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"the model client of agent {definition.name} returned "
                f"{type(response).__name__}, not a ModelResponse"
            )
        stopped = CONTENT_FILTER_TURN_ERROR if response.filtered else response.stopped_error
        if stopped is not None:
            # A summary the content filter stopped would replace the messages it
            # stands for cut, and one the output token limit cut before any text is
            # none; the same request ends so again, so no retry, and the error says why.
            error = ModelCallError(stopped)
            error.retryable = False
            raise error
        text = response.text.strip()
        if not text:
            raise ValueError(f"the summary call of agent {definition.name} returned no text")
        return ContextSummaryResult(
            text=text, usage=response.usage, model_call_metadata=response.model_call_metadata
        )


__all__ = ["BuiltinLoopCompaction", "context_summary_items"]
