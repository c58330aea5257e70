"""What one SQLite connection knows of the file, kept across its transactions while no other
connection commits.

A session's Steps and its client read the same rows transaction after
transaction: the Flow run's row, its singleton Attributes, its active Step
executions, the Stream's running size. Within one process they all go through
one connection, and SQLite's ``PRAGMA data_version`` on that connection changes
exactly when another connection committed. So each transaction reads it first
(``SqliteFlowStore``), and when it moved, ``KnownRows.begin`` forgets the Flow
runs that the other connections' commits logged as changed (``flow_changes.py``),
or of a run whose row and Attribute values they did not write, only its Step
executions, Channel messages and Stream position.
While it stays, what this connection read or wrote is what the file holds:
every write of the rows kept here goes through ``SqliteTransaction``, which
keeps them up to date, and a transaction (or savepoint) that rolls back
forgets everything, since its writes were kept as they were made.

Kept per Flow run, for the most recently used ``MOST_FLOWS`` runs: the row,
singleton values (and which are unset), whole AttributeMaps of up to
``MOST_MAP_CHARS`` of text, the keys of write-once maps (their values are
``WriteOnceValues``'), the active Step executions once they were read
together, the unconsumed messages of Channels that hold at most
``MOST_PENDING_KEPT`` of at most ``MOST_PENDING_CHARS`` of text, how many wait
in each Channel, the ID of the newest Stream event, and the Step numbers it
counted last. Values are stored text; rows are the stored column values,
decoded into a fresh object for each caller.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, cast

from dex_agents.adapters.local.sqlite_row_reads import decode_execution, decode_flow
from dex_agents.adapters.local.sqlite_schema import (
    EXECUTION_COLUMNS,
)
from dex_agents.ports.flow_rows import ACTIVE_EXECUTION_STATUSES, ExecutionRow, FlowRow, MessageRow
from dex_agents.ports.store_capabilities import ChangedFlows

MOST_FLOWS = 512
"""How many Flow runs' rows and values one connection keeps, the least recently used dropped.

