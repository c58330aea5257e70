"""Run agents on the embedded engine: one SQLite file is the server.

``LocalRuntime`` opens a session database in this process (or keeps one in
memory), starts workers and gives an ``AgentSessionClient`` per Flow;
``serve_workers`` and ``run_workers`` run extra worker processes on the same
file. ``DatabaseFileError`` names what is wrong with a database path, and
``StoreCorruptError`` is raised by a read or commit that meets a damaged page
or value (the README's "Running several worker processes" says what to do).
``DEFAULT_STEP_HISTORY_LIMIT`` (1,000) is how many finished Step executions
each session keeps unless ``step_history_limit`` says otherwise.
"""

from __future__ import annotations

from dex_agents.adapters.local.database_file import DatabaseFileError
from dex_agents.adapters.local.history_retention import DEFAULT_STEP_HISTORY_LIMIT
from dex_agents.adapters.local.runtime import DEFAULT_MAX_CONCURRENT_TASKS
from dex_agents.adapters.local.store_errors import StoreCorruptError
from dex_agents.composition.local_runtime import LocalRuntime, run_workers, serve_workers

__all__ = [
    "DEFAULT_MAX_CONCURRENT_TASKS",
    "DEFAULT_STEP_HISTORY_LIMIT",
    "DatabaseFileError",
    "LocalRuntime",
    "StoreCorruptError",
    "run_workers",
    "serve_workers",
]
