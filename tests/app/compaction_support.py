"""Helpers of the compaction and spend-limit tests: a runner that compacts, and turn loops."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dex_agents.domain.compaction import select_turn_boundary_cutoff
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.runner_outcomes import ContextSummaryResult
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.runner import AgentTurnContext
from tests.app.harness import Session
from tests.app.scripted_runner import ScriptedRunner

SUMMARY_USAGE = AgentUsage(model_calls=1, input_tokens=70, output_tokens=30)

TOKENS_PER_MESSAGE = 10
"""The tokens the scripted runner counts per stored message."""


@dataclass
class CompactingRunner(ScriptedRunner):
    """``ScriptedRunner`` plus ``ContextCompactionRunner``.

    ``always_high`` makes every estimate exceed any window; ``cutoff`` replaces
    the shared rule's answer; ``summary_failures`` makes the next summaries raise;
    ``summary_usage`` is what each summary call reports.
    """

    always_high: bool = False
    cutoff: object = None
    summary_failures: int = 0
    summary_usage: AgentUsage = SUMMARY_USAGE
    estimates: list[int] = field(default_factory=list)
    summary_requests: list[ContextSummaryRequest] = field(default_factory=list)
    release_summary: asyncio.Event | None = None

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        estimate = 10**9 if self.always_high else len(turn.messages) * TOKENS_PER_MESSAGE
        self.estimates.append(estimate)
        return estimate

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        if self.cutoff is not None:
            return self.cutoff  # type: ignore[return-value]  # a runner that breaks the contract
        return select_turn_boundary_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        self.summary_requests.append(request)
        if self.release_summary is not None:
            await self.release_summary.wait()
        if self.summary_failures > 0:
            self.summary_failures -= 1
            raise RuntimeError("the summary model is down")
        return ContextSummaryResult(
            text=f"summary through {request.through_sequence}", usage=self.summary_usage
        )


async def run_turns(session: Session, first: int, last: int) -> None:
    """Send ``m<first>`` .. ``m<last>``, one turn each; turn ``n`` is ``m<n>``."""
    for number in range(first, last + 1):
        if number == 1:
            await session.sessions.start_session("s1", "m1")
        else:
            assert await session.sessions.send_user_message("s1", f"m{number}")
        await session.idle(turns=number)
