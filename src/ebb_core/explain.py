"""A recall hit's explanation: the parts of its score, its live links, and the one-line
summary every caller shows (``RecallHit.why``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from . import scoring
from .clock import from_us, to_us
from .model import LiveLink, Node, RecallHit, Tier, Why
from .ranking import Candidate
from .scoring import Config
from .store import Link
from .text import matched_terms


def explain_hit(
    c: Candidate,
    node: Node,
    terms: list[str],
    links: Sequence[Link],
    now_us: int,
    ranked: Sequence[Candidate],
    cfg: Config,
    epoch_us: int,
) -> RecallHit:
    """One hit with its explanation; ``links`` are this node's strongest live links and
    ``ranked`` the candidates in order (to say why recall reached a deeper tier); ``epoch_us``
    the store's scoring epoch."""
    parts = scoring.activation_parts(
        node.base_key, node.key, _opt_us(node.last_read_at), now_us, epoch_us, cfg
    )
    h = cfg.half_life_us
    live = [
        LiveLink(
            id=link.other_id,
            kind=link.kind,
            direction="out" if link.outgoing else "in",
            weight=link.weight,
            decayed_weight=link.weight * scoring.decay(now_us - link.reinforced_us, h),
            reinforced_at=from_us(link.reinforced_us),
        )
        for link in links
    ]
    last = max(
        [t for t in [node.last_read_at, *(x.reinforced_at for x in live)] if t is not None],
        default=None,
    )
    live.sort(key=lambda x: (-x.decayed_weight, x.id))
    matched = matched_terms(terms, node.text)
    reached = "hot"
    if node.tier != Tier.HOT:
        below = [r.score for r in ranked if r.tier == Tier.HOT and r.score < c.score]
        best = max(below, default=None)
        prior = scoring.tier_prior(node.tier, cfg)
        reached = (
            f"{node.tier.label}: no hot memory scored as high"
            + (f" (the best below it: {best:.3f})" if best is not None else "")
            + f"; its score carries the {node.tier.label} prior x{prior:g}"
        )
    summary = _summary(matched, parts, live, node.tier, last, now_us)
    summary = "; ".join([summary, *_extras(c, node.tier, reached)])
    why = Why(
        matched_terms=matched,
        text_score=c.text_score,
        text_norm=c.t_norm,
        activation=parts.total,
        activation_norm=c.a_norm,
        edges_part=parts.edges,
        read_part=parts.read,
        spread_part=parts.spread,
        live_links=live[:10],
        last_reinforced_at=last,
        tier=node.tier,
        summary=summary,
        spread_text=c.spread,
        spread_from=c.spread_from[:10],
        superseded_by=c.superseded_by,
        reached=reached,
        similarity=c.sim,
        similarity_norm=c.v_norm,
        match=c.match,
        found_by=list(dict.fromkeys(c.found + (["link"] if c.spread_from else []))),
    )
    return RecallHit(node=node, score=c.score, why=why)


def _extras(c: Candidate, tier: Tier, reached: str) -> list[str]:
    """The summary's closing parts: similarity, spreading, supersession, a deeper tier."""
    extra: list[str] = []
    if c.sim is not None:
        extra.insert(0, f"similarity {c.sim:.3f}")
    if c.spread_from:
        direct = [i for i in c.spread_from if i not in c.spread_via]
        via = [i for i in c.spread_from if i in c.spread_via]
        said = [f"linked to matches {', '.join(direct[:3])}"] if direct else []
        said += [f"two links from a match, through {', '.join(via[:3])}"] if via else []
        extra.append(f"{'; '.join(said)} (+{c.spread:.3f})")
    if c.superseded_by:
        extra.append(f"superseded by {', '.join(c.superseded_by)}")
    if tier != Tier.HOT:
        extra.append(f"from {reached}")
    return extra


def _opt_us(when: datetime | None) -> int | None:
    return None if when is None else to_us(when)


def _summary(
    matched: list[str],
    parts: scoring.ActivationParts,
    links: list[LiveLink],
    tier: Tier,
    last: datetime | None,
    now_us: int,
) -> str:
    bits = []
    bits.append("matched " + ", ".join(repr(t) for t in matched) if matched else "no text match")
    bits.append(
        f"activation {parts.total:.3f} (links {parts.edges:.3f}, read {parts.read:.3f}, "
        f"neighbours {parts.spread:.3f})"
    )
    if links:
        # Two links to one neighbour (two kinds, or both directions) name it once.
        others = list(dict.fromkeys(link.id for link in links))
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        count = f"{len(links)} live link{'s' if len(links) != 1 else ''}"
        if len(others) < len(links):
            count += f" to {len(others)} memor{'ies' if len(others) != 1 else 'y'}"
        bits.append(f"{count} ({shown})")
    if last is not None:
        days = max(now_us - to_us(last), 0) / scoring.US_PER_DAY
        bits.append(f"last reinforced {_ago(days)}")
    bits.append(f"tier {tier.label}")
    return "; ".join(b for b in bits if b)


def _ago(days: float) -> str:
    if days < 1 / 24:
        return "just now"
    if days < 1:
        return f"{days * 24:.0f}h ago"
    return f"{days:.0f}d ago"
