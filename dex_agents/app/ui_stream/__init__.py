"""Browser streams over the engine port: the snapshot with its resume token, and SSE frames.

``snapshot`` reads ``get_agent_snapshot`` and the token to open the event
stream from; ``frames`` follows the ``AgentEvents`` Stream as Server-Sent
Event frames. Each has an async form over ``FlowClient`` and
``StreamPageReader`` and a blocking form over ``SyncFlowClient``. The public
``dex_agents.ui_stream`` also takes Dex clients.
"""
