"""Flow runs whose stored values sit on a damaged page of the file, kept so no transaction reads them.

SQLite reports a page it cannot make sense of (random bytes over an overflow
page, a broken pointer) as ``SQLITE_CORRUPT``, "database disk image is
malformed", and from then on the transaction that read it can write nothing:
each later statement fails the same way, so the whole commit fails. Until
2026-12-07 a claim round that read one session's state there failed each time
it ran, and the worker retried it for ever as a passing store fault, claiming
no other session's Step. Now the store notes that Flow run when a read of its
Attribute values finds a damaged page, and each later transaction of the store
refuses to read those values with ``StoredValueError`` before it reads a page,
so the transaction stays usable: a claim round leases that session's Step with
no state, its attempt fails with ``UnreadableStateError`` naming the run, and
its retry policy and failure route decide, as for a damaged value. The note
lasts as long as the store is open: such a page does not mend, and a file a
person repaired is opened again.
"""

from __future__ import annotations

import sqlite3
import threading

from dex_agents.adapters.local.store_errors import StoredValueError


def is_damaged_page(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's report of a damaged page (``SQLITE_CORRUPT``)."""
    code = getattr(error, "sqlite_errorcode", None)
    return (
        isinstance(error, sqlite3.DatabaseError)
        and isinstance(code, int)
        and code & 0xFF == sqlite3.SQLITE_CORRUPT
    )


def damaged_page_error(flow_id: str, error: BaseException | None = None) -> StoredValueError:
    """The error that names the Flow run whose values are on a damaged page."""
    cause = "" if error is None else f": {error}"
    return StoredValueError(
        f"the stored values of Flow run {flow_id!r} are on a damaged page of the file{cause}"
    )


class DamagedRuns:
    """The Flow runs of one store whose Attribute values a read found on a damaged page.

    Shared by every transaction of the store, on any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, str] = {}

    def note(self, flow_id: str, error: BaseException) -> None:
        """Keep ``flow_id`` as damaged, with SQLite's words for it."""
        with self._lock:
            self._runs.setdefault(flow_id, str(error))

    def check(self, flow_id: str) -> None:
        """Raise ``StoredValueError`` naming ``flow_id`` when its values are on a damaged page."""
        if not self._runs:  # the common case, without the lock
            return
        with self._lock:
            found = self._runs.get(flow_id)
        if found is not None:
            raise damaged_page_error(flow_id, sqlite3.DatabaseError(found))
