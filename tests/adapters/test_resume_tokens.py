"""Stream resume tokens: what a token names, read back from the tokens this process made or
from the token's own text, and every other token refused."""

from __future__ import annotations

import base64
import json

import pytest

from dex_agents.adapters.local import codec
from dex_agents.adapters.local.codec import decode_resume_token, encode_resume_token
from dex_agents.ports.errors import InvalidResumeTokenError


def _made_elsewhere(data: object) -> str:
    """A token as another process (or this one, before a restart) made it: JSON in base64."""
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@pytest.mark.parametrize(
    ("session", "event_id"),
    [("session-1", 0), ("session-1", 1), ("séance «2»", 2**53), ('quote"s', 42)],
)
def test_a_token_reads_back_as_its_event_here_and_in_another_process(
    session: str, event_id: int
) -> None:
    token = encode_resume_token(session, event_id)
    # The text is what tokens always were, so tokens handed out before still read.
    assert token == _made_elsewhere([session, event_id])
    assert decode_resume_token(session, token) == event_id
    codec._made_tokens.clear()  # as in a process that did not make it
    assert decode_resume_token(session, token) == event_id


@pytest.mark.parametrize("made_here", [True, False], ids=["made here", "made elsewhere"])
def test_another_sessions_token_is_refused(made_here: bool) -> None:
    token = encode_resume_token("session-1", 7)
    if not made_here:
        codec._made_tokens.clear()
    with pytest.raises(InvalidResumeTokenError, match="belongs to another session"):
        decode_resume_token("session-2", token)


@pytest.mark.parametrize(
    "token",
    [
        "!!not base64!!",
        _made_elsewhere({"session": "session-1", "id": 1}),
        _made_elsewhere(["session-1", True]),
        _made_elsewhere(["session-1", "1"]),
        _made_elsewhere(["session-1", 1, 2]),
        _made_elsewhere(["session-1"]),
        base64.urlsafe_b64encode(b"\xff\xfe").decode("ascii"),
        _made_elsewhere(["session-1", -5]),
        _made_elsewhere(["session-1", 2**63]),
        _made_elsewhere(["session-1", 2**70]),
        base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode("ascii"),
    ],
    ids=[
        "not base64",
        "an object",
        "a bool",
        "text",
        "three items",
        "one item",
        "not UTF-8",
        "a negative ID",
        "an ID past SQLite's integers",
        "a huge ID",
        "nested too deep",
    ],
)
def test_a_malformed_token_is_refused(token: str) -> None:
    with pytest.raises(InvalidResumeTokenError, match="malformed stream resume token"):
        decode_resume_token("session-1", token)


def test_a_long_malformed_token_is_shown_shortened() -> None:
    # It was echoed whole: a token of a megabyte made an error message of a megabyte.
    token = "x" * 1_000_000
    with pytest.raises(InvalidResumeTokenError) as refused:
        decode_resume_token("session-1", token)
    assert str(refused.value) == (
        f"malformed stream resume token {'x' * 100!r}... (1000000 characters)"
    )


@pytest.mark.parametrize("token", [None, 5])
def test_a_token_that_is_not_text_is_a_type_error_naming_it(token: object) -> None:
    # It failed with "object of type 'NoneType' has no len()".
    with pytest.raises(TypeError, match=r"^resume_token must be a string, not "):
        decode_resume_token("session-1", token)  # type: ignore[arg-type]


def test_an_empty_token_is_the_streams_start() -> None:
    assert decode_resume_token("session-1", "") == 0


def test_the_tokens_kept_are_bounded_and_an_early_one_still_reads() -> None:
    first = encode_resume_token("session-1", 1)
    for event_id in range(2, codec._MOST_TOKENS_KEPT + 2):
        encode_resume_token("session-1", event_id)
    assert len(codec._made_tokens) <= codec._MOST_TOKENS_KEPT
    assert first not in codec._made_tokens
    assert decode_resume_token("session-1", first) == 1
