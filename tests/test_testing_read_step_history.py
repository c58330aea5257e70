"""``dex_agents.testing.read_step_history(server_address, flow_id)``: Step history through dexcli."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dex_agents.testing import DEXCLI_ENV, read_step_history
from tests.adapters.dex.fake_dexcli import SAMPLE_ENTRIES, serving_dexcli


async def test_it_runs_dexcli_flow_history_and_parses_the_completed_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dexcli = serving_dexcli(tmp_path / "bin")
    monkeypatch.setenv(DEXCLI_ENV, str(dexcli))
    assert await read_step_history("127.0.0.1:8801", "session-1") == SAMPLE_ENTRIES
    (call,) = [
        json.loads(line) for line in (dexcli.parent / "calls.jsonl").read_text().splitlines()
    ]
    assert call[:2] == ["flow", "history"]
    assert "127.0.0.1:8801" in call
    assert call[-1] == "session-1"


async def test_without_dexcli_it_says_what_to_use_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEXCLI_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"set DEXCLI, or use AgentTestStack\.read_step_history"):
        await read_step_history("127.0.0.1:8801", "session-1")
