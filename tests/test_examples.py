"""The programs in ``examples/`` run as the README shows them, and the README's code is real.

Each example runs as a subprocess, ``python examples/<name>.py`` with this
project's interpreter (the one ``uv run python`` runs), in the test's
``tmp_path`` so that its SQLite file lands there; the test asserts on what it
prints and on exit code 0. Where the README shows an example's output, the
real output must match it. The README's own code is checked here too: its
"Your first agent" block is ``examples/first_agent.py`` byte for byte, every
``python`` block is an example or compiles, no code block imports
``dex_agents.adapters``, which is internal, and every page it links exists.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dex_agents.testing import wait_until
from tests.adapters.litellm.provider_scripts import (
    function_call_item,
    message_item,
    responses_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
RUN_TIMEOUT_SECONDS = 60

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README: its language, text and the section it is in."""

    language: str
    text: str
    section: str


def readme_blocks() -> list[Block]:
    """Every fenced code block of README.md, in order."""
    readme = README.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(readme):
        headings = re.findall(r"^## (.+)$", readme[: match.start()], re.M)
        section = headings[-1] if headings else ""
        blocks.append(Block(match.group(1), match.group(2), section))
    return blocks


def section_blocks(section: str, language: str) -> list[Block]:
    """The code blocks in one ``## `` section, in one language."""
    found = [b for b in readme_blocks() if b.section == section and b.language == language]
    assert found, f"README section {section!r} has no {language} block"
    return found


def run_example(name: str, cwd: Path) -> str:
    """Run ``python examples/<name>`` in ``cwd``; its stdout, after checking it exited 0."""
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert completed.returncode == 0, (
        f"{name} exited {completed.returncode}\n{completed.stdout}\n{completed.stderr}"
    )
    return completed.stdout


def test_first_agent_prints_what_the_readme_shows_and_resumes_on_a_second_run(
    tmp_path: Path,
) -> None:
    first_run, second_run = section_blocks("Your first agent", "text")

    assert run_example("first_agent.py", tmp_path) == first_run.text
    assert (tmp_path / "first-agent.sqlite3").is_file()
    assert run_example("first_agent.py", tmp_path) == second_run.text


