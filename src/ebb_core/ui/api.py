"""The handlers of ``ebb ui``'s page and JSON/SVG API (see :mod:`ebb_core.ui.server`).

:class:`Api` holds what every request checks (the host, the access token, the session token
and the body of a change) and runs each request's work on a :class:`~ebb_core.engine.Brain`
from :class:`~ebb_core.mcp_access.StoreAccess` in a thread; the work itself (what each view
reads or changes) is a plain function of the Brain below it. Imported only when the page is
served: it needs the ``ui`` extra (Starlette).
"""

from __future__ import annotations

import hmac
import html
import json
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..errors import EbbError, InvalidInput, NoStore, NotFound, StoreLocked
from . import draw
from .server import ACCESS_COOKIE, MAX_BODY, TOKEN_HEADER

if TYPE_CHECKING:
    from ..engine import Brain
    from ..mcp_access import StoreAccess
    from .server import UiSettings

T = TypeVar("T")


class Api:
    """The page's routes over ``access``, guarded as ``settings`` say."""

    def __init__(self, access: StoreAccess, settings: UiSettings) -> None:
        self.access, self.settings = access, settings
        self.headers = {
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
            "Content-Security-Policy": (
                "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
            ),
        }

    # -- what every request goes through ---------------------------------------------------------

    def refuse(self, status: int, message: str) -> Response:
        return JSONResponse({"error": message}, status_code=status, headers=self.headers)

    def guard(self, request: Request, *, change: bool) -> Response | None:
        """Why this request may not proceed (a response), or ``None`` when it may."""
        settings = self.settings
        if settings.loopback and request.headers.get("host", "") not in settings.allowed_hosts():
            return self.refuse(403, "this page answers only at its loopback address")
        if settings.access_token is not None:
            given = request.cookies.get(ACCESS_COOKIE, "")
            if not hmac.compare_digest(given.encode(), settings.access_token.encode()):
                return self.refuse(401, "open the page with ?token=YOUR-TOKEN first")
        if not change:
            return None
        origin = request.headers.get("origin")
        own = f"http://{request.headers.get('host', '')}"
        if origin is not None and origin.rstrip("/") != own:
            return self.refuse(403, f"cross-origin request from {origin} refused")
        token = request.headers.get(TOKEN_HEADER.lower(), "")
        if not hmac.compare_digest(token.encode(), settings.session_token.encode()):
            return self.refuse(
                403, f"missing or wrong {TOKEN_HEADER}: reload the page and try again"
            )
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return self.refuse(415, "changes are sent as application/json")
        return None

    async def call(self, work: Callable[[Brain], T]) -> T | Response:
        """``work`` run on the store's Brain in a thread; an error becomes a JSON refusal."""

        def run() -> T:
            with self.access.brain() as brain:
                return work(brain)

        try:
            return await run_in_threadpool(run)
        except StoreLocked:
            return self.refuse(
                503, f"the store {self.access.location} is busy (another process holds it)"
            )
        except (NotFound, NoStore) as exc:
            return self.refuse(404, str(exc))
        except EbbError as exc:
            return self.refuse(400, str(exc))
        except Exception as exc:
            return self.refuse(
                500,
                f"unexpected {type(exc).__name__}: {exc}. This is a bug in Ebb; nothing was "
                "half-written (each change is one transaction).",
            )

    def respond(self, value: Any) -> Response:
        if isinstance(value, Response):
            return value
        return JSONResponse(value, headers=self.headers)

    # -- pages -----------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        settings = self.settings
        given = request.query_params.get("token")
        if settings.access_token is not None and given is not None:
            if not hmac.compare_digest(given.encode(), settings.access_token.encode()):
                return self.refuse(401, "wrong token")
            page = RedirectResponse("/", status_code=303, headers=self.headers)
            page.set_cookie(ACCESS_COOKIE, given, httponly=True, samesite="strict", path="/")
            return page
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        page_html = (
            _static("index.html")
            .replace("__EBB_TOKEN__", html.escape(settings.session_token, quote=True))
            .replace("__EBB_NAMESPACE__", html.escape(self.access.namespace, quote=True))
            .replace("__EBB_WHERE__", html.escape(self.access.location, quote=True))
        )
        return HTMLResponse(page_html, headers=self.headers)

    def static(self, name: str, media: str) -> Callable[[Request], Any]:
        async def serve_file(request: Request) -> Response:
            blocked = self.guard(request, change=False)
            return blocked or Response(_static(name), media_type=media, headers=self.headers)

        return serve_file

    # -- reading ---------------------------------------------------------------------------------

    async def queue(self, request: Request) -> Response:
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        try:
            limit = _int(request, "limit", 50, 1, 500)
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        return self.respond(await self.call(lambda brain: _queue(brain, limit)))

    async def graph(self, request: Request) -> Response:
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        centre = request.query_params.get("id") or None
        try:
            k = _int(request, "k", 30, 1, 120)
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        return self.respond(await self.call(lambda brain: _graph(brain, centre, k)))

    async def decay_view(self, request: Request) -> Response:
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        ids = [i for i in request.query_params.get("ids", "").split(",") if i.strip()][:6]
        try:
            past = _int(request, "past", 90, 1, 3650)
            future = _int(request, "future", 90, 0, 3650)
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        return self.respond(await self.call(lambda brain: _decay(brain, ids, past, future)))

    async def log(self, request: Request) -> Response:
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        node_id = request.query_params.get("id") or None
        action = request.query_params.get("action") or None
        by = (request.query_params.get("by") or "").strip().lower()
        try:
            limit = _int(request, "limit", 200, 1, 5000)
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        return self.respond(await self.call(lambda b: _log(b, node_id, action, by, limit)))

    async def stats(self, request: Request) -> Response:
        blocked = self.guard(request, change=False)
        if blocked is not None:
            return blocked
        return self.respond(await self.call(_stats))

    # -- changing --------------------------------------------------------------------------------

    async def approve(self, request: Request) -> Response:
        blocked = self.guard(request, change=True)
        if blocked is not None:
            return blocked
        try:
            data = await _body(request)
            ids = data.get("ids")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise InvalidInput("ids must be a non-empty list of memory ids", field="ids")
            by = _text_field(data, "by", required=True)
            note = _text_field(data, "note", required=False)
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        result = await self.call(lambda b: b.approve_deletion(ids, approved_by=by, note=note))
        return result if isinstance(result, Response) else self.respond({"deleted": result})

    async def restore(self, request: Request) -> Response:
        blocked = self.guard(request, change=True)
        if blocked is not None:
            return blocked
        try:
            data = await _body(request)
            node_id = _text_field(data, "id", required=True)
            by = _text_field(data, "by", required=False) or "ui"
        except InvalidInput as exc:
            return self.refuse(400, str(exc))
        return self.respond(await self.call(lambda brain: _restore(brain, node_id, by)))


