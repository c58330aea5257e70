"""A scripted model's walk of a request costs what the call adds, not the session's length.

``ScriptedModelClient`` estimates every request's items. Each call's items
repeat the conversation, and it resumed its walk of an earlier request only
after comparing the two, element by element: work that grew with the session.
The built-in loop now notes where a request's items hold its kept walk of
earlier turns (``request_prefixes.py``), and the client resumes on that note
with nothing compared. These tests count, never time: the elements compared
stay none over a long session, what is left to walk after the noted prefix is
one turn's items at most, and every estimate is the one a fresh walk gives.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from dex_agents import ToolEffect
from dex_agents.app.builtin_loop import conversation, scripted_estimates
from dex_agents.app.builtin_loop.conversation import turn_conversation
from dex_agents.app.builtin_loop.request_prefixes import (
    REQUEST_PREFIXES,
    ItemsLineage,
    ItemsPrefix,
    extended_lineage,
)
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.model_io import ModelInputItem, ModelOutputItem, UserTextItem
from dex_agents.domain.token_estimates import estimate_text_tokens
from dex_agents.local import LocalRuntime
from tests.app.test_conversation_walk import CASES

TURNS = 40
TURN = timedelta(seconds=30)


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id} is on its way"


def _fresh_estimate(request: ModelRequest) -> int:
    """What a walk of every item from the start estimates (the client's documented sum)."""
    texts: list[str] = [request.instructions]
    for item in request.items:
        if isinstance(item, ModelOutputItem):
            texts.append(item.item)
        else:
            texts.append(item.text if isinstance(item, UserTextItem) else item.output)
    tools = sum(scripted_estimates.tool_tokens(tool) for tool in request.tools)
    return sum(estimate_text_tokens(text) for text in texts) + tools


class _Observed:
    """What each model call's request held, seen from the script."""

    def __init__(self) -> None:
        self.client = ScriptedModelClient(self.respond, max_recorded_requests=0)
        self.prefixes: list[ItemsPrefix | None] = []
        self.lengths: list[int] = []
        self.estimates: list[tuple[int, int]] = []

    def respond(self, request: ModelRequest) -> ScriptedModelReply:
        self.prefixes.append(REQUEST_PREFIXES.get(request.items))
        self.lengths.append(len(request.items))
        self.estimates.append(
            (self.client.estimate_input_tokens(request), _fresh_estimate(request))
        )
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=f"done: {results[-1].output}")
        turn = len(ScriptedModelClient.user_texts(request))
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("lookup", {"order_id": "7"}, call_id=f"call-{turn}")]
        )


async def test_a_long_session_compares_no_item_and_walks_one_turn_a_call() -> None:
    observed = _Observed()
    agent = AgentDefinition(
        name="prefixes", instructions="Help.", model=observed.client, tools=[lookup]
    )
    flow = builtin_agent_session_flow(agent, flow_type="RequestPrefixes")
    compared: list[int] = []
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s")
        for turn in range(TURNS):
            assert await sessions.send_user_message("s", f"where is my order? ({turn})")
            done = await sessions.wait_for_user("s", timeout=TURN)
            assert done.messages[-1].text == "done: order 7 is on its way"
            compared.append(scripted_estimates._ITEMS_WALKED.compared)
    # The first turn has no earlier turn to keep a walk of: its second call compares the
    # first's one item. After it, nothing is compared.
    assert compared[1:] == [compared[0]] * (TURNS - 1)
    assert len(observed.prefixes) == 2 * TURNS
    assert all(vouched == fresh for vouched, fresh in observed.estimates)
    # Every call after the first turn's holds a noted prefix of one lineage, and what
    # follows it is this turn's items: the user text, a call and its result at most.
    later = observed.prefixes[2:]
    lineages = {id(prefix.lineage) for prefix in later if prefix is not None}
    assert None not in later
    assert len(lineages) == 1
    for prefix, length in zip(later, observed.lengths[2:], strict=True):
        assert prefix is not None
        assert prefix.offset == 0
        assert length - len(prefix.items) <= 3
    assert observed.lengths[-1] == 4 * TURNS - 1  # the history did grow


def test_a_request_built_anew_is_not_vouched_for() -> None:
    # Equal items in another tuple (a runner without a media store strips images into new
    # items; a caller builds its own request) are compared, never taken on the note.
    items: tuple[ModelInputItem, ...] = (UserTextItem(text="a"), UserTextItem(text="b"))
    prefix = ItemsPrefix(0, items[:1], ItemsLineage(items[:1]))
    with REQUEST_PREFIXES.noting(items, prefix):
        assert REQUEST_PREFIXES.get(items) is prefix
        alike = (*items,)
        assert alike == items
        assert alike is not items
        assert REQUEST_PREFIXES.get(alike) is None
    assert REQUEST_PREFIXES.get(items) is None
    assert REQUEST_PREFIXES.count() == 0


def test_two_walks_that_went_apart_from_one_walk_never_share_a_lineage() -> None:
    first: tuple[ModelInputItem, ...] = (UserTextItem(text="a"),)
    lineage = extended_lineage(None, (), first)
    one = (*first, UserTextItem(text="b"))
    other = (*first, UserTextItem(text="c"))
    assert extended_lineage(lineage, first, one) is lineage
    # The second resumed ``first`` too, but the lineage has moved on to ``one``, which
    # ``other`` does not start with.
    assert extended_lineage(lineage, first, other) is not lineage
    assert lineage.latest is one


@pytest.mark.parametrize("name", list(CASES))
def test_a_noted_prefix_is_the_very_items_where_it_says(name: str) -> None:
    # The note is taken unchecked, so it must hold in every case the walk knows: a plan
    # note, a summary first, a result read from the records, images, a walk not resumed.
    conversation._WALKED.clear()
    earlier, later, _ = CASES[name]()
    for turn in (earlier, later):
        built = turn_conversation(turn)
        prefix = built.prefix
        if prefix is None:
            continue
        held = built.items[prefix.offset : prefix.offset + len(prefix.items)]
        assert len(held) == len(prefix.items)
        assert all(a is b for a, b in zip(held, prefix.items, strict=True))
        assert prefix.lineage.latest is prefix.items
