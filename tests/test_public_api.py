"""The spec's public names are importable where the spec puts them, each with a docstring."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
from types import ModuleType

import pytest

# Importing LiteLLM fetches its model cost map over the network unless this is set, as
# tests/adapters/litellm/conftest.py does for its own tests.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dex_agents
import dex_agents.adapters.dex
import dex_agents.app
import dex_agents.app.builtin_loop
import dex_agents.builtin_loop
import dex_agents.composition
import dex_agents.domain
import dex_agents.ports
import dex_agents.testing

# The names the foundation issue lists, by the module the spec puts them in.
SPEC_NAMES: dict[str, tuple[str, ...]] = {
    "dex_agents": (
        "AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE",
        "session_flow_definition_document",
        "AgentSessionFlow",
        "AgentSessionClient",
        "AgentSessionOptions",
        "AgentState",
        "AgentMessage",
        "FrameworkMessage",
        "AgentToolCall",
        "AgentInterrupt",
        "AgentInterruptResolution",
        "AgentPlan",
        "AgentUsage",
        "ContextSummary",
        "AgentMessageIndex",
        "AgentMessageChunk",
        "AgentUserMessage",
        "AgentSnapshot",
        "AgentMessagesPage",
        "AgentEvent",
        "AgentEventType",
        "ExecutePlanRequest",
        "SteerUserMessageRequest",
        "DeleteQueuedMessageRequest",
        "CancelTurnRequest",
        "ResolveInterruptRequest",
        "AnswerQuestionRequest",
        "ListAgentMessagesRequest",
        "ToolEffect",
        "ToolPolicy",
        "is_approval_required",
        "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
        "TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL",
        "MAX_CONSECUTIVE_TURN_CONTINUATIONS",
        "TURN_CONTINUATION_LIMIT_ERROR",
        "describe_tool_call_outcome",
        "build_turn_failure_note",
        "OUTCOME_UNKNOWN_TOOL_RESULT",
        "MISSING_TOOL_TASK_POLLER",
        "message_sequence_key",
        "CompactionPolicy",
        "estimate_text_tokens",
        "estimate_stored_input_tokens",
        "select_turn_boundary_cutoff",
        "build_context_summary_prompt",
        "build_context_summary_omission_note",
        "CONTEXT_SUMMARY_NOTE_HEADER",
        "CONTEXT_SUMMARY_TRANSCRIPT_HEADER",
        "CONTEXT_SUMMARY_INSTRUCTIONS",
        "build_plan_note",
        "BuiltInTool",
        "BUILT_IN_TOOL_DEFINITIONS",
        "validate_session_settings",
        "session_settings_size",
        "MAX_SESSION_SETTINGS_BYTES",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
        "INVALID_START_SESSION_SETTINGS_REASON",
        "AgentImageReference",
        "verify_image_bytes",
        "validate_image_reference",
        "validate_image_references",
        "build_image_reference",
        "require_short_image_uris",
        "require_store_image_reference",
        "MAX_IMAGE_BYTES",
        "MAX_IMAGES_PER_MESSAGE",
        "MAX_IMAGE_URI_LENGTH",
        "ImageValidationError",
        "MediaStoreError",
        "IDEMPOTENCY_KEY_META_KEY",
        "TOOL_EFFECT_META_KEY",
        "TOOL_APPROVAL_META_KEY",
        "TOOL_OUTCOME_META_KEY",
        "ToolSource",
        "MediaStore",
        "AgentFrameworkRunner",
        "UnfinishedTurnMessageBuilder",
        "ImageUserMessageBuilder",
        "ToolCallStepOptionsProvider",
        "ToolTaskPoller",
        "ToolTaskCanceller",
        "ContextCompactionRunner",
        "PlanModeRunner",
        "AgentTurnContext",
        "TurnCompleted",
        "ToolCallsRequested",
        "TurnContinued",
        "DeferredToolCall",
        "DeferredToolExecution",
        "ToolExecutionResult",
        "ToolInputRequested",
        "ToolTaskStarted",
        "ToolTaskPending",
        "ToolExecutionError",
        "ToolOutcomeUnknownError",
        "ModelSpendLimit",
        "ModelCallMetadata",
        "ContextSummaryResult",
        "AGENT_STATE",
        "AGENT_MESSAGES",
        "AgentSessionFlow",
        "AgentSessionOptions",
        "AgentSessionClient",
        "AgentTracingOptions",
        "GenAISemanticConventionsVersion",
        "AGENT_TRACE_CONTEXT",
        "BuiltInTool",
        "session_flow_definition_document",
    ),
    "dex_agents.builtin_loop": (
        "AgentDefinition",
        "builtin_agent_session_flow",
        "FrameworkToolSourceRouter",
        "function_tool",
        "FunctionToolResult",
        "ToolCallContext",
        "ScriptedModelClient",
        "ScriptedModelReply",
        "ScriptedToolCall",
        "InMemoryMediaStore",
        "LocalDirectoryMediaStore",
        "ModelClient",
        "ModelRequest",
        "ModelResponse",
        "ModelOutputWriter",
        "ContinueTurn",
        "TurnContinuation",
    ),
    # The remaining modules of the spec's module table. ``dex_agents.connectors`` is not
    # here: without the Connector SDK its import raises the ImportError that names what to
    # install (tests/adapters/connectors/test_import_without_sdk.py).
    "dex_agents.litellm": ("LiteLLMModelClient",),
    "dex_agents.mcp": ("McpStdioServerConfig", "McpStreamableHttpServerConfig", "McpToolSource"),
    "dex_agents.s3": ("S3MediaStore",),
    "dex_agents.ui_stream": (
        "AGENT_EVENT_STREAM_HEADERS",
        "InvalidAgentEventResumeTokenError",
        "read_agent_event_stream_snapshot",
        "read_agent_event_stream_snapshot_sync",
        "stream_agent_event_frames",
        "stream_agent_event_frames_sync",
    ),
    "dex_agents.testing": (
        "AgentTestStack",
        "EXECUTE_COMPLETED_EVENT",
        "run_agent_worker",
        "wait_for_agent_snapshot",
        "FileGate",
        "InvocationLog",
        "read_step_history",
        "StepHistoryEntry",
        "wait_until",
        "ScriptedModelClient",
        "ContextWindowSessionScenario",
    ),
    "dex_agents.tracing": ("TRACING_LOGGER",),
}


@pytest.mark.parametrize(
    ("module_name", "name"),
    [(module, name) for module, names in SPEC_NAMES.items() for name in names],
)
def test_spec_name_is_importable(module_name: str, name: str) -> None:
    module = importlib.import_module(module_name)
    assert hasattr(module, name)
    assert name in module.__all__


@pytest.mark.parametrize(
    "module", [dex_agents, dex_agents.builtin_loop, dex_agents.testing], ids=lambda m: m.__name__
)
def test_all_names_exist(module: ModuleType) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
    assert sorted(module.__all__, key=str.lower) == sorted(set(module.__all__), key=str.lower)


def _layer_modules() -> list[ModuleType]:
    modules: list[ModuleType] = [dex_agents, dex_agents.builtin_loop, dex_agents.testing]
    for package in (
        dex_agents.domain,
        dex_agents.ports,
        dex_agents.app,
        dex_agents.app.builtin_loop,
        dex_agents.adapters.dex,
        dex_agents.composition,
    ):
        modules.append(package)
        for info in pkgutil.iter_modules(package.__path__):
            modules.append(importlib.import_module(f"{package.__name__}.{info.name}"))
    return modules


def _public_definitions(module: ModuleType) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if (inspect.isclass(value) or inspect.isfunction(value)) and (
            getattr(value, "__module__", None) == module.__name__
        ):
            found.append((name, value))
    return found


@pytest.mark.parametrize("module", _layer_modules(), ids=lambda module: module.__name__)
def test_every_public_class_and_function_has_a_docstring(module: ModuleType) -> None:
    assert (module.__doc__ or "").strip(), f"{module.__name__} has no module docstring"
    undocumented = [
        name for name, value in _public_definitions(module) if not (value.__doc__ or "").strip()
    ]
    assert undocumented == []
