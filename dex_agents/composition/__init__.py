"""The composition root: the app layer's session Flow and client joined to the engines' adapters.

``dex_agents.app`` and ``dex_agents.adapters`` never import each other; this
package is the one place that knows both, so the public ``AgentSessionFlow`` is
at once the portable session Flow (the embedded engine runs it) and a
``dex.Flow`` (a Dex Worker serves it).
"""
