"""The stdio test server behind a proxy that never answers some requests.

``python silent_proxy.py LOG METHOD...`` runs ``mcp_test_server.py`` as its child and
passes the lines between it and the client, except a request of one of ``METHOD``s:
that one is never passed on, so it is never answered, and its method is appended
to the file ``LOG``, one line each, after the proxy's process ID. With
``server/discover`` it is an older server that ignores the 2026-07-28 probe but
answers ``initialize``; with both it is a server that never answers at all, as one
stuck in its start. The proxy ends when the client closes its stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")


def _method(line: bytes) -> Any:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


def _forward(source: IO[bytes], target: IO[bytes], log: Path, silenced: set[str]) -> None:
    for line in source:
        method = _method(line)
        if method in silenced:
            with log.open("a", encoding="utf-8") as file:
                file.write(f"{method}\n")
            continue
        target.write(line)
        target.flush()
    target.close()


def main() -> None:
    """Run the test server behind the proxy until the client closes stdin."""
    log, silenced = Path(sys.argv[1]), set(sys.argv[2:])
    with log.open("a", encoding="utf-8") as file:
        file.write(f"{os.getpid()}\n")
    child = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    threading.Thread(
        target=_forward, args=(sys.stdin.buffer, child.stdin, log, silenced), daemon=True
    ).start()
    for line in child.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
