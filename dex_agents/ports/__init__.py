"""Ports: the typing.Protocol interfaces that the session and its adapters meet at."""
