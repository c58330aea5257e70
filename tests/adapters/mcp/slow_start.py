"""The stdio test server, slow to start: ``python slow_start.py SECONDS`` sleeps, then runs it.

The client's requests wait in the pipe meanwhile, as for a server whose first start
fetches its packages (``npx -y ...``) or loads a large model.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")

if __name__ == "__main__":
    time.sleep(float(sys.argv[1]))
    os.execv(sys.executable, [sys.executable, str(SERVER_SCRIPT)])
