"""The stdio test server, slow to start: ``python slow_start.py SECONDS`` runs it that long after it started.

The client's requests wait in the pipe meanwhile, as for a server whose first start
fetches its packages (``npx -y ...``) or loads a large model. The server's imports
are made while it waits, so when it answers depends on ``SECONDS``, not on how long
a loaded machine takes to import them.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()

import importlib.util  # noqa: E402  (the start is timed before the imports)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")

if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("mcp_test_server", SERVER_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    time.sleep(max(0.0, STARTED + float(sys.argv[1]) - time.monotonic()))
    server.build_server().run("stdio")
