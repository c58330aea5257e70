"""What decoding a long session's stored history costs: its message chunks, from JSON text.

    uv run --frozen python bench/history_decode.py [--turns N] [--rounds N]

A process decodes a session's older messages once and keeps them, but a session
back after many others ran (``session_working_set.py``'s first round), a worker
started again, or a reader opening the session decodes them again: every
``AgentMessageChunk`` of its history, through the wire converter
(``dex_agents.domain.wire.from_json``), the same path the store's reads take.

It runs ``--turns`` (200) turns of ``workload.flow`` in a temporary file, reads
the session's chunk texts back, and decodes them all ``--rounds`` (20) times;
it prints the fastest and the median round, per message and in all, with the
JSON parse alone (``json.loads``) beside it. Run it in two checkouts
(``PYTHONPATH``) to compare two commits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import workload

from dex_agents.adapters.local.stored_text import unpack
from dex_agents.domain.wire import from_json
from dex_agents.local import LocalRuntime
from dex_agents.ports.session_schema import AGENT_MESSAGE_CHUNKS

SESSION_ID = "history"


async def populate(path: Path, turns: int) -> None:
    """One session of ``workload.flow`` with ``turns`` turns in ``path``."""
    async with LocalRuntime(path, [workload.flow], workers=1) as runtime:
        client = runtime.sessions(workload.flow)
        await client.open_session(SESSION_ID)
        await client.wait_for_user(SESSION_ID)
        for turn in range(1, turns + 1):
            await client.send_user_message(SESSION_ID, workload.user_message(turn))
            await client.wait_for_user(SESSION_ID)


def chunk_texts(path: Path) -> list[str]:
    """The session's stored chunk texts, inflated, in key order."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT value FROM attribute_values WHERE flow_id = ? AND name = ? ORDER BY key",
            (SESSION_ID, AGENT_MESSAGE_CHUNKS.name),
        ).fetchall()
    connection.close()
    return [unpack(value) for (value,) in rows]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.sqlite3"
        asyncio.run(populate(path, args.turns))
        texts = chunk_texts(path)
    cls = AGENT_MESSAGE_CHUNKS.value_type
    messages = sum(len(from_json(text, cls).messages) for text in texts)
    decoded, parsed = [], []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for text in texts:
            from_json(text, cls)
        decoded.append(time.perf_counter() - started)
        started = time.perf_counter()
        for text in texts:
            json.loads(text)
        parsed.append(time.perf_counter() - started)
    chars = sum(map(len, texts))
    print(f"{args.turns} turns: {len(texts)} chunks, {messages} messages, {chars:,} characters")
    print(f"{'':28}  {'fastest ms':>10}  {'median ms':>9}  {'us/message':>10}")
    for label, times in (("decode (from_json)", decoded), ("JSON parse alone", parsed)):
        fastest, median = min(times), statistics.median(times)
        print(
            f"{label:28}  {fastest * 1e3:>10.2f}  {median * 1e3:>9.2f}  "
            f"{median / messages * 1e6:>10.2f}"
        )


if __name__ == "__main__":
    main()
