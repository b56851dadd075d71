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

import hmac
import html
import json
import os
import secrets
import sys
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..cli import store_options
from ..errors import BackendUnavailable, EbbError, InvalidInput, NoStore, NotFound, StoreLocked

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ..engine import Brain
    from ..mcp_access import StoreAccess

__all__ = ["DEFAULT_PORT", "UiSettings", "build_app", "serve", "ui_command"]

DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_HEADER = "X-Ebb-Token"
ACCESS_COOKIE = "ebb_ui_access"
MAX_BODY = 64 * 1024
T = TypeVar("T")


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


def _static(name: str) -> str:
    folder = resources.files("ebb_core.ui").joinpath("static")
    return folder.joinpath(name).read_text(encoding="utf-8")


def _entry(e: Any) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "at": e.at.isoformat(),
        "action": e.action,
        "id": e.node_id,
        "from": e.from_tier.label if e.from_tier else None,
        "to": e.to_tier.label if e.to_tier else None,
        "by": e.actor,
        "reason": e.reason,
        "kept": e.payload is not None,
    }


def _int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {raw!r}", field=name) from None
    if not lo <= value <= hi:
        raise InvalidInput(f"{name} must be between {lo} and {hi}, got {value}", field=name)
    return value


def build_app(access: StoreAccess, settings: UiSettings) -> Starlette:
    """The Starlette application serving the page and its JSON/SVG API over ``access``."""
    try:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise BackendUnavailable(
            f"the web page needs its extra: pip install 'ebb-memory[ui]' ({exc})"
        ) from None
    from . import draw

    headers = {
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        ),
    }

    def refuse(status: int, message: str) -> Response:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def guard(request: Request, *, change: bool) -> Response | None:
        """Why this request may not proceed (a response), or ``None`` when it may."""
        if settings.loopback and request.headers.get("host", "") not in settings.allowed_hosts():
            return refuse(403, "this page answers only at its loopback address")
        if settings.access_token is not None:
            given = request.cookies.get(ACCESS_COOKIE, "")
            if not hmac.compare_digest(given.encode(), settings.access_token.encode()):
                return refuse(401, "open the page with ?token=YOUR-TOKEN first")
        if not change:
            return None
        origin = request.headers.get("origin")
        own = f"http://{request.headers.get('host', '')}"
        if origin is not None and origin.rstrip("/") != own:
            return refuse(403, f"cross-origin request from {origin} refused")
        token = request.headers.get(TOKEN_HEADER.lower(), "")
        if not hmac.compare_digest(token.encode(), settings.session_token.encode()):
            return refuse(403, f"missing or wrong {TOKEN_HEADER}: reload the page and try again")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return refuse(415, "changes are sent as application/json")
        return None

    async def call(work: Callable[[Brain], T]) -> T | Response:
        def run() -> T:
            with access.brain() as brain:
                return work(brain)

        try:
            return await run_in_threadpool(run)
        except StoreLocked:
            return refuse(503, f"the store {access.location} is busy (another process holds it)")
        except (NotFound, NoStore) as exc:
            return refuse(404, str(exc))
        except EbbError as exc:
            return refuse(400, str(exc))
        except Exception as exc:
            return refuse(
                500,
                f"unexpected {type(exc).__name__}: {exc}. This is a bug in Ebb; nothing was "
                "half-written (each change is one transaction).",
            )

    def respond(value: Any) -> Response:
        if isinstance(value, Response):
            return value
        return JSONResponse(value, headers=headers)

    async def body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise InvalidInput(f"request body larger than {MAX_BODY} bytes")
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            raise InvalidInput("the request body is not JSON") from None
        if not isinstance(data, dict):
            raise InvalidInput("the request body must be a JSON object")
        return data

    def text_field(data: dict[str, Any], name: str, *, required: bool) -> str:
        value = data.get(name, "")
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string", field=name)
        if required and not value.strip():
            raise InvalidInput(f"{name} is required", field=name)
        return value.strip()

    # -- pages ------------------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        given = request.query_params.get("token")
        if settings.access_token is not None and given is not None:
            if not hmac.compare_digest(given.encode(), settings.access_token.encode()):
                return refuse(401, "wrong token")
            page = RedirectResponse("/", status_code=303, headers=headers)
            page.set_cookie(ACCESS_COOKIE, given, httponly=True, samesite="strict", path="/")
            return page
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked
        page_html = (
            _static("index.html")
            .replace("__EBB_TOKEN__", html.escape(settings.session_token, quote=True))
            .replace("__EBB_NAMESPACE__", html.escape(access.namespace, quote=True))
            .replace("__EBB_WHERE__", html.escape(access.location, quote=True))
        )
        return HTMLResponse(page_html, headers=headers)

    def static(name: str, media: str) -> Callable[[Request], Any]:
        async def serve_file(request: Request) -> Response:
            blocked = guard(request, change=False)
            return blocked or Response(_static(name), media_type=media, headers=headers)

        return serve_file

    # -- reading ----------------------------------------------------------------------------------

    async def queue(request: Request) -> Response:
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked
        try:
            limit = _int(request, "limit", 50, 1, 500)
        except InvalidInput as exc:
            return refuse(400, str(exc))

        def work(brain: Brain) -> dict[str, Any]:
            items = []
            queued = brain.review_queue(limit)
            series = {
                s.id: s
                for s in draw.activation_series(
                    brain, [i.id for i in queued], past_days=90, future_days=0, points=60
                )
            }
            cold_cut = brain.stats().reference_activation * brain.config.cold_ratio
            for item in queued:
                links = [
                    {
                        "id": n.node.id,
                        "kind": n.edge.kind,
                        "direction": "out" if n.edge.src == item.id else "in",
                        "decayed": n.decayed_weight,
                        "tier": n.node.tier.label,
                    }
                    for n in brain.neighbors(item.id, limit=8)
                ]
                history = [_entry(e) for e in brain.audit_log(20, node_id=item.id)]
                items.append(
                    {
                        "id": item.id,
                        "kind": item.kind,
                        "text": item.text,
                        "reason": item.reason,
                        "queued_at": item.queued_at.isoformat() if item.queued_at else None,
                        "activation": item.activation,
                        "links": links,
                        "history": history,
                        "spark": draw.sparkline_svg(series[item.id], cold_cut),
                    }
                )
            total = brain.stats().review_queue
            return {"namespace": brain.namespace, "total": total, "items": items}

        return respond(await call(work))

    async def graph(request: Request) -> Response:
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked
        centre = request.query_params.get("id") or None
        try:
            k = _int(request, "k", 30, 1, 120)
        except InvalidInput as exc:
            return refuse(400, str(exc))

        def work(brain: Brain) -> dict[str, Any]:
            g = draw.neighbourhood(brain, centre, k) if centre else draw.most_active(brain, k)
            return {
                "svg": draw.graph_svg(g),
                "nodes": [
                    {"id": n.id, "tier": n.tier.label, "activation": n.activation, "text": n.text}
                    for n in g.nodes
                ],
                "links": [
                    {"src": lk.src, "dst": lk.dst, "kind": lk.kind, "decayed": lk.decayed}
                    for lk in g.links
                ],
            }

        return respond(await call(work))

    async def decay_view(request: Request) -> Response:
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked
        ids = [i for i in request.query_params.get("ids", "").split(",") if i.strip()][:6]
        try:
            past = _int(request, "past", 90, 1, 3650)
            future = _int(request, "future", 90, 0, 3650)
        except InvalidInput as exc:
            return refuse(400, str(exc))

        def work(brain: Brain) -> dict[str, Any]:
            chosen = ids or [n.id for n in brain.top(3, depth=3)]
            missing = sorted(set(chosen) - set(brain.store.get_nodes(brain.namespace, chosen)))
            if missing:
                raise NotFound(f"no memory {missing[0]!r} in namespace {brain.namespace!r}")
            series = draw.activation_series(brain, chosen, past_days=past, future_days=future)
            cfg = brain.config
            reference = brain.stats().reference_activation
            cuts = [("hot", cfg.hot_ratio), ("warm", cfg.warm_ratio), ("cold", cfg.cold_ratio)]
            svg = draw.decay_svg(series, now=brain.clock.now(), reference=reference, cuts=cuts)
            return {
                "svg": svg,
                "ids": chosen,
                "reference": reference,
                "now": {s.id: float(s.values[_now_index(s, brain)]) for s in series},
            }

        return respond(await call(work))

    async def log(request: Request) -> Response:
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked
        node_id = request.query_params.get("id") or None
        action = request.query_params.get("action") or None
        by = (request.query_params.get("by") or "").strip().lower()
        try:
            limit = _int(request, "limit", 200, 1, 5000)
        except InvalidInput as exc:
            return refuse(400, str(exc))

        def work(brain: Brain) -> dict[str, Any]:
            # "by" is matched here, so look further back for it (the store filters the rest).
            entries = brain.audit_log(5000 if by else limit, node_id=node_id, action=action)
            rows = [_entry(e) for e in reversed(entries) if not by or by in e.actor.lower()]
            return {"entries": rows[:limit]}

        return respond(await call(work))

    async def stats(request: Request) -> Response:
        blocked = guard(request, change=False)
        if blocked is not None:
            return blocked

        def work(brain: Brain) -> dict[str, Any]:
            names = sorted({brain.namespace, *brain.namespaces()})
            return {
                "current": brain.namespace,
                "namespaces": [brain.scoped(n).stats().model_dump(mode="json") for n in names],
            }

        return respond(await call(work))

    # -- changing ---------------------------------------------------------------------------------

    async def approve(request: Request) -> Response:
        blocked = guard(request, change=True)
        if blocked is not None:
            return blocked
        try:
            data = await body(request)
            ids = data.get("ids")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise InvalidInput("ids must be a non-empty list of memory ids", field="ids")
            by = text_field(data, "by", required=True)
            note = text_field(data, "note", required=False)
        except InvalidInput as exc:
            return refuse(400, str(exc))
        result = await call(lambda b: b.approve_deletion(ids, approved_by=by, note=note))
        return result if isinstance(result, Response) else respond({"deleted": result})

    async def restore(request: Request) -> Response:
        blocked = guard(request, change=True)
        if blocked is not None:
            return blocked
        try:
            data = await body(request)
            node_id = text_field(data, "id", required=True)
            by = text_field(data, "by", required=False) or "ui"
        except InvalidInput as exc:
            return refuse(400, str(exc))

        def work(brain: Brain) -> dict[str, Any]:
            node = brain.get(node_id)
            if node.tier.label != "frozen":
                raise InvalidInput(
                    f"memory {node_id!r} is not in the review queue (tier {node.tier.label})",
                    field="id",
                )
            restored = brain.restore(node_id, actor=by)
            return {"restored": restored.id, "tier": restored.tier.label}

        return respond(await call(work))

    routes = [
        Route("/", index),
        Route("/static/app.js", static("app.js", "text/javascript; charset=utf-8")),
        Route("/static/style.css", static("style.css", "text/css; charset=utf-8")),
        Route("/api/queue", queue),
        Route("/api/graph", graph),
        Route("/api/decay", decay_view),
        Route("/api/log", log),
        Route("/api/stats", stats),
        Route("/api/approve", approve, methods=["POST"]),
        Route("/api/restore", restore, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _now_index(series: Any, brain: Brain) -> int:
    from ..clock import to_us

    now = to_us(brain.clock.now())
    return int(abs(series.times_us - now).argmin())


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
