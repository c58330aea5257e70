"""dex-agents: durable AI-agent sessions, one durable workflow per session.

The public names of the spec are importable from here.
"""
