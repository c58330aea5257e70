"""How the embedded engine writes its own bookkeeping as JSON: options, waits, results, tokens.

Movement options and wait conditions name Steps, Attributes and Channels by
their names, so any process that registered the same Flow type can read them
back after a crash.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from dex_agents.domain.canonical_json import compact_encoder
from dex_agents.ports.engine import (
    AttributeLock,
    MapLoad,
    RetryPolicy,
    Step,
    StepDurability,
    StepOptions,
)
from dex_agents.ports.errors import InvalidResumeTokenError
from dex_agents.ports.flow_rows import ExecutionRow, MessageRow
from dex_agents.ports.persistence import AttributeDef, AttributeMapDef, ChannelDef, ChannelMapDef
from dex_agents.ports.step_contexts import AttemptProgress, RecoveryError
from dex_agents.ports.step_waits import TimerCondition, Wait, WaitResult

SchemaItem = AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any]


# json.dumps(data, separators=(",", ":"), sort_keys=True), as the engine always wrote these.
_dumps = compact_encoder(sort_keys=True, ensure_ascii=True, allow_nan=True)


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _delta(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def encode_options(options: StepOptions) -> str:
    """Movement options as JSON text, naming Steps and Attributes by name."""
    retry = options.retry
    # Named only when there are some: the options of every other movement are stored as
    # before, which a worker of an earlier release reads the same.
    failure_locks = {
        "failure_locks": [[lock.attribute.name, lock.key] for lock in options.failure_locks]
    }
    return _dumps(
        {
            "execute_timeout": options.execute_timeout.total_seconds(),
            "heartbeat_timeout": options.heartbeat_timeout.total_seconds(),
            "retry": {
                "maximum_attempts": retry.maximum_attempts,
                "initial_interval": retry.initial_interval.total_seconds(),
                "backoff_coefficient": retry.backoff_coefficient,
                "maximum_interval": retry.maximum_interval.total_seconds(),
                "total_duration": _seconds(retry.total_duration),
            },
            "failure_step": None
            if options.failure_step is None
            else options.failure_step.step_type,
            "locks": [[lock.attribute.name, lock.key] for lock in options.locks],
            "loads": [[load.attribute_map.name, load.key] for load in options.loads],
            "wait_loads": [[load.attribute_map.name, load.key] for load in options.wait_loads],
            "durability": options.durability.value,
            **(failure_locks if options.failure_locks else {}),
        }
    )


def decode_options(
    text: str,
    steps: dict[str, Step[Any]],
    schema: dict[str, SchemaItem],
) -> StepOptions:
    """Read movement options back, resolving names against the registered Flow type."""
    data = json.loads(text)

    def load(pair: list[Any]) -> MapLoad:
        item = schema[pair[0]]
        if not isinstance(item, AttributeMapDef):
            raise ValueError(f"{pair[0]} is not an AttributeMap")
        return MapLoad(item, pair[1])

    def lock(pair: list[Any]) -> AttributeLock:
        item = schema[pair[0]]
        if not isinstance(item, AttributeDef | AttributeMapDef):
            raise ValueError(f"{pair[0]} is not an Attribute or AttributeMap")
        return AttributeLock(item, pair[1])

    retry = data["retry"]
    failure = data["failure_step"]
    return StepOptions(
        execute_timeout=timedelta(seconds=data["execute_timeout"]),
        heartbeat_timeout=timedelta(seconds=data["heartbeat_timeout"]),
        retry=RetryPolicy(
            maximum_attempts=retry["maximum_attempts"],
            initial_interval=timedelta(seconds=retry["initial_interval"]),
            backoff_coefficient=retry["backoff_coefficient"],
            maximum_interval=timedelta(seconds=retry["maximum_interval"]),
            total_duration=_delta(retry["total_duration"]),
        ),
        failure_step=None if failure is None else type(steps[failure]),
        locks=tuple(lock(pair) for pair in data["locks"]),
        loads=tuple(load(pair) for pair in data["loads"]),
        wait_loads=tuple(load(pair) for pair in data["wait_loads"]),
        durability=StepDurability(data["durability"]),
        # Options stored before 2026-12-07 name none.
        failure_locks=tuple(lock(pair) for pair in data.get("failure_locks", ())),
    )


def encode_wait(wait: Wait, started_at: datetime) -> tuple[str, datetime | None]:
    """A wait's conditions as JSON text, with Timers as absolute instants; and the earliest one."""
    conditions: list[dict[str, Any]] = []
    earliest: datetime | None = None
    for condition in wait.conditions:
        if isinstance(condition, TimerCondition):
            fire_at = started_at + condition.duration
            earliest = fire_at if earliest is None else min(earliest, fire_at)
            conditions.append({"timer": fire_at.isoformat()})
        else:
            conditions.append(
                {"channel": condition.channel.name, "key": condition.key, "count": condition.count}
            )
    return _dumps(conditions), earliest


def decode_wait(text: str) -> list[dict[str, Any]]:
    """The stored conditions, in their original order."""
    conditions: list[dict[str, Any]] = json.loads(text)
    return conditions


