"""The console's JSON answers, written as the event frames are: lone surrogates escaped.

A session keeps the text a tool or a model gave it even when it holds a lone
surrogate (a file name ``os.fsdecode`` read from bytes that are not UTF-8), and
a snapshot or an inbox row carries it to the browser. Starlette's
``JSONResponse`` writes it raw and then fails to encode it as UTF-8, answering
500 to every read of the session; ``dex_agents.domain.canonical_json`` writes
it as its ``\\uXXXX`` escape, which JSON allows and ``JSON.parse`` reads back.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse as StarletteJSONResponse

from dex_agents.domain.canonical_json import dumps


class JSONResponse(StarletteJSONResponse):
    """Starlette's ``JSONResponse`` with the body in the project's canonical JSON."""

    def render(self, content: Any) -> bytes:
        """``content`` as canonical JSON text in UTF-8, each lone surrogate as its escape."""
        return dumps(content).encode("utf-8")
