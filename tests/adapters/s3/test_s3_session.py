"""A whole session on the embedded engine whose function tool's image lives in moto's bucket."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from dex_agents.builtin_loop import (
    AgentDefinition,
    FunctionToolResult,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    builtin_agent_session_flow,
    function_tool,
)
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.wire import to_wire
from dex_agents.local import LocalRuntime
from dex_agents.s3 import S3MediaStore
from tests.domain.images_support import png

SCREEN = png(total_size=len(png()) + 40)
TURN = timedelta(seconds=30)


async def test_a_function_tools_image_is_stored_in_the_bucket_and_shown_to_the_model(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str
) -> None:
    @function_tool(effect=ToolEffect.READ)
    async def take_screenshot(context: ToolCallContext) -> str | FunctionToolResult:
        """Take a screenshot of the screen."""
        if context.media_store is None:
            return "Screenshots need a media store."
        reference = await context.media_store.put_image(SCREEN)
        return FunctionToolResult(output="Took a screenshot.", images=[reference])

    def respond(request: ModelRequest) -> ScriptedModelReply:
        results = ScriptedModelClient.tool_results(request)
        if results:
            return ScriptedModelReply(text=f"I see {len(request.image_bytes)} screenshot.")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("take_screenshot", {})])

    model = ScriptedModelClient(respond)
    agent = AgentDefinition(
        name="viewer", instructions="You look at screens.", model=model, tools=[take_screenshot]
    )
    flow = builtin_agent_session_flow(agent, flow_type="ScreenAgent", media_store=s3_store)
    async with LocalRuntime(None, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s-1")
        assert await sessions.send_user_message("s-1", "What is on the screen?")
        snapshot = await sessions.wait_for_user("s-1", timeout=TURN)

    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "I see 1 screenshot."
    tool_message = next(m for m in snapshot.messages if m.tool_output is not None)
    (image,) = tool_message.images
    assert image.uri == f"s3://{bucket}/sessions/sha256/{image.sha256}"
    assert json.loads(tool_message.framework_item)["images"] == [to_wire(image)]
    stored = s3_admin.get_object(Bucket=bucket, Key=f"sessions/sha256/{image.sha256}")
    assert stored["Body"].read() == SCREEN
    # The model call after the tool read the bytes back from the bucket.
    (result,) = ScriptedModelClient.tool_results(model.requests[-1])
    assert result.images == (image,)
    assert model.requests[-1].image_bytes == {image.sha256: SCREEN}
