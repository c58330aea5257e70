"""MCP tool names: ``<server>__<tool>``, sanitized, at most 64 characters, first name wins."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.mcp_naming import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    McpLeftOutTool,
    McpNamedTool,
    mcp_tool_name,
    select_mcp_tool_names,
)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_resource_and_prompt_tool_names() -> None:
    assert MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME == "mcp_list_resources_and_prompts"
    assert MCP_READ_RESOURCE_TOOL_NAME == "mcp_read_resource"
    assert MCP_GET_PROMPT_TOOL_NAME == "mcp_get_prompt"


@pytest.mark.parametrize(
    ("server", "tool", "name"),
    [
        ("files", "read_file", "files__read_file"),
        ("tickets", "create-ticket", "tickets__create-ticket"),
        ("my server", "get.item", "my_server__get_item"),
        ("tickets", "créer", "tickets__cr_er"),
        ("📁", "👍", "____"),
        ("s", "t" * 61, "s__" + "t" * 61),
        ("tickets", "x" * 54 + "é", "tickets__" + "x" * 54 + "_"),
    ],
    ids=[
        "plain",
        "dash kept",
        "space and dot replaced",
        "non-ASCII letter replaced",
        "each code point one underscore",
        "exactly 64 kept",
        "64 code points counted, not UTF-8 bytes",
    ],
)
def test_names_are_joined_and_sanitized(server: str, tool: str, name: str) -> None:
    assert mcp_tool_name(server, tool) == name


@pytest.mark.parametrize(
    ("server", "tool", "name"),
    [
        ("s", "t" * 62, "s__" + "t" * 44 + "_4ace2446d03b6853"),
        ("s" * 30, "x" * 40, "s" * 30 + "__" + "x" * 15 + "_551c1042018f7ec2"),
        ("a.b", "c" * 70, "a_b__" + "c" * 42 + "_88d44ecf2844e44a"),
        ("a_b", "c" * 70, "a_b__" + "c" * 42 + "_da56becc22796205"),
    ],
    ids=["65 characters", "long server", "hash of the unsanitized name", "differs from a.b"],
)
def test_long_names_keep_47_characters_and_16_hex_of_the_sha256(
    server: str, tool: str, name: str
) -> None:
    result = mcp_tool_name(server, tool)
    assert result == name
    assert len(result) == 64
    digest = hashlib.sha256(f"{server}__{tool}".encode()).hexdigest()
    assert result.endswith("_" + digest[:16])


@pytest.mark.parametrize(("server", "tool"), [("", "x"), ("files", "")])
def test_an_empty_name_is_refused(server: str, tool: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        mcp_tool_name(server, tool)


@settings(max_examples=100, deadline=None)
@given(server=st.text(min_size=1, max_size=80), tool=st.text(min_size=1, max_size=80))
def test_every_name_is_provider_safe_and_deterministic(server: str, tool: str) -> None:
    name = mcp_tool_name(server, tool)
    assert NAME_PATTERN.fullmatch(name)
    assert mcp_tool_name(server, tool) == name


@settings(max_examples=50, deadline=None)
@given(server=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True), tool=st.text(min_size=1))
def test_a_safe_short_name_is_unchanged(server: str, tool: str) -> None:
    safe_tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
    name = mcp_tool_name(server, tool)
    if len(server) + 2 + len(tool) <= 64:
        assert name == f"{server}__{safe_tool}"
    else:
        assert name.startswith(f"{server}__"[:47])


def test_the_first_tool_of_a_name_is_offered_and_later_ones_left_out() -> None:
    selection = select_mcp_tool_names(
        [
            ("files", "read.file"),
            ("files", "write"),
            ("files", "read_file"),
            ("tickets", "create"),
            ("files", "write"),
        ]
    )
    assert selection.offered == (
        McpNamedTool(name="files__read_file", server="files", tool="read.file"),
        McpNamedTool(name="files__write", server="files", tool="write"),
        McpNamedTool(name="tickets__create", server="tickets", tool="create"),
    )
    assert selection.left_out == (
        McpLeftOutTool(
            name="files__read_file",
            server="files",
            tool="read_file",
            kept_server="files",
            kept_tool="read.file",
        ),
        McpLeftOutTool(
            name="files__write",
            server="files",
            tool="write",
            kept_server="files",
            kept_tool="write",
        ),
    )
    assert selection.left_out[0].warning == (
        "MCP tool 'read_file' of server 'files' is left out: its name 'files__read_file' "
        "is already used by tool 'read.file' of server 'files'"
    )


def test_a_name_collision_across_servers_keeps_server_order() -> None:
    selection = select_mcp_tool_names([("a.b", "x"), ("a_b", "x")])
    assert [tool.server for tool in selection.offered] == ["a.b"]
    assert [tool.server for tool in selection.left_out] == ["a_b"]


def test_an_empty_listing_offers_nothing() -> None:
    selection = select_mcp_tool_names([])
    assert selection.offered == ()
    assert selection.left_out == ()
