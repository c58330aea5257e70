"""Runs every case of every ``conformance/*.json`` file against this implementation.

Each case file names its rule in ``"rule"``; a module in
``tests/conformance/runners`` with the same ``RULE`` turns a case's ``input`` into
the value the case ``expect``\\ s. A file without a runner, or a runner without a
file, fails the suite, so no case file is silently skipped.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conformance import runners

CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / "conformance"


def _runner_modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(runners.__path__):
        module = importlib.import_module(f"{runners.__name__}.{info.name}")
        found[module.RULE] = module
    return found


def _case_files() -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(CONFORMANCE_DIR.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        files[document["rule"]] = document
    return files


RUNNERS = _runner_modules()
FILES = _case_files()
CASES = [
    pytest.param(rule, case, id=f"{rule}:{case['name']}")
    for rule, document in FILES.items()
    for case in document["cases"]
]


def test_every_case_file_has_a_runner_and_every_runner_a_file() -> None:
    assert set(FILES) == set(RUNNERS)


def test_case_names_are_unique_per_file() -> None:
    for rule, document in FILES.items():
        names = [case["name"] for case in document["cases"]]
        assert len(names) == len(set(names)), rule


@pytest.mark.parametrize(("rule", "case"), CASES)
def test_conformance_case(rule: str, case: dict[str, Any]) -> None:
    assert RUNNERS[rule].run(case["input"]) == case["expect"]
