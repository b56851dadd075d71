"""The options of ``ebb mcp`` (``mcp_server.mcp_command``): where the server listens and how it
holds the store between calls, each a group of ``click`` options shown in ``--help`` in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .grouping import DEFAULT_DELAY as DEFAULT_REINFORCEMENT_DELAY
from .mcp_access import DEFAULT_IDLE_RELEASE, DEFAULT_WAIT


def _options(*options: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The ``click`` options given, applied as a group (shown in ``--help`` in this order)."""

    def apply(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


#: where the server listens
transport_options = _options(
    click.option(
        "--transport",
        type=click.Choice(["stdio", "http"]),
        default="stdio",
        show_default=True,
        help="stdio for a client that starts the server; http for streamable HTTP.",
    ),
    click.option(
        "--host",
        default="127.0.0.1",
        show_default=True,
        help="HTTP only: interface to listen on (no authentication: keep it on loopback).",
    ),
    click.option(
        "--port",
        type=click.IntRange(1, 65535),
        default=8000,
        show_default=True,
        help="HTTP only: port; the endpoint is http://HOST:PORT/mcp.",
    ),
)

#: how long calls wait for the store and how it is held between them
holding_options = _options(
    click.option(
        "--wait",
        type=click.FloatRange(min=0),
        default=DEFAULT_WAIT,
        show_default=True,
        envvar="EBB_MCP_WAIT",
        help="Seconds a tool call waits while a person's ebb command holds the store "
        "(EBB_MCP_WAIT).",
    ),
    click.option(
        "--idle-release",
        type=click.FloatRange(min=0),
        default=DEFAULT_IDLE_RELEASE,
        show_default=True,
        envvar="EBB_MCP_IDLE_RELEASE",
        help="Embedded store: seconds without a call before the server lets go of the store; 0 "
        "opens it for each call only (EBB_MCP_IDLE_RELEASE). An ebb command that needs the store "
        "gets it after the current call either way.",
    ),
    click.option(
        "--reinforcement-delay",
        type=click.FloatRange(min=0, max=3600),
        default=DEFAULT_REINFORCEMENT_DELAY,
        show_default=True,
        envvar="EBB_REINFORCEMENT_DELAY",
        help="Seconds what recall reinforces may wait to be written, grouped with other writes "
        "(it counts for the next recall at once); 0 writes it with each recall "
        "(EBB_REINFORCEMENT_DELAY). A crash loses at most this much reinforcement, never a "
        "memory.",
    ),
)
