"""The embedded engine: Flow runs on one machine, kept in an SQLite file (or in memory for tests).

``SqliteFlowStore`` is durable and shared by every process that opens the same
file; ``MemoryFlowStore`` keeps one process's Flow runs with the same semantics,
without durability. The engine core runs the Flow rules over either store.
"""