def condition_fire_at(condition: dict[str, Any]) -> datetime | None:
    """When a stored Timer condition fires, or ``None`` for a Channel condition."""
    value = condition.get("timer")
    return None if value is None else datetime.fromisoformat(value)


def encode_wait_result(
    index: int | None,
    timer_fired: bool,
    channel: str | None = None,
    taken: Sequence[MessageRow] = (),
) -> str:
    """What ended a wait: the condition's index, whether a Timer fired, the messages it took.

    Each taken message keeps its sequence, ID and time besides its value, so RPCs
    can still list it as waiting until the Step that took it commits
    (``taken_messages``).
    """
    return _dumps(
        {
            "index": index,
            "timer_fired": timer_fired,
            "channel": channel,
            "messages": [message.value for message in taken],
            "taken": [
                [message.seq, message.message_id, message.key, message.created_at.isoformat()]
                for message in taken
            ],
        }
    )


def taken_messages(row: ExecutionRow) -> list[MessageRow]:
    """The Channel messages an execution's ended wait took, oldest first.

    Wait results written before the engine kept this list yield none.
    """
    if row.wait_result is None:
        return []
    data = json.loads(row.wait_result)
    channel = data.get("channel")
    if channel is None:
        return []
    return [
        MessageRow(seq, row.flow_id, channel, key, message_id, value, datetime.fromisoformat(at))
        for (seq, message_id, key, at), value in zip(
            data.get("taken", []), data["messages"], strict=False
        )
    ]


def decode_wait_result(text: str | None, decode_message: Callable[[str, str], Any]) -> WaitResult:
    """Read a wait result back; ``decode_message(channel, text)`` decodes each message."""
    if text is None:
        return WaitResult()
    data = json.loads(text)
    channel = data.get("channel")
    messages = tuple(decode_message(channel, message) for message in data["messages"])
    return WaitResult(
        condition_index=data["index"], timer_fired=data["timer_fired"], messages=messages
    )


def encode_recovery(error: RecoveryError) -> str:
    """A recovery error as JSON text, for the failure route execution."""
    return _dumps(
        {
            "detail": error.detail,
            "error_type": error.error_type,
            "attempt_progress": error.attempt_progress.value,
        }
    )


def decode_recovery(text: str | None) -> RecoveryError | None:
    """Read a recovery error back."""
    if text is None:
        return None
    data = json.loads(text)
    return RecoveryError(
        detail=data["detail"],
        error_type=data["error_type"],
        attempt_progress=AttemptProgress(data["attempt_progress"]),
    )


_MOST_TOKENS_KEPT = 4096
"""How many resume tokens this process made are kept with what they name, to read back."""

_LARGEST_EVENT_ID = 2**63 - 1
"""The largest ID SQLite can give an event (its largest INTEGER)."""

# Token -> (session, event ID), of tokens this process made: a Stream reader hands back the
# token of the event it was given, several times a turn, and decoding it (base64, then JSON)
# cost as much as the read that served the event. Emptied when full.
_made_tokens: dict[str, tuple[str, int]] = {}


def encode_resume_token(flow_id: str, event_id: int) -> str:
    """An opaque Stream resume token that names its session, so another session's is refused."""
    # The compact JSON of [flow_id, event_id], as tokens always were.
    raw = f"[{json.dumps(flow_id)},{int(event_id)}]".encode()
    token = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    if len(_made_tokens) >= _MOST_TOKENS_KEPT:
        _made_tokens.clear()
    _made_tokens[token] = (flow_id, event_id)
    return token


def decode_resume_token(flow_id: str, token: str) -> int:
    """The event ID a token resumes after; ``InvalidResumeTokenError`` for any other token."""
    if not isinstance(token, str):
        # It failed with "object of type 'NoneType' has no len()".
        raise TypeError(f"resume_token must be a string, not {type(token).__name__}")
    if token == "":
        return 0
    named, event_id = _made_tokens.get(token) or _token_parts(token)
    if named != flow_id:
        raise InvalidResumeTokenError(f"the resume token belongs to another session, not {flow_id}")
    return event_id


def _token_parts(token: str) -> tuple[object, int]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error, RecursionError) as error:
        # RecursionError: JSON nested deeper than the parser goes, as no token is.
        raise InvalidResumeTokenError(f"malformed stream resume token {_shown(token)}") from error
    if (
        not isinstance(data, list)
        or len(data) != 2
        or not isinstance(data[1], int)
        or isinstance(data[1], bool)
        # Event IDs are SQLite integers from 1; 0 is the Stream's start, as "" is.
        or not 0 <= data[1] <= _LARGEST_EVENT_ID
    ):
        raise InvalidResumeTokenError(f"malformed stream resume token {_shown(token)}")
    return data[0], int(data[1])


def _shown(token: str) -> str:
    # A page's token is short; one of megabytes was echoed whole into the error and its logs.
    if len(token) <= _SHOWN_TOKEN_CHARS:
        return repr(token)
    return f"{token[:_SHOWN_TOKEN_CHARS]!r}... ({len(token)} characters)"


_SHOWN_TOKEN_CHARS = 100
