"""The connector tests run on the fake Connector SDK of ``fake_sdk``."""

from tests.adapters.connectors.fake_sdk import install_fake_sdk

install_fake_sdk()
