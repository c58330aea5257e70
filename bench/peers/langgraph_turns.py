"""The turn workload on LangGraph: a StateGraph with a model node and a tool node.

The model node is the same script as dex-agents' (``workload``): after the
user's message it asks for ``lookup_order``, after the tool's result it answers.
The tool node is LangGraph's ``ToolNode`` and the route between them its
``tools_condition``, so the graph is the one LangGraph's own tutorials build.
The checkpointer is ``SqliteSaver`` on a WAL file with ``synchronous=FULL``, or
``InMemorySaver``. One session is one thread; one turn is one ``invoke``, with
``durability`` ``"async"`` (LangGraph's default: a step's checkpoint is written
while the next step runs, and ``invoke`` returns once all are written) or
``"sync"`` (each checkpoint is written before the next step starts). The
``messages`` channel is the stable ``add_messages`` reducer, so every checkpoint
holds the whole conversation; LangGraph 1.2's ``DeltaChannel``, which would not,
is marked beta and is not used.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import workload
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

Durability = Literal["sync", "async", "exit"]


class State(TypedDict):
    """The graph's state: the conversation, appended to by every node."""

    messages: Annotated[list[AnyMessage], add_messages]


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return workload.order_status(order_id)


def model(state: State) -> dict[str, list[AnyMessage]]:
    """The scripted model: a tool call after the user's message, an answer after its result."""
    messages = state["messages"]
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content=workload.answer(str(last.content)))]}
    call = {
        "id": f"call_{len(messages)}",
        "name": "lookup_order",
        "args": {"order_id": workload.ORDER_ID},
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """The compiled graph: START -> model -> (tools -> model)* -> END."""
    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([lookup_order]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


class LangGraphTurns:
    """One LangGraph session (a thread) that runs the workload's turns."""

    def __init__(self, path: Path | None, durability: Durability = "async") -> None:
        self.connection: sqlite3.Connection | None = None
        if path is None:
            saver: BaseCheckpointSaver[Any] = InMemorySaver()
        else:
            # check_same_thread=False as SqliteSaver's own docs do: it locks around the connection.
            self.connection = sqlite3.connect(path, check_same_thread=False)
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=FULL")
            saver = SqliteSaver(self.connection)
        self.graph = build_graph(saver)
        self.durability = durability

    def turn(self, session_id: str, turn: int) -> str:
        """Run turn ``turn`` of session ``session_id`` and return the model's answer."""
        config = {"configurable": {"thread_id": session_id}}
        state = self.graph.invoke(
            {"messages": [HumanMessage(content=workload.user_message(turn))]},
            config,
            durability=self.durability,
        )
        return str(state["messages"][-1].content)

    def close(self) -> None:
        """Close the SQLite connection, if any."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None
