"""The built-in agent loop (``dex_agents.builtin_loop``): agents defined without a framework.

``AgentDefinition`` names an agent's instructions, model, function tools and
built-in tools; ``builtin_agent_session_flow`` turns it into an
``AgentSessionFlow`` whose ``BuiltinLoopAgentRunner`` makes exactly one model
call per ``RunModel``. ``@function_tool`` derives a tool's JSON Schema from type
hints; ``ScriptedModelClient`` answers without a model key; the media stores keep
image bytes; ``AgentDefinition.tool_sources`` offers tools listed at run time,
and ``FrameworkToolSourceRouter`` gives framework adapters the same sources.
``dex_agents.litellm.LiteLLMModelClient`` (the ``litellm`` extra) calls real models.
"""

from dex_agents.adapters.media.local_directory import LocalDirectoryMediaStore
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.app.builtin_loop.definition import (
    AgentDefinition,
    InstructionContext,
    TurnContinuationContext,
)
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import (
    FunctionTool,
    FunctionToolResult,
    ToolCallContext,
    function_tool,
)
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.app.builtin_loop.source_router import FrameworkToolSourceRouter
from dex_agents.app.builtin_loop.tool_sources import (
    DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT,
    SOURCE_TOOL_NOT_OFFERED_RESULT,
    SourceToolListing,
)
from dex_agents.composition.builtin_flow import builtin_agent_session_flow
from dex_agents.domain.listed_tools import ListedTool
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
from dex_agents.ports.tool_source import ToolSource

__all__ = [
    "DEFAULT_TOOL_SOURCE_LISTING_TIMEOUT",
    "SOURCE_TOOL_NOT_OFFERED_RESULT",
    "AgentDefinition",
    "BuiltinLoopAgentRunner",
    "ContinueTurn",
    "FrameworkToolSourceRouter",
    "FunctionTool",
    "FunctionToolResult",
    "InMemoryMediaStore",
    "InstructionContext",
    "ListedTool",
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
    "SourceToolListing",
    "ToolCallContext",
    "ToolResultItem",
    "ToolSource",
    "TurnContinuation",
    "TurnContinuationContext",
    "UserTextItem",
    "builtin_agent_session_flow",
    "builtin_agent_session_options",
    "function_tool",
]
