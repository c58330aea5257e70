"""Adapters: engines and providers behind the ports (embedded SQLite engine, Dex, LiteLLM, MCP, S3)."""
