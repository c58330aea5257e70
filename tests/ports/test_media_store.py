"""load_images: a runner reads each image of its input once from the media store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from dex_agents.domain.errors import MediaStoreError
from dex_agents.domain.events import EventPayload
from dex_agents.domain.images import (
    AgentImageReference,
    ImageTurn,
    build_image_reference,
    collect_turn_images,
    require_store_image_reference,
    verify_image_bytes,
)
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.ports.media_store import LOAD_IMAGES_AT_ONCE, MediaStore, load_images
from dex_agents.ports.runner import AgentTurnContext
from tests.domain.images_support import png

STORE_URI = "memory://media"
RED = png()
BLUE = png(total_size=len(png()) + 20)  # another valid PNG: a private chunk pads it


class CountingMediaStore:
    """An in-memory store that verifies reads as the port requires and counts them."""

    store_uri = STORE_URI

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.reads: list[str] = []

    async def put_image(self, data: bytes) -> AgentImageReference:
        reference = build_image_reference(data, self.store_uri)
        self.objects.setdefault(reference.sha256, bytes(data))
        return reference

    async def get_image(self, reference: AgentImageReference) -> bytes:
        require_store_image_reference(reference, self.store_uri)
        self.reads.append(reference.sha256)
        try:
            data = self.objects[reference.sha256]
        except KeyError:
            raise MediaStoreError(f"image {reference.sha256} is not stored") from None
        verify_image_bytes(data, reference)
        return data


class QuietEvents:
    def write_text_delta(self, text: str) -> None:
        pass

    def write_reasoning_delta(self, text: str) -> None:
        pass

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        pass

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        pass

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        pass


async def _heartbeat() -> None:
    pass


async def test_each_image_is_read_once_and_keyed_by_sha256() -> None:
    store = CountingMediaStore()
    port: MediaStore = store
    red, blue = await port.put_image(RED), await port.put_image(BLUE)
    assert red.sha256 != blue.sha256
    loaded = await load_images(port, [red, blue, red, blue, red])
    assert loaded == {red.sha256: RED, blue.sha256: BLUE}
    assert list(loaded) == [red.sha256, blue.sha256]
    assert store.reads == [red.sha256, blue.sha256]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"mime_type": "image/jpeg"}, "a 67-byte image/jpeg"),
        ({"size_bytes": 68}, "a 68-byte image/png"),
    ],
    ids=["another type", "another size"],
)
async def test_a_later_reference_that_misnames_the_bytes_is_refused(
    change: dict[str, Any], named: str
) -> None:
    # Each image of a model request is built from its own reference: a later one read only
    # as a repeat of the first would have sent PNG bytes as the JPEG it claims.
    store = CountingMediaStore()
    red = await store.put_image(RED)
    forged = attrs.evolve(red, **change)
    with pytest.raises(MediaStoreError, match=f"is a 67-byte image/png, not {named}"):
        await load_images(store, [red, forged])
    assert store.reads == []  # refused before anything is read
    assert await load_images(store, [red, attrs.evolve(red, uri=red.uri + "-elsewhere")]) == {
        red.sha256: RED
    }


async def test_no_references_read_nothing() -> None:
    store = CountingMediaStore()
    assert await load_images(store, []) == {}
    assert await load_images(store, iter(())) == {}
    assert store.reads == []


class OverlapStore(CountingMediaStore):
    """Reads that yield to the loop a few times, so overlapping reads show in ``most``.

    ``fails`` maps a SHA-256 to how many yields its read makes before it fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0
        self.fails: dict[str, int] = {}

    async def get_image(self, reference: AgentImageReference) -> bytes:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            for _ in range(self.fails.get(reference.sha256, 3)):
                await asyncio.sleep(0)
            if reference.sha256 in self.fails:
                raise MediaStoreError(f"read of {reference.sha256} failed")
            return await super().get_image(reference)
        finally:
            self.in_flight -= 1


def _images(count: int) -> list[bytes]:
    # Valid PNGs of different sizes: a private chunk pads each.
    return [png(total_size=len(png()) + 20 * (n + 1)) for n in range(count)]


async def test_the_reads_of_one_call_overlap_up_to_the_limit() -> None:
    store = OverlapStore()
    references = [await store.put_image(data) for data in _images(LOAD_IMAGES_AT_ONCE + 4)]
    loaded = await load_images(store, references[:3])
    assert store.most == 3
    assert list(loaded) == [r.sha256 for r in references[:3]]
    store.most = 0
    loaded = await load_images(store, references)
    assert store.most == LOAD_IMAGES_AT_ONCE
    assert list(loaded) == [r.sha256 for r in references]
    assert store.in_flight == 0


async def test_a_failure_raises_the_first_failing_references_error_after_every_read_ends() -> None:
    store = OverlapStore()
    fine, slow_bad, quick_bad = [await store.put_image(data) for data in _images(3)]
    store.fails = {slow_bad.sha256: 6, quick_bad.sha256: 0}
    with pytest.raises(MediaStoreError, match=f"^read of {slow_bad.sha256} failed$"):
        await load_images(store, [fine, slow_bad, quick_bad])
    assert store.in_flight == 0
    assert store.reads == [fine.sha256]  # the counted part of a read that did not fail


async def test_a_missing_image_raises_its_error() -> None:
    store = CountingMediaStore()
    red = await store.put_image(RED)
    missing = build_image_reference(BLUE, STORE_URI)  # never stored
    with pytest.raises(MediaStoreError, match=f"^image {missing.sha256} is not stored$"):
        await load_images(store, [missing, red])


async def test_a_cancelled_call_leaves_no_read_running() -> None:
    store = OverlapStore()
    references = [await store.put_image(data) for data in _images(3)]
    store.fails = {r.sha256: 1000 for r in references}  # reads that outlast the call
    call = asyncio.create_task(load_images(store, references))
    for _ in range(10):
        await asyncio.sleep(0)
    assert store.in_flight == 3
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert store.in_flight == 0


async def test_a_runner_loads_the_images_of_its_turn() -> None:
    store = CountingMediaStore()
    red, blue = await store.put_image(RED), await store.put_image(BLUE)
    user = AgentMessage(
        sequence=1,
        turn_id="turn-1",
        role=MessageRole.USER,
        framework_item="{}",
        text="What does this chart show?",
        images=(red,),
    )
    screenshot = AgentToolCall(
        tool_call_id="call-1",
        tool_name="screenshot",
        arguments="{}",
        turn_id="turn-1",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.SUCCEEDED,
        deferral_order=0,
        images=(blue, red),
    )
    turn = AgentTurnContext(
        flow_id="session-42",
        turn_id="turn-1",
        attempt=1,
        messages=(user,),
        events=QuietEvents(),
        heartbeat=_heartbeat,
        tool_calls={"call-1": screenshot},
    )
    image_turn: ImageTurn = turn  # the port's context is what collect_turn_images reads
    references = collect_turn_images(image_turn)
    assert references == (red, blue)
    assert await load_images(store, references) == {red.sha256: RED, blue.sha256: BLUE}
    assert store.reads == [red.sha256, blue.sha256]
