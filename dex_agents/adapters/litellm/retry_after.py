"""How long a provider asked to wait before the same request: its ``Retry-After``.

A provider that refuses a call for now (a 429, a 503) may say when to come
back: ``retry-after-ms`` (OpenAI, Azure) in milliseconds, or ``Retry-After`` in
seconds or as an HTTP date (RFC 9110). A date is read against the answer's own
``Date`` header when it has one, so a clock that differs from the provider's
does not change the wait. ``errors.translate_error`` finds the headers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return value if isinstance(value, str) else None


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _date(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_retry_after(headers: Mapping[str, str], now: datetime) -> timedelta | None:
    """The wait ``headers`` ask for, or ``None`` when they ask for none or for none ahead.

    ``retry-after-ms`` wins over ``retry-after``; an HTTP date counts from the
    ``date`` header, else from ``now``.
    """
    milliseconds = _header(headers, "retry-after-ms")
    if milliseconds is not None:
        value = _seconds(milliseconds.strip())
        if value is not None:
            return _wait(value / 1000)
    text = _header(headers, "retry-after")
    if text is None:
        return None
    seconds = _seconds(text.strip())
    if seconds is None:
        moment = _date(text)
        if moment is None:
            return None
        seconds = (moment - (_date(_header(headers, "date")) or now)).total_seconds()
    return _wait(seconds)


def _wait(seconds: float) -> timedelta | None:
    if seconds <= 0:
        return None
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        # Longer than timedelta holds: still a wait, the longest there is, so the retry
        # budget refuses it and the turn fails, instead of calling again at once.
        return timedelta.max


def describe_wait(delay: timedelta) -> str:
    """``retry after 20 seconds``, rounded up to whole seconds."""
    seconds = max(1, math.ceil(delay.total_seconds()))
    return f"retry after {seconds} second{'s' if seconds != 1 else ''}"
