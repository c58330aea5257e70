"""What a function tool returns, as the ``ToolExecutionResult`` the session stores.

A ``str`` is the output; a ``FunctionToolResult`` adds the images the tool
uploaded to the runner's media store; a ``ToolInputRequested`` asks the user;
anything else is serialized as JSON (dataclasses as objects, enums as their
values). Images need the runner's store, and each must be one of its images: the
runner reads them again from that store for every later model call. A tool
source's images are checked against it too (``require_own_images``).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Sequence
from typing import Any

import attrs

from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.images import (
    AgentImageReference,
    require_images_of_store,
    validate_image_references,
)
from dex_agents.domain.messages import image_tuple
from dex_agents.domain.runner_outcomes import ToolExecutionResult, ToolInputRequested
from dex_agents.ports.media_store import MediaStore


@attrs.frozen
class FunctionToolResult:
    """A function tool's text for the model with the images it uploaded.

    The runner returns it as ``ToolExecutionResult(output, images)``. A plain
    ``dict`` with ``output`` and ``images`` keys is serialized as JSON instead.
    """

    output: str = attrs.field(validator=attrs.validators.instance_of(str))
    images: tuple[AgentImageReference, ...] = attrs.field(default=(), converter=image_tuple)


def require_own_images(
    tool_name: str, images: Sequence[AgentImageReference], store_uri: str
) -> None:
    """Raise ``ImageValidationError`` for the first image not in the store at ``store_uri``.

    A reference of another store would fail every later turn of the session; it
    fails the tool attempt instead, as an invalid reference does.
    """
    require_images_of_store(images, store_uri, source=f"tool {tool_name} returned")


def _result_default(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {item.name: getattr(value, item.name) for item in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def function_tool_result(
    tool_name: str, result: object, media_store: MediaStore | None
) -> ToolExecutionResult | ToolInputRequested:
    """The tool step's outcome for what the function tool ``tool_name`` returned.

    Raises ``ToolExecutionError`` for images without a media store,
    ``ImageValidationError`` for an invalid image or one of another store, and
    ``TypeError`` for a result that is not JSON serializable.
    """
    if isinstance(result, str):
        return ToolExecutionResult(result)
    if isinstance(result, ToolInputRequested):
        return result
    if isinstance(result, FunctionToolResult):
        if result.images and media_store is None:
            raise ToolExecutionError(
                f"tool {tool_name} returned {len(result.images)} images, but the runner "
                "has no media store to show them to the model"
            )
        images = validate_image_references(result.images)
        if media_store is not None:
            require_own_images(tool_name, images, media_store.store_uri)
        return ToolExecutionResult(result.output, images)
    try:
        output = json.dumps(
            result,
            sort_keys=False,
            ensure_ascii=False,
            allow_nan=False,
            default=_result_default,
        )
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"tool {tool_name} returned a result that is not JSON serializable: {error}"
        ) from error
    return ToolExecutionResult(output)
