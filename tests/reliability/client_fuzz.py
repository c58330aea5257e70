"""The pieces of the client fuzz: the argument strategies and a session world to call into.

``values`` are what a caller might pass by mistake: ``None``, bools where ints
go, negative and huge ints, NaN, bytes, containers, text with control
characters or lone surrogates, megabytes of text. Each argument strategy mixes
them with values of the right shape, including IDs that are real right now
(a pending interrupt's, the active turn's, a queued message's), drawn when the
example runs.

``FuzzWorld`` is an in-memory runtime with a Worker and three sessions kept in
known states: ``idle`` (one turn done), ``approval`` (a write waits for
approval) and ``question`` (an ``ask_user`` question waits). ``observe()``
reads everything a call could change: every known session's snapshot and
``list_flows``; ``settle()`` waits until no session is working on its own.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from dex_agents import AgentSessionClient, AgentSnapshot, session_attention
from dex_agents.domain.images import AgentImageReference
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_client import FlowInfo
from dex_agents.testing import wait_until
from tests.reliability.harness import stored_messages, user_texts

TURN = timedelta(seconds=30)
KEPT_SESSIONS = {"idle": "hello", "approval": "refund 7", "question": "ask 7"}
QUIET_STEPS = frozenset(
    {
        frozenset({"AwaitUserMessage"}),
        frozenset({"AwaitToolApproval", "ResumeTurn"}),
        frozenset({"AwaitQuestionAnswer", "ResumeTurn"}),
    }
)
"""The active Steps of a session that waits for a person and has nothing else to run."""

_SURROGATES = st.sampled_from(["\ud800", "x\udfffy", "\udc80\udc81", "ok \ud83d"])
_CONTROL = st.text(alphabet=st.characters(categories=["Cc"]), min_size=1, max_size=6)
# Built when drawn, so a failing example's report does not print megabytes.
_HUGE = st.sampled_from([("h", 100_000), ("é", 300_000), ("x", 2_000_000)]).map(
    lambda c: c[0] * c[1]
)
_ODD_TEXT = st.sampled_from(
    ["", " ", "\n\t ", "a/b", "\x00", "\x1b[2J", "\u202e", "🙂" * 70, "s" * 257]
)
text_values = st.one_of(st.text(max_size=30), _CONTROL, _SURROGATES, _HUGE, _ODD_TEXT)
int_values = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**40]),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    int_values,
    st.floats(),
    text_values,
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.sampled_from([object(), timedelta(seconds=1), bytearray(b"x"), ("t",), frozenset({1})]),
)

hashable_values = st.one_of(
    st.none(), st.booleans(), int_values, text_values, st.binary(max_size=4), st.just(("t",))
)
"""Wrong values that can be a mapping's key."""


def choice(*branches: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of ``branches``, each as likely (``st.one_of`` would flatten nested ones and weigh
    every branch of ``values`` like a whole strategy)."""
    return st.sampled_from(branches).flatmap(lambda branch: branch)


def pick(items: list[str]) -> st.SearchStrategy[str]:
    """One of ``items``, drawn as an index with fixed bounds: the real IDs change from one
    example to the next, and hypothesis needs the same draws to replay an example."""
    return st.integers(0, 2**16).map(lambda index: items[index % len(items)])


def maybe(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``right`` three times in four, any wrong value the rest, so some calls get through."""
    return choice(right, right, right, values)


_ID_CHARACTERS = string.ascii_letters + string.digits + "-_.:"
new_session_ids = st.text(alphabet=_ID_CHARACTERS, min_size=1, max_size=24).map(
    lambda s: f"new-{s}"
)
_json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**60), 2**60), st.text(max_size=10)
)
json_objects = st.dictionaries(
    st.text(max_size=8),
    st.recursive(_json_leaves, lambda inner: st.lists(inner, max_size=3), max_leaves=6),
    max_size=4,
)
settings_values = choice(
    st.none(),
    json_objects,
    st.just({}),
    st.builds(lambda: {"big": "b" * 70_000}),  # over the settings' size limit
    st.dictionaries(st.text(max_size=3), values, max_size=3),
    st.dictionaries(int_values, st.text(max_size=3), min_size=1, max_size=2),
    st.just({"nan": float("nan")}),
    values,
)
environment_values = choice(
    st.none(),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=3), values, min_size=1, max_size=2),
    st.dictionaries(hashable_values, st.text(max_size=3), min_size=1, max_size=2),
    values,
)
image_values = choice(
    st.just(()),
    st.lists(values, max_size=2),
    text_values,
    st.just(
        [
            AgentImageReference(
                uri="file:///nowhere.png", mime_type="image/png", sha256="0" * 64, size_bytes=1
            )
        ]
    ),
    values,
)
timeout_values = choice(
    st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(milliseconds=200)),
    st.sampled_from([timedelta(0), timedelta.max, timedelta.min]),
    values,
)


