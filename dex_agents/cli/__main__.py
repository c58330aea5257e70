"""``python -m dex_agents.cli``: the ``dex-agents`` command."""

from dex_agents.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
