"""The built-in agent loop's public names (``dex_agents.builtin_loop``).

For now this holds the model-client contract the loop is written against:
``ModelClient``, the ``ModelRequest`` it receives, the ``ModelResponse`` it
returns and the ``ModelOutputWriter`` it streams live text to, the scripted
model client that answers without a model key, function tools
(``@function_tool``, ``ToolCallContext``, ``FunctionToolResult``), the media
stores, and the turn continuation values. ``AgentDefinition`` and the runner
arrive with the rest of the built-in loop.
"""

from dex_agents.adapters.media.local_directory import LocalDirectoryMediaStore
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.app.builtin_loop.function_tools import (
    FunctionTool,
    FunctionToolResult,
    ToolCallContext,
    function_tool,
)
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolChoice,
    ModelToolDefinition,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.turns import ContinueTurn, TurnContinuation
from dex_agents.ports.model_client import ModelClient, ModelOutputWriter

__all__ = [
    "ContinueTurn",
    "FunctionTool",
    "FunctionToolResult",
    "InMemoryMediaStore",
    "LocalDirectoryMediaStore",
    "ModelClient",
    "ModelInputItem",
    "ModelOutputItem",
    "ModelOutputWriter",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "ModelToolChoice",
    "ModelToolDefinition",
    "ScriptedModelClient",
    "ScriptedModelReply",
    "ScriptedToolCall",
    "ToolCallContext",
    "ToolResultItem",
    "TurnContinuation",
    "UserTextItem",
    "function_tool",
]
