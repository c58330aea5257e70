"""The application layer: the session Flow and its client, written against the ports only."""
