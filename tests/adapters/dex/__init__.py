"""Tests of the Dex adapter, and the fake-server harness that drives a real Dex Worker."""
