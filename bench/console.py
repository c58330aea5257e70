"""The session console under load: page loads with 10 and 1,000 sessions, event delivery to 50 streams.

It fills two SQLite files with demo sessions (``populate``), then runs
``dex-agents serve`` on each in a process of its own, as a person would, and
this process is the browsers: ``httpx`` clients that load the pages the console
serves and hold its Server-Sent Event streams open. Delivery is measured from
the moment the engine stored an event (the ``created_at`` of its row, which
this process reads from the file afterwards) until a stream client here has
read its frame. Both processes run on this machine, so they share its clock.

    uv run --frozen python bench/console.py [--sessions N] [--small N] [--streams N]
        [--loads N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from dex_agents.adapters.local.codec import decode_resume_token
from dex_agents.cli.database import demo_flow
from dex_agents.composition.session_client import AgentSessionClient
from dex_agents.console.page_files import STATIC_DIR
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_store import StoreTransaction

ROOT = Path(__file__).resolve().parents[1]
CONTROL_HEADERS = {"X-Dex-Agents-Console": "1"}
STATIC = (
    *(f"/static/{path.name}" for path in sorted(STATIC_DIR.glob("*.js"))),
    "/static/console.css",
)
"""What a page load fetches besides the page: the style sheet and every JavaScript module."""
APPROVAL_EVERY = 10
"""Every tenth session waits for a refund's approval; the others are idle after one turn."""
TURN_SESSION = "s-0001"
_TICKS = os.sysconf("SC_CLK_TCK")


def session_id(number: int) -> str:
    """The ID of session ``number`` of a populated file."""
    return f"s-{number:04d}"


async def populate(path: Path, sessions: int) -> float:
    """``sessions`` demo sessions in ``path``, each after its first turn; return the seconds."""
    flow = demo_flow()
    started = time.perf_counter()
    async with LocalRuntime(path, [flow], workers=1, create=True) as runtime:
        client = runtime.sessions(flow)
        # Twenty at a time: the one worker has work queued, and no start waits long.
        limit = asyncio.Semaphore(20)

        async def one(number: int) -> None:
            async with limit:
                sid = session_id(number)
                if number % APPROVAL_EVERY == 0:
                    message = f"refund order {number} $5"
                else:
                    message = f"where is order {number}"
                await client.start_session(sid, message)
                await client.wait_for_user(sid)

        await asyncio.gather(*(one(number) for number in range(sessions)))
    return time.perf_counter() - started


def free_port() -> int:
    """A loopback port that no one listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def start_serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    """``dex-agents serve --db DB --port PORT`` as a child process (it takes no input)."""
    return subprocess.Popen(
        [sys.executable, "-m", "dex_agents.cli", "serve", "--db", str(db), "--port", str(port)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


@contextlib.asynccontextmanager
async def serving(db: Path) -> AsyncIterator[tuple[str, int]]:
    """``dex-agents serve --db DB`` on a free port until the block ends: ``(url, pid)``."""
    port = free_port()
    process = start_serve(db, port)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as client:
            for _ in range(600):
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/api/sessions")).status_code == 200:
                        break
                if process.poll() is not None:
                    raise SystemExit(f"dex-agents serve exited with {process.returncode}")
                await asyncio.sleep(0.05)
        yield url, process.pid
    finally:
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(process.wait, 15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def median_ms(seconds: Sequence[float]) -> float:
    """The median of ``seconds``, in milliseconds."""
    return statistics.median(seconds) * 1000


def percentile_ms(seconds: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``seconds`` (nearest rank), in milliseconds."""
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


@dataclass
class Load:
    """The timings of one kind of page load, one entry per repetition."""

    page: list[float] = field(default_factory=list)
    api: list[float] = field(default_factory=list)
    api_bytes: int = 0

    @property
    def whole(self) -> list[float]:
        """Page plus its API call, repetition by repetition."""
        return [page + api for page, api in zip(self.page, self.api, strict=True)]


async def timed_get(client: httpx.AsyncClient, path: str) -> tuple[float, bytes]:
    """GET ``path`` and read the whole body; fail on an error status."""
    started = time.perf_counter()
    response = await client.get(path)
    response.raise_for_status()
    return time.perf_counter() - started, response.content


async def touch(db: Path) -> None:
    """Commit one row to a table of the benchmark's own in ``db``: the file changed, no session did.

    The console looks at the file again only after it changed (any commit), and
    then rebuilds the inbox rows of the sessions that changed: none here.
    """
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection, connection:
        connection.execute("CREATE TABLE IF NOT EXISTS bench_touch (at REAL)")
        connection.execute("INSERT INTO bench_touch VALUES (?)", (time.time(),))


