"""``pages``: every page up to one without a cursor, and never a cursor twice."""

from __future__ import annotations

import attrs
import pytest

from dex_agents.adapters.mcp.paging import RepeatedCursorError, pages


@attrs.frozen
class _Page:
    cursor: str | None
    next_cursor: str | None


@pytest.mark.parametrize(
    ("next_cursors", "fetched", "repeated"),
    [
        ((None,), [None], False),
        (("a", "b", None), [None, "a", "b"], False),
        (("a", "a"), [None, "a"], True),
        (("a", "b", "a"), [None, "a", "b"], True),
        (("a", ""), [None, "a"], False),
    ],
    ids=["one page", "three pages", "the same cursor again", "a cycle", "an empty cursor ends"],
)
async def test_pages_follow_each_cursor_once(
    next_cursors: tuple[str | None, ...], fetched: list[str | None], repeated: bool
) -> None:
    asked: list[str | None] = []

    async def fetch(cursor: str | None) -> _Page:
        asked.append(cursor)
        return _Page(cursor, next_cursors[len(asked) - 1])

    async def follow() -> None:
        async for _ in pages(fetch):
            pass

    if repeated:
        with pytest.raises(RepeatedCursorError):
            await follow()
    else:
        await follow()
    assert asked == fetched
