"""Scripted agents for the console's browser tests: ones that ask, plan, or show images.

All run on the built-in loop with a ``ScriptedModelClient``, so every turn is
deterministic and needs no key; only the model is scripted, the session is real.
"""

from __future__ import annotations

import json
from pathlib import Path

from dex_agents import ToolEffect, ToolInputRequested
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.builtin_loop import (
    FunctionToolResult,
    ToolCallContext,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.cli.database import demo_flow
from dex_agents.composition.session_flow import AgentSessionFlow
from dex_agents.domain.builtin_tools import (
    QUESTION_DEADLINE_PASSED_MESSAGE,
    QUESTION_DECLINED_MESSAGE,
    BuiltInTool,
)
from dex_agents.domain.model_io import ModelRequest
from dex_agents.local import LocalRuntime
from dex_agents.ports.media_store import MediaStore
from tests.domain.images_support import png

SPEED_QUESTION = "Which shipping speed?"
SPEEDS = ("standard", "express")
NOTE_QUESTION = "Any note for the courier?"
PLAN_TASKS = ("Back up the database", "Run the migration")
APPROVED_PLAN_TEXT = "The user approved plan revision"
"""How the session's executing turn's user message starts, after ``[Dex]``."""


DEFAULT_SPEED = "standard"
"""The speed the question agent ships at when the person declines to choose one."""


def shipping_answer(speed: str | None, note: str | None) -> str:
    """What the question agent answers once both questions are answered or declined:
    a declined one (``None``) leaves the default speed, or no note."""
    chosen = DEFAULT_SPEED if speed is None else speed
    return f"Shipping {chosen}; note for the courier: {'none' if note is None else note}"


_NO_ANSWER = frozenset({QUESTION_DECLINED_MESSAGE, QUESTION_DEADLINE_PASSED_MESSAGE})


def _answers(request: ModelRequest) -> list[str | None]:
    # A declined question (or one whose deadline passed) is a plain-text result, not JSON:
    # a real agent reads it and goes on without the answer, so this one does too, where it
    # failed its turn on the text. Any other result is an answer's JSON, parsed strictly.
    answers: list[str | None] = []
    for result in ScriptedModelClient.tool_results(request):
        if result.output in _NO_ANSWER:
            answers.append(None)
            continue
        value = json.loads(result.output)
        assert value["status"] == "answered", value
        answers.append(str(value["answer"]))
    return answers


def _ask_twice(request: ModelRequest) -> ScriptedModelReply:
    # One turn: a question with fixed choices only, then one in free text, then the answer.
    answers = _answers(request)
    if not answers:
        speed = {"question": SPEED_QUESTION, "choices": list(SPEEDS), "allows_free_text": False}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, speed),))
    if len(answers) == 1:
        note = {"question": NOTE_QUESTION}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, note),))
    return ScriptedModelReply(text=shipping_answer(answers[0], answers[1]))


def question_flow() -> AgentSessionFlow:
    """``ShippingAgent``: asks for a speed (choices only), then a note (free text), then answers."""
    definition = AgentDefinition(
        name="shipping",
        instructions="Ask how to ship.",
        model=ScriptedModelClient(_ask_twice),
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    return builtin_agent_session_flow(definition, flow_type="ShippingAgent")


def _plan(request: ModelRequest) -> ScriptedModelReply:
    texts = ScriptedModelClient.user_texts(request)
    executing = bool(texts) and APPROVED_PLAN_TEXT in texts[-1]
    if ScriptedModelClient.tool_results(request):
        if executing:
            return ScriptedModelReply(text="Migrated: every task is completed.")
        return ScriptedModelReply(text="Here is the draft: review it, then execute it.")
    status = "completed" if executing else "pending"
    todos = {"todos": [{"content": task, "status": status} for task in PLAN_TASKS]}
    return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.WRITE_TODOS, todos),))


def plan_flow() -> AgentSessionFlow:
    """``MigrationAgent`` in plan mode: drafts two pending tasks, and completes both when run."""
    definition = AgentDefinition(
        name="migration",
        instructions="Plan the migration, then run it.",
        model=ScriptedModelClient(_plan),
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
        plan_mode_enabled=True,
    )
    return builtin_agent_session_flow(definition, flow_type="MigrationAgent")


async def sessions_in_every_situation(path: Path) -> None:
    """Sessions in ``path`` in each situation a snapshot tells apart: ``idle``, ``approval``,
    ``queued`` (an approval and a queued message) and ``starting`` (no ``AgentState`` yet) of
    ``demo_flow()``, and ``question`` of ``question_flow()``."""
    demo, asking = demo_flow(), question_flow()
    async with LocalRuntime(path, [demo, asking], workers=1) as runtime:
        sessions, questions = runtime.sessions(demo), runtime.sessions(asking)
        for session_id, message in (
            ("idle", "where is order 7"),
            ("approval", "refund order 8 $2"),
        ):
            await sessions.start_session(session_id, message)
            await sessions.wait_for_user(session_id)
        await sessions.start_session("queued", "refund order 9 $3")
        await sessions.wait_for_user("queued")
        assert await sessions.send_user_message("queued", "where is order 9")
        await questions.start_session("question", "ship it")
        await questions.wait_for_user("question")
    async with LocalRuntime(path, [demo], workers=0, create=False) as runtime:
        await runtime.sessions(demo).start_session("starting", "where is order 1")


