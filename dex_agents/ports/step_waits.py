"""What a Step's wait phase returns and what ended the wait: Channel and Timer conditions.

A Step's ``wait_for`` (``dex_agents.ports.engine.Step``) returns a ``Wait`` on
conditions built with ``for_one``, ``for_n``, ``for_one_in`` and ``timer``; its
execute phase then sees the ``WaitResult``: which condition ended the wait, and
the messages it consumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dex_agents.ports.persistence import ChannelDef, ChannelMapDef


@dataclass(frozen=True)
class ChannelCondition:
    """Wait until ``count`` messages wait in a Channel (``key`` ``None``) or one
    ChannelMap instance, then consume exactly ``count`` of them, oldest first."""

    channel: ChannelDef[Any] | ChannelMapDef[Any]
    count: int = 1
    key: str | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"a channel condition waits for at least 1 message, not {self.count}")
        if isinstance(self.channel, ChannelMapDef) != (self.key is not None):
            raise ValueError(
                f"{self.channel.name}: a ChannelMap condition needs an instance key, "
                "and a Channel condition takes none"
            )


@dataclass(frozen=True)
class TimerCondition:
    """Wait until ``duration`` has passed since the wait began. A zero Timer fires at once."""

    duration: timedelta

    def __post_init__(self) -> None:
        if self.duration < timedelta(0):
            raise ValueError(f"a timer duration cannot be negative: {self.duration}")


Condition = ChannelCondition | TimerCondition


def for_one(channel: ChannelDef[Any]) -> ChannelCondition:
    """Wait for one message of a Channel."""
    return ChannelCondition(channel, 1)


def for_n(channel: ChannelDef[Any], count: int) -> ChannelCondition:
    """Wait for ``count`` messages of a Channel."""
    return ChannelCondition(channel, count)


def for_one_in(channel_map: ChannelMapDef[Any], key: str) -> ChannelCondition:
    """Wait for one message of one ChannelMap instance."""
    return ChannelCondition(channel_map, 1, key)


def timer(duration: timedelta) -> TimerCondition:
    """Wait for a durable Timer."""
    return TimerCondition(duration)


@dataclass(frozen=True)
class Wait:
    """What a Step's wait phase waits on: the first of ``conditions`` to be ready.

    When several are ready at once, Timers win, then Channels in argument order,
    as in Dex. Only the selected Channel condition consumes messages. An empty
    ``conditions`` skips the wait.
    """

    conditions: tuple[Condition, ...]

    @classmethod
    def until(cls, condition: Condition) -> Wait:
        """Wait for one condition."""
        return cls((condition,))

    @classmethod
    def any_of(cls, *conditions: Condition) -> Wait:
        """Wait for the first ready condition."""
        if not conditions:
            raise ValueError("Wait.any_of needs at least one condition")
        return cls(tuple(conditions))

    @classmethod
    def skip(cls) -> Wait:
        """Run execute at once."""
        return cls(())


@dataclass(frozen=True)
class WaitResult:
    """Which condition ended the wait, and the messages it consumed."""

    condition_index: int | None = None
    timer_fired: bool = False
    messages: tuple[Any, ...] = ()
