"""The Dex adapter: the session Flow on a real Dex Worker, and a FlowClient over a Dex AsyncClient.

SDK 1.23.0 mapping notes live in each module; the README's "Running on Dex" says what
was and was not verified without a server.
"""
