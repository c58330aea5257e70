"""Runs every case of every ``conformance/*.json`` file against this implementation.

Each case file names its rule in ``"rule"``; a module in
``tests/conformance/runners`` with the same ``RULE`` turns a case's ``input`` into
the value the case ``expect``\\ s. A file without a runner, or a runner without a
file, fails the suite, and files are collected by path, not by rule, so a second
file of one rule (an old version kept readable) runs too: no case file is
silently skipped.
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


def case_files(directory: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` case file in ``directory`` by file name."""
    # Keyed by rule, a second file of one rule replaced the first, whose cases then
    # never ran, a broken one included.
    return {
        path.name: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(directory.glob("*.json"))
    }


def case_params(files: dict[str, dict[str, Any]]) -> list[Any]:
    """One ``(rule, case)`` parameter per case of every file, with its file and name as ID."""
    return [
        pytest.param(document["rule"], case, id=f"{Path(name).stem}:{case['name']}")
        for name, document in files.items()
        for case in document["cases"]
    ]


RUNNERS = _runner_modules()
FILES = case_files(CONFORMANCE_DIR)
CASES = case_params(FILES)


def test_every_case_file_has_a_runner_and_every_runner_a_file() -> None:
    assert {document["rule"] for document in FILES.values()} == set(RUNNERS)


def test_case_names_are_unique_per_file() -> None:
    for name, document in FILES.items():
        names = [case["name"] for case in document["cases"]]
        assert len(names) == len(set(names)), name


def test_two_files_of_one_rule_both_run(tmp_path: Path) -> None:
    for name, expect in (("sequence_keys.json", "000000000001"), ("sequence_keys_v0.json", "1")):
        case = {"name": "sequence 1", "input": {"sequence": 1}, "expect": {"key": expect}}
        document = {"rule": "sequence_keys", "cases": [case]}
        (tmp_path / name).write_text(json.dumps(document), encoding="utf-8")
    params = case_params(case_files(tmp_path))
    assert [param.id for param in params] == [
        "sequence_keys:sequence 1",
        "sequence_keys_v0:sequence 1",
    ]
    # The old file's case is wrong for this implementation, and it runs, so it fails.
    results = [
        RUNNERS[rule].run(case["input"]) == case["expect"]
        for rule, case in (param.values for param in params)
    ]
    assert results == [True, False]


@pytest.mark.parametrize(("rule", "case"), CASES)
def test_conformance_case(rule: str, case: dict[str, Any]) -> None:
    assert RUNNERS[rule].run(case["input"]) == case["expect"]
