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
    "INSTRUCTIONS",
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


INSTRUCTIONS = """\
Ebb is your long-term memory, kept as a graph. Each memory (a fact, decision, preference, person,
meeting, note) is a node; links between memories are typed, weighted and timestamped.
Relevance is recency-weighted connection strength: memories you use and link stay alive, unused
ones fade into archive tiers (hot → warm → cold) by themselves.

- Before answering anything that may depend on earlier sessions, call `recall`; each hit says
  why it surfaced.
- When you learn something durable, `remember` it (one idea per memory) and link it to the
  memories it refers to (`links`, or `connect`).
- When a recalled memory actually helped, `reinforce` it.
- To read memories whose ids you know, `read` them; to see the context around one (linked
  decisions, people, meetings), `explore` it. Both only look unless you ask them to reinforce.
- When a fact or decision changed, `remember` the new one with `supersedes` naming the old one:
  the old memory is kept but ranks below its replacement.
- If a memory is wrong or obsolete, `forget` it: that only queues it for a person to review.
  You cannot delete anything; a person approves deletions with the `ebb` command line.
"""
"""How to use the tools, for a model: the MCP server sends it as its instructions; it suits an
agent's system prompt in the other frameworks too."""

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
