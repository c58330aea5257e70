"""What ``ScriptedModelClient`` estimates of a request: its items' tokens and images, and its tools'.

A session's requests repeat its conversation, so each walk of a request's items
resumes a kept walk of an earlier one: unchecked where the built-in loop vouched
for the items (``request_prefixes.py``), after a comparison otherwise.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from dex_agents.app.builtin_loop.request_prefixes import REQUEST_PREFIXES, ItemsPrefix
from dex_agents.app.prefix_cache import PrefixCache
from dex_agents.domain.canonical_json import dumps
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelToolDefinition,
    UserTextItem,
)
from dex_agents.domain.object_memo import ObjectMemo
from dex_agents.domain.token_estimates import UTF8_BYTES_PER_TOKEN, estimate_text_tokens

# The LiteLLM client's ESTIMATED_IMAGE_INPUT_TOKENS, so that a scripted agent's
# compaction triggers where a real one's would.
ESTIMATED_IMAGE_INPUT_TOKENS: Final = 1600
"""The tokens each image counts for."""


_ItemsWalk: TypeAlias = tuple[int, tuple[AgentImageReference, ...]]

_WALKS_PER_FIRST_ITEM: Final = 8
"""The walks kept for requests that start with one item object: of as many sessions.

Equal stored items decode to one object, so sessions that began alike (a
benchmark's or a test's, or two users' "hi") send requests with the same first
item. With one walk kept for them, the requests of two such sessions took turns
replacing each other's walk, and each walked its items again from where the two
part: the whole history of the longer, at every call.
"""

_ITEMS_WALKED: PrefixCache[ModelInputItem, _ItemsWalk] = PrefixCache(
    lambda walk: walk[0] * UTF8_BYTES_PER_TOKEN, walks_per_key=_WALKS_PER_FIRST_ITEM
)
"""The estimated tokens and the images of the items of earlier requests.

A session's requests repeat its conversation's items (the same objects, from
the built-in loop's walk), so an item is estimated once, not once per call. A
kept walk weighs the bytes its tokens were estimated from. Requests have no
session, so the first item's object is the key.
"""


_PREFIXES_WALKED: PrefixCache[ModelInputItem, _ItemsWalk] = PrefixCache(
    lambda walk: walk[0] * UTF8_BYTES_PER_TOKEN
)
"""The estimated tokens and the images of the kept walks the built-in loop's requests hold,
by their ``ItemsLineage``: resumed with nothing compared (``request_prefixes.py``)."""


def walk_items(items: tuple[ModelInputItem, ...]) -> _ItemsWalk:
    """The estimated tokens of ``items``' texts and their images, in order."""
    if not items:
        return 0, ()
    prefix = REQUEST_PREFIXES.get(items)
    if prefix is not None:
        return _walk_with_prefix(items, prefix)
    key = ("scripted", id(items[0]))
    resumed = _ITEMS_WALKED.resume(key, items)
    start, walk = resumed or (0, (0, ()))
    walk = _walk_on(items, start, len(items), walk)
    if start < len(items):  # the second walk of a call's items finds them all walked
        _ITEMS_WALKED.remember(key, items, walk, replacing=resumed)
    return walk


def _walk_with_prefix(items: tuple[ModelInputItem, ...], prefix: ItemsPrefix) -> _ItemsWalk:
    """``walk_items`` of a request the built-in loop vouched for: the walk of an earlier
    prefix of the lineage is resumed unchecked, so only what the call adds is walked."""
    kept, lineage, offset = prefix.items, prefix.lineage, prefix.offset
    resumed = _PREFIXES_WALKED.resume(lineage, kept, lineage=lineage)
    if resumed is not None and resumed[0] == len(kept):
        walk = resumed[1]  # the second walk of a call's items, or a call of the same turn
    else:
        start, walk = resumed or (0, (0, ()))
        walk = _walk_on(kept, start, len(kept), walk)
        _PREFIXES_WALKED.remember(lineage, kept, walk, lineage=lineage)
    end = offset + len(kept)
    if end < len(items):
        walk = _walk_on(items, end, len(items), walk)
    if not offset:
        return walk
    head_tokens, head_images = _walk_on(items, 0, offset, (0, ()))
    return head_tokens + walk[0], head_images + walk[1]


def _walk_on(
    items: tuple[ModelInputItem, ...], start: int, end: int, walk: _ItemsWalk
) -> _ItemsWalk:
    """``walk`` carried on over ``items[start:end]``."""
    tokens, images = walk
    for item in items[start:end]:
        if isinstance(item, ModelOutputItem):
            tokens += estimate_text_tokens(item.item)
            continue
        tokens += estimate_text_tokens(item.text if isinstance(item, UserTextItem) else item.output)
        if item.images:
            images += item.images
    return tokens, images


_TOOL_TOKENS: ObjectMemo[ModelToolDefinition, int] = ObjectMemo()
"""The estimated tokens of each offered definition object.

Function and listed tools offer the same definition object in every call, so its
schema is encoded and estimated once, not once per call.
"""


def _estimate_tool(tool: ModelToolDefinition) -> int:
    texts = (tool.name, tool.description, dumps(dict(tool.parameters_schema)))
    return sum(estimate_text_tokens(text) for text in texts)


def tool_tokens(tool: ModelToolDefinition) -> int:
    """The estimated tokens of an offered definition's name, description and schema."""
    return _TOOL_TOKENS.get(tool, _estimate_tool)
