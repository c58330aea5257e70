"""An RPC's input on the embedded engine: encoded once, and decoded only when its decode
could differ from it.

The input goes through its wire form so that a handler sees what Dex would hand it.
An input that its decode gives back type for type and that nobody can change is handed
over as it is, and a handler that publishes it writes the text it was encoded as.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import attrs
import pytest

from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.rpcs import rpc_call
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.staged_state import StagedState
from dex_agents.adapters.local.state_sources import TransactionSource
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.wire import to_json
from dex_agents.ports.engine import Rpc, RpcResult, Step, StepDecision, dead_end
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from dex_agents.ports.persistence import ChannelDef
from dex_agents.ports.step_contexts import RpcContext, StepContext


@attrs.frozen
class Reading:
    """A frozen value with a float: an ``int`` given for it comes back a ``float``."""

    level: float


@attrs.define
class Note:
    """A value anybody may change."""

    text: str


@attrs.frozen
class Wrapped:
    """A frozen value that holds one anybody may change."""

    note: Note


class Shade(StrEnum):
    """A choice that travels as its plain string."""

    DARK = "dark"


@attrs.frozen
class Pick:
    """A frozen value whose union's decode reads an enum member as the plain string."""

    choice: str | Shade


POSTED: ChannelDef[Any] = ChannelDef("Posted", object)


class Idle(Step[None]):
    """The start Step; no worker runs it in these tests."""

    async def execute(self, context: StepContext, input: None) -> StepDecision:
        return dead_end()


class PostingFlow:
    """A Flow whose RPCs publish their input as it came, and note what each handler got."""

    flow_type = "Posting"
    stream = None
    schema = (POSTED,)

    def __init__(self) -> None:
        self.seen: list[object] = []
        self.start_step: Step[Any] = Idle()
        self.steps = (self.start_step,)
        self.rpcs = {
            name: Rpc(name, kind, bool, self._post, is_transactional=True)
            for name, kind in (
                ("message", AgentUserMessage),
                ("reading", Reading),
                ("note", Note),
                ("wrapped", Wrapped),
                ("pick", Pick),
            )
        }

    def _post(self, context: RpcContext, value: Any) -> RpcResult[bool]:
        self.seen.append(value)
        context.state.publish(POSTED, value)
        return RpcResult(True)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    opened: FlowStore = (
        MemoryFlowStore()
        if request.param == "memory"
        else SqliteFlowStore(tmp_path / "flows.sqlite3")
    )
    yield opened
    opened.close()


async def _posted(engine: LocalEngine) -> list[str]:
    def read(tx: StoreTransaction) -> list[str]:
        return [row.value for row in tx.pending_messages("p1", POSTED.name, "")]

    return await engine.read(read)


MESSAGE = AgentUserMessage(
    text="Where is order 7?",
    images=(
        AgentImageReference(
            uri="media://img-1", mime_type="image/png", sha256="ab" * 32, size_bytes=12
        ),
    ),
)


async def test_an_exact_frozen_input_reaches_the_handler_as_it_is_and_is_published_as_encoded(
    store: FlowStore,
) -> None:
    flow = PostingFlow()
    engine = LocalEngine(store, [flow])
    client = LocalFlowClient(engine)
    await client.start_flow(flow, "p1", None)

    assert await client.invoke_rpc(flow, "p1", "message", MESSAGE) is True

    (seen,) = flow.seen
    assert seen is MESSAGE  # not decoded again: its decode would be equal, type for type
    assert await _posted(engine) == [to_json(MESSAGE)]


@pytest.mark.parametrize(
    ("rpc", "value", "decoded"),
    [
        # An int where a float belongs: the decode is a float, and the handler gets that.
        ("reading", Reading(level=3), Reading(level=3.0)),
        # Values that may change: the handler gets a copy, as Dex would hand it.
        ("note", Note(text="hi"), Note(text="hi")),
        ("wrapped", Wrapped(note=Note(text="hi")), Wrapped(note=Note(text="hi"))),
        # A union that reads the member's JSON as its str arm: the handler gets the str.
        ("pick", Pick(choice=Shade.DARK), Pick(choice="dark")),
    ],
)
async def test_an_input_whose_decode_may_differ_is_decoded_and_published_anew(
    store: FlowStore, rpc: str, value: object, decoded: object
) -> None:
    flow = PostingFlow()
    engine = LocalEngine(store, [flow])
    client = LocalFlowClient(engine)
    await client.start_flow(flow, "p1", None)

    await client.invoke_rpc(flow, "p1", rpc, value)

    (seen,) = flow.seen
    assert seen is not value
    assert seen == decoded
    assert type(getattr(seen, "level", 0.0)) is float
    assert type(getattr(seen, "choice", "")) is str
    assert await _posted(engine) == [to_json(decoded)]


def test_only_an_exact_frozen_input_carries_its_text(store: FlowStore) -> None:
    flow = PostingFlow()
    registered = LocalEngine(store, [flow]).registered(flow)

    def call(rpc: str, value: object) -> tuple[object, str | None]:
        made = rpc_call(registered, "p1", rpc, value, lambda: None)  # type: ignore[arg-type,return-value]
        return made.input_value, made.input_text

    assert call("message", MESSAGE) == (MESSAGE, to_json(MESSAGE))
    assert call("message", MESSAGE)[0] is MESSAGE
    assert call("reading", Reading(level=3)) == (Reading(level=3.0), None)
    assert call("note", Note(text="hi")) == (Note(text="hi"), None)
    assert call("wrapped", Wrapped(note=Note(text="hi")))[1] is None


def test_a_publish_writes_the_known_text_of_that_very_object_only(store: FlowStore) -> None:
    text = to_json(MESSAGE)

    def staged(tx: StoreTransaction) -> list[str]:
        state = StagedState("p1", TransactionSource(tx, "p1", (), frozenset()), ())
        state.know_text(MESSAGE, text)
        state.publish(POSTED, MESSAGE)
        state.publish(POSTED, attrs.evolve(MESSAGE))  # equal, but another object
        return [publish.value for publish in state.publishes]

    known, other = store.read(staged)
    assert known is text
    assert other == text
    assert other is not text
