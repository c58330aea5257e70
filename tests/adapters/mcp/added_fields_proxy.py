"""The stdio test server behind a proxy that adds fields to its resource and prompt answers.

The MCP SDK's server drops ``null`` values from what it sends (mcp 2.3), and its
models have no field of a server's own, so no server built with it can send
either. ``python added_fields_proxy.py`` runs ``mcp_test_server.py`` as its child,
passes the client's lines through, and adds ``NULL_FIELDS`` and ``OWN_FIELD`` to
each item of a listing and each content of a read, and a ``null`` ``annotations``
and ``OWN_FIELD`` to each prompt message's content, so the client reads what
another server could send.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")
NULL_FIELDS: dict[str, str] = {
    "resources": "title",
    "resourceTemplates": "title",
    "prompts": "title",
    "contents": "_meta",
}
"""The field each item of a result list gets as ``null``, by the list's key."""
OWN_FIELD = ("x-example-owner", "support")
"""A field of the server's own, which no MCP type has, and its value."""


def add_nulls(message: Any) -> Any:
    """``message`` with ``NULL_FIELDS``, prompt content ``annotations`` and ``OWN_FIELD`` added."""
    result = message.get("result") if isinstance(message, dict) else None
    if isinstance(result, dict):
        for key, field in NULL_FIELDS.items():
            for item in result.get(key) or []:
                item[field] = None
                item[OWN_FIELD[0]] = OWN_FIELD[1]
        for prompt_message in result.get("messages") or []:
            prompt_message["content"]["annotations"] = None
            prompt_message["content"][OWN_FIELD[0]] = OWN_FIELD[1]
    return message


def _forward(source: IO[bytes], target: IO[bytes]) -> None:
    for line in source:
        target.write(line)
        target.flush()
    target.close()


def main() -> None:
    """Run the test server behind the proxy until the client closes stdin."""
    child = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    threading.Thread(target=_forward, args=(sys.stdin.buffer, child.stdin), daemon=True).start()
    for line in child.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            sys.stdout.buffer.write(line)
        else:
            sys.stdout.buffer.write(json.dumps(add_nulls(message)).encode() + b"\n")
        sys.stdout.buffer.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
