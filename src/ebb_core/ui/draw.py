"""The pictures ``ebb ui`` shows, drawn on the server as SVG (no JavaScript library, no build step).

- :func:`graph_svg`: memories as circles coloured by tier and sized by activation, their links as
  lines as thick as their decayed weight, laid out by a small deterministic force layout;
- :func:`decay_svg`: activation over time of a few memories (a log scale), from their edges' and
  read's timestamps, with the tier cuts at today's reference activation drawn across.

Every piece of user text goes through :func:`xml.sax.saxutils.escape` / ``quoteattr`` before it
reaches the SVG, so the page can insert the result as markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ..clock import from_us, to_us
from ..engine import Brain
from ..model import Node, Tier
from ..scoring import US_PER_DAY, decay, scale

TIER_COLOURS = {
    Tier.HOT: "#d9480f",
    Tier.WARM: "#e8a400",
    Tier.COLD: "#1c7ed6",
    Tier.FROZEN: "#868e96",
}
SERIES_COLOURS = ("#5f3dc4", "#2b8a3e", "#c2255c", "#0b7285", "#e67700", "#495057")


@dataclass
class GraphNode:
    id: str
    text: str
    tier: Tier
    activation: float
    pinned: bool = False


@dataclass
class GraphLink:
    src: str
    dst: str
    kind: str
    decayed: float


@dataclass
class Graph:
    """What a graph view shows: nodes, links among them and the node at the centre (if any)."""

    nodes: list[GraphNode]
    links: list[GraphLink]
    centre: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def neighbourhood(brain: Brain, id: str, limit: int = 24) -> Graph:
    """``id``, its strongest ``limit`` neighbours and the links among them (no reinforcement)."""
    centre = brain.get(id)
    near = brain.neighbors(id, limit=limit)
    nodes = {centre.id: centre, **{n.node.id: n.node for n in near}}
    return _graph(brain, nodes, centre=id)


def most_active(brain: Brain, k: int = 30) -> Graph:
    """The ``k`` most active memories (hot to cold) and the links among them."""
    return _graph(brain, {n.id: n for n in brain.top(k, depth=3)}, centre=None)


def _graph(brain: Brain, nodes: dict[str, Node], centre: str | None) -> Graph:
    now_us = to_us(brain.clock.now())
    h = brain.config.half_life_us
    links: dict[tuple[str, str, str], GraphLink] = {}
    for inc in brain.store.incident(brain.namespace, list(nodes)):
        e = inc.edge
        if e.src in nodes and e.dst in nodes:
            decayed = e.weight * decay(now_us - to_us(e.reinforced_at), h)
            links[(e.src, e.dst, e.kind)] = GraphLink(e.src, e.dst, e.kind, decayed)
    out = []
    for node_id, n in nodes.items():
        out.append(
            GraphNode(
                id=node_id,
                text=n.text,
                tier=n.tier,
                activation=brain.activation(node_id),
                pinned=n.pinned,
            )
        )
    return Graph(out, sorted(links.values(), key=lambda x: (x.src, x.dst, x.kind)), centre)


def layout(
    n: int, pairs: Sequence[tuple[int, int, float]], centre: int | None, seed: int = 7
) -> np.ndarray:
    """Positions in [0, 1]² for ``n`` nodes (Fruchterman–Reingold, fixed seed: the same graph is
    always drawn the same way). ``centre`` is held in the middle."""
    if n == 0:
        return np.zeros((0, 2))
    if n == 1:
        return np.array([[0.5, 0.5]])
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, 2 * math.pi, n, endpoint=False)
    pos = np.c_[np.cos(angles), np.sin(angles)] * 0.4 + rng.normal(0, 0.02, (n, 2))
    if centre is not None:
        pos[centre] = 0.0
    k = math.sqrt(1.0 / n)
    temp = 0.1
    for _ in range(200):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-3)
        move = (delta / dist[:, :, None] * (k * k / dist)[:, :, None]).sum(axis=1)
        for a, b, w in pairs:
            d = pos[a] - pos[b]
            length = max(float(np.linalg.norm(d)), 1e-3)
            pull = d / length * (length * length / k) * (0.5 + min(w, 1.0))
            move[a] -= pull
            move[b] += pull
        move -= pos * 0.3  # a little gravity keeps loose memories on the page
        length = np.maximum(np.linalg.norm(move, axis=1), 1e-9)
        pos += move / length[:, None] * np.minimum(length, temp)[:, None]
        if centre is not None:
            pos[centre] = 0.0
        temp *= 0.98
    # Centred on the centre memory (or the middle of the drawing), the same scale on both axes.
    pos = pos - (pos[centre] if centre is not None else (pos.min(axis=0) + pos.max(axis=0)) / 2)
    reach = float(np.abs(pos).max()) or 1.0
    return np.asarray(0.5 + pos / (2 * reach))


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def graph_svg(graph: Graph, width: int = 960, height: int = 560) -> str:
    """The graph as an SVG element: colour = tier, area = activation, line = decayed weight."""
    if not graph.nodes:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 80" '
            'class="graph" role="img"><text x="20" y="45" class="empty">'
            "No memories to draw.</text></svg>"
        )
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    top_link = max((lk.decayed for lk in graph.links), default=0.0) or 1.0
    pairs = [(index[lk.src], index[lk.dst], lk.decayed / top_link) for lk in graph.links]
    centre = index.get(graph.centre) if graph.centre else None
    pos = layout(len(graph.nodes), pairs, centre)
    margin_x, margin_y = 110, 40
    xy = [
        (margin_x + p[0] * (width - 2 * margin_x), margin_y + p[1] * (height - 2 * margin_y - 20))
        for p in pos
    ]
    top_act = max(n.activation for n in graph.nodes) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="graph" '
        f'role="img" aria-label="memory graph">'
    ]
    for lk in graph.links:
        (x1, y1), (x2, y2) = xy[index[lk.src]], xy[index[lk.dst]]
        share = lk.decayed / top_link
        title = escape(f"{lk.src} -{lk.kind}-> {lk.dst}: decayed weight {lk.decayed:.3g}")
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="link" '
            f'stroke-width="{0.6 + 5 * share:.2f}" stroke-opacity="{0.25 + 0.6 * share:.2f}">'
            f"<title>{title}</title></line>"
        )
    for n, (x, y) in zip(graph.nodes, xy, strict=True):
        r = 5 + 19 * math.sqrt(max(n.activation, 0.0) / top_act)
        label = escape(_short(n.id, 30))
        title = escape(
            f"{n.id} · {n.tier.label} · activation {n.activation:.3g}\n{_short(n.text, 200)}"
        )
        ring = ' stroke="#212529" stroke-width="3"' if n.id == graph.centre else ""
        pin = " 📌" if n.pinned else ""
        parts.append(
            f'<g class="node tier-{n.tier.label}" data-id={quoteattr(n.id)} tabindex="0">'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{TIER_COLOURS[n.tier]}"{ring}/>'
            f'<text x="{x:.1f}" y="{y + r + 13:.1f}" text-anchor="middle">{label}{pin}</text>'
            f"<title>{title}</title></g>"
        )
    parts.append(_legend(height))
    parts.append("</svg>")
    return "".join(parts)


def _legend(height: int) -> str:
    items = []
    for i, tier in enumerate(Tier):
        x = 14 + i * 90
        items.append(
            f'<circle cx="{x}" cy="{height - 14}" r="6" fill="{TIER_COLOURS[tier]}"/>'
            f'<text x="{x + 10}" y="{height - 10}" class="legend">{tier.label}</text>'
        )
    items.append(
        f'<text x="380" y="{height - 10}" class="legend">circle area: activation · '
        "line width: decayed link weight</text>"
    )
    return "".join(items)


# -- decay -----------------------------------------------------------------------------------------


@dataclass
class Series:
    id: str
    tier: Tier
    times_us: np.ndarray
    values: np.ndarray


def _base_over(weights: np.ndarray, at: np.ndarray, times: np.ndarray, h: float) -> np.ndarray:
    """``Σ w · decay(T − t)`` at each of ``times``, each term counted only from its ``t`` on."""
    if not len(weights):
        return np.zeros(len(times))
    age = times[:, None] - at[None, :]
    # Before a term was set the memory did not have it (an edge's earlier reinforcements are not
    # kept, so the past is a lower bound).
    return np.asarray(np.where(age >= 0, weights[None, :] * decay(age, h), 0.0).sum(axis=1))


def activation_series(
    brain: Brain, ids: Sequence[str], *, past_days: float, future_days: float, points: int = 160
) -> list[Series]:
    """Activation of each of ``ids`` from ``past_days`` ago to ``future_days`` ahead.

    The scoring model's formula: the memory's base (its links' weights and its read bonus, each
    decayed from its timestamp) plus ``spread`` times each neighbour's base over its degree. A
    neighbour's base is its stored one (exact now) decayed back or forward in time, counted from
    when the link was made, so one query serves a memory with thousands of links. Ahead of now
    nothing more happens. At "now" it equals :meth:`Brain.activation` once ``maintain`` has
    rescored the neighbourhood exactly.
    """
    now_us = to_us(brain.clock.now())
    times = np.linspace(now_us - past_days * US_PER_DAY, now_us + future_days * US_PER_DAY, points)
    times = times.astype(np.int64)
    h = brain.config.half_life_us
    cfg = brain.config
    nodes = brain.store.get_nodes(brain.namespace, list(ids))
    chosen = [i for i in ids if i in nodes]
    own: dict[str, tuple[list[float], list[int]]] = {i: ([], []) for i in chosen}
    shares: dict[str, tuple[list[float], list[int]]] = {i: ([], []) for i in chosen}
    for inc in brain.store.incident(brain.namespace, chosen):
        own[inc.node_id][0].append(inc.edge.weight)
        own[inc.node_id][1].append(to_us(inc.edge.reinforced_at))
        if inc.other.degree > 0:
            shares[inc.node_id][0].append(inc.other.base_key / inc.other.degree)
            shares[inc.node_id][1].append(to_us(inc.edge.created_at))
    # Stored keys turn into values now through the store's scale factor (key × scale = value).
    scale_now = next((brain.activation(i) / nodes[i].key for i in chosen if nodes[i].key > 0), 0.0)
    out = []
    for i in chosen:
        w, t = own[i]
        read = nodes[i].last_read_at
        if read is not None and cfg.read_bonus > 0:
            w, t = [*w, cfg.read_bonus], [*t, to_us(read)]
        values = _base_over(np.asarray(w, float), np.asarray(t, np.int64), times, h)
        sw, st = shares[i]
        if sw and scale_now > 0:
            since = np.asarray(st, np.int64)
            now_values = np.asarray(sw, float) * scale_now
            spread = np.where(
                times[:, None] >= since[None, :],
                now_values[None, :] * scale(times[:, None], now_us, h),
                0.0,
            ).sum(axis=1)
            values = values + cfg.spread * spread
        out.append(Series(i, nodes[i].tier, times, np.asarray(values)))
    return out


def decay_svg(
    series: Sequence[Series],
    *,
    now: datetime,
    reference: float,
    cuts: Sequence[tuple[str, float]],
    width: int = 960,
    height: int = 420,
) -> str:
    """A log-scale chart of ``series``, a horizontal line per tier cut (``reference × ratio``)."""
    left, right, top = 70, 170, 20
    bottom = 50 + 18 * ((len(series) + 2) // 3)  # dates, then the legend in rows of three
    if not series:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 80" class="decay" '
            'role="img"><text x="20" y="45" class="empty">Choose memories to chart.</text></svg>'
        )
    t0, t1 = int(series[0].times_us[0]), int(series[0].times_us[-1])
    ylo, yhi = _decades(series, [reference * r for _, r in cuts if reference * r > 0])
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_of(t: float) -> float:
        return left + (t - t0) / max(t1 - t0, 1) * plot_w

    def y_of(v: float) -> float:
        v = max(v, 10.0**ylo)
        return top + (yhi - math.log10(v)) / (yhi - ylo) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="decay" '
        'role="img" aria-label="activation over time">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for p in range(ylo, yhi + 1):
        y = y_of(10.0**p)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">1e{p}</text>'
        )
    for k in range(5):
        t = t0 + (t1 - t0) * k / 4
        x = x_of(t)
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="middle" class="axis">'
            f"{from_us(int(t)).date().isoformat()}</text>"
        )
    now_x = x_of(to_us(now))
    parts.append(
        f'<line x1="{now_x:.1f}" x2="{now_x:.1f}" y1="{top}" y2="{top + plot_h}" class="now"/>'
        f'<text x="{now_x + 4:.1f}" y="{top + 12}" class="axis">now</text>'
    )
    for name, ratio in cuts:
        v = reference * ratio
        if v <= 0:
            continue
        y = y_of(v)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="cut"/>'
            f'<text x="{left + plot_w + 6}" y="{y + 4:.1f}" class="cut-label">'
            f"{escape(name)} ≥ {ratio:g}×ref</text>"
        )
    for i, s in enumerate(series):
        parts.append(_series_line(i, s, x_of, y_of, left + (i % 3) * (plot_w / 3), top + plot_h))
    parts.append("</svg>")
    return "".join(parts)


def _decades(series: Sequence[Series], lines: list[float]) -> tuple[int, int]:
    """The powers of ten the chart's log scale runs between, to hold every positive value of
    ``series`` and every cut in ``lines`` (at least one decade)."""
    positive = np.concatenate([s.values[s.values > 0] for s in series] + [np.asarray(lines)])
    lo = float(positive.min()) if len(positive) else 1e-3
    hi = float(positive.max()) if len(positive) else 1.0
    ylo, yhi = math.floor(math.log10(max(lo, 1e-12))), math.ceil(math.log10(max(hi, 1e-12)))
    if yhi <= ylo:
        yhi = ylo + 1
    return ylo, yhi


def _series_line(
    i: int,
    s: Series,
    x_of: Callable[[float], float],
    y_of: Callable[[float], float],
    lx: float,
    plot_bottom: float,
) -> str:
    """The ``i``-th series' line on the chart and its entry in the legend (at ``lx``, in rows of
    three below the plot)."""
    colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
    pts = " ".join(
        f"{x_of(float(t)):.1f},{y_of(float(v)):.1f}"
        for t, v in zip(s.times_us, s.values, strict=True)
        if v > 0
    )
    label = escape(_short(s.id, 30))
    ly = plot_bottom + 44 + 18 * (i // 3)
    return (
        f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2.2" '
        f'class="series" data-id={quoteattr(s.id)}><title>{escape(s.id)}</title></polyline>'
        f'<rect x="{lx:.0f}" y="{ly - 5:.0f}" width="14" height="4" fill="{colour}"/>'
        f'<text x="{lx + 20:.0f}" y="{ly:.0f}" class="legend">{label} ({s.tier.label})</text>'
    )


def sparkline_svg(series: Series, cut: float, width: int = 220, height: int = 40) -> str:
    """A small log-scale line of one memory's activation, with the cold cut (``cut``) dashed."""
    values = np.maximum(series.values, 0.0)
    positive = values[values > 0]
    floor = min(float(positive.min()) if len(positive) else 1e-6, cut or 1e-6) / 2
    top = max(float(values.max()), cut) * 1.2
    lo, hi = math.log10(max(floor, 1e-12)), math.log10(max(top, 1e-12))
    span = (hi - lo) or 1.0

    def y_of(v: float) -> float:
        return 2 + (hi - math.log10(max(v, floor))) / span * (height - 4)

    n = len(values)
    pts = " ".join(  # nothing before the memory had anything (it did not exist yet)
        f"{2 + k / max(n - 1, 1) * (width - 4):.1f},{y_of(float(v)):.1f}"
        for k, v in enumerate(values)
        if v > 0
    )
    days = (int(series.times_us[-1]) - int(series.times_us[0])) / US_PER_DAY
    title = escape(f"{series.id}: activation over the last {days:.0f} days (log scale)")
    cut_y = y_of(cut) if cut > 0 else height
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="spark" '
        f'role="img"><title>{title}</title>'
        f'<line x1="0" x2="{width}" y1="{cut_y:.1f}" y2="{cut_y:.1f}" class="cut"/>'
        f'<polyline points="{pts}" fill="none" stroke="#5f3dc4" stroke-width="1.6"/></svg>'
    )
