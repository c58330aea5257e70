"""What ``LiteLLMModelClient`` adds to a model call over LiteLLM itself, on loopback.

Run it from the repository root, with the ``litellm`` extra installed:

    uv run --frozen python bench/model_client_overhead.py [--calls N] [--deltas N] [--tools N]

A provider on ``127.0.0.1`` answers every request with the same streamed answer
of ``--deltas`` text pieces (40) and usage; each request offers ``--tools`` tools
(1: ``lookup``; more have ``mcp_many_tools.py``'s shape). For each API the benchmark times, in
one run and interleaved call by call, ``--calls`` (200) raw LiteLLM calls
(``litellm.aresponses`` or ``litellm.acompletion`` with ``stream=True``, read to
the end) and as many ``LiteLLMModelClient.call_model`` calls with the same
request, and prints the medians, their difference (the client's overhead per
call), the median of the paired differences, and the ratio. The raw calls get
the arguments the client builds, decoded anew from JSON for every call, so both
send the same bytes with new objects; the client's time includes building them,
its output writer calls, and assembling the items and usage. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price map download

import litellm

from dex_agents.adapters.litellm.chat_request import chat_arguments
from dex_agents.adapters.litellm.responses_request import responses_arguments
from dex_agents.domain.model_io import ModelRequest, ModelToolDefinition, UserTextItem
from dex_agents.litellm import LiteLLMModelClient

KEY = "sk-bench-0123456789"

# ---------------------------------------------------------------------------
# The provider


def responses_events(pieces: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """The Responses API stream events of a message answer of ``pieces``."""
    text = "".join(pieces)
    item: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    response: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5-mini",
    }
    usage = {"input_tokens": 50, "output_tokens": 40, "total_tokens": 90}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**response, "status": "in_progress", "output": []}})
    ]
    events.append(
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}})
    )
    events += [
        (
            "response.output_text.delta",
            {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece},
        )
        for piece in pieces
    ]
    events.append(("response.output_item.done", {"output_index": 0, "item": item}))
    events.append(
        (
            "response.completed",
            {"response": {**response, "status": "completed", "output": [item], "usage": usage}},
        )
    )
    return [
        (name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    ]


def chat_events(pieces: Sequence[str]) -> list[tuple[None, Any]]:
    """The Chat Completions chunks of an answer of ``pieces``, its usage, then ``[DONE]``."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> tuple[None, Any]:
        data: dict[str, Any] = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4.1",
        }
        data["choices"] = (
            [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        )
        if delta is None:
            data["usage"] = {"prompt_tokens": 50, "completion_tokens": 40, "total_tokens": 90}
        return (None, data)

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in pieces]
    events += [chunk({}, "stop"), chunk(None), (None, "[DONE]")]
    return events


def sse_bytes(events: Sequence[tuple[str | None, Any]]) -> bytes:
    """A whole HTTP response streaming ``events``, chunked, as one ``bytes``."""
    body = b""
    for name, data in events:
        text = (f"event: {name}\n" if name else "") + "data: "
        text += data if isinstance(data, str) else json.dumps(data)
        chunk = (text + "\n\n").encode()
        body += f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    return head + body + b"0\r\n\r\n"


