"""The racers of ``test_cross_process_races``: client processes started to race on one file.

``Racers.race(plans)`` starts one ``python -m tests.reliability.race_client``
per plan, waits until every one has opened the database, writes the shared
``go`` file, and returns each racer's results once all have exited.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dex_agents.testing import wait_until
from tests.reliability.harness import REPO_ROOT

PROCESS_TIMEOUT = 120.0
"""How long a racer may take to start, and all of them to finish, on a loaded machine."""


@dataclass
class Racers:
    """Client processes that each make their calls once the ``go`` file appears."""

    directory: Path
    database: Path

    async def race(self, plans: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Start one racer per plan (``calls`` and ``concurrent``), let them go, return their results.

        Every call must return: one that raised fails the test, with the racers' output.
        """
        go = self.directory / "go"
        processes = []
        for number, plan in enumerate(plans):
            request = {
                **plan,
                "database": str(self.database),
                "ready": str(self.directory / f"racer-{number}.ready"),
                "go": str(go),
                "out": str(self.directory / f"racer-{number}.json"),
            }
            request_path = self.directory / f"racer-{number}.request.json"
            request_path.write_text(json.dumps(request), encoding="utf-8")
            with (self.directory / f"racer-{number}.log").open("wb") as output:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.reliability.race_client",
                    str(request_path),
                    cwd=REPO_ROOT,
                    stdout=output,
                    stderr=output,
                )
            processes.append(process)
        try:
            for number, process in enumerate(processes):
                ready = self.directory / f"racer-{number}.ready"

                def started(
                    process: asyncio.subprocess.Process = process, ready: Path = ready
                ) -> bool:
                    if process.returncode is not None:
                        raise RuntimeError(f"a racer exited early:\n{self.logs(len(plans))}")
                    return ready.exists()

                await wait_until(f"racer {number} to be ready", started, PROCESS_TIMEOUT)
            go.write_text("go", encoding="utf-8")
            async with asyncio.timeout(PROCESS_TIMEOUT):
                codes = [await process.wait() for process in processes]
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        assert codes == [0] * len(plans), self.logs(len(plans))
        results = [
            json.loads((self.directory / f"racer-{n}.json").read_text(encoding="utf-8"))
            for n in range(len(plans))
        ]
        errors = [r for plan in results for r in plan if r["error"] is not None]
        assert not errors, f"racers' calls raised: {errors}\n{self.logs(len(plans))}"
        return results

    def logs(self, count: int) -> str:
        return "\n".join(
            (self.directory / f"racer-{n}.log").read_text(encoding="utf-8", errors="replace")
            for n in range(count)
        )