CRASH_AT_THE_APPROVAL = textwrap.dedent(
    """
    import asyncio, os, runpy, signal, sys

    example = runpy.run_path(sys.argv[1])
    flow = example["flow"]

    async def main():
        async with example["LocalRuntime"]("first-agent.sqlite3", [flow]) as runtime:
            sessions = runtime.sessions(flow)
            await sessions.open_session("customer-7")
            await sessions.send_user_message("customer-7", "Please refund order 7.")
            snapshot = await sessions.wait_for_user("customer-7")
            print("pending:", snapshot.pending_interrupts[0].tool_name, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


def killed_first_agent(crash: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``first_agent.py`` run under ``crash``, a program that SIGKILLs it at one point."""
    crashed = subprocess.run(
        [sys.executable, "-c", crash, str(EXAMPLES / "first_agent.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert crashed.returncode == -9, crashed.stderr
    return crashed


def assert_first_agent_resumes(tmp_path: Path) -> None:
    """Run ``first_agent.py`` again: it resumes the session and prints the README's first run."""
    output = run_example("first_agent.py", tmp_path)
    first_run = section_blocks("Your first agent", "text")[0].text
    assert output == first_run.replace("started session", "resumed session")


def test_first_agent_approves_a_pending_refund_after_a_kill_9(tmp_path: Path) -> None:
    crashed = killed_first_agent(CRASH_AT_THE_APPROVAL, tmp_path)
    assert crashed.stdout == "pending: refund_order\n"
    assert_first_agent_resumes(tmp_path)


CRASH_AS_THE_SESSION_STARTS = textwrap.dedent(
    """
    import os, runpy, signal, sys

    from dex_agents import AgentSessionClient

    def killed_once_it_returns(call):
        async def call_then_die(self, *args, **kwargs):
            await call(self, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        return call_then_die

    # The first call that leaves the session in the file is the last thing this run does.
    for name in ("open_session", "start_session"):
        setattr(AgentSessionClient, name, killed_once_it_returns(getattr(AgentSessionClient, name)))
    runpy.run_path(sys.argv[1], run_name="__main__")
    """
)


def test_first_agent_killed_as_its_session_starts_resumes_it_on_the_next_run(
    tmp_path: Path,
) -> None:
    killed_first_agent(CRASH_AS_THE_SESSION_STARTS, tmp_path)
    assert_first_agent_resumes(tmp_path)


def test_approvals_and_questions_answers_the_question_and_the_rejected_tool_never_runs(
    tmp_path: Path,
) -> None:
    output = run_example("approvals_and_questions.py", tmp_path)

    assert output == textwrap.dedent(
        """\
        question: Which subscription? ['basic', 'pro'] -> pro
        rejecting cancel_subscription {"plan": "pro"}
        agent: The cancellation did not happen: Not today: keep it until the end of the month.
        the messages of turn-1:
          1 user: Cancel my subscription.
          2 assistant: calls ask_user {"question": "Which subscription?", "choices": ["basic", "pro"]}
          3 tool: ask_user -> {"status":"answered","answer":"pro"}
          4 assistant: calls cancel_subscription {"plan": "pro"}
          5 tool: cancel_subscription -> Not today: keep it until the end of the month.
          6 assistant: The cancellation did not happen: Not today: keep it until the end of the month.
        """
    )
    assert "cancel_subscription ran" not in output


def test_custom_runner_echoes_and_calls_its_tool_in_a_step(tmp_path: Path) -> None:
    output = run_example("custom_runner.py", tmp_path)

    assert output == textwrap.dedent(
        """\
        you: hello there
        agent: echo: hello there  (turn-1 stored user, assistant)
        you: shout durable steps
        agent: DURABLE STEPS!  (turn-2 stored user, assistant, tool, assistant)
        """
    )


SEVERAL_WORKERS_OUTPUT = re.compile(
    r"this process (?P<main>\d+); worker processes \[(?P<first>\d+), (?P<second>\d+)\]\n"
    r"(?P<answers>(?:customer-\d: order \d looked up by process \d+\n){4})"
    r"tool calls per process: \{(?P<counts>[^}]*)\}\n"
    r"worker processes stopped with exit codes \[0, 0\]\n"
)


def check_several_workers_output(output: str) -> None:
    """Four answers, each from one of the three processes, and both workers stopped cleanly."""
    match = SEVERAL_WORKERS_OUTPUT.fullmatch(output)
    assert match is not None, output
    processes = {match["main"], match["first"], match["second"]}
    assert len(processes) == 3
    answers = re.findall(r"customer-(\d): order (\d) looked up by process (\d+)", match["answers"])
    assert [(session, order) for session, order, _ in answers] == [
        (str(n), str(n)) for n in range(1, 5)
    ]
    assert {pid for _, _, pid in answers} <= processes
    counts = dict(re.findall(r"'(\d+)': (\d+)", match["counts"]))
    assert set(counts) <= processes
    assert sum(int(count) for count in counts.values()) == 4


def test_several_workers_runs_sessions_in_three_processes_and_stops_the_workers(
    tmp_path: Path,
) -> None:
    check_several_workers_output(run_example("several_workers.py", tmp_path))


def process_is_running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is no zombie (an orphan's reaper may be slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_several_workers_leaves_no_worker_behind_when_it_is_killed(tmp_path: Path) -> None:
    main = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "several_workers.py"),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert main.stdout is not None
    first_line = await asyncio.wait_for(main.stdout.readline(), RUN_TIMEOUT_SECONDS)
    workers = [int(pid) for pid in re.findall(r"\d+", first_line.decode().split(";")[1])]
    assert len(workers) == 2, first_line
    try:
        main.kill()  # kill -9 of the program alone, not of its process group
        await main.wait()

        await wait_until(
            "the orphaned worker processes to exit",
            lambda: not any(process_is_running(pid) for pid in workers),
            timeout=RUN_TIMEOUT_SECONDS,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(main.pid, signal.SIGKILL)


def test_the_readme_shows_several_workers_output_of_the_right_shape() -> None:
    (sample,) = section_blocks("Running several worker processes", "text")
    check_several_workers_output(sample.text)


async def test_real_model_runs_the_first_agent_on_a_provider(tmp_path: Path) -> None:
    # The provider here is a local server that speaks OpenAI's Responses API.
    call = function_call_item("fc_1", "call_1", "lookup_order", '{"order_id": "7"}')
    answer = "Your order 7 shipped on Monday."
    async with ProviderServer() as server:
        server.script(responses_reply([call]), responses_reply([message_item("msg_1", answer)]))
        env = {
            **os.environ,
            "OPENAI_API_KEY": "local-test-key",
            "DEX_AGENTS_API_BASE": server.url + "/v1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLES / "real_model.py"),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_SECONDS)
        assert process.returncode == 0, stderr.decode()
        assert stdout.decode().splitlines() == [f"agent: {answer}"]
        server.assert_script_used()


EXAMPLE_TESTS: dict[str, Callable[..., object]] = {
    "first_agent.py": test_first_agent_prints_what_the_readme_shows_and_resumes_on_a_second_run,
    "approvals_and_questions.py": (
        test_approvals_and_questions_answers_the_question_and_the_rejected_tool_never_runs
    ),
    "custom_runner.py": test_custom_runner_echoes_and_calls_its_tool_in_a_step,
    "real_model.py": test_real_model_runs_the_first_agent_on_a_provider,
    "several_workers.py": test_several_workers_runs_sessions_in_three_processes_and_stops_the_workers,
}


def test_every_example_is_run_here_and_shown_in_the_readme_as_it_runs() -> None:
    examples = {path.name for path in EXAMPLES.glob("*.py")}
    commands = {
        command
        for block in readme_blocks()
        if block.language == "bash"
        for command in re.findall(r"^uv run python examples/(\S+\.py)$", block.text, re.M)
    }

    assert examples == set(EXAMPLE_TESTS)
    assert commands == examples


@pytest.mark.parametrize("name", sorted(EXAMPLE_TESTS))
def test_each_example_says_what_it_shows_and_how_to_run_it(name: str) -> None:
    docstring = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8")))

    assert docstring is not None
    assert f"uv run python examples/{name}" in docstring
    assert len(docstring.split("\n\n")[0]) > 20


def test_the_first_agent_block_is_the_example_byte_for_byte() -> None:
    block = section_blocks("Your first agent", "python")[0]

    assert block.text == (EXAMPLES / "first_agent.py").read_text(encoding="utf-8")


def test_every_python_block_is_an_example_or_compiles() -> None:
    examples = {path.read_text(encoding="utf-8") for path in EXAMPLES.glob("*.py")}
    for block in readme_blocks():
        if block.language != "python" or block.text in examples:
            continue
        # The tour's fragments run inside an async function, as the README says.
        compile(block.text, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_no_readme_code_imports_the_internal_adapters() -> None:
    for block in readme_blocks():
        assert "dex_agents.adapters" not in block.text, block.text


def test_the_readme_and_docs_link_to_files_that_exist() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", page.read_text("utf-8")):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the package or a name a module of it defines."""
    module, _, name = dotted.rpartition(".")
    with contextlib.suppress(ModuleNotFoundError):  # a module's attribute is no module
        # Found, not imported: dex_agents.connectors raises ImportError without its SDK.
        if importlib.util.find_spec(dotted) is not None:
            return True
    try:
        return hasattr(importlib.import_module(module), name)
    except ModuleNotFoundError:
        return False


def test_every_dotted_name_the_readme_gives_is_where_it_says() -> None:
    # A newcomer imports a name from where the prose puts it; one named where it is not
    # (BuiltInTool under dex_agents.builtin_loop, say) fails at their first import.
    readme = README.read_text(encoding="utf-8")
    names = set(re.findall(r"`(dex_agents(?:\.\w+)+)`", readme))

    assert "dex_agents.BuiltInTool" in names
    assert [name for name in sorted(names) if not _resolves(name)] == []
