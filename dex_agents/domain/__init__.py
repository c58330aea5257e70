"""The pure domain core of dex-agents.

Every module here is synchronous and does no I/O: it takes values (``now``, IDs,
sizes) and returns values (a decision, a record, a cutoff, a commit plan). The
session Steps in ``dex_agents.app`` load state, ask these rules, and commit what
they return; the engines in ``dex_agents.adapters`` perform the effects.
"""