async def read_request_path(reader: asyncio.StreamReader) -> str:
    """Read one HTTP/1.1 request with its body; return its path."""
    line = await reader.readline()
    length = 0
    while (header := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return line.split()[1].decode()


class LoopbackServer:
    """An asyncio server on ``127.0.0.1`` whose ``handle`` answers each connection."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        """Listen on a free port."""
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)

    async def stop(self) -> None:
        """Stop listening."""
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection."""
        raise NotImplementedError


class Provider(LoopbackServer):
    """Answers each request with the stream of its path."""

    def __init__(self, deltas: int) -> None:
        super().__init__()
        pieces = [f"word{n} " for n in range(deltas)]
        self.answers = {
            "/v1/responses": sse_bytes(responses_events(pieces)),
            "/v1/chat/completions": sse_bytes(chat_events(pieces)),
        }

    @property
    def url(self) -> str:
        """The provider's ``api_base``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send the whole stream of the request's path at once."""
        try:
            writer.write(self.answers[await read_request_path(reader)])
            await writer.drain()
        finally:
            writer.close()


# ---------------------------------------------------------------------------
# The calls


class Discard:
    """A ``ModelOutputWriter`` that drops the text, as cheaply as a writer can."""

    def write_text_delta(self, text: str) -> None:
        pass

    def write_reasoning_delta(self, text: str) -> None:
        pass


LOOKUP = ModelToolDefinition(
    name="lookup",
    description="Look an order up.",
    parameters_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
)
_PROPERTIES = {f"p{n}": {"type": "string", "description": "a parameter " * 6} for n in range(6)}


def request_with(tools: int) -> ModelRequest:
    """The benchmark's request, offering ``lookup`` and ``tools - 1`` more tools.

    The more tools have the shape of ``mcp_many_tools.py``'s: about 170 characters
    of description and six string parameters. The request is made once, so every
    call offers the same definition objects, as a tool source's listing does.
    """
    more = tuple(
        ModelToolDefinition(
            name=f"tool_{n}",
            description="Does a thing. " * 12,
            parameters_schema={"type": "object", "properties": _PROPERTIES, "required": ["p0"]},
        )
        for n in range(tools - 1)
    )
    return ModelRequest(
        instructions="You help with orders.",
        items=(UserTextItem(text="Where is order 7?"),),
        tools=(LOOKUP, *more),
    )


def calls(
    api: str, base: str, request: ModelRequest
) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]:
    """The raw LiteLLM call and the client's call of ``api``, with the same arguments."""
    if api == "responses":
        client = LiteLLMModelClient(
            "openai/gpt-5-mini", api_base=base, api_key_provider=lambda: KEY
        )
        arguments = responses_arguments(request, client.route, {})
        call: Any = litellm.aresponses
    else:
        client = LiteLLMModelClient(
            "openai/gpt-4.1", api="chat_completions", api_base=base, api_key_provider=lambda: KEY
        )
        arguments = chat_arguments(request, client.route, {})
        call = litellm.acompletion
    arguments.update(api_key=KEY, api_base=base, num_retries=0, max_retries=0)
    # Every raw call gets new argument objects, as a real caller's would: LiteLLM
    # does less work when it is handed the very same objects again.
    text = json.dumps(arguments)
    output = Discard()

    async def raw() -> None:
        async for _ in await call(**json.loads(text)):
            pass

    async def wrapped() -> None:
        await client.call_model(request, output)

    return raw, wrapped


async def measure(
    api: str, base: str, count: int, request: ModelRequest
) -> tuple[list[float], list[float]]:
    """Interleaved timings of the raw call and the client's call, in seconds."""
    raw, wrapped = calls(api, base, request)
    for _ in range(10):  # warm-up: LiteLLM imports lazily and builds its clients
        await raw()
        await wrapped()
    raw_times: list[float] = []
    client_times: list[float] = []
    for n in range(count):
        pair = ((raw, raw_times), (wrapped, client_times))
        for call, times in pair if n % 2 == 0 else pair[::-1]:
            started = time.perf_counter()
            await call()
            times.append(time.perf_counter() - started)
    return raw_times, client_times


async def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its results."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind (200)")
    parser.add_argument("--deltas", type=int, default=40, help="text pieces per answer (40)")
    parser.add_argument("--tools", type=int, default=1, help="tools each call offers (1)")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.deltas < 1 or args.tools < 1:
        parser.error("--calls, --deltas and --tools must be at least 1")
    request = request_with(args.tools)
    litellm.suppress_debug_info = True
    # LiteLLM's own Responses usage object warns on every call; it is LiteLLM's noise.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    provider = Provider(args.deltas)
    await provider.start()
    try:
        rows = []
        for api in ("responses", "chat_completions"):
            raw, client = await measure(api, provider.url, args.calls, request)
            raw_median, client_median = statistics.median(raw), statistics.median(client)
            paired = statistics.median(c - r for r, c in zip(raw, client, strict=True))
            rows.append((api, raw_median, client_median, paired))
    finally:
        await provider.stop()
    print(
        f"{args.calls} calls of each kind, {args.deltas} text deltas per answer, "
        f"{args.tools} tools offered, loopback provider"
    )
    print(
        f"{'API':<18}{'raw LiteLLM':>14}{'client':>14}{'overhead':>14}{'paired':>14}{'ratio':>10}"
    )
    for api, raw_median, client_median, paired in rows:
        print(
            f"{api:<18}{raw_median * 1000:>11.3f} ms{client_median * 1000:>11.3f} ms"
            f"{(client_median - raw_median) * 1000:>11.3f} ms{paired * 1000:>11.3f} ms"
            f"{client_median / raw_median:>9.3f}x"
        )
    print("overhead: client median - raw median; paired: median of (client - raw) per pair")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
