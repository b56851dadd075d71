"""Ebb's agent tools, written once: the catalog every adapter exposes.

Each tool is a :class:`ToolSpec` with no framework in it: a name, a description written for the
model that picks the tool, a pydantic model of its arguments, ``run(brain, args, actor)``, and two
renderings of the result (the JSON object an MCP client gets, and the text a model reads). The
MCP server (``ebb mcp``), the LangChain tools (:func:`ebb_langchain.create_ebb_tools`) and the
LlamaIndex tools (:class:`ebb_llamaindex.EbbToolSpec`) are each a short loop over
:data:`CATALOG`, so a tool has the same name, arguments and behaviour everywhere.

>>> from ebb_core.tools import TOOLS
>>> TOOLS["recall"](brain, {"query": "pricing"})          # doctest: +SKIP
'1. [decision:outcome-pricing] (decision, hot) We price by outcome now ...'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .look import EXPLORE, HISTORY, NEIGHBORS, READ, RECALL, REVIEW_QUEUE, STATS
from .spec import Args, ToolSpec, renamed, with_defaults
from .write import CONNECT, FORGET, MAINTAIN, PIN, REINFORCE, REMEMBER

__all__ = [
    "AGENT_TOOLS",
    "CATALOG",
    "TOOLS",
    "Args",
    "ToolSpec",
    "renamed",
    "select",
    "with_defaults",
]

CATALOG: tuple[ToolSpec[Any, Any], ...] = (
    REMEMBER,
    RECALL,
    CONNECT,
    REINFORCE,
    FORGET,
    NEIGHBORS,
    HISTORY,
    PIN,
    MAINTAIN,
    REVIEW_QUEUE,
    STATS,
    READ,
    EXPLORE,
)
"""Every tool, in the order clients list them."""

TOOLS: dict[str, ToolSpec[Any, Any]] = {t.name: t for t in CATALOG}

AGENT_TOOLS = ("remember", "recall", "connect", "forget")
"""The tools the LangChain and LlamaIndex adapters give an agent unless asked for others: the
four an assistant needs in a conversation (the MCP server serves the whole catalog)."""


def select(names: Iterable[str] | str) -> list[ToolSpec[Any, Any]]:
    """The catalog's tools named in ``names`` (``"all"``: every one), in the order given."""
    if isinstance(names, str):
        names = [t.name for t in CATALOG] if names == "all" else [names]
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in TOOLS]
    if unknown:
        from ..errors import InvalidInput

        raise InvalidInput(
            f"no tool named {', '.join(map(repr, unknown))}: choose from "
            f"{', '.join(TOOLS)} (or 'all')",
            field="tools",
        )
    return [TOOLS[n] for n in wanted]