@dataclass
class FuzzWorld:
    """An in-memory runtime and the sessions the fuzz calls into."""

    runtime: LocalRuntime
    sessions: AgentSessionClient
    known: set[str] = field(default_factory=lambda: set(KEPT_SESSIONS))

    async def start(self) -> None:
        """Start the kept sessions and bring them to their states."""
        for session in KEPT_SESSIONS:
            await self.sessions.open_session(session)
        await self.keep_states()

    async def quiet(self, session: str) -> AgentSnapshot:
        """The session's snapshot once nothing of it can run before a person acts.

        It needs a person (``session_attention``), nothing is steered, and its
        active Steps are one of the waiting sets in ``QUIET_STEPS``: a snapshot
        that still shows an approval after ``cancel_turn`` or a steer is not
        quiet yet. Polled rather than ``wait_for_user``: a session started with
        no message writes no event, so that wait would sit out its 2 s recheck.
        """

        async def probe() -> AgentSnapshot | None:
            snapshot = await self.sessions.get_agent_snapshot(session)
            steps = frozenset(
                (await self.runtime.flow_client.describe_flow(session)).active_step_types
            )
            waiting = session_attention(snapshot) is not None and not snapshot.steered_messages
            return snapshot if waiting and steps in QUIET_STEPS else None

        return await wait_until(f"session {session!r} to be quiet", probe, TURN.total_seconds())

    async def keep_states(self) -> None:
        """Bring the kept sessions back to their states when a call moved them on."""
        for session, text in KEPT_SESSIONS.items():
            snapshot = await self.quiet(session)
            wants_interrupt = session != "idle"
            for _ in range(5):
                if bool(snapshot.pending_interrupts) == wants_interrupt and snapshot.messages:
                    break
                assert await self.sessions.send_user_message(session, text)
                snapshot = await self.sessions.wait_for_user(session, timeout=TURN)
            else:
                raise AssertionError(f"cannot bring {session} back: {snapshot!r}"[:3000])

    async def settle(self) -> None:
        """Wait until every known session needs a person: none is working on its own."""
        for session in sorted(self.known):
            await self.quiet(session)

    async def observe(self) -> tuple[dict[str, AgentSnapshot], tuple[FlowInfo, ...]]:
        """Everything a call could change."""
        snapshots = {s: await self.sessions.get_agent_snapshot(s) for s in sorted(self.known)}
        return snapshots, tuple(await self.runtime.flow_client.list_flows())

    async def copies(self, session: object, text: object) -> int:
        """How often ``text`` is stored, queued or steered as a user message of a known ``session``."""
        if not isinstance(session, str) or session not in self.known or not isinstance(text, str):
            return 0
        stored = user_texts(await stored_messages(self.sessions, session))
        snapshot = await self.sessions.get_agent_snapshot(session)
        waiting = [m.text for m in (*snapshot.queued_messages, *snapshot.steered_messages)]
        return stored.count(text) + waiting.count(text)

    @staticmethod
    def real_ids(snapshots: dict[str, AgentSnapshot]) -> dict[str, list[str]]:
        """IDs a call could name right now: interrupts, turns, queued messages, sessions."""
        interrupts, turns, queued = [], ["turn-1"], []
        for snapshot in snapshots.values():
            interrupts += [i.interrupt_id for i in snapshot.pending_interrupts]
            if snapshot.state is not None and snapshot.state.active_turn_id:
                turns.append(snapshot.state.active_turn_id)
            queued += [m.message_id for m in snapshot.queued_messages]
        return {
            "sessions": sorted(snapshots),
            "interrupts": interrupts or ["none"],
            "turns": turns,
            "queued": queued or ["none"],
        }