class TurnTaker:
    """One idle session's turn before each load, sent from this process as another client's
    would be, and waited for: the console rebuilds that session's inbox row."""

    def __init__(self, clients: Mapping[str, AgentSessionClient], sessions: Mapping[str, int]):
        self._clients = clients
        self._sessions = sessions  # sessions in each file
        self._turns = 0

    async def __call__(self, name: str) -> None:
        self._turns += 1
        # Numbers that are no multiple of APPROVAL_EVERY: those sessions are idle.
        number = 1 + self._turns % (self._sessions[name] - 1)
        if number % APPROVAL_EVERY == 0:
            number += 1
        client = self._clients[name]
        await client.send_user_message(session_id(number), f"where is order {number}")
        await client.wait_for_user(session_id(number))


async def page_loads(
    urls: Mapping[str, str],
    page: str,
    api: str,
    repetitions: int,
    before: Callable[[str], Awaitable[None]] | None = None,
) -> dict[str, Load]:
    """Load ``page`` with its script and style, then ``api``, from each server in turn.

    ``repetitions`` timed rounds after 2 untimed ones; in each round every
    server in ``urls`` serves one load, so a change in the machine's load falls
    on them alike. ``before(name)`` runs, untimed, before each load.
    """
    loads = {name: Load() for name in urls}
    async with contextlib.AsyncExitStack() as stack:
        # One connection per server, kept alive, as a browser tab reuses one.
        clients = {
            name: await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            for name, url in urls.items()
        }
        for repetition in range(repetitions + 2):
            for name, client in clients.items():
                if before is not None:
                    await before(name)
                page_seconds = 0.0
                for path in (page, *STATIC):
                    seconds, _ = await timed_get(client, path)
                    page_seconds += seconds
                api_seconds, body = await timed_get(client, api)
                if repetition >= 2:
                    loads[name].page.append(page_seconds)
                    loads[name].api.append(api_seconds)
                    loads[name].api_bytes = len(body)
    return loads


class StreamReader:
    """One open event stream, like one browser tab: the frames it read and when."""

    def __init__(self, client: httpx.AsyncClient, session: str) -> None:
        self.session = session
        self.received: list[tuple[str, str, float]] = []  # (event type, resume token, time)
        self.completed = 0
        self._client = client
        self._changed = asyncio.Event()
        self.opened = asyncio.Event()

    async def run(self) -> None:
        """Open the stream from the snapshot's token, as the page does, and read it until cancelled."""
        body = (await self._client.get(f"/api/sessions/{self.session}/snapshot")).json()
        path = f"/api/sessions/{self.session}/events"
        params = {"resume_token": body["resume_token"]}
        async with self._client.stream("GET", path, params=params) as response:
            response.raise_for_status()
            self.opened.set()
            token = ""
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    token = line[3:].strip()
                elif line.startswith("data:"):
                    now = time.time()
                    event_type = json.loads(line[5:])["type"]
                    self.received.append((event_type, token, now))
                    if event_type == "turn_completed":
                        self.completed += 1
                        self._changed.set()

    async def wait_completed(self, count: int) -> None:
        """Wait until ``count`` turns completed on this stream."""
        while self.completed < count:
            self._changed.clear()
            await self._changed.wait()


@dataclass
class Delivery:
    """Event delivery to open streams over some turns."""

    streams: int
    latencies: list[float]
    last_tab: list[float]
    """Per event, the latency to the last stream of its session to read it."""
    turns: int
    server_cpu_seconds: float
    events: int


async def event_times(db: Path, readers: Sequence[StreamReader]) -> dict[int, float]:
    """When the engine stored each event the readers read (its row's ``created_at``)."""
    ids = {
        decode_resume_token(reader.session, token)
        for reader in readers
        for _, token, _ in reader.received
    }
    flow = demo_flow()
    async with LocalRuntime(db, [flow], workers=0, create=False) as runtime:

        def created(tx: StoreTransaction) -> dict[int, float]:
            rows = {event_id: tx.get_event(event_id) for event_id in ids}
            return {i: row.created_at.timestamp() for i, row in rows.items() if row is not None}

        times: dict[int, float] = await runtime.flow_client.engine.read(created)
        return times


