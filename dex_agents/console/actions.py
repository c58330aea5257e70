"""The console's controls: one JSON body in, one session RPC, and a reason for every ``False``.

Each control names the ``AgentSessionClient`` method it calls. A ``False``
answer is not an error: the session decided (an approval already answered, a
message no longer queued), and the browser shows ``reason``. A body that does
not fit the control is ``ControlInputError`` (answer 400).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dex_agents.composition.session_client import AgentSessionClient
from dex_agents.ports.errors import ChannelMessageNotFoundError


class ControlInputError(ValueError):
    """A control's JSON body is missing a field or has one of the wrong type."""


@dataclass(frozen=True)
class ControlOutcome:
    """What a control did: ``ok`` is the RPC's answer, ``reason`` says why it was ``False``."""

    ok: bool
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        """The outcome as the browser reads it."""
        return {"ok": self.ok, "reason": self.reason}


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ControlInputError(f"{key} must be a string")
    return value


def _optional_text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ControlInputError(f"{key} must be a string")
    return value


def _flag(body: Mapping[str, Any], key: str, *, required: bool = False) -> bool:
    if required and key not in body:
        # A missing decision must not read as "no": {"approve": true} rejected the write.
        raise ControlInputError(f"{key} is required: true or false")
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise ControlInputError(f"{key} must be true or false")
    return value


def _whole(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ControlInputError(f"{key} must be a whole number")
    return value


Control = Callable[[AgentSessionClient, str, Mapping[str, Any]], Awaitable[bool]]


async def _send(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    text, plan_mode = _text(body, "text"), _flag(body, "plan_mode")
    return await client.send_user_message(session_id, text, plan_mode=plan_mode)


async def _steer(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.steer_user_message(
        session_id,
        message_id=_optional_text(body, "message_id"),
        text=_optional_text(body, "text"),
        plan_mode=_flag(body, "plan_mode"),
    )


async def _delete(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.delete_queued_message(session_id, _text(body, "message_id"))


async def _cancel(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.cancel_turn(session_id, _text(body, "turn_id"))


async def _resolve(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.resolve_interrupt(
        session_id,
        _text(body, "interrupt_id"),
        _flag(body, "approved", required=True),
        _optional_text(body, "rejection_message"),
    )


async def _answer(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.answer_question(
        session_id, _text(body, "interrupt_id"), _text(body, "answer")
    )


async def _execute(client: AgentSessionClient, session_id: str, body: Mapping[str, Any]) -> bool:
    return await client.execute_plan(session_id, _whole(body, "revision"))


CONTROLS: Mapping[str, tuple[Control, str]] = {
    "send_user_message": (
        _send,
        "the session did not accept the message (blank, or plan mode is off)",
    ),
    "steer_user_message": (
        _steer,
        "nothing was steered: the message is no longer queued, the text is blank, "
        "plan mode is off, or the turn does not accept steering",
    ),
    "delete_queued_message": (_delete, "that message is no longer queued"),
    "cancel_turn": (_cancel, "that turn is no longer active, or it does not accept cancellation"),
    "resolve_interrupt": (
        _resolve,
        "already answered, past its deadline, or no longer pending",
    ),
    "answer_question": (
        _answer,
        "already answered, past its deadline, or not an allowed answer",
    ),
    "execute_plan": (
        _execute,
        "the plan cannot run now: it changed, it already runs, or the session is busy",
    ),
}
"""Every control by name: the call, and what a ``False`` answer means."""


async def run_control(
    name: str, client: AgentSessionClient, session_id: str, body: Mapping[str, Any]
) -> ControlOutcome:
    """Run control ``name``; ``KeyError`` for a name that is not one."""
    control, refusal = CONTROLS[name]
    try:
        ok = await control(client, session_id, body)
    except ChannelMessageNotFoundError:
        return ControlOutcome(
            ok=False, reason="the session took that message while you acted: look again"
        )
    except TypeError as error:
        raise ControlInputError(str(error)) from error
    return ControlOutcome(ok=True) if ok else ControlOutcome(ok=False, reason=refusal)
