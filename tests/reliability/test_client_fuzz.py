"""Every ``AgentSessionClient`` method, fuzzed with arguments a caller might pass by mistake.

For each method, hypothesis draws its arguments from right and wrong values
(``client_fuzz``) and calls it on an in-memory runtime whose sessions wait in
known states. Every call must end one of two ways:

- it returns its documented type (``bool``, the run ID ``str``, an
  ``AgentSnapshot``, an ``AgentMessagesPage``); a message it accepted is then
  stored or queued exactly once more;
- it raises a clear error: a ``TypeError``, a ``ValueError`` or a
  ``DexAgentsError``, never another type, and never a hang.

A call that raises, returns ``False`` or only reads leaves every session's
snapshot and ``list_flows`` exactly as they were. The default profile is fast
and derandomized (the same examples on every run); ``DEX_AGENTS_SOAK=1`` runs ten
times as many, freshly random.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dex_agents import AgentMessagesPage, AgentSnapshot, DexAgentsError
from dex_agents.local import LocalRuntime
from dex_agents.testing import InvocationLog
from tests.reliability.client_fuzz import (
    FuzzWorld,
    choice,
    environment_values,
    image_values,
    int_values,
    maybe,
    new_session_ids,
    pick,
    settings_values,
    text_values,
    timeout_values,
    values,
)
from tests.reliability.harness import SOAK, Stopwatch, record_figures, soak
from tests.reliability.race_agent import build_race_flow

CLEAR_ERRORS = (TypeError, ValueError, DexAgentsError)
CALL_SECONDS = 30.0
"""A call that takes longer than this hangs: no method of an idle runtime waits that long."""

FUZZ = settings(
    max_examples=soak(50, 500),
    deadline=None,
    database=None,
    derandomize=not SOAK,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Arguments = tuple[tuple[Any, ...], dict[str, Any]]
Drawer = Callable[[st.DataObject, dict[str, list[str]]], Arguments]


def _session(data: st.DataObject, ids: dict[str, list[str]]) -> Any:
    real = pick(ids["sessions"])
    return data.draw(choice(real, real, real, new_session_ids, values), label="session_id")


def _real(data: st.DataObject, ids: dict[str, list[str]], kind: str, label: str) -> Any:
    real = pick(ids[kind])
    return data.draw(choice(real, real, text_values, values), label=label)


def _options(data: st.DataObject, **options: st.SearchStrategy[Any]) -> dict[str, Any]:
    """Each keyword argument given or left out, by the draw."""
    return {
        name: data.draw(strategy, label=name)
        for name, strategy in options.items()
        if data.draw(st.booleans(), label=f"give {name}")
    }


def _text(data: st.DataObject, label: str) -> Any:
    return data.draw(
        maybe(choice(st.text(max_size=40), st.text(max_size=40), text_values)), label=label
    )


DRAWERS: dict[str, Drawer] = {
    "open_session": lambda d, ids: (
        (_session(d, ids),),
        _options(
            d,
            session_settings=settings_values,
            start_environment=environment_values,
            plan_mode=maybe(st.booleans()),
        ),
    ),
    "start_session": lambda d, ids: (
        (_session(d, ids), _text(d, "initial_message")),
        _options(
            d,
            session_settings=settings_values,
            start_environment=environment_values,
            plan_mode=maybe(st.booleans()),
            images=image_values,
        ),
    ),
    "send_user_message": lambda d, ids: (
        (_session(d, ids), _text(d, "text")),
        _options(d, plan_mode=maybe(st.booleans()), images=image_values),
    ),
    "steer_user_message": lambda d, ids: (
        (_session(d, ids),),
        _options(
            d,
            message_id=choice(pick(ids["queued"]), st.none(), values),
            text=maybe(st.text(max_size=20)),
            plan_mode=maybe(st.booleans()),
            images=image_values,
        ),
    ),
    "delete_queued_message": lambda d, ids: (
        (_session(d, ids), _real(d, ids, "queued", "message_id")),
        {},
    ),
    "cancel_turn": lambda d, ids: ((_session(d, ids), _real(d, ids, "turns", "turn_id")), {}),
    "execute_plan": lambda d, ids: ((_session(d, ids), d.draw(maybe(int_values))), {}),
    "resolve_interrupt": lambda d, ids: (
        (
            _session(d, ids),
            _real(d, ids, "interrupts", "interrupt_id"),
            d.draw(maybe(st.booleans()), label="approved"),
        ),
        _options(d, rejection_message=maybe(st.one_of(st.none(), text_values))),
    ),
    "answer_question": lambda d, ids: (
        (_session(d, ids), _real(d, ids, "interrupts", "interrupt_id"), _text(d, "answer")),
        {},
    ),
    "update_session_settings": lambda d, ids: (
        (_session(d, ids), d.draw(settings_values, label="session_settings")),
        {},
    ),
    "get_agent_snapshot": lambda d, ids: ((_session(d, ids),), {}),
    "list_agent_messages": lambda d, ids: (
        (_session(d, ids),),
        _options(
            d,
            before_sequence=maybe(st.one_of(st.none(), int_values)),
            after_sequence=maybe(st.one_of(st.none(), int_values)),
            limit=maybe(int_values),
        ),
    ),
    "wait_for_user": lambda d, ids: ((_session(d, ids),), _options(d, timeout=timeout_values)),
}
RESULT_TYPES: dict[str, type] = {
    "start_session": str,
    "get_agent_snapshot": AgentSnapshot,
    "wait_for_user": AgentSnapshot,
    "list_agent_messages": AgentMessagesPage,
}
READ_ONLY = frozenset({"get_agent_snapshot", "list_agent_messages", "wait_for_user"})


def _shown(method: str, arguments: Arguments) -> str:
    args, kwargs = arguments
    shown = [repr(a)[:80] for a in args] + [f"{k}={v!r}"[:80] for k, v in kwargs.items()]
    return f"{method}({', '.join(shown)})"


def _sent_text(method: str, arguments: Arguments) -> object:
    """The text a call queues when it succeeds, or ``None``."""
    args, kwargs = arguments
    if method == "send_user_message":
        return args[1]
    if method == "steer_user_message" and kwargs.get("message_id") is None:
        return kwargs.get("text")
    return None


async def one_call(
    world: FuzzWorld, method: str, data: st.DataObject, counts: Counter[str]
) -> None:
    """Draw one call of ``method``, make it, and check its outcome."""
    await world.keep_states()
    before = await world.observe()
    arguments = DRAWERS[method](data, world.real_ids(before[0]))
    args, kwargs = arguments
    call = _shown(method, arguments)
    sent = _sent_text(method, arguments)
    copies = await world.copies(args[0], sent)
    counts["tried"] += 1
    refusal: Exception | None = None
    try:
        async with asyncio.timeout(CALL_SECONDS):
            result = await getattr(world.sessions, method)(*args, **kwargs)
    except CLEAR_ERRORS as error:
        refusal = error
    except Exception as error:
        raise AssertionError(
            f"{call} raised {type(error).__name__}, not a TypeError, ValueError or "
            f"DexAgentsError: {error}"
        ) from error
    if refusal is not None:
        counts["raised"] += 1
        assert await world.observe() == before, f"{call} raised {refusal!r} and changed the state"
        return
    expected = RESULT_TYPES.get(method, bool)
    assert type(result) is expected, f"{call} returned {type(result).__name__}"
    if isinstance(result, AgentMessagesPage):
        assert len(result.messages) <= 200
    if result is False or method in READ_ONLY:
        counts["returned False" if result is False else "read"] += 1
        assert await world.observe() == before, f"{call} returned {result!r} and changed the state"
        return
    counts["succeeded"] += 1
    if method in ("start_session", "open_session"):
        world.known.add(args[0])
    await world.settle()
    if sent is not None and isinstance(sent, str):
        assert await world.copies(args[0], sent) == copies + 1, f"{call}: not stored once"


@pytest.mark.parametrize("method", sorted(DRAWERS))
def test_a_client_method_refuses_bad_arguments_clearly_and_changes_nothing(
    method: str, tmp_path: Path
) -> None:
    clock = Stopwatch()
    counts: Counter[str] = Counter()
    flow = build_race_flow(InvocationLog(tmp_path / "invocations.log"))
    runtime = LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20))
    with asyncio.Runner() as runner:
        runner.run(runtime.__aenter__())
        try:
            world = FuzzWorld(runtime, runtime.sessions(flow))
            runner.run(world.start())

            @FUZZ
            @given(data=st.data())
            def fuzz(data: st.DataObject) -> None:
                runner.run(one_call(world, method, data, counts))

            fuzz()
        finally:
            runner.run(runtime.__aexit__(None, None, None))
    assert counts["tried"] >= 1
    record_figures("client_fuzz", method=method, seconds=clock.seconds(), **counts)
