"""Token estimates: three UTF-8 bytes per token, rounding up."""

from __future__ import annotations

import pytest

from dex_agents.domain.token_estimates import estimate_text_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abc", 1),
        ("abcd", 2),
        ("abcdef", 2),
        ("é", 1),  # 2 bytes
        ("ééé", 2),  # 6 bytes
        ("€", 1),  # 3 bytes
        ("😀", 2),  # 4 bytes
        ("日本語", 3),  # 9 bytes
        ("日本語a", 4),  # 10 bytes
    ],
)
def test_three_utf8_bytes_per_token_rounding_up(text: str, tokens: int) -> None:
    assert estimate_text_tokens(text) == tokens