async def deliveries(db: Path, url: str, pid: int, sessions: Sequence[str], turns: int) -> Delivery:
    """Streams open on ``sessions`` (repeats allowed); ``turns`` turns in ``TURN_SESSION``."""
    limits = httpx.Limits(max_connections=len(sessions) + 10)
    async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as client:
        readers = [StreamReader(client, session) for session in sessions]
        tasks = [asyncio.create_task(reader.run()) for reader in readers]
        try:
            await asyncio.wait_for(asyncio.gather(*(r.opened.wait() for r in readers)), 60)
            watching = [reader for reader in readers if reader.session == TURN_SESSION]
            cpu_before = 0.0
            for turn in range(turns + 1):
                if turn == 1:  # the first turn warms up: it is not counted
                    for reader in readers:
                        reader.received.clear()
                    cpu_before = process_cpu_seconds(pid)
                sent = await client.post(
                    f"/api/sessions/{TURN_SESSION}/controls/send_user_message",
                    json={"text": "where is order 1"},
                    headers=CONTROL_HEADERS,
                )
                if sent.json() != {"ok": True, "reason": None}:
                    raise SystemExit(f"the console refused a message: {sent.text}")
                await asyncio.wait_for(
                    asyncio.gather(*(r.wait_completed(turn + 1) for r in watching)), 60
                )
            cpu = process_cpu_seconds(pid) - cpu_before
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    times = await event_times(db, watching)
    latencies: list[float] = []
    slowest: dict[int, float] = {}
    for reader in watching:
        for _, token, received in reader.received:
            event_id = decode_resume_token(reader.session, token)
            if event_id in times:
                latency = received - times[event_id]
                latencies.append(latency)
                slowest[event_id] = max(slowest.get(event_id, 0.0), latency)
    return Delivery(
        streams=len(sessions),
        latencies=latencies,
        last_tab=list(slowest.values()),
        turns=turns,
        server_cpu_seconds=cpu,
        events=len(slowest),
    )


def row(cells: Sequence[object]) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def ratio(a: float, b: float) -> str:
    """``a / b`` as ``1.23x``."""
    return f"{a / b:.2f}x" if b else "-"


def print_loads(small: int, large: int, loads: dict[str, Load]) -> None:
    """The page-load table: each load with the small file, the large one, and their ratio."""
    print(row(["page load (median ms)", f"{small} sessions", f"{large:,} sessions", "ratio"]))
    print(row(["---", "---:", "---:", "---:"]))
    measures: list[tuple[str, Callable[[Load], float]]] = [
        ("page, script, style", lambda load: median_ms(load.page)),
        ("JSON", lambda load: median_ms(load.api)),
        ("all four", lambda load: median_ms(load.whole)),
        ("all four, p95", lambda load: percentile_ms(load.whole, 0.95)),
    ]
    kinds = {
        "inbox": "inbox, file unchanged",
        "rebuilt": "inbox, after another program's commit",
        "moved": "inbox, after one session's turn",
        "session": "session page + snapshot",
    }
    for kind, title in kinds.items():
        for label, measure in measures:
            if kind in ("rebuilt", "moved") and label.startswith("page"):
                continue  # the same files as the row above
            a, b = measure(loads[f"{kind} small"]), measure(loads[f"{kind} large"])
            print(row([f"{title}: {label}", f"{a:.2f}", f"{b:.2f}", ratio(b, a)]))
        a_kb = loads[f"{kind} small"].api_bytes / 1024
        b_kb = loads[f"{kind} large"].api_bytes / 1024
        if kind not in ("rebuilt", "moved"):
            print(row([f"{title}: JSON KiB", f"{a_kb:.1f}", f"{b_kb:.1f}", ratio(b_kb, a_kb)]))


def print_deliveries(base: Delivery, others: Sequence[tuple[str, Delivery]]) -> None:
    """The delivery table: each setting's latencies, and its median over the one stream's."""
    print(
        row(
            [
                "streams open",
                "events",
                "median ms",
                "p95 ms",
                "max ms",
                "last tab median ms",
                "server CPU ms/turn",
                "median / 1 stream",
            ]
        )
    )
    print(row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]))
    for label, delivery in [("1", base), *others]:
        print(
            row(
                [
                    label,
                    len(delivery.latencies),
                    f"{median_ms(delivery.latencies):.2f}",
                    f"{percentile_ms(delivery.latencies, 0.95):.2f}",
                    f"{max(delivery.latencies) * 1000:.2f}",
                    f"{median_ms(delivery.last_tab):.2f}",
                    f"{delivery.server_cpu_seconds / delivery.turns * 1000:.1f}",
                    ratio(median_ms(delivery.latencies), median_ms(base.latencies)),
                ]
            )
        )


