"""A tiny S3 service on 127.0.0.1 that speaks PutObject, HeadObject and GetObject.

Moto always honours ``If-None-Match``, so this server plays the services moto cannot:
one that refuses conditional writes with ``501 NotImplemented``, one whose
conditional writes meet ``409 ConditionalRequestConflict`` a given number of times,
and one that serves an object under a wrong ``Content-Length``. It records every
request so a test can check which calls the store made. It checks no signature.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True)
class SeenRequest:
    method: str
    key: str
    if_none_match: str | None


@dataclass
class FakeS3:
    """What the server holds and how it misbehaves; tests change it between calls."""

    refuse_conditional_writes: bool = False
    conflicts_left: int = 0
    objects: dict[str, bytes] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    endpoint_url: str = ""

    def methods(self) -> list[tuple[str, bool]]:
        """Each request as ``(method, sent If-None-Match)``."""
        return [(seen.method, seen.if_none_match is not None) for seen in self.requests]


def _error(status: int, code: str, message: str) -> web.Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    )
    return web.Response(status=status, text=body, content_type="application/xml")


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


def _app(fake: FakeS3) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        key = request.match_info["key"]
        condition = request.headers.get("If-None-Match")
        fake.requests.append(SeenRequest(request.method, key, condition))
        if request.method == "PUT":
            body = await request.read()
            if condition is not None:
                if fake.refuse_conditional_writes:
                    return _error(501, "NotImplemented", "If-None-Match is not implemented")
                if fake.conflicts_left:
                    fake.conflicts_left -= 1
                    return _error(409, "ConditionalRequestConflict", "A conflicting write")
                if key in fake.objects:
                    return _error(412, "PreconditionFailed", "At least one precondition failed")
            fake.objects[key] = body
            return web.Response(status=200, headers={"ETag": _etag(body)})
        data = fake.objects.get(key)
        if data is None:
            if request.method == "HEAD":
                return web.Response(status=404)
            return _error(404, "NoSuchKey", "The specified key does not exist.")
        headers = {"ETag": _etag(data), "Content-Type": "application/octet-stream"}
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(data))
            return web.Response(status=200, headers=headers)
        return web.Response(status=200, body=data, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{bucket}/{key:.+}", handle)
    return app


@asynccontextmanager
async def running_fake_s3(fake: FakeS3) -> AsyncIterator[FakeS3]:
    runner = web.AppRunner(_app(fake), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    fake.endpoint_url = f"http://{host}:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()