def _calls_then_says_done(tool: str) -> ScriptedModelClient:
    """A model that calls ``tool`` with no arguments, then answers ``done: <its output>``."""

    def reply(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=f"done: {results[-1].output}")
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(tool, {}),))

    return ScriptedModelClient(reply)


ACCOUNT_QUESTION = "Which account?"
ACCOUNTS = ("savings", "checking")


def account_flow() -> AgentSessionFlow:
    """``AccountAgent``: calls ``pick_account``, a tool that asks which account once it runs."""

    @function_tool(effect=ToolEffect.READ)
    def pick_account(context: ToolCallContext) -> object:
        """Pick the account to charge."""
        if context.input_answers:
            return f"charged {context.input_answers[0]}"
        return ToolInputRequested(ACCOUNT_QUESTION, choices=ACCOUNTS)

    definition = AgentDefinition(
        name="accounts",
        instructions="Charge an account.",
        model=_calls_then_says_done("pick_account"),
        tools=[pick_account],
    )
    return builtin_agent_session_flow(definition, flow_type="AccountAgent")


UNDECODABLE_FILE = "report-\udcff.txt"
"""A file name as ``os.fsdecode`` gives one that is not UTF-8: its last byte a lone surrogate."""


def file_flow() -> AgentSessionFlow:
    """``FileAgent``: calls ``delete_file``, which asks before it deletes ``UNDECODABLE_FILE``."""

    @function_tool(effect=ToolEffect.READ)
    def delete_file(context: ToolCallContext) -> object:
        """Delete the old report."""
        if context.input_answers:
            return f"deleted {UNDECODABLE_FILE}"
        return ToolInputRequested(f"Delete {UNDECODABLE_FILE}?", choices=("yes", "no"))

    definition = AgentDefinition(
        name="files",
        instructions="Tidy the files.",
        model=_calls_then_says_done("delete_file"),
        tools=[delete_file],
    )
    return builtin_agent_session_flow(definition, flow_type="FileAgent")


SCREENSHOT_TEXT = "Took a screenshot."
SEEN_TEXT = "I see the screen."


def image_flow(media: MediaStore) -> AgentSessionFlow:
    """``EyesAgent``: takes a screenshot (a tool result with an image in ``media``), then answers."""

    @function_tool(effect=ToolEffect.READ)
    async def take_screenshot(context: ToolCallContext) -> FunctionToolResult:
        """Take a screenshot of the screen."""
        assert context.media_store is not None
        reference = await context.media_store.put_image(png())
        return FunctionToolResult(output=SCREENSHOT_TEXT, images=[reference])

    def reply(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text=SEEN_TEXT)
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("take_screenshot", {}),))

    definition = AgentDefinition(
        name="eyes",
        instructions="Look.",
        model=ScriptedModelClient(reply),
        tools=[take_screenshot],
    )
    return builtin_agent_session_flow(definition, flow_type="EyesAgent", media_store=media)


def echo_flow() -> AgentSessionFlow:
    """``EchoAgent``: answers each message with ``ok``, one model call a turn."""
    definition = AgentDefinition(
        name="echo",
        instructions="Answer ok.",
        model=ScriptedModelClient(lambda request: ScriptedModelReply(text="ok")),
    )
    return builtin_agent_session_flow(definition, flow_type="EchoAgent")


async def echo_session(db: Path, session_id: str, turns: int) -> None:
    """Session ``session_id`` of ``echo_flow`` in ``db``: ``turns`` turns, "message 1" onwards."""
    flow = echo_flow()
    async with LocalRuntime(db, [flow], workers=1) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.start_session(session_id, "message 1")
        await sessions.wait_for_user(session_id)
        for number in range(2, turns + 1):
            assert await sessions.send_user_message(session_id, f"message {number}")
            await sessions.wait_for_user(session_id)


def asking_image_flow(media: MediaStore) -> AgentSessionFlow:
    """``PatientEyesAgent``: asks a question first, so messages sent meanwhile are queued."""

    def reply(request: ModelRequest) -> ScriptedModelReply:
        if ScriptedModelClient.tool_results(request):
            return ScriptedModelReply(text=SEEN_TEXT)
        question = {"question": "Which screen?"}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(BuiltInTool.ASK_USER, question),))

    definition = AgentDefinition(
        name="patient-eyes",
        instructions="Ask, then look.",
        model=ScriptedModelClient(reply),
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    return builtin_agent_session_flow(definition, flow_type="PatientEyesAgent", media_store=media)
