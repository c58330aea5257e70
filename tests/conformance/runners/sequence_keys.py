"""Runner of ``conformance/sequence_keys.json``: ``message_sequence_key`` and its inverse."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.windowing import message_sequence_key, parse_message_sequence_key

RULE = "sequence_keys"


def run(case_input: dict[str, Any]) -> Any:
    """Key a sequence, or parse a key; a refused value gives ``{"refused": true}``."""
    try:
        if "sequence" in case_input:
            return {"key": message_sequence_key(case_input["sequence"])}
        return {"sequence": parse_message_sequence_key(case_input["key"])}
    except ValueError:
        return {"refused": True}
