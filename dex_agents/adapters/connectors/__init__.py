"""Connector operations as agent tools, on the Connector SDK (``dex_agents.connectors``).

``sdk`` is the one module that names the SDK; ``manifest`` reads an operation's entry
in ``dex-connector.json``; ``input_schema`` checks arguments against the manifest's
closed JSON Schema subset; ``source`` is ``ConnectorToolSource``.
"""
