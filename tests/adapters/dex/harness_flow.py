"""``Toy``: a toy async Flow using every kind of state the fake-Dex harness maps.

The harness tests serve it in a real ``dex.AsyncWorker`` (see :func:`toy_registry`) and
check, field by field, what the driver decodes from the Worker's answers.
"""

from __future__ import annotations

from datetime import timedelta

import dex

STATUS = dex.Attribute("status", str, index=dex.AttributeIndex(dex.IndexType.KEYWORD))
COUNT = dex.Attribute("count", int)
TAGS = dex.Attribute("tags", list[str])
NOTES = dex.AttributeMap("notes", str)
INBOX = dex.Channel("inbox", str)
REPLIES = dex.ChannelMap("replies", str)
EVENTS = dex.Stream("events", str, stream_capacity_bytes=4096)

# An instance key that needs quoting: the physical name is "replies/k%201".
KEY = "k 1"


class BoomError(RuntimeError):
    """What the failing Step raises."""


class Recover(dex.Step[str]):
    """Reports what a retried or recovering attempt can see of its past."""

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:  # type: ignore[override]
        error = context.recovery_error
        return dex.graceful_complete(
            {
                "input": input,
                "tags": TAGS.get(context),
                "has_checkpoint": context.has_last_heartbeat_value(),
                "checkpoint": context.get_last_heartbeat_value(str),
                "recovery": None if error is None else [error.detail, error.error_type],
                "attempt": context.attempt,
                "first_attempt_at": context.first_attempt_at.isoformat(),
                "flow_id": context.flow_id,
                "run_id": context.run_id,
                "step": context.step_execution_id,
                "from": context.from_step_execution_id,
            }
        )


class Boom(dex.Step[int]):
    """Heartbeats its input, then raises."""

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:  # type: ignore[override]
        await context.heartbeat(input)
        await context.heartbeat()
        if input < 0:
            raise ValueError(f"negative {input}")
        raise BoomError(f"boom {input}")


RECOVER_OPTIONS = dex.StepOptions(
    execute_method_timeout=timedelta(minutes=2),
    heartbeat_timeout=timedelta(seconds=30),
    execute_retry=dex.RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
    execute_durability=dex.StepDurability.SYNC,
    execute_lock_attributes=(STATUS.lock(),),
    execute_load_attribute_map_instances=(NOTES.load(KEY),),
)


class Waiter(dex.Step[str]):
    """Waits for a reply on its ChannelMap instance or a Timer, then does everything once."""

    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:  # type: ignore[override]
        context.set_step_execution_local("asked", input)
        return dex.Wait.any_of(
            dex.Timer.by_duration(timedelta(minutes=5), condition_id="patience"),
            REPLIES.for_one(input, condition_id="reply"),
        )

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:  # type: ignore[override]
        status = STATUS.get(context)
        note = NOTES.get(context, input)
        replies = REPLIES.results(context, input)
        asked = context.get_step_execution_local("asked", str)
        await context.heartbeat({"status": status, "note": note, "asked": asked})
        EVENTS.write(context, f"{input}: {list(replies)} timer={context.has_timer_fired()}")
        STATUS.set(context, "answered")
        NOTES.delete(context, input)
        INBOX.publish(context, f"note was {note}")
        REPLIES.publish(context, "echo", replies[0] if replies else "none")
        context.record_event("replies", {"count": len(replies)})
        return dex.go_to_many(
            dex.StepMovement.of(Recover, "x", options=RECOVER_OPTIONS)
        ).with_canceling_steps(Boom)


class ToyFlow(dex.Flow[str]):
    """A Flow using every kind of state the harness maps."""

    def get_flow_type(self) -> str:
        return "Toy"

    def get_steps(self) -> dex.StepList[str]:
        return dex.StepList.start_step(Waiter()).other_steps(Recover(), Boom())

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return dex.PersistenceSchema.of(STATUS, COUNT, TAGS, NOTES, INBOX, REPLIES, EVENTS)

    async def handle_timeout(self, context: dex.AsyncContext) -> dex.StepDecision:  # type: ignore[override]
        return dex.force_fail(f"timed out waiting, status {STATUS.get(context)}")

    @dex.rpc(lock_attributes=(STATUS.lock(),), load_channels=(INBOX,))
    async def nudge(self, context: dex.Context, text: str) -> dex.RPCResult[int]:
        if not text:
            raise LookupError("empty nudge")
        pending = INBOX.pending_messages(context)
        for message in pending:
            INBOX.delete(context, message.message_id)
        STATUS.set(context, text)
        COUNT.set(context, COUNT.get(context) + 1)
        INBOX.publish(context, text.upper())
        REPLIES.publish(context, KEY, text)
        return dex.RPCResult(
            len(pending), next_steps=(dex.StepMovement.of(Waiter, KEY),)
        ).with_canceling_steps(Recover)


def toy_registry() -> dex.Registry:
    """A Registry serving :class:`ToyFlow`, whose handlers are async."""
    return dex.Registry([ToyFlow()], allow_async_handlers=True)
