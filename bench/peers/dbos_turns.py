"""The turn workload on DBOS: one workflow per turn, a step per model call and per tool call.

DBOS supports an SQLite system database (``system_database_url="sqlite:///..."``),
so it runs on a file like the other systems. DBOS opens that file in SQLite's
default rollback-journal mode; ``use_wal_full`` makes every SQLAlchemy
connection of this process switch it to WAL with ``synchronous=FULL``, the same
settings as the other systems. A turn calls the ``turn`` workflow in this
process, as a DBOS application does: ``model`` (a step) asks for the tool,
``lookup_order`` (a step) runs it, ``model`` answers.

The conversation's durable record is DBOS's: each turn's workflow, with ID
``<session>:<turn>``, returns (and DBOS stores) the turn's messages. This module
also keeps the session's messages in memory, so the model step sees the history
without rereading every earlier workflow's result; an application would rebuild
that list after a crash from the results of the session's turn workflows (the
benchmark never crashes, so it does not). DBOS stores a step's output, not its
input, so the history the model step receives is not written again each turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy
import workload
from dbos import DBOS, DBOSConfig, SetWorkflowID

_history: dict[str, list[dict[str, Any]]] = {}


def use_wal_full() -> None:
    """Open every SQLAlchemy connection of this process in WAL mode with ``synchronous=FULL``."""

    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", pragmas)


@DBOS.step()
def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: a tool call after the user's message, an answer after its result."""
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": workload.answer(last["content"])}
    call = {
        "id": f"call_{len(messages)}",
        "name": "lookup_order",
        "arguments": json.dumps({"order_id": workload.ORDER_ID}),
    }
    return {"role": "assistant", "tool_calls": [call]}


@DBOS.step()
def lookup_order(order_id: str) -> str:
    """The read tool."""
    return workload.order_status(order_id)


@DBOS.workflow()
def turn(session_id: str, text: str) -> list[dict[str, Any]]:
    """One turn: the model, each tool call it asks for, the model again, until it answers."""
    history = _history.setdefault(session_id, [])
    new: list[dict[str, Any]] = [{"role": "user", "content": text}]
    while True:
        reply = model(history + new)
        new.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            output = lookup_order(**json.loads(call["arguments"]))
            new.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    history.extend(new)
    return new


class DbosTurns:
    """DBOS launched on an SQLite system database, running the workload's turns."""

    def __init__(self, path: Path) -> None:
        use_wal_full()
        config: DBOSConfig = {
            "name": "dex-agents-bench",
            "system_database_url": f"sqlite:///{path}",
            "log_level": "WARNING",
        }
        DBOS(config=config)
        DBOS.launch()

    def turn(self, session_id: str, number: int) -> str:
        """Run turn ``number`` of session ``session_id`` and return the model's answer."""
        with SetWorkflowID(f"{session_id}:{number}"):
            messages = turn(session_id, workload.user_message(number))
        return str(messages[-1]["content"])

    def close(self) -> None:
        """Shut DBOS down; the file stays."""
        DBOS.destroy()
