"""``LiteLLMModelClient`` and the pure rules it follows ("Model clients").

The rules modules hold no I/O and import no LiteLLM, so they are tested with
tables of cases:

- ``routing``: which API a model uses and how its tool results carry images;
- ``tool_choice``: which models refuse a forced tool choice;
- ``options``: request options and model settings, the keys they may not set;
- ``images``: image parts per API, and the texts that stand in for images;
- ``tools``: tool definitions and the tool choice per API;
- ``replay``: which stored output items replay provider-exact, and how others replay;
- ``responses_request`` and ``chat_request``: a ``ModelRequest`` as each API's input;
- ``responses_output`` and ``chat_stream``: each API's output as ``ModelOutputItem`` values;
- ``usage``: each API's usage as ``AgentUsage``;
- ``answer_ids``: which answers LiteLLM names with an ID of its own;
- ``estimates``: ``estimate_input_tokens``;
- ``redaction``: credentials scrubbed from texts and URLs;
- ``errors``: the errors the client raises, and LiteLLM's translated to them;
- ``answered_errors``: errors a provider answers with HTTP 200, and whether a retry helps.
- ``aws_event_stream``: the binary AWS event stream encoding Bedrock streams in.

``streams`` reads LiteLLM's streams, ``body_watch`` (and ``gemini_finish``,
``anthropic_stop``, ``bedrock_answered``, ``bedrock_stop``) a call's HTTP body as
LiteLLM reads it, and ``client`` makes the call; they need LiteLLM.
Import the client from ``dex_agents.litellm``.
"""
