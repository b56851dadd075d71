"""Recall's ranking parts: a candidate and the parts of its score (:class:`Candidate`), the
fusion of text and meaning (:class:`Fusion`), the text matches as candidates, and what
spreading passes along links (:func:`pass_along`, used by both hops)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import scoring
from .scoring import Config
from .store import Link, Match


@dataclass
class Candidate:
    """One memory recall is ranking, with the parts of its score."""

    id: str
    text_score: float
    t_norm: float
    key: float
    pinned: bool
    tier: int
    spread: float = 0.0
    spread_from: list[str] = field(default_factory=list)
    spread_via: list[str] = field(default_factory=list)  # of spread_from: second-hop relays
    superseded_by: list[str] = field(default_factory=list)
    a_norm: float = 0.0
    score: float = 0.0
    supplied: bool = False  # its score came from the memory it replaced
    sim: float | None = None  # cosine similarity to the query (None: no vector)
    v_norm: float = 0.0  # the similarity normalised against the best candidate's
    match: float = 0.0  # the fused text and similarity that spreading and the blend use
    found: list[str] = field(default_factory=list)


class Fusion:
    """Fuses a candidate's text match and vector similarity into its ``match``.

    ``score`` fusion: ``match = (1 − w) · t_norm + w · v_norm`` where ``t_norm`` is the text
    score normalised as before and ``v_norm = ((sim − floor) / (best − floor)) ** contrast``
    (``best``: the highest similarity among the candidates; ``floor``: ``vector_floor``, or the
    last similarity of a full vector pool if higher; ≤ ``floor`` counts 0). ``rrf``:
    reciprocal-rank fusion of the two rankings, ``(1 − w) / (60 + text rank) + w / (60 +
    similarity rank)``, rescaled so the best possible is 1. Memories outside the vector pool fuse
    with similarity 0.
    """

    def __init__(
        self, cfg: Config, qvec: Any, vec: Sequence[tuple[Match, float]], pool: int
    ) -> None:
        self.cfg = cfg
        self.sims: dict[str, float] = {m.id: float(s) for m, s in vec}
        self.best = max(self.sims.values(), default=1.0)
        # A full pool's last similarity is the floor too: what is outside the pool (similarity
        # 0 here) and what is at its edge then count alike.
        self.floor = cfg.vector_floor
        if len(vec) >= pool and self.sims:
            self.floor = max(self.floor, min(self.sims.values()))
        self.text_ranks: dict[str, int] | None = None

    def apply(self, cands: Iterable[Candidate]) -> None:
        cfg = self.cfg
        w, floor = cfg.vector_weight, self.floor
        span = self.best - floor
        group = list(cands)
        for c in group:
            c.sim = self.sims.get(c.id)
            if c.sim is None or span <= 0 or c.sim <= floor:
                c.v_norm = 0.0
            else:
                c.v_norm = min((c.sim - floor) / span, 1.0) ** cfg.vector_contrast
        if cfg.fusion == "rrf":
            # ranks among every candidate seen so far (memories brought in later included)
            if self.text_ranks is None:
                by_text = sorted((c for c in group if c.t_norm > 0), key=lambda c: -c.t_norm)
                self.text_ranks = {c.id: r for r, c in enumerate(by_text)}
            sims = sorted(self.sims.values(), reverse=True)
            for c in group:
                part = (1 - w) / (60 + self.text_ranks[c.id]) if c.id in self.text_ranks else 0
                if c.v_norm > 0 and c.sim is not None:
                    part += w / (60 + bisect.bisect_left([-x for x in sims], -c.sim))
                c.match = part * 60
        else:
            for c in group:
                c.match = (1 - w) * c.t_norm + w * c.v_norm


def from_matches(matches: Sequence[Match], has_terms: bool, cfg: Config) -> dict[str, Candidate]:
    """The text matches as candidates, by id, their match normalised by the best one's."""
    top_text = max((m.score for m in matches), default=0.0) or 1.0
    # Contrast: a match half as strong as the best counts 0.35 (text_contrast 1.5), so
    # weak partial matches (one common word) stay below what strong matches spread.
    cands = {
        m.id: Candidate(
            m.id,
            m.score,
            (m.score / top_text) ** cfg.text_contrast if has_terms else 0.0,
            m.key,
            m.pinned,
            m.tier,
        )
        for m in matches
    }
    for c in cands.values():
        c.match = c.t_norm
        if c.text_score > 0:
            c.found.append("text")
    return cands


def pass_along(
    links: Sequence[Link], now_us: int, cfg: Config, share: float, has: Mapping[str, float]
) -> dict[str, list[tuple[float, str]]]:
    """What each memory receives along ``links`` from the memories passing: (gain, passer).

    A passer gives ``share`` of what it ``has`` (its match on the first hop, what it received
    on the second), each link damped by its decay relative to the passer's strongest link: a
    stale association of a live memory passes little, and an old conversation's links pass as
    much as when they were fresh."""
    h = cfg.half_life_us
    decayed = [
        (link, link.weight * scoring.decay(now_us - link.reinforced_us, h)) for link in links
    ]
    strongest: dict[str, float] = {}
    for link, dw in decayed:
        strongest[link.node_id] = max(strongest.get(link.node_id, 0.0), dw)
    gains: dict[str, list[tuple[float, str]]] = {}
    for link, dw in decayed:
        top = strongest[link.node_id]
        damp = dw / top if top > 0 else 1.0
        gains.setdefault(link.other_id, []).append((share * has[link.node_id] * damp, link.node_id))
    return gains
