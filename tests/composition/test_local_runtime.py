"""``dex_agents.local.LocalRuntime`` with ``open_session`` and ``wait_for_user``, on both stores."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow, ToolEffect
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.adapters.local.stream_pages import LocalStreamPageReader
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.messages import MessageRole
from dex_agents.local import DatabaseFileError, LocalRuntime, run_workers, serve_workers
from dex_agents.ports.errors import (
    FlowAlreadyStartedError,
    FlowNotFoundError,
    SessionWaitTimeoutError,
    StreamReadTimeoutError,
)
from dex_agents.testing import wait_until
from dex_agents.ui_stream import stream_agent_event_frames

REPOSITORY = Path(__file__).resolve().parents[2]


@function_tool(effect=ToolEffect.READ)
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id} shipped"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@function_tool(effect=ToolEffect.READ)
def stuck(marker: str) -> str:
    """Mark that it runs, then never return, as a hung synchronous call."""
    Path(marker).touch()
    threading.Event().wait()
    return "never"


def reply(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    last = ScriptedModelClient.user_texts(request)[-1]
    if results:
        return ScriptedModelReply(text=f"done: {results[-1].output}")
    if last.startswith("refund"):
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("refund", {"order_id": "7"}),))
    if last.startswith("stuck "):
        marker = last.removeprefix("stuck ")
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("stuck", {"marker": marker}),))
    if last.startswith("look"):
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("lookup", {"order_id": "7"}),))
    return ScriptedModelReply(text=f"echo: {last}")


def make_flow(flow_type: str = "RuntimeTestAgent") -> AgentSessionFlow:
    agent = AgentDefinition(
        name="runtime-test",
        instructions="Answer.",
        model=ScriptedModelClient(reply),
        tools=[lookup, refund, stuck],
    )
    return builtin_agent_session_flow(agent, flow_type=flow_type)


@pytest.fixture(params=["memory", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return None if request.param == "memory" else tmp_path / "sessions.sqlite3"


FAST = timedelta(milliseconds=20)


async def test_a_turn_with_an_approval_end_to_end(database: Path | None) -> None:
    flow = make_flow()
    async with LocalRuntime(database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        assert await sessions.open_session("s-1") is True
        assert await sessions.open_session("s-1") is False
        with pytest.raises(FlowAlreadyStartedError):
            await sessions.start_session("s-1")
        assert await sessions.send_user_message("s-1", "refund order 7")
        waiting = await sessions.wait_for_user("s-1", timeout=timedelta(seconds=20))
        assert session_attention(waiting) is SessionAttention.APPROVAL
        approval = waiting.pending_interrupts[0]
        assert approval.tool_name == "refund"
        assert await sessions.resolve_interrupt("s-1", approval.interrupt_id, approved=True)
        done = await sessions.wait_for_user("s-1", timeout=timedelta(seconds=20))
        assert session_attention(done) is SessionAttention.IDLE
        assert done.messages[-1].text == "done: refunded 7"


async def test_wait_for_user_times_out_while_a_turn_waits_for_nobody(tmp_path: Path) -> None:
    flow = make_flow()
    # No worker: the accepted message is queued and no turn can end.
    async with LocalRuntime(tmp_path / "db.sqlite3", [flow], workers=0) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        with pytest.raises(SessionWaitTimeoutError, match="did not need a person"):
            # Without a worker even StartAgentSession never commits.
            await sessions.wait_for_user("s-1", timeout=timedelta(milliseconds=300))


async def test_an_accepted_message_is_never_invisible(database: Path | None) -> None:
    """Polls tightly across every handover: right after ``send_user_message`` returned ``True``
    no snapshot may look idle until the message is stored and its turn ended."""
    flow = make_flow()
    async with LocalRuntime(database, [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        await sessions.wait_for_user("s-1", timeout=timedelta(seconds=10))
        for turn in range(1, 16):
            text = f"message {turn}"
            assert await sessions.send_user_message("s-1", text)
            polls = 0
            while True:
                snapshot = await sessions.get_agent_snapshot("s-1")
                polls += 1
                if session_attention(snapshot) is not None:
                    break
            stored = [m.text for m in snapshot.messages if m.role is MessageRole.USER]
            assert stored[-1] == text, f"idle after {polls} polls without {text!r} stored"
            assert snapshot.messages[-1].text == f"echo: {text}"


async def test_sessions_refuses_a_flow_the_runtime_does_not_serve() -> None:
    served = make_flow()
    async with LocalRuntime(None, [served], workers=0) as runtime:
        with pytest.raises(ValueError, match=r"OtherAgent.* not one of this runtime's Flows"):
            runtime.sessions(make_flow("OtherAgent"))
        # The same type built twice: the message must not read as a wrong type name.
        with pytest.raises(
            ValueError,
            match=r"^this Flow of type 'RuntimeTestAgent' is another object than the one this "
            r"runtime serves: pass the Flow given to LocalRuntime$",
        ):
            runtime.sessions(make_flow())


@pytest.mark.parametrize(
    ("flow", "shown"),
    [("RuntimeTestAgent", "str ('RuntimeTestAgent')"), (None, "NoneType (None)")],
    ids=["its type name", "None"],
)
async def test_sessions_refuses_what_is_no_flow_by_name(flow: object, shown: str) -> None:
    # Both failed with "'str' object has no attribute 'flow_type'".
    async with LocalRuntime(None, [make_flow()], workers=0) as runtime:
        with pytest.raises(
            TypeError,
            match=r"^sessions: flow must be one of the Flows given to LocalRuntime \(an "
            rf"AgentSessionFlow\), not {re.escape(shown)}$",
        ):
            runtime.sessions(flow)  # type: ignore[arg-type]


async def test_an_agent_session_client_refuses_what_is_no_flow_or_no_client() -> None:
    # Each was kept, and the first call failed with an AttributeError naming neither.
    flow = make_flow()
    async with LocalRuntime(None, [flow], workers=0) as runtime:
        with pytest.raises(
            TypeError,
            match=r"^AgentSessionClient: flow must be a session Flow \(an AgentSessionFlow\), "
            r"not str$",
        ):
            AgentSessionClient(runtime.flow_client, "RuntimeTestAgent")  # type: ignore[arg-type]
        for client in (None, runtime):
            with pytest.raises(
                TypeError,
                match=r"^AgentSessionClient: client must be a Dex AsyncClient or a FlowClient "
                rf"\(such as runtime.flow_client\), not {type(client).__name__}$",
            ):
                AgentSessionClient(client, flow)  # type: ignore[arg-type]
        assert AgentSessionClient(runtime.flow_client, flow).flow is flow


async def test_serve_and_run_workers_refuse_no_path() -> None:
    # serve_workers(None, ...) served an empty store in memory until it was cancelled.
    refused = (
        r": path must be the session database's path, not None: workers on a store in "
        r"memory serve no other process; use LocalRuntime\(None, flows\) for that$"
    )
    with pytest.raises(TypeError, match=rf"^serve_workers{refused}"):
        await serve_workers(None, [make_flow()])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"^run_workers{refused}"):
        run_workers(None, [make_flow()])  # type: ignore[arg-type]


async def test_create_false_never_creates_a_database(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite3"
    with pytest.raises(DatabaseFileError, match="no session database at"):
        async with LocalRuntime(path, [make_flow()], create=False):
            pass
    assert not path.exists()


async def test_a_directory_is_refused_when_the_runtime_opens(tmp_path: Path) -> None:
    with pytest.raises(DatabaseFileError, match="is a directory, not a session database"):
        async with LocalRuntime(tmp_path, [make_flow()]):
            pass


async def test_a_runtime_opened_twice_at_once_opens_once(tmp_path: Path) -> None:
    runtime = LocalRuntime(tmp_path / "db.sqlite3", [make_flow()])
    # Both passed the check while the file opened in a thread: two engines, two workers.
    opened = await asyncio.gather(runtime.open(), runtime.open(), return_exceptions=True)
    try:
        assert opened[0] is None
        assert isinstance(opened[1], RuntimeError)
        assert str(opened[1]) == "this runtime is open already"
    finally:
        await runtime.close()
    async with runtime:  # closed, it opens again
        await runtime.flow_client.list_flows()


async def test_two_closes_at_once_stop_the_workers_before_the_store_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flow = make_flow()
    runtime = LocalRuntime(tmp_path / "db.sqlite3", [flow], poll_interval=FAST)
    await runtime.open()
    sessions = runtime.sessions(flow)
    for number in range(10):
        await sessions.open_session(f"s-{number}")
        await sessions.send_user_message(f"s-{number}", "look up order 7")
    # The second close found no workers left to stop and closed the store under the
    # first one's: "a worker stopped: the flow store ... is closed".
    with caplog.at_level(logging.WARNING, logger="dex_agents.engine"):
        await asyncio.gather(runtime.close(), runtime.close())
    assert [record.getMessage() for record in caplog.records] == []


@pytest.mark.parametrize("workers", [-1, True, 1.5])
def test_workers_must_be_a_whole_number(workers: object) -> None:
    with pytest.raises(ValueError, match="workers must be a whole number"):
        LocalRuntime(None, [make_flow()], workers=workers)  # type: ignore[arg-type]


def test_flows_must_be_a_list_of_flows() -> None:
    flow = make_flow()
    # One Flow for the list failed with "'AgentSessionFlow' object is not iterable", and a
    # list of something else with "'str' object has no attribute 'flow_type'".
    with pytest.raises(
        TypeError, match=r"^flows must be a list of Flows, such as \[flow\]; got AgentSessionFlow$"
    ):
        LocalRuntime(None, flow)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"^flows must hold Flows \(an AgentSessionFlow per agent\); got str$"
    ):
        LocalRuntime(None, [flow, "OtherAgent"])  # type: ignore[list-item]
    assert LocalRuntime(None, (flow,)).flows == (flow,)


class _BytesPath:
    """A path-like whose path is bytes."""

    def __fspath__(self) -> bytes:
        return b"db.sqlite3"


@pytest.mark.parametrize("path", [b"db.sqlite3", 5, _BytesPath()])
def test_path_must_be_a_str_or_path_like_of_str(tmp_path: Path, path: object) -> None:
    with pytest.raises(
        TypeError,
        match=r"^path must be the session database's path as a str or os\.PathLike of str, or "
        rf"None for a store in memory, not {type(path).__name__}$",
    ):
        LocalRuntime(path, [make_flow()])  # type: ignore[arg-type]


@pytest.mark.parametrize("create", ["no", 0, None])
def test_create_must_be_a_bool(tmp_path: Path, create: object) -> None:
    with pytest.raises(TypeError, match=rf"^create must be True or False, not {create!r}$"):
        LocalRuntime(tmp_path / "db.sqlite3", [make_flow()], create=create)  # type: ignore[arg-type]
    assert not (tmp_path / "db.sqlite3").exists()


@pytest.mark.parametrize("prefix", ["", 5])
def test_worker_id_prefix_must_be_a_non_empty_string(tmp_path: Path, prefix: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^worker_id_prefix must be None or a non-empty string, not {prefix!r}$"
    ):
        LocalRuntime(tmp_path / "db.sqlite3", [make_flow()], worker_id_prefix=prefix)  # type: ignore[arg-type]


@pytest.mark.parametrize("slots", [0, True, 1.5, float("nan"), "4"])
def test_max_concurrent_tasks_must_be_a_whole_number(tmp_path: Path, slots: object) -> None:
    # Refused before the file is opened: 0 once created the file and left it open, and
    # 1.5 or NaN opened a runtime whose worker died at its first claim round.
    with pytest.raises(
        ValueError,
        match=rf"^max_concurrent_tasks must be a whole number, 1 or more, not {slots!r}$",
    ):
        LocalRuntime(tmp_path / "db.sqlite3", [make_flow()], max_concurrent_tasks=slots)  # type: ignore[arg-type]
    assert not (tmp_path / "db.sqlite3").exists()


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("poll_interval", timedelta(0), "poll_interval must be positive, not 0:00:00"),
        ("lease_duration", -FAST, "lease_duration must be positive, not -1 day, 23:59:59.980000"),
        ("lease_duration", 10, "lease_duration must be a positive timedelta, not 10"),
        ("poll_interval", None, "poll_interval must be a positive timedelta, not None"),
        # Past year 9999 its worker died at once with "date value out of range".
        (
            "lease_duration",
            timedelta.max,
            "lease_duration must be at most 100 years, not 999999999 days, 23:59:59.999999",
        ),
    ],
)
def test_intervals_must_be_positive_timedeltas(
    tmp_path: Path, argument: str, value: object, message: str
) -> None:
    # The message names the argument and the value; a number failed with "'<=' not supported".
    with pytest.raises(ValueError, match=f"^{message}$"):
        LocalRuntime(tmp_path / "db.sqlite3", [make_flow()], **{argument: value})  # type: ignore[arg-type]
    assert not (tmp_path / "db.sqlite3").exists()


async def test_serve_workers_refuses_to_serve_with_no_worker(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    async with LocalRuntime(database, [make_flow()], workers=0):
        pass
    # It returned at once, as if it had served and been stopped.
    with pytest.raises(ValueError, match=r"^serve_workers needs at least 1 worker"):
        await serve_workers(database, [make_flow()], workers=0)


CANCELLED_OPEN_PROGRAM = textwrap.dedent(
    """
    import asyncio, os, sys
    from tests.composition.test_local_runtime import make_flow
    from dex_agents.local import LocalRuntime

    def open_files():
        links = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                links.append(os.readlink(f"/proc/self/fd/{fd}"))
            except FileNotFoundError:  # the listing's own descriptor, closed since
                pass
        return sorted(link for link in links if link.startswith(sys.argv[1]))

    async def main():
        opening = asyncio.create_task(LocalRuntime(sys.argv[1], [make_flow()]).open())
        await asyncio.sleep(0)  # into the thread that opens the file
        opening.cancel()
        await asyncio.gather(opening, return_exceptions=True)
        # Waits for that thread; what its end schedules runs within a few loop rounds.
        await asyncio.get_running_loop().shutdown_default_executor()
        for _ in range(100):
            if not open_files():
                break
            await asyncio.sleep(0)
        print(open_files())

    asyncio.run(main())
    """
)


async def start_program(
    program: str, database: Path, stdout: int | None = None
) -> asyncio.subprocess.Process:
    """``program`` run by this interpreter with ``database`` as its argument, in the repository."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        str(database),
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files in /proc")
async def test_a_cancelled_open_closes_the_store_it_opened(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    child = await start_program(CANCELLED_OPEN_PROGRAM, database, stdout=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=30)
    assert child.returncode == 0, stderr.decode()
    # The thread opened the file anyway, and its lock files stayed open until the process ended.
    assert database.exists()
    assert stdout.decode().strip() == "[]"


WORKER_PROGRAM = textwrap.dedent(
    """
    import sys
    from tests.composition.test_local_runtime import make_flow
    from dex_agents.local import run_workers

    run_workers(sys.argv[1], [make_flow()])
    """
)


async def test_run_workers_serves_the_file_from_another_process(tmp_path: Path) -> None:
    database = tmp_path / "shared.sqlite3"
    flow = make_flow()
    async with LocalRuntime(database, [flow], workers=0, poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        worker = await start_program(WORKER_PROGRAM, database)
        try:
            assert await sessions.send_user_message("s-1", "look up order 7")
            done = await sessions.wait_for_user("s-1", timeout=timedelta(seconds=30))
            assert done.messages[-1].text == "done: order 7 shipped"
        finally:
            worker.terminate()  # SIGTERM: run_workers stops claiming and exits cleanly
            _, stderr = await asyncio.wait_for(worker.communicate(), timeout=30)
        assert worker.returncode == 0, stderr.decode()


async def test_a_second_signal_ends_run_workers_while_a_sync_tool_hangs(tmp_path: Path) -> None:
    database, marker = tmp_path / "shared.sqlite3", tmp_path / "stuck-tool-runs"
    flow = make_flow()
    async with LocalRuntime(database, [flow], workers=0, poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        worker = await start_program(WORKER_PROGRAM, database)
        try:
            assert await sessions.send_user_message("s-1", f"stuck {marker}")
            await wait_until("the stuck tool to run", marker.exists, 30)
            # Ctrl-C stops claiming, and the process waits for the tool's thread; the
            # next signal (another kind, so the kernel cannot merge the two) ends it.
            worker.send_signal(signal.SIGINT)
            worker.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(worker.communicate(), timeout=30)
        finally:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
        # Ended by the default action of whichever signal its handler saw second.
        assert worker.returncode in (-signal.SIGINT, -signal.SIGTERM), stderr.decode()


async def test_the_stream_tail_token_skips_every_retained_event(tmp_path: Path) -> None:
    flow = make_flow()
    async with LocalRuntime(tmp_path / "db.sqlite3", [flow], poll_interval=FAST) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "look up order 7")
        await sessions.wait_for_user("s-1", timeout=timedelta(seconds=20))
        client = runtime.flow_client
        tail = await client.stream_tail_token(flow, "s-1")
        assert tail
        with pytest.raises(StreamReadTimeoutError):
            await client.read_stream(flow, "s-1", tail, poll_timeout=timedelta(milliseconds=50))
        assert await sessions.send_user_message("s-1", "hello")
        event = await client.read_stream(flow, "s-1", tail, poll_timeout=timedelta(seconds=10))
        assert event.value.type == "turn_started"


@pytest.mark.parametrize(("workers", "client"), [(0, True), (1, False)])
async def test_a_runtime_without_workers_writes_as_a_client(
    tmp_path: Path, workers: int, client: bool
) -> None:
    async with LocalRuntime(tmp_path / "db.sqlite3", [make_flow()], workers=workers) as runtime:
        store = runtime.flow_client._engine.store
        assert isinstance(store, SqliteFlowStore)
        assert store.client is client


async def test_a_session_of_another_flow_type_is_not_read_as_this_one(tmp_path: Path) -> None:
    support, sales = make_flow("SupportAgent"), make_flow("SalesAgent")
    async with LocalRuntime(tmp_path / "db.sqlite3", [support, sales]) as runtime:
        sessions = runtime.sessions(support)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "hello")
        await sessions.wait_for_user("s-1", timeout=timedelta(seconds=20))
        client = runtime.flow_client
        # Read through the right Flow first: its events are then read ahead and kept.
        first = await client.read_stream(support, "s-1", poll_timeout=timedelta(seconds=10))
        assert first.value.type == "turn_started"
        pages = LocalStreamPageReader(client.engine)
        sync_client = runtime.sync_flow_client()
        wrong = "^no SalesAgent session with ID 's-1'$"
        with pytest.raises(FlowNotFoundError, match=wrong):
            await client.read_stream(sales, "s-1", poll_timeout=timedelta(seconds=10))
        with pytest.raises(FlowNotFoundError, match=wrong):
            await client.stream_tail_token(sales, "s-1")
        tail = await client.stream_tail_token(support, "s-1")
        with pytest.raises(FlowNotFoundError, match=wrong):  # at the tail: no event to read
            await client.read_stream(sales, "s-1", tail, poll_timeout=FAST)
        with pytest.raises(FlowNotFoundError, match=wrong):
            await pages.list_stream_messages(sales, "s-1", 10)
        with pytest.raises(FlowNotFoundError, match=wrong):
            await asyncio.to_thread(sync_client.read_stream, sales, "s-1", "", FAST)
        with pytest.raises(FlowNotFoundError, match=wrong):
            await asyncio.to_thread(sync_client.list_stream_messages, sales, "s-1", 10)
        with pytest.raises(FlowNotFoundError, match=wrong):
            await stream_agent_event_frames(client, sales, "s-1", resume_token="")
        again = await client.read_stream(support, "s-1", poll_timeout=timedelta(seconds=10))
        assert again.value == first.value
