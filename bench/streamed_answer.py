"""What a streamed answer's pieces cost a durable turn with ``LiteLLMModelClient``.

Run it from the repository root, with the ``litellm`` extra installed:

    uv run --frozen python bench/streamed_answer.py [--pieces N] [--turns N] [--pause MS]

A provider on ``127.0.0.1`` (``model_client_overhead.py``'s) answers every
model call with a streamed text answer and its usage, in three shapes: one
piece; ``--pieces`` (200) word-sized pieces sent in one burst, as a provider's
chunks reach a worker that is behind; and as many pieces sent one at a time,
``--pause`` ms (2) apart, as they reach an idle worker. One ``LocalRuntime`` on
a temporary SQLite file serves a session of each shape and API (Responses,
Chat Completions) with the worker in this process; after warm-up turns their
``--turns`` (20) turns take turns, and the benchmark prints, per API and shape,
the median CPU time of the process per turn (the provider's included, the same
for every build), the ``text_delta`` events the turn wrote, and the CPU per
piece over the one-piece answer. Each turn is one model call that answers. It
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price map download

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_client_overhead import (
    KEY,
    LoopbackServer,
    chat_events,
    read_request_path,
    responses_events,
    sse_bytes,
)

SHAPES = ("one piece", "burst", "paced")


class PacedProvider(LoopbackServer):
    """Answers ``/<shape index>/v1/<api path>`` with that shape's stream."""

    def __init__(self, pieces: int, pause: float) -> None:
        super().__init__()
        words = [f"word{n} " for n in range(pieces)]
        self.pause = pause
        # By API and whether the answer is one piece.
        self.streams: dict[tuple[str, bool], list[bytes]] = {}
        for api, events in (("responses", responses_events), ("chat", chat_events)):
            for single, texts in ((True, ["".join(words)]), (False, words)):
                body = sse_bytes(events(texts))
                head, _, rest = body.partition(b"\r\n\r\n")
                # Each chunk of the chunked body on its own, to send them apart.
                chunks, position = [], 0
                while position < len(rest):
                    size_end = rest.index(b"\r\n", position)
                    size = int(rest[position:size_end], 16)
                    end = size_end + 2 + size + 2
                    chunks.append(rest[position:end])
                    position = end
                self.streams[(api, single)] = [head + b"\r\n\r\n", *chunks]

    def url(self, shape: str) -> str:
        """The ``api_base`` of ``shape``'s answers."""
        return f"http://127.0.0.1:{self.port}/{SHAPES.index(shape)}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send the stream of the request's shape and API: at once, or piece by piece."""
        try:
            _, shape_index, _, endpoint = (await read_request_path(reader)).split("/", 3)
            shape = SHAPES[int(shape_index)]
            stream = self.streams[
                ("responses" if endpoint.startswith("responses") else "chat", shape == "one piece")
            ]
            if shape != "paced":
                writer.write(b"".join(stream))
            else:
                for chunk in stream:
                    writer.write(chunk)
                    await writer.drain()
                    await asyncio.sleep(self.pause)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def measure(pieces: int, turns: int, pause: float) -> dict[tuple[str, str], Any]:
    """Per API and shape: the CPU seconds of each timed turn, and its ``text_delta`` events."""
    from dex_agents.adapters.litellm.routing import ModelApi
    from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
    from dex_agents.litellm import LiteLLMModelClient
    from dex_agents.local import LocalRuntime
    from dex_agents.ports.errors import StreamReadTimeoutError

    provider = PacedProvider(pieces, pause)
    await provider.start()
    apis: tuple[ModelApi, ...] = ("responses", "chat_completions")
    cases = [(api, shape) for api in apis for shape in SHAPES]
    flows = []
    for api, shape in cases:
        model = "openai/gpt-5-mini" if api == "responses" else "openai/gpt-4.1"
        model_client = LiteLLMModelClient(
            model, api=api, api_base=provider.url(shape), api_key_provider=lambda: KEY
        )
        definition = AgentDefinition(name="bench", instructions="You answer.", model=model_client)
        flow_type = f"Streamed{api.title().replace('_', '')}{SHAPES.index(shape)}"
        flows.append(builtin_agent_session_flow(definition, flow_type=flow_type))
    cpu: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    events: dict[tuple[str, str], list[int]] = {case: [] for case in cases}
    try:
        with tempfile.TemporaryDirectory(prefix="dex-streamed-") as directory:
            database = Path(directory) / "streamed.sqlite3"
            async with LocalRuntime(database, flows, create=True) as runtime:
                clients = [runtime.sessions(flow) for flow in flows]
                sessions = [f"streamed-{n}" for n in range(len(cases))]
                tokens = [""] * len(cases)
                for client, session in zip(clients, sessions, strict=True):
                    await client.open_session(session)

                async def deltas_since(position: int) -> int:
                    count = 0
                    while True:
                        try:
                            message = await runtime.flow_client.read_stream(
                                flows[position],
                                sessions[position],
                                tokens[position],
                                poll_timeout=timedelta(0),
                            )
                        except StreamReadTimeoutError:
                            return count
                        tokens[position] = message.resume_token
                        count += message.value.type == "text_delta"

                async def turn(position: int, number: int) -> float:
                    client, session = clients[position], sessions[position]
                    started = time.process_time()
                    assert await client.send_user_message(session, f"hi {number}")
                    done = await client.wait_for_user(session)
                    spent = time.process_time() - started
                    answer = done.messages[-1].text or ""
                    assert answer.startswith("word0 "), answer
                    return spent

                for number in range(3):
                    for position in range(len(cases)):
                        await turn(position, number)
                        await deltas_since(position)
                for number in range(turns):
                    order = range(len(cases)) if number % 2 == 0 else reversed(range(len(cases)))
                    for position in order:
                        cpu[cases[position]].append(await turn(position, number))
                        events[cases[position]].append(await deltas_since(position))
    finally:
        await provider.stop()
    return {case: (cpu[case], events[case]) for case in cases}


async def main(argv: Sequence[str]) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=200, help="pieces of an answer (200)")
    parser.add_argument("--turns", type=int, default=20, help="timed turns per case (20)")
    parser.add_argument("--pause", type=float, default=2.0, help="ms between paced pieces (2)")
    arguments = parser.parse_args(argv)
    if arguments.pieces < 2 or arguments.turns < 1 or arguments.pause < 0:
        parser.error("--pieces must be at least 2, --turns at least 1, --pause not negative")
    import litellm

    litellm.suppress_debug_info = True
    # LiteLLM's own Responses usage object warns on every call; it is LiteLLM's noise.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    results = await measure(arguments.pieces, arguments.turns, arguments.pause / 1000)
    print(
        f"{arguments.pieces} pieces per answer, {arguments.turns} turns per case, "
        f"paced pieces {arguments.pause:g} ms apart"
    )
    print("| API | answer | CPU ms per turn | text_delta events per turn | CPU us per piece |")
    print("| --- | --- | ---: | ---: | ---: |")
    for api in ("responses", "chat_completions"):
        one = statistics.median(results[(api, "one piece")][0])
        for shape in SHAPES:
            times, counts = results[(api, shape)]
            median = statistics.median(times)
            per_piece = (
                ""
                if shape == "one piece"
                else f"{(median - one) / (arguments.pieces - 1) * 1e6:.1f}"
            )
            label = "1 piece" if shape == "one piece" else f"{arguments.pieces} pieces, {shape}"
            print(
                f"| {api} | {label} | {median * 1000:.2f} | "
                f"{statistics.median(counts):g} | {per_piece} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
