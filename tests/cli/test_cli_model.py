"""``dex-agents chat --model``: the demo agent on a real model, here a provider on loopback.

The chat runs as a real process against ``ProviderServer``, which speaks the
OpenAI Responses API; a missing key and an unknown model are one clear line
before the chat starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.adapters.litellm.provider_scripts import chat_reply, message_item, responses_reply
from tests.adapters.litellm.provider_server import ProviderServer

ANSWER = "Order 7 shipped on Monday."


def chat_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith("_API_KEY") and not key.startswith("DEX_AGENTS_")
    }
    return {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


async def run_chat(args: list[str], stdin: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dex_agents.cli",
        "chat",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=90)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_the_chat_answers_from_the_model(tmp_path: Path) -> None:
    async with ProviderServer() as server:
        server.script(responses_reply([message_item("msg_1", ANSWER)]))
        db = str(tmp_path / "chat.sqlite3")
        code, out, err = await run_chat(
            ["--db", db, "--model", "openai/gpt-5-mini", "--api-base", server.url + "/v1"],
            "where is my order?\n/quit\n",
            chat_env(OPENAI_API_KEY="local-test-key"),
        )
        # Nothing on stderr: LiteLLM's pydantic warnings were printed into the chat.
        assert (code, err) == (0, "")
        assert "model: openai/gpt-5-mini" in out
        assert ANSWER in out
        server.assert_script_used()
        (request,) = server.requests
        assert request.path.endswith("/responses")
        assert "where is my order?" in json.dumps(request.body)


async def test_a_chat_completions_only_server_is_reached_as_hosted_vllm(tmp_path: Path) -> None:
    # What the README tells a llama.cpp user to type: no key, a tool call, a streamed answer.
    async with ProviderServer() as server:
        server.script(
            chat_reply(tool_calls=[("call_1", "lookup_order", '{"order_id": "7"}')]),
            chat_reply(ANSWER),
        )
        code, out, err = await run_chat(
            [
                "--db",
                str(tmp_path / "chat.sqlite3"),
                "--model",
                "hosted_vllm/my-model",
                "--api-base",
                server.url + "/v1",
            ],
            "where is order 7?\n/quit\n",
            chat_env(),
        )
        assert (code, err) == (0, "")
        server.assert_script_used()
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 2
    assert 'lookup_order -> succeeded: {"order_id": "7", "status": "shipped"' in out
    assert f"agent> {ANSWER}" in out


async def test_the_model_can_come_from_the_environment(tmp_path: Path) -> None:
    async with ProviderServer() as server:
        server.script(responses_reply([message_item("msg_1", ANSWER)]))
        env = chat_env(
            OPENAI_API_KEY="local-test-key",
            DEX_AGENTS_MODEL="openai/gpt-5-mini",
            DEX_AGENTS_API_BASE=server.url + "/v1",
        )
        code, out, err = await run_chat(
            ["--db", str(tmp_path / "chat.sqlite3")], "hello\n/quit\n", env
        )
        assert code == 0, err
        assert ANSWER in out


async def test_a_missing_key_is_one_line_before_the_chat_starts(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    code, out, err = await run_chat(
        ["--db", str(db), "--model", "openai/gpt-5-mini"], "hello\n", chat_env()
    )
    assert code == 1
    assert out == ""
    assert err.strip().splitlines() == [
        "dex-agents: error: model 'openai/gpt-5-mini' (openai) needs OPENAI_API_KEY in the environment"
    ]
    assert not db.exists()


async def test_an_unknown_model_is_one_line(tmp_path: Path) -> None:
    code, out, err = await run_chat(
        ["--db", str(tmp_path / "chat.sqlite3"), "--model", "no-such-model"], "", chat_env()
    )
    assert code == 1
    assert out == ""
    assert "unknown model 'no-such-model'" in err
    assert len(err.strip().splitlines()) == 1


async def test_an_api_base_without_a_model_is_refused_not_ignored(tmp_path: Path) -> None:
    # Ignored, it left the chat on the scripted demo model while the person meant their server.
    db = tmp_path / "chat.sqlite3"
    code, out, err = await run_chat(
        ["--db", str(db), "--api-base", "http://127.0.0.1:1/v1"], "hello\n/quit\n", chat_env()
    )
    assert (code, out) == (2, "")
    assert err == (
        "dex-agents: error: --api-base needs --model (or $DEX_AGENTS_MODEL): a model to ask there\n"
    )
    assert not db.exists()


# Runs as ``python -m dex_agents.cli`` does, and says last, as the process ends, how many
# objects the interpreter's final collections would still walk and how many it skips.
_REPORTS_WHAT_EXIT_COLLECTS = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: print('walked', len(gc.get_objects()), 'frozen',"
    " gc.get_freeze_count(), file=sys.stderr))\n"
    "from dex_agents.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


async def test_leaving_the_chat_leaves_the_models_objects_out_of_the_final_collections(
    tmp_path: Path,
) -> None:
    # Each of the interpreter's final collections walked every object LiteLLM loaded: the
    # shell's prompt came back 2-6 s after /quit.
    async with ProviderServer() as server:
        server.script(responses_reply([message_item("msg_1", ANSWER)]))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _REPORTS_WHAT_EXIT_COLLECTS,
            "chat",
            "--db",
            str(tmp_path / "chat.sqlite3"),
            "--model",
            "openai/gpt-5-mini",
            "--api-base",
            server.url + "/v1",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=chat_env(OPENAI_API_KEY="local-test-key"),
        )
        stdout, stderr = await asyncio.wait_for(
            process.communicate(b"where is my order?\n/quit\n"), timeout=90
        )
    assert process.returncode == 0, stderr.decode()
    assert ANSWER in stdout.decode()
    _, walked, _, frozen = stderr.decode().split()
    assert int(walked) * 10 < int(frozen), stderr.decode()
