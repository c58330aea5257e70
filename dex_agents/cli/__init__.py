"""The ``dex-agents`` command line: talk to a durable demo agent in a local SQLite file."""
