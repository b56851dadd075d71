"""``ebb ui``: a local web page over the same :class:`~ebb_core.engine.Brain` the CLI opens.

Needs the ``ui`` extra (``pip install 'ebb-memory[ui]'``: Starlette and uvicorn). They are
imported only when the page is served, so the rest of Ebb (and ``ebb --help``) works without them.

What the page shows: the review queue (approve a deletion with the approver's name, or restore),
a graph of a memory's neighbourhood or of the most active memories, a decay chart with the tier
cuts, the audit log (filterable) and counts per tier and namespace. The pictures are SVG drawn on
the server (:mod:`ebb_core.ui.draw`); the page is one HTML file, one small script and one
stylesheet, with no build step.

Safe by construction
--------------------
- It listens on 127.0.0.1 unless ``--host`` names another interface, and then only with
  ``--token``: every request must carry that token (the first visit passes it as ``?token=``,
  the server keeps it in an HttpOnly, SameSite=Strict cookie).
- On loopback the ``Host`` header must name the loopback address (no DNS rebinding).
- Every change is a POST with a JSON body carrying, in the ``X-Ebb-Token`` header, the token the
  server generated at start and wrote into the page. Another site cannot read the page, so it
  cannot learn the token; a cross-origin POST without it (or with a foreign ``Origin``) is refused
  with 403 and changes nothing.
- The only changes are approving a deletion (only memories in the review queue can be deleted:
  :meth:`Brain.approve_deletion` refuses anything else) and restoring a memory.
- The store is reached through :class:`~ebb_core.mcp_access.StoreAccess`, like ``ebb mcp``:
  opened for a request (waiting, having asked, while ``ebb mcp`` or a CLI command holds it) and
  let go of when idle or as soon as another process asks for it.
"""

from __future__ import annotations

import os
import secrets
import sys
from typing import TYPE_CHECKING

import click

from ..cli import store_options
from ..errors import BackendUnavailable, EbbError, InvalidInput, StoreLocked

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..mcp_access import StoreAccess

__all__ = ["DEFAULT_PORT", "UiSettings", "build_app", "serve", "ui_command"]

DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_HEADER = "X-Ebb-Token"
ACCESS_COOKIE = "ebb_ui_access"
MAX_BODY = 64 * 1024


class UiSettings:
    """Where the page listens and the tokens guarding it."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None):
        if host not in LOOPBACK and not token:
            raise InvalidInput(
                f"--host {host} would let other machines reach the page: pass --token TOKEN too "
                "(every request must then carry it), or keep the default 127.0.0.1",
                field="host",
            )
        if token is not None and len(token) < 16:
            raise InvalidInput("--token must be at least 16 characters long", field="token")
        self.host, self.port, self.access_token = host, port, token
        self.session_token = secrets.token_urlsafe(32)
        """Written into the page; every POST must send it back in ``X-Ebb-Token``."""

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"

    def allowed_hosts(self) -> set[str]:
        names = {"127.0.0.1", "localhost", "[::1]"} if self.loopback else {self.host}
        if ":" in self.host and not self.loopback:
            names = {f"[{self.host}]"}
        return {f"{n}:{self.port}" for n in names} | ({*names} if self.port == 80 else set())


def build_app(access: StoreAccess, settings: UiSettings) -> Starlette:
    """The Starlette application serving the page and its JSON/SVG API over ``access`` (the
    handlers: :class:`ebb_core.ui.api.Api`)."""
    try:
        from starlette.applications import Starlette
        from starlette.routing import Route
    except ImportError as exc:
        raise BackendUnavailable(
            f"the web page needs its extra: pip install 'ebb-memory[ui]' ({exc})"
        ) from None
    from .api import Api

    api = Api(access, settings)
    routes = [
        Route("/", api.index),
        Route("/static/app.js", api.static("app.js", "text/javascript; charset=utf-8")),
        Route("/static/style.css", api.static("style.css", "text/css; charset=utf-8")),
        Route("/api/queue", api.queue),
        Route("/api/graph", api.graph),
        Route("/api/decay", api.decay_view),
        Route("/api/log", api.log),
        Route("/api/stats", api.stats),
        Route("/api/approve", api.approve, methods=["POST"]),
        Route("/api/restore", api.restore, methods=["POST"]),
    ]
    return Starlette(routes=routes)


# -- running it ----------------------------------------------------------------------------------


def serve(
    settings: UiSettings,
    path: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    namespace: str | None = None,
    *,
    wait: float = 10.0,
    idle_release: float = 2.0,
) -> None:
    """Serve the page until the process is stopped (Ctrl-C)."""
    from ..mcp_access import StoreAccess

    _check_port(settings.host, settings.port)
    access = StoreAccess(
        path, backend=backend, namespace=namespace, wait=wait, idle_release=idle_release
    )
    app = build_app(access, settings)
    try:
        import uvicorn
    except ImportError as exc:
        raise BackendUnavailable(
            f"the web page needs its extra: pip install 'ebb-memory[ui]' ({exc})"
        ) from None
    try:
        where = access.check(wait=wait)
    except StoreLocked:
        where = access.location.removeprefix("at ")
        _note(f"ebb ui: the store at {where} is busy; each request waits up to {wait:g} s for it")
    suffix = "" if settings.access_token is None else "?token=…  (the token you passed)"
    _note(
        f"ebb ui: {where} (namespace {access.namespace!r}) at {settings.url}{suffix}; "
        "Ctrl-C to stop"
    )
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", access_log=False
    )
    try:
        uvicorn.Server(config).run()
    finally:
        access.close()


def _check_port(host: str, port: int) -> None:
    """Refuse at once (before the store is opened) when the port is taken."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InvalidInput(
                f"cannot listen on {host} port {port} ({exc.strerror or exc}): pass another "
                "--port, or stop what uses it",
                field="port",
            ) from None


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@click.command("ui")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on; anything but loopback needs --token.",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="Port."
)
@click.option(
    "--token",
    envvar="EBB_UI_TOKEN",
    help="Access token every request must carry (EBB_UI_TOKEN; required with --host).",
)
@store_options
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds a request waits while another process (ebb mcp, a command) holds the store.",
)
@click.pass_context
def ui_command(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    db: str | None,
    backend: str | None,
    namespace: str | None,
    wait: float,
) -> None:
    """Serve a local web page: review queue (approve, restore), graph, decay, audit log, stats.

    Listens on 127.0.0.1 only, unless --host and --token are both given. Works while `ebb mcp`
    serves the same store: each request asks for the store the way `ebb` commands do.
    """
    parent = ctx.find_root().obj if ctx.parent is not None else None
    db = db or getattr(parent, "db", None)
    backend = backend or getattr(parent, "backend", None)
    namespace = namespace or getattr(parent, "namespace", None)
    try:
        serve(UiSettings(host, port, token), db, backend, namespace, wait=wait)
    except EbbError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
