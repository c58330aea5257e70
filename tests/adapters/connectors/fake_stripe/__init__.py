"""A Connector package for the tests: its ``dex-connector.json`` is package data."""