# -- reading a request ---------------------------------------------------------------------------


async def _body(request: Request) -> dict[str, Any]:
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


def _text_field(data: dict[str, Any], name: str, *, required: bool) -> str:
    value = data.get(name, "")
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    if required and not value.strip():
        raise InvalidInput(f"{name} is required", field=name)
    return value.strip()


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


def _now_index(series: Any, brain: Brain) -> int:
    from ..clock import to_us

    now = to_us(brain.clock.now())
    return int(abs(series.times_us - now).argmin())


# -- each view's work on the Brain ---------------------------------------------------------------


def _queue(brain: Brain, limit: int) -> dict[str, Any]:
    """The review queue's first ``limit`` items, each with its links, history and sparkline."""
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


def _graph(brain: Brain, centre: str | None, k: int) -> dict[str, Any]:
    """The graph around ``centre`` (or of the ``k`` most active memories): SVG and data."""
    g = draw.neighbourhood(brain, centre, k) if centre else draw.most_active(brain, k)
    return {
        "svg": draw.graph_svg(g),
        "nodes": [
            {"id": n.id, "tier": n.tier.label, "activation": n.activation, "text": n.text}
            for n in g.nodes
        ],
        "links": [
            {"src": lk.src, "dst": lk.dst, "kind": lk.kind, "decayed": lk.decayed} for lk in g.links
        ],
    }


def _decay(brain: Brain, ids: list[str], past: int, future: int) -> dict[str, Any]:
    """The decay chart of ``ids`` (or of the three most active memories) with the tier cuts."""
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


def _log(
    brain: Brain, node_id: str | None, action: str | None, by: str, limit: int
) -> dict[str, Any]:
    """The audit log, newest first, filtered by memory, action and (a part of) who acted."""
    # "by" is matched here, so look further back for it (the store filters the rest).
    entries = brain.audit_log(5000 if by else limit, node_id=node_id, action=action)
    rows = [_entry(e) for e in reversed(entries) if not by or by in e.actor.lower()]
    return {"entries": rows[:limit]}


def _stats(brain: Brain) -> dict[str, Any]:
    """The counts of every namespace, the current one named."""
    names = sorted({brain.namespace, *brain.namespaces()})
    return {
        "current": brain.namespace,
        "namespaces": [brain.scoped(n).stats().model_dump(mode="json") for n in names],
    }


def _restore(brain: Brain, node_id: str, by: str) -> dict[str, Any]:
    """Restore ``node_id`` from the review queue (refused for a memory not in it)."""
    node = brain.get(node_id)
    if node.tier.label != "frozen":
        raise InvalidInput(
            f"memory {node_id!r} is not in the review queue (tier {node.tier.label})",
            field="id",
        )
    restored = brain.restore(node_id, actor=by)
    return {"restored": restored.id, "tier": restored.tier.label}
