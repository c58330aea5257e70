"""Following a paginated MCP list (``tools/list``, ``resources/list``, ...) to its end.

A server's ``nextCursor`` says where the next page starts; a server that gives a
cursor it gave before would be followed forever, hanging the listing of every
server and the Step that waits for it. ``pages`` stops there with
``RepeatedCursorError``, so such a server counts as one that cannot be listed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol, TypeVar


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


PageT = TypeVar("PageT", bound=_Page)


class RepeatedCursorError(Exception):
    """The server gave a ``nextCursor`` it had given before: its list never ends."""


async def pages(fetch: Callable[[str | None], Awaitable[PageT]]) -> AsyncGenerator[PageT, None]:
    """Each page ``fetch(cursor)`` gives, from the first (``None``) to one without a cursor.

    Raises ``RepeatedCursorError`` instead of fetching a cursor a second time. A caller
    may stop early; the next page is only fetched when it is asked for.
    """
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await fetch(cursor)
        yield page
        cursor = page.next_cursor
        if not cursor:
            return
        if cursor in seen:
            raise RepeatedCursorError(f"the server repeated the list cursor {cursor!r}")
        seen.add(cursor)
