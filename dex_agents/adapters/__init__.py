"""Adapters: engines and providers behind the ports (the embedded SQLite engine, Dex, media stores)."""
