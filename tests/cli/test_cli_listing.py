"""``dex-agents sessions`` and ``show`` over a file that other programs wrote too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.adapters.local.stream_pages import LocalStreamPageReader
from dex_agents.app.session_waits import wait_for_person
from dex_agents.cli.database import demo_flow
from dex_agents.cli.listing import step_status, table_lines
from dex_agents.cli.main import main
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.state import AgentSessionStartInput
from dex_agents.local import LocalRuntime
from dex_agents.ports.flow_client import FlowInfo
from tests.adapters.engine_flows import EngineTestFlow
from tests.app.compaction_support import CompactingRunner
from tests.app.scripted_runner import ScriptedRunner
from tests.app.steering_support import SlowModelRunner
from tests.support.retry_intervals import retrying_runtime

WAIT = timedelta(seconds=30)
# Written by "another program": the session client refuses such an ID, the engine does not.
EVIL_ID = "evil\x1b[2J\u202eid"


async def _seed(db: Path) -> None:
    demo = demo_flow()
    other = AgentSessionFlow(ScriptedRunner(), flow_type="OtherAgent")
    engine_flow = EngineTestFlow()
    async with LocalRuntime(
        db, [demo, other, engine_flow], poll_interval=timedelta(milliseconds=20)
    ) as runtime:
        demo_sessions = runtime.sessions(demo)
        await demo_sessions.open_session("d1")
        assert await demo_sessions.send_user_message("d1", "refund order 7")
        await demo_sessions.wait_for_user("d1", timeout=WAIT)
        other_sessions = runtime.sessions(other)
        await other_sessions.open_session("o1")
        assert await other_sessions.send_user_message("o1", "hello")
        await other_sessions.wait_for_user("o1", timeout=WAIT)
        client = runtime.flow_client
        await client.start_flow(demo, EVIL_ID, AgentSessionStartInput())

        async def evil_snapshot() -> AgentSnapshot:
            snapshot: AgentSnapshot = await client.invoke_rpc(
                demo, EVIL_ID, "get_agent_snapshot", None
            )
            return snapshot

        await wait_for_person(client, demo, EVIL_ID, evil_snapshot, WAIT)
        await client.start_flow(engine_flow, "engine-1", "wait for messages")


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "db.sqlite3"
    asyncio.run(_seed(db))
    return db


def _run(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main(list(arguments))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sessions_lists_every_flow_type_in_aligned_columns_with_ids_escaped(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = datetime.now(UTC) - timedelta(minutes=5)
    code, out, err = _run(capsys, "sessions", "--db", str(seeded))
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    assert "\u202e" not in out
    header, *rows = out.splitlines()
    columns = [header.index(name) for name in ("FLOW TYPE", "STATUS", "LAST STEP (UTC)")]
    cells = []
    for row in rows:
        for column in columns:
            assert row[column - 2 : column] == "  ", (row, column)
            assert row[column] != " ", (row, column)
        starts = [0, *columns]
        ends = [*columns, None]
        cells.append([row[a:b].strip() for a, b in zip(starts, ends, strict=True)])
    assert [cell[:3] for cell in cells] == [
        ["d1", "DemoSupportAgent", "waiting for approval of refund_order"],
        ["o1", "OtherAgent", "waiting for a message"],
        ["evil\\x1b[2J\\u202eid", "DemoSupportAgent", "waiting for a message"],
        ["engine-1", "EngineTest", "working"],
    ]
    for cell in cells:
        last_step = datetime.strptime(cell[3], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        assert started <= last_step <= datetime.now(UTC)


def test_show_reads_a_session_of_a_flow_type_it_does_not_serve(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "show", "o1", "--db", str(seeded))
    assert (code, err) == (0, "")
    assert out.startswith(
        "session o1 (OtherAgent): waiting_for_user_message, waits for a user message\n"
        "transcript:\n  you> hello\n  agent> echo: hello\n"
    )


async def _seed_long_session(db: Path, turns: int) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="OtherAgent")
    async with LocalRuntime(db, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("long")
        for turn in range(1, turns + 1):
            assert await sessions.send_user_message("long", f"hello {turn}")
            await sessions.wait_for_user("long", timeout=WAIT)


def test_show_prints_the_whole_transcript_of_a_session_longer_than_a_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 101 turns store 202 messages: more than one list_agent_messages page (200).
    db = tmp_path / "long.sqlite3"
    asyncio.run(_seed_long_session(db, turns=101))

    code, out, err = _run(capsys, "show", "long", "--db", str(db))

    assert (code, err) == (0, "")
    said = [line.removeprefix("  you> ") for line in out.splitlines() if "you> " in line]
    assert said == [f"hello {turn}" for turn in range(1, 102)]


async def _seed_compacted_session(db: Path, turns: int) -> tuple[int | None, str | None]:
    """A session retention cut short; where its kept messages start, and the first one's text."""
    options = replace(
        AgentSessionOptions(compaction=CompactionPolicy(context_window_tokens=100)),
        message_window_size=4,
        message_chunk_size=2,
        retained_message_limit=6,
    )
    flow = AgentSessionFlow(CompactingRunner(), flow_type="CompactingAgent", options=options)
    async with LocalRuntime(db, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("short", "m1")
        await sessions.wait_for_user("short", timeout=WAIT)
        for turn in range(2, turns + 1):
            assert await sessions.send_user_message("short", f"m{turn}")
            await sessions.wait_for_user("short", timeout=WAIT)
        page = await sessions.list_agent_messages("short", after_sequence=0)
        return page.deleted_before_sequence, page.messages[0].text


def test_show_says_which_messages_retention_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "compacted.sqlite3"
    deleted_before, first_kept = asyncio.run(_seed_compacted_session(db, turns=10))
    assert deleted_before is not None
    assert deleted_before > 1

    code, out, err = _run(capsys, "show", "short", "--db", str(db))

    assert (code, err) == (0, "")
    assert out.splitlines()[1:4] == [
        "transcript:",
        f"  (messages 1 to {deleted_before - 1} were deleted by retention)",
        f"  you> {first_kept}",
    ]


async def _seed_failed_turn(db: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="OtherAgent")
    async with retrying_runtime(db, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("failed", "fail")
        await sessions.wait_for_user("failed", timeout=WAIT)


def test_show_says_why_the_last_turn_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sessions listed the failure and a resumed chat named it; show said nothing of it.
    db = tmp_path / "failed.sqlite3"
    asyncio.run(_seed_failed_turn(db))

    code, out, err = _run(capsys, "show", "failed", "--db", str(db))

    assert (code, err) == (0, "")
    assert out.splitlines()[1:4] == [
        "transcript:",
        "  you> fail",
        "the last turn failed: the scripted model cannot answer 'fail'",
    ]


async def _seed_cancelled_turn(db: Path) -> None:
    demo = demo_flow()
    async with LocalRuntime(db, [demo], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(demo)
        await sessions.open_session("cancelled")
        assert await sessions.send_user_message("cancelled", "refund order 7")
        waiting = await sessions.wait_for_user("cancelled", timeout=WAIT)
        assert waiting.state is not None
        assert waiting.state.active_turn_id is not None  # at the refund's approval
        assert await sessions.cancel_turn("cancelled", waiting.state.active_turn_id)
        await sessions.wait_for_user("cancelled", timeout=WAIT)
        # A later completed turn is not a cancelled one.
        await sessions.open_session("completed")
        assert await sessions.send_user_message("completed", "where is order 7")
        await sessions.wait_for_user("completed", timeout=WAIT)


def test_show_says_the_last_turn_was_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An idle snapshot looks the same after a completed turn: show said only what it waits
    # for, as if the turn had ended as it should.
    db = tmp_path / "cancelled.sqlite3"
    asyncio.run(_seed_cancelled_turn(db))

    code, out, err = _run(capsys, "show", "cancelled", "--db", str(db))

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].endswith("waits for a user message")
    assert lines[lines.index("tool calls of the running turn:") - 1] == (
        "the last turn was cancelled"
    )
    code, out, err = _run(capsys, "show", "completed", "--db", str(db))
    assert (code, err) == (0, "")
    assert "cancelled" not in out


def test_sessions_says_the_last_turn_was_cancelled_as_show_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, sessions listed a cancelled turn's session as "waiting for a message", as
    # after a completed turn, where show said "the last turn was cancelled".
    db = tmp_path / "cancelled.sqlite3"
    asyncio.run(_seed_cancelled_turn(db))

    code, out, err = _run(capsys, "sessions", "--db", str(db))

    assert (code, err) == (0, "")
    status = {row[0]: row[2] for row in (line.split("  ") for line in out.splitlines()[1:])}
    assert status["cancelled"] == "waiting for a message (its last turn was cancelled)"
    assert status["completed"].rstrip() == "waiting for a message"


def _forget_cancelled_turn_ids(db: Path) -> None:
    """Store each AgentState as a dex-agents from before ``cancelled_turn_id`` wrote it."""
    with contextlib.closing(sqlite3.connect(db)) as raw, raw:
        rows = raw.execute(
            "SELECT flow_id, value FROM attribute_values WHERE name = 'AgentState'"
        ).fetchall()
        for flow_id, value in rows:
            state = json.loads(value)
            assert state.pop("cancelled_turn_id", None) in (None, "turn-1")
            raw.execute(
                "UPDATE attribute_values SET value = ? WHERE flow_id = ? AND name = 'AgentState'",
                (json.dumps(state, separators=(",", ":"), sort_keys=True), flow_id),
            )


def test_a_turn_cancelled_before_cancelled_turn_id_was_kept_reads_as_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The TurnCancellationRequest that cancel_turn recorded for the newest turn says so: until
    # 2026-12-07 such a session was listed and shown as if its last turn had ended.
    db = tmp_path / "cancelled.sqlite3"
    asyncio.run(_seed_cancelled_turn(db))
    _forget_cancelled_turn_ids(db)

    code, out, err = _run(capsys, "sessions", "--db", str(db))

    assert (code, err) == (0, "")
    status = {row[0]: row[2] for row in (line.split("  ") for line in out.splitlines()[1:])}
    assert status["cancelled"] == "waiting for a message (its last turn was cancelled)"
    assert status["completed"].rstrip() == "waiting for a message"
    code, out, err = _run(capsys, "show", "cancelled", "--db", str(db))
    assert (code, err) == (0, "")
    assert "the last turn was cancelled" in out.splitlines()


async def _seed_cancelled_then_trimmed(db: Path) -> None:
    runner = SlowModelRunner()
    options = AgentSessionOptions(event_stream_capacity_bytes=1500)
    flow = AgentSessionFlow(runner, flow_type="OtherAgent", options=options)
    async with LocalRuntime(db, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session("cancelled", "slow")
        await asyncio.wait_for(runner.entered.wait(), 10)
        assert await sessions.cancel_turn("cancelled", "turn-1")
        await sessions.wait_for_user("cancelled", timeout=WAIT)
        # The Flow type's Stream is full of another session's later turns: the cancelled
        # turn's events, its turn_cancelled too, are trimmed.
        await sessions.start_session("busy", "hello")
        for turn in range(8):
            await sessions.wait_for_user("busy", timeout=WAIT)
            assert await sessions.send_user_message("busy", f"hello {turn} " + "x" * 200)
        await sessions.wait_for_user("busy", timeout=WAIT)
        pages = LocalStreamPageReader(runtime.flow_client.engine)
        page = await pages.list_stream_messages(flow, "cancelled", 100)
        assert "turn_cancelled" not in [message.value.type for message in page.messages]


def test_show_says_the_last_turn_was_cancelled_after_the_stream_trimmed_its_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, show found the cancel by paging the session's Stream for turn_cancelled, so
    # once the Stream trimmed it show said nothing, while sessions said it was cancelled.
    db = tmp_path / "trimmed.sqlite3"
    asyncio.run(_seed_cancelled_then_trimmed(db))

    code, out, err = _run(capsys, "show", "cancelled", "--db", str(db))

    assert (code, err) == (0, "")
    assert out.splitlines()[1:4] == ["transcript:", "  you> slow", "the last turn was cancelled"]


def test_show_refuses_a_flow_run_that_is_not_an_agent_session(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "show", "engine-1", "--db", str(seeded)) == (
        1,
        "",
        "dex-agents: error: 'engine-1' is a EngineTest Flow run that dex-agents cannot "
        "read as an agent session (working)\n",
    )


def _damage_state(db: Path, session_id: str) -> None:
    with contextlib.closing(sqlite3.connect(db)) as raw, raw:
        raw.execute(
            "UPDATE attribute_values SET value = CAST(x'ff22' AS TEXT)"
            " WHERE flow_id = ? AND name = 'AgentState'",
            (session_id,),
        )


def test_sessions_lists_every_session_when_one_has_damaged_state(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _damage_state(seeded, "o1")
    code, out, err = _run(capsys, "sessions", "--db", str(seeded))
    # Before, SQLite's UTF-8 error in the listing's one read failed the whole command.
    assert (code, err) == (0, "")
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert listed == ["d1", "o1", "evil\\x1b[2J\\u202eid", "engine-1"]


def test_show_of_a_session_whose_state_is_damaged_names_the_damaged_value(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _damage_state(seeded, "o1")
    code, out, err = _run(capsys, "show", "o1", "--db", str(seeded))
    # Before, it said o1 was "a OtherAgent Flow run that dex-agents cannot read as an
    # agent session", which is not what is wrong with it.
    assert (code, out) == (1, "")
    assert err.startswith(f"dex-agents: error: {seeded} is damaged: the stored value of ")
    assert "Attribute 'AgentState' of Flow run 'o1' is not UTF-8 text" in err
    assert len(err.splitlines()) == 1, err


def test_chat_refuses_a_session_of_another_flow_type_before_anything_is_typed(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "chat", "--session", "o1", "--db", str(seeded)) == (
        1,
        "",
        "dex-agents: error: session 'o1' is a OtherAgent session; chat talks to "
        "DemoSupportAgent sessions only (choose another --session)\n",
    )


async def _seed_failed_start(db: Path) -> None:
    flow = demo_flow()
    # Settings far over the limit fail the session in its first Step, with a reason.
    start = AgentSessionStartInput(session_settings={"notes": "x" * 40_000})
    async with LocalRuntime(db, [flow]) as runtime:
        await runtime.flow_client.start_flow(flow, "broken", start)


def test_chat_refuses_a_failed_session_saying_why_it_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "failed.sqlite3"
    asyncio.run(_seed_failed_start(db))
    code, out, err = _run(capsys, "chat", "--session", "broken", "--db", str(db))
    # Before, it said only that the session is failed.
    assert (code, out) == (1, "")
    assert err.startswith(
        "dex-agents: error: session 'broken' is failed: invalid start session settings: "
    )
    assert err.endswith(" (choose another --session)\n")


def test_show_of_a_session_whose_start_was_refused_says_why_it_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "failed.sqlite3"
    asyncio.run(_seed_failed_start(db))
    code, out, err = _run(capsys, "show", "broken", "--db", str(db))
    # Before, it called the session a Flow run dex-agents cannot read as an agent session.
    assert (code, out) == (1, "")
    assert err.startswith("dex-agents: error: session 'broken' failed: invalid start session ")
    assert "cannot read" not in err


def test_sessions_of_an_empty_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "db.sqlite3"

    async def create() -> None:
        async with LocalRuntime(db, [demo_flow()], workers=0):
            pass

    asyncio.run(create())
    assert _run(capsys, "sessions", "--db", str(db)) == (0, f"no sessions in {db}\n", "")


def _info(*steps: str, status: str = "running") -> FlowInfo:
    return FlowInfo(
        flow_id="x",
        flow_type="SomeAgent",
        status=status,
        started_at=datetime(2024, 1, 1, tzinfo=UTC),
        closed_at=None,
        active_step_types=steps,
    )


@pytest.mark.parametrize(
    ("info", "status"),
    [
        (_info("AwaitToolApproval", "CallTool"), "waiting for approval"),
        (_info("AwaitQuestionAnswer"), "waiting for an answer to a question"),
        (_info("AwaitUserMessage"), "waiting for a message"),
        (_info("StartAgentSession"), "starting"),
        (_info("RunModel"), "working"),
        (_info(status="stopped"), "stopped"),
    ],
)
def test_a_session_it_cannot_read_is_described_by_its_active_steps(
    info: FlowInfo, status: str
) -> None:
    assert step_status(info) == status


def test_table_cells_are_escaped_before_they_are_measured() -> None:
    assert table_lines([["ID", "X"], ["a\x1bb", "1"], ["c", "2"]]) == [
        "ID      X",
        "a\\x1bb  1",
        "c       2",
    ]
