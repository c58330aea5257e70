"""Token usage of model calls, per call and as the session total (``AgentUsage``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class AgentUsage:
    """Usage of one or more model calls. ``+`` adds two usages field by field."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: AgentUsage) -> AgentUsage:
        return AgentUsage(
            model_calls=self.model_calls + other.model_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


_COUNTS = tuple(field.name for field in attrs.fields(AgentUsage))


def check_model_call_usage(usage: object, where: str) -> AgentUsage:
    """Return ``usage`` when it is an ``AgentUsage`` whose counts are all ints.

    Raises ``TypeError`` naming ``where`` (such as ``"TurnCompleted.usage"``) and
    the field otherwise: ``None``, or a count that is ``None``, a float or a bool.
    The session adds the usage to its ``AgentUsage`` total and writes it in a
    ``usage_recorded`` event, and a float or bool count would be stored as JSON
    that no longer decodes as an ``AgentUsage``: every later snapshot, model call
    and read of the event Stream would fail.
    """
    if not isinstance(usage, AgentUsage):
        raise TypeError(f"{where} must be an AgentUsage, not {type(usage).__name__}")
    for name in _COUNTS:
        count = getattr(usage, name)
        if type(count) is not int:
            raise TypeError(f"{where}.{name} must be an int, not {type(count).__name__}")
    return usage
