"""What ``S3MediaStore`` costs per image read and write over a kept aiobotocore client.

Run it from the repository root, with the ``s3`` extra and the dev group (moto):

    uv run --frozen python bench/s3_overhead.py [--calls N]

The service is moto's S3 server on 127.0.0.1 in a thread of this process (as in the
tests), so its CPU time is in the figures too; compare the rows of one run. For
``--calls`` (30) rounds after a warm-up, interleaved, it times:

- ``get_image``: the store's read of one small PNG (a new client, as for a call that
  overlaps no other, ``GetObject``, the bytes verified against the reference), what a
  model call with one image in its input does;
- ``put_image``: the store's conditional write of an image already stored (``412``);
- ``load_images``, ``--images`` (4) images: what a model call whose input holds them
  does, printed per image too;
- ``upload_images``, as many images already stored: what a tool Step does with an MCP
  result that holds them;
- kept client: one ``GetObject`` of the same object on an aiobotocore client another
  store opened once before the rounds, read to its end: the floor of a read.

It prints the medians, each store call over the floor, and the CPU time of the
process per call. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' image helper and moto settings

import boto3  # type: ignore[import-untyped]  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from dex_agents.adapters.mcp.images import upload_images  # noqa: E402
from dex_agents.ports.media_store import load_images  # noqa: E402
from dex_agents.s3 import S3MediaStore  # noqa: E402
from tests.adapters.s3.conftest import (  # noqa: E402
    ACCESS_KEY_ID,
    REGION,
    SECRET_ACCESS_KEY,
    moto_store,
)
from tests.domain.images_support import png  # noqa: E402

BUCKET = "media-bench"


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    cpu = time.process_time()
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started, time.process_time() - cpu


async def measure(endpoint: str, calls: int, images: int) -> dict[str, list[tuple[float, float]]]:
    """Interleaved (wall, CPU) seconds of each kind of call."""
    store: S3MediaStore = moto_store(endpoint, BUCKET)
    data = png()
    reference = await store.put_image(data)
    several = [png(total_size=len(data) + 20 * n) for n in range(images)]
    references = [await store.put_image(image) for image in several]
    content = [
        {"type": "image", "data": base64.b64encode(image).decode("ascii"), "mimeType": "image/png"}
        for image in several
    ]
    key = store.object_key(reference.sha256)
    # Another store's client: one of the measured store would be shared by its calls.
    async with moto_store(endpoint, BUCKET)._client() as kept:

        async def get_image() -> None:
            assert await store.get_image(reference) == data

        async def put_image() -> None:
            assert await store.put_image(data) == reference

        async def load_several() -> None:
            assert list((await load_images(store, references)).values()) == several

        async def upload_several() -> None:
            assert await upload_images(store, content) == tuple(references)

        async def kept_get() -> None:
            response = await kept.get_object(Bucket=BUCKET, Key=key)
            async with response["Body"] as body:
                assert await body.read() == data

        kinds = {
            "get_image": get_image,
            "put_image": put_image,
            f"load_images, {images} images": load_several,
            f"upload_images, {images} images": upload_several,
            "kept client GET": kept_get,
        }
        for call in kinds.values():  # warm-up: imports, the service model, moto's first answers
            for _ in range(3):
                await call()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
        order = list(kinds.items())
        for n in range(calls):
            turn = n % len(order)
            for name, call in order[turn:] + order[:turn]:
                times[name].append(await _timed(call))
    return times


async def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="timed rounds (30)")
    parser.add_argument("--images", type=int, default=4, help="images per load_images (4)")
    arguments = parser.parse_args(argv)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        admin = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )
        admin.create_bucket(Bucket=BUCKET)
        times = await measure(endpoint, arguments.calls, arguments.images)
    finally:
        server.stop()
    floor = statistics.median(wall for wall, _ in times["kept client GET"])
    print("| call | median ms | over a kept client's GET | CPU ms per call |")
    print("| --- | ---: | ---: | ---: |")
    for name, samples in times.items():
        wall = statistics.median(wall for wall, _ in samples)
        cpu = statistics.median(cpu for _, cpu in samples)
        print(f"| {name} | {wall * 1000:.2f} | {wall / floor:.2f}x | {cpu * 1000:.2f} |")
        if name.startswith(("load_images", "upload_images")):
            each, each_cpu = wall / arguments.images, cpu / arguments.images
            print(
                f"| per image | {each * 1000:.2f} | {each / floor:.2f}x | {each_cpu * 1000:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
