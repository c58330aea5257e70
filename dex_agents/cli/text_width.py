"""How many terminal columns text takes, as the chat's key-by-key prompt lays it out.

Text is measured in units that a terminal draws as one thing and that one press
of the erase key removes whole: a character with the marks that combine with it,
the selectors that choose how it looks, and the emoji that a zero width joiner
(U+200D) or a skin tone joins to it; two regional indicators make one flag. The
widths are those of the ``wcwidth`` library's ``wcswidth`` (0.7), which terminals
that draw emoji sequences follow:

- a wide or full-width character (East Asian Width ``W`` or ``F``) takes two
  columns; a combining mark, a format character and a Hangul vowel or final
  consonant that joins a syllable take none; anything else one;
- variation selector 16 (U+FE0F) after a character that has an emoji form draws
  it as an emoji, two columns wide ("❤️", "☀️", "1️⃣"): counted as one column, the
  cursor landed a column short of where the terminal put it on a wrapped line;
- what a joiner joins, and a skin tone after an emoji, adds no column ("👩🏽‍🔬"
  takes two);
- a flag takes two columns, and so does a regional indicator left alone.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterator

_ZERO_WIDTH_JOINER = "\u200d"
_EMOJI_STYLE = "\ufe0f"  # variation selector 16
_SOFT_HYPHEN = "\u00ad"  # a format character that terminals draw

# The characters that variation selector 16 draws as a two-column emoji: the bases of
# Unicode's emoji-variation-sequences.txt whose East Asian Width is not W (the
# ``wcwidth`` library's VS16_NARROW_TO_WIDE table).
# fmt: off
_EMOJI_STYLE_WIDENS = (
    (0x0023, 0x0023), (0x002A, 0x002A), (0x0030, 0x0039), (0x00A9, 0x00A9), (0x00AE, 0x00AE),
    (0x203C, 0x203C), (0x2049, 0x2049), (0x2122, 0x2122), (0x2139, 0x2139), (0x2194, 0x2199),
    (0x21A9, 0x21AA), (0x2328, 0x2328), (0x23CF, 0x23CF), (0x23ED, 0x23EF), (0x23F1, 0x23F2),
    (0x23F8, 0x23FA), (0x24C2, 0x24C2), (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0),
    (0x25FB, 0x25FC), (0x2600, 0x2604), (0x260E, 0x260E), (0x2611, 0x2611), (0x2618, 0x2618),
    (0x261D, 0x261D), (0x2620, 0x2620), (0x2622, 0x2623), (0x2626, 0x2626), (0x262A, 0x262A),
    (0x262E, 0x262F), (0x2638, 0x263A), (0x2640, 0x2640), (0x2642, 0x2642), (0x265F, 0x2660),
    (0x2663, 0x2663), (0x2665, 0x2666), (0x2668, 0x2668), (0x267B, 0x267B), (0x267E, 0x267E),
    (0x2692, 0x2692), (0x2694, 0x2697), (0x2699, 0x2699), (0x269B, 0x269C), (0x26A0, 0x26A0),
    (0x26A7, 0x26A7), (0x26B0, 0x26B1), (0x26C8, 0x26C8), (0x26CF, 0x26CF), (0x26D1, 0x26D1),
    (0x26D3, 0x26D3), (0x26E9, 0x26E9), (0x26F0, 0x26F1), (0x26F4, 0x26F4), (0x26F7, 0x26F9),
    (0x2702, 0x2702), (0x2708, 0x2709), (0x270C, 0x270D), (0x270F, 0x270F), (0x2712, 0x2712),
    (0x2714, 0x2714), (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721), (0x2733, 0x2734),
    (0x2744, 0x2744), (0x2747, 0x2747), (0x2763, 0x2764), (0x27A1, 0x27A1), (0x2934, 0x2935),
    (0x2B05, 0x2B07), (0x1F170, 0x1F171), (0x1F17E, 0x1F17F), (0x1F321, 0x1F321),
    (0x1F324, 0x1F32C), (0x1F336, 0x1F336), (0x1F37D, 0x1F37D), (0x1F396, 0x1F397),
    (0x1F399, 0x1F39B), (0x1F39E, 0x1F39F), (0x1F3CB, 0x1F3CE), (0x1F3D4, 0x1F3DF),
    (0x1F3F3, 0x1F3F3), (0x1F3F5, 0x1F3F5), (0x1F3F7, 0x1F3F7), (0x1F43F, 0x1F43F),
    (0x1F441, 0x1F441), (0x1F4FD, 0x1F4FD), (0x1F549, 0x1F54A), (0x1F56F, 0x1F570),
    (0x1F573, 0x1F579), (0x1F587, 0x1F587), (0x1F58A, 0x1F58D), (0x1F590, 0x1F590),
    (0x1F5A5, 0x1F5A5), (0x1F5A8, 0x1F5A8), (0x1F5B1, 0x1F5B2), (0x1F5BC, 0x1F5BC),
    (0x1F5C2, 0x1F5C4), (0x1F5D1, 0x1F5D3), (0x1F5DC, 0x1F5DE), (0x1F5E1, 0x1F5E1),
    (0x1F5E3, 0x1F5E3), (0x1F5E8, 0x1F5E8), (0x1F5EF, 0x1F5EF), (0x1F5F3, 0x1F5F3),
    (0x1F5FA, 0x1F5FA), (0x1F6CB, 0x1F6CB), (0x1F6CD, 0x1F6CF), (0x1F6E0, 0x1F6E5),
    (0x1F6E9, 0x1F6E9), (0x1F6F0, 0x1F6F0), (0x1F6F3, 0x1F6F3),
)
# fmt: on
_EMOJI_STYLE_STARTS = tuple(start for start, _ in _EMOJI_STYLE_WIDENS)


def _widened_by_emoji_style(character: str) -> bool:
    code = ord(character)
    index = bisect.bisect_right(_EMOJI_STYLE_STARTS, code) - 1
    return index >= 0 and code <= _EMOJI_STYLE_WIDENS[index][1]


def _is_regional_indicator(character: str) -> bool:
    return "\U0001f1e6" <= character <= "\U0001f1ff"


def _is_symbol(character: str) -> bool:
    return unicodedata.category(character) == "So"  # as emoji are, not letters


def _is_skin_tone(character: str) -> bool:
    return "\U0001f3fb" <= character <= "\U0001f3ff"


def character_width(character: str) -> int:
    """The columns ``character`` takes on its own: 2, 1 or 0."""
    if character == _SOFT_HYPHEN:
        return 1
    if unicodedata.combining(character) or unicodedata.category(character) in ("Mn", "Me", "Cf"):
        return 0
    if "\u1160" <= character <= "\u11ff" or "\ud7b0" <= character <= "\ud7ff":
        return 0  # a Hangul vowel or final consonant: part of the syllable before it
    if _is_regional_indicator(character):
        return 2
    return 2 if unicodedata.east_asian_width(character) in ("W", "F") else 1


def units(text: str) -> Iterator[tuple[str, int]]:
    """``text`` split into what a terminal draws as one thing, each with its columns."""
    unit, width = "", 0
    joined = False  # the last character was a zero width joiner
    for character in text:
        own = character_width(character)
        if unit and (joined or own == 0):
            emoji_style = character == _EMOJI_STYLE and not joined
            if emoji_style and width == 1 and _widened_by_emoji_style(unit[0]):
                width = 2
            unit += character
        elif unit and _is_skin_tone(character) and _is_symbol(unit[0]):
            unit += character  # a skin tone of the emoji before it
        elif (
            unit
            and _is_regional_indicator(character)
            and len(unit) == 1
            and _is_regional_indicator(unit)
        ):
            unit += character  # the second half of a flag
        else:
            if unit:
                yield unit, width
            unit, width = character, own
        joined = character == _ZERO_WIDTH_JOINER
    if unit:
        yield unit, width


def display_width(text: str) -> int:
    """How many columns ``text`` takes (``units``)."""
    return sum(width for _, width in units(text))


def without_last_unit(text: str) -> str:
    """``text`` without its last unit (``units``): what one press of the erase key leaves."""
    pieces = [unit for unit, _ in units(text)]
    return text[: len(text) - len(pieces[-1])] if pieces else ""
