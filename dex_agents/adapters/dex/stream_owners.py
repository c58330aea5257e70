"""Whose Stream a read names: a read that finds no event checks that the session exists.

Dex keeps a Stream per Flow type and reads one by Flow ID without checking
that the Flow exists, so a read through another Flow type's Flow, of a session
never started, or of one Dex has since removed (retention deletes a closed
session) found nothing and waited out every long poll: the browser stream sent
keep-alives for ever and ``wait_for_user`` waited its whole timeout. The
embedded engine refuses them with ``FlowNotFoundError`` naming the type asked
for. So when a read finds no event, one ``describe_flow`` tells which: a read
that finds an event is of its own type's Stream and needs none. The answer is
not remembered: a Flow ID's type never changes, but a session found once can be
removed later, and a remembered answer kept its readers polling. That costs one
short request after each long poll that found nothing. A ``describe_flow`` that
fails for another reason leaves the read's own outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import dex

from dex_agents.ports.errors import FlowNotFoundError


def _require_owner(
    flow_type: str, flow_id: str, described: dex.FlowInfo | dex.DexServiceError
) -> None:
    """The rule, whichever way ``describe`` was called: what ``describe`` answered for ``flow_id``.

    A session Dex does not find, or of another Flow type, is not found; a
    ``describe`` that failed for another reason leaves the read's own outcome.
    """
    if isinstance(described, dex.FlowNotFoundError) or (
        isinstance(described, dex.FlowInfo) and described.flow_type != flow_type
    ):
        raise FlowNotFoundError(f"no {flow_type} session with ID {flow_id!r}")


async def check_stream_owner(
    describe: Callable[[str], Awaitable[dex.FlowInfo]], flow_type: str, flow_id: str
) -> None:
    """``FlowNotFoundError`` when ``describe`` finds no ``flow_type`` session ``flow_id``."""
    described: dex.FlowInfo | dex.DexServiceError
    try:
        described = await describe(flow_id)
    except dex.DexServiceError as error:
        described = error
    _require_owner(flow_type, flow_id, described)


def check_stream_owner_sync(
    describe: Callable[[str], dex.FlowInfo], flow_type: str, flow_id: str
) -> None:
    """``check_stream_owner`` with a blocking ``describe``."""
    described: dex.FlowInfo | dex.DexServiceError
    try:
        described = describe(flow_id)
    except dex.DexServiceError as error:
        described = error
    _require_owner(flow_type, flow_id, described)