async def main() -> None:
    """Fill the files, serve each, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000, help="sessions in the large file")
    parser.add_argument("--small", type=int, default=10, help="sessions in the small file")
    parser.add_argument("--streams", type=int, default=50, help="event streams held open")
    parser.add_argument("--loads", type=int, default=20, help="timed repetitions of a page load")
    parser.add_argument("--turns", type=int, default=20, help="timed turns per delivery setting")
    arguments = parser.parse_args()
    if arguments.streams > arguments.sessions:
        parser.error("--streams must be at most --sessions")
    count = arguments.loads
    with tempfile.TemporaryDirectory(prefix="dex-agents-console-bench-") as tmp:
        files = {"small": Path(tmp) / "small.sqlite3", "large": Path(tmp) / "large.sqlite3"}
        for name, sessions in (("small", arguments.small), ("large", arguments.sessions)):
            seconds = await populate(files[name], sessions)
            print(f"filled {files[name].name}: {sessions} sessions in {seconds:.1f} s", flush=True)
        loads: dict[str, Load] = {}
        async with serving(files["small"]) as (small, _), serving(files["large"]) as (large, _):
            urls = {"small": small, "large": large}
            for name, load in (await page_loads(urls, "/", "/api/sessions", count)).items():
                loads[f"inbox {name}"] = load
            rebuilt = await page_loads(
                urls, "/", "/api/sessions", count, lambda name: touch(files[name])
            )
            for name, load in rebuilt.items():
                loads[f"rebuilt {name}"] = load
            session = f"/sessions/{TURN_SESSION}"
            snapshot = f"/api/sessions/{TURN_SESSION}/snapshot"
            for name, load in (await page_loads(urls, session, snapshot, count)).items():
                loads[f"session {name}"] = load
            flow = demo_flow()
            async with contextlib.AsyncExitStack() as clients:
                runtimes = {
                    name: await clients.enter_async_context(
                        LocalRuntime(path, [flow], workers=0, create=False)
                    )
                    for name, path in files.items()
                }
                taker = TurnTaker(
                    {name: runtime.sessions(flow) for name, runtime in runtimes.items()},
                    {"small": arguments.small, "large": arguments.sessions},
                )
                for name, load in (
                    await page_loads(urls, "/", "/api/sessions", count, taker)
                ).items():
                    loads[f"moved {name}"] = load
        db = files["large"]
        spread = [session_id(number) for number in range(1, arguments.streams + 1)]
        async with serving(db) as (url, pid):
            one = await deliveries(db, url, pid, [TURN_SESSION], arguments.turns)
            many = await deliveries(db, url, pid, spread, arguments.turns)
            same = await deliveries(
                db, url, pid, [TURN_SESSION] * arguments.streams, arguments.turns
            )
            # The inbox again, with the streams open all the while (none of them moves).
            limits = httpx.Limits(max_connections=arguments.streams + 10)
            async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as client:
                readers = [StreamReader(client, session) for session in spread]
                tasks = [asyncio.create_task(reader.run()) for reader in readers]
                try:
                    await asyncio.gather(*(reader.opened.wait() for reader in readers))
                    busy = (await page_loads({"large": url}, "/", "/api/sessions", count))["large"]
                    busy_rebuilt = (
                        await page_loads(
                            {"large": url}, "/", "/api/sessions", count, lambda _: touch(db)
                        )
                    )["large"]
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
    print()
    print_loads(arguments.small, arguments.sessions, loads)
    for label, load, alone in (
        ("file unchanged", busy, loads["inbox large"]),
        ("after another program's commit", busy_rebuilt, loads["rebuilt large"]),
    ):
        print(
            row(
                [
                    f"inbox {label}, {arguments.streams} streams open: all four",
                    "",
                    f"{median_ms(load.whole):.2f}",
                    f"{ratio(median_ms(load.whole), median_ms(alone.whole))} of none open",
                ]
            )
        )
    print()
    print(
        f"Event delivery, {arguments.sessions:,} sessions in the file, {arguments.turns} turns "
        f"of `where is order 1` in {TURN_SESSION} per row:"
    )
    print()
    print_deliveries(
        one,
        [
            (f"{arguments.streams}, one per session", many),
            (f"{arguments.streams}, all on the turn's session", same),
        ],
    )


if __name__ == "__main__":
    asyncio.run(main())
