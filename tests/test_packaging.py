"""The extras this project follows pin the design's requirement ranges (spec-differences.md).

The design's metadata lists each extra's requirements; ``litellm``, ``mcp`` and
``otel`` follow it exactly, so a user who installs an extra gets every package
its modules import, within the range they were built for.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The design's ``Requires-Dist`` lines of these extras.
DESIGN_EXTRAS = {
    "litellm": ["litellm>=1.104,<1.106"],
    "mcp": ["httpx2>=2.10,<3", "mcp>=2.3,<3"],
    "otel": ["opentelemetry-api>=1.20,<2"],
}


def test_the_followed_extras_pin_the_designs_ranges() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    assert {name: sorted(extras[name]) for name in DESIGN_EXTRAS} == DESIGN_EXTRAS