About 4 KiB each, and the waiting Channel messages each keeps (a session's are a few
queued user messages and tool results): a worker serving 10,000 waiting sessions keeps
2 MiB of them, and the sessions it is running now stay kept."""

MOST_MAP_CHARS = 256 * 1024
"""The most text one kept AttributeMap holds; a map that grows past it is no longer kept."""

MOST_PENDING_KEPT = 64
"""The most unconsumed messages of one Channel (or ChannelMap instance) kept; a Channel that
holds more is read again each time (a session's Channels hold a few at a time)."""

MOST_PENDING_CHARS = 64 * 1024
"""The most text the kept unconsumed messages of one Channel hold; past it, as past
``MOST_PENDING_KEPT``, the Channel is read again each time (its count is still kept)."""

ACTIVE_STATUSES = frozenset(status.value for status in ACTIVE_EXECUTION_STATUSES)
"""The stored statuses of an execution that ``KnownFlow.active`` holds."""

_STATUS = EXECUTION_COLUMNS.index("status")
_ID = EXECUTION_COLUMNS.index("id")


class KnownFlow:
    """What is known of one Flow run; ``None`` (or a missing key) means not known."""

    __slots__ = (
        "active",
        "last_event_id",
        "map_chars",
        "map_keys",
        "maps",
        "pending",
        "pending_chars",
        "pending_counts",
        "row",
        "row_known",
        "single_events",
        "singletons",
        "step_numbers",
    )

    def __init__(self) -> None:
        self.row_known = False
        self.row: tuple[Any, ...] | None = None  # stored values, or None when there is no row
        self.singletons: dict[str, str | None] = {}
        self.maps: dict[str, dict[str, str]] = {}
        self.map_chars: dict[str, int] = {}  # the text each kept map holds
        self.map_keys: dict[str, set[str]] = {}
        # Execution ID -> stored values (EXECUTION_COLUMNS), of every active execution.
        self.active: dict[int, tuple[Any, ...]] | None = None
        # The ID of the run's newest Stream event: the one an event appended now follows.
        self.last_event_id: int | None = None
        # How many of its events are single rows, not yet sealed into a block.
        self.single_events: int | None = None
        # (channel, key) -> its unconsumed messages by seq; channel -> how many of key "".
        self.pending: dict[tuple[str, str], list[MessageRow]] = {}
        self.pending_chars: dict[tuple[str, str], int] = {}
        self.pending_counts: dict[str, int] = {}
        # Step type -> the count step_counters holds, as this connection last counted it.
        self.step_numbers: dict[str, int] = {}

    def forget_activity(self) -> None:
        """Forget all but the row and the Attribute values: the Step executions, the Channel
        messages and the Stream's newest event."""
        self.active = None
        self.last_event_id = None
        self.single_events = None
        self.pending = {}
        self.pending_chars = {}
        self.pending_counts = {}
        self.step_numbers = {}

    def flow_row(self) -> FlowRow | None:
        """A fresh ``FlowRow`` of the kept values (the caller may change it)."""
        return None if self.row is None else decode_flow(self.row)

    def executions(self, statuses: frozenset[str]) -> list[tuple[ExecutionRow, tuple[Any, ...]]]:
        """The kept active executions in ``statuses`` by ID: a fresh row, and its stored values."""
        assert self.active is not None
        return [
            (decode_execution(values), values)
            for _, values in sorted(self.active.items())
            if values[_STATUS] in statuses
        ]

    def keep_map(self, name: str, values: dict[str, str]) -> None:
        """Keep a whole AttributeMap as read, unless it holds more than ``MOST_MAP_CHARS``."""
        chars = sum(map(len, values.values()))
        if chars <= MOST_MAP_CHARS:
            self.maps[name] = values
            self.map_chars[name] = chars

    def holds(self, name: str, key: str, text: str | None) -> bool:
        """Whether the value at ``name``/``key`` is known to be ``text`` (``None``: unset)."""
        if key == "":
            return name in self.singletons and self.singletons[name] == text
        whole = self.maps.get(name)
        return whole is not None and whole.get(key) == text

    def put_value(self, name: str, key: str, text: str | None) -> None:
        """Keep a write (``None``: a delete) of one value."""
        if key == "":
            self.singletons[name] = text
        kept = self.maps.get(name)
        if kept is not None:
            before = kept.pop(key, None)
            chars = self.map_chars[name] - (0 if before is None else len(before))
            if text is not None:
                kept[key] = text
                chars += len(text)
            if chars > MOST_MAP_CHARS:  # a map that grew too large is read again when needed
                del self.maps[name], self.map_chars[name]
            else:
                self.map_chars[name] = chars
        keys = self.map_keys.get(name)
        if keys is not None:
            if text is None:
                keys.discard(key)
            else:
                keys.add(key)

    def keep_pending(self, channel: str, key: str, rows: list[MessageRow]) -> None:
        """Keep the unconsumed messages of a Channel as read, unless there are too many."""
        if key == "":
            self.pending_counts[channel] = len(rows)
        chars = sum(len(row.value) for row in rows)
        if len(rows) <= MOST_PENDING_KEPT and chars <= MOST_PENDING_CHARS:
            self.pending[(channel, key)] = rows
            self.pending_chars[(channel, key)] = chars

    def message_added(self, row: MessageRow) -> None:
        """Keep a message appended now (its ``seq`` is the newest)."""
        kept = (row.channel, row.key)
        rows = self.pending.get(kept)
        if rows is not None:
            chars = self.pending_chars[kept] + len(row.value)
            if len(rows) < MOST_PENDING_KEPT and chars <= MOST_PENDING_CHARS:
                rows.append(row)
                self.pending_chars[kept] = chars
            else:
                self._forget_pending(kept)
        if row.key == "" and row.channel in self.pending_counts:
            self.pending_counts[row.channel] += 1

    def message_taken(self, channel: str, key: str, seq: int) -> None:
        """Keep that the unconsumed message ``seq`` was consumed or deleted."""
        rows = self.pending.get((channel, key))
        if rows is not None:
            kept = [row for row in rows if row.seq != seq]
            if len(kept) == len(rows):  # not the message kept: what is kept cannot be trusted
                self.message_back(channel, key)
                return
            self.pending[(channel, key)] = kept
            self.pending_chars[(channel, key)] = sum(len(row.value) for row in kept)
        if key == "" and channel in self.pending_counts:
            self.pending_counts[channel] -= 1

    def message_back(self, channel: str, key: str) -> None:
        """Forget a Channel's messages: a consumed one is pending again, in its old place."""
        self._forget_pending((channel, key))
        if key == "":
            self.pending_counts.pop(channel, None)

    def _forget_pending(self, kept: tuple[str, str]) -> None:
        self.pending.pop(kept, None)
        self.pending_chars.pop(kept, None)

    def put_execution(self, values: Sequence[Any]) -> None:
        """Keep an execution as stored now: in the active set while it is active."""
        if self.active is None:
            return
        if values[_STATUS] in ACTIVE_STATUSES:
            self.active[values[_ID]] = tuple(values)
        else:
            self.active.pop(values[_ID], None)


class KnownRows:
    """The rows and values one connection knows, valid while ``PRAGMA data_version`` holds."""

    def __init__(self, most_flows: int = MOST_FLOWS) -> None:
        self._most = most_flows
        self._flows: OrderedDict[str, KnownFlow] = OrderedDict()
        self._version: int | None = None
        # Execution ID -> Flow run, for the active executions kept.
        self._owner: dict[int, str] = {}
        self.stream_bytes: dict[str, int] = {}
        """Each Flow type's Stream size in bytes, as ``stream_sizes`` holds it."""
        self.change: int | None = None
        """The newest logged change (``flow_changes``) that what is kept reflects."""
        self.next_execution_id: int | None = None
        """The store ID the next Step execution inserted gets, known since this connection
        inserted the last one: ``AUTOINCREMENT`` gives one past it while no other connection
        inserts (``SqliteTransaction.insert_execution``)."""

    def begin(self, version: int, changed_since: Callable[[int | None], ChangedFlows]) -> None:
        """Start a transaction whose connection reads ``version``; when it moved, forget what
        ``changed_since`` says other connections changed since ``change``.

        ``changed_since(None)`` asks for the newest change alone: nothing is known yet.
        """
        if version == self._version:
            return
        # A Flow type's size moves with any run's events: cheap to read again.
        self.stream_bytes.clear()
        self.next_execution_id = None  # another connection may have inserted one
        # Should the read fail, the version stays unseen, and the next transaction asks again.
        changed, self.change = changed_since(self.change)
        if changed is None:
            self.forget()
        else:
            for flow_id, state in changed.items():
                if state:
                    self._drop(flow_id)
                else:
                    self._drop_activity(flow_id)
        self._version = version

    def holds_version(self, version: int) -> bool:
        """Whether what is kept was valid at ``version`` of ``PRAGMA data_version``."""
        return version == self._version

    def committed(self, change: int | None) -> None:
        """This connection committed a transaction that logged ``change`` (``None``: none).

        Kept only when it directly follows the one known, so a change logged
        by another connection in between is never taken as seen.
        """
        if change is not None and self.change is not None and change == self.change + 1:
            self.change = change

    def forget(self) -> None:
        """Forget everything: another connection committed, or a rollback undid kept writes."""
        self._flows.clear()
        self._owner.clear()
        self.stream_bytes.clear()
        self.next_execution_id = None

    def _drop(self, flow_id: str) -> None:
        dropped = self._flows.pop(flow_id, None)
        if dropped is not None:
            self._forget_owners(dropped)

    def _drop_activity(self, flow_id: str) -> None:
        # Another connection changed the run's Step executions, Channel messages or Stream,
        # not its row or Attribute values (a client queued a message, a worker claimed).
        known = self._flows.get(flow_id)
        if known is not None:
            self._forget_owners(known)
            known.forget_activity()

    def _forget_owners(self, known: KnownFlow) -> None:
        """Forget which run owns each active execution ``known`` holds."""
        for execution_id in known.active or ():
            self._owner.pop(execution_id, None)

    def forget_single_events(self) -> None:
        """Forget how many single events each run has: a trim deleted some of them."""
        for known in self._flows.values():
            known.single_events = None

    def flow(self, flow_id: str) -> KnownFlow:
        """The entry of ``flow_id``, made when it has none; the least recently used goes."""
        known = self._flows.get(flow_id)
        if known is None:
            known = self._flows[flow_id] = KnownFlow()
            if len(self._flows) > self._most:
                self._drop(next(iter(self._flows)))
        else:
            self._flows.move_to_end(flow_id)
        return known

    def peek(self, flow_id: str) -> KnownFlow | None:
        """The entry of ``flow_id`` if there is one, without making it recently used."""
        return self._flows.get(flow_id)

    def keep_active(self, flow_id: str, rows: Sequence[Sequence[Any]]) -> KnownFlow:
        """Keep ``rows``, the stored values of every active execution of ``flow_id``."""
        known = self.flow(flow_id)
        self._forget_owners(known)
        known.active = {values[_ID]: tuple(values) for values in rows}
        for execution_id in known.active:
            self._owner[execution_id] = flow_id
        return known

    def put_execution(self, flow_id: str, values: Sequence[Any]) -> None:
        """Keep an execution as stored now, when its Flow run's active set is kept."""
        known = self._flows.get(flow_id)
        if known is None or known.active is None:
            return
        known.put_execution(values)
        if values[_ID] in known.active:
            self._owner[values[_ID]] = flow_id
        else:
            self._owner.pop(values[_ID], None)

    def active_execution(self, execution_id: int) -> tuple[ExecutionRow, tuple[Any, ...]] | None:
        """A kept active execution, a fresh row and its stored values; ``None`` when not kept."""
        flow_id = self._owner.get(execution_id)
        if flow_id is None:
            return None
        known = self._flows.get(flow_id)
        if known is None or known.active is None or execution_id not in known.active:
            return None
        values = known.active[execution_id]
        return decode_execution(values), values


class _OnFirstUse:
    """Stands in for the kept rows until their first use, which ``resolve`` gives them at."""

    __slots__ = ("_resolve",)

    def __init__(self, resolve: Callable[[], KnownRows]) -> None:
        self._resolve = resolve

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


def known_on_first_use(resolve: Callable[[], KnownRows]) -> KnownRows:
    """A stand-in for the rows ``resolve`` returns, which calls it at each use (a read checks
    the kept rows at their first use, ``kept_reads``); ``resolve`` puts the real rows in its
    place, so it is used once."""
    # Typed as what it stands in for: each use of it is the real one's, through __getattr__.
    return cast(KnownRows, _OnFirstUse(resolve))
