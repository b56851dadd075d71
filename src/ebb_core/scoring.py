"""The scoring model: pure functions over plain values and one frozen :class:`Config`.

No I/O, no clock reads, no globals. Every function that takes times works on plain ``int``
microseconds and also on numpy arrays, so a backend can reuse it verbatim in a vectorised
maintenance pass.

The model
---------
``decay(age) = 2^(-age / half_life)``.

The *base* of a node at time T sums what touches it directly::

    base(n, T) = Σ_{edges e of n} w_e · decay(T − t_e) + read_bonus · decay(T − t_read(n))

Its *activation* adds one damped hop of the same over each of its edges, each neighbour sharing
its base equally among its own edges (ACT-R's fan effect; PageRank divides the same way), so a
hub does not keep every neighbour alive on its own::

    A(n, T) = base(n, T) + spread · Σ_{edges (n, m)} base(m, T) / degree(m)

``degree`` counts edges (two edges of different kinds between the same pair count twice).

Because every term decays with the same exponential, ``A(n, T) = 2^(−(T−E)/h) · K(n)`` for any
reference time E (the *epoch*), where the *key* ``K(n)`` is the same sum with each term written
as ``w · 2^((t − E)/h)``. ``K`` changes only when something happens to n or a neighbour, so
ranking and tier ratios need no rescoring as time passes: stores keep ``K`` (and the base part
``B``) on every node and recall orders by it. The epoch moves forward (``rebase``) before the
exponents get large, so keys never overflow.

Tiers are cut on ``K(n) / K(reference)``, which equals the ratio of activations at any time.
The reference is the most active non-pinned, non-frozen memory, or in a graph of more than a
hundred such memories the one at the top percentile (``reference_quantile``): with skewed degrees
one hub can be thousands of times as active as a typical memory, and normalising against it alone
would push nearly everything else into the archive (measured: 99.8% frozen on a 100k-memory
synthetic graph; 1.3% with the top-percentile reference).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import InvalidInput
from .model import Tier

US_PER_DAY = 86_400 * 1_000_000

Num = TypeVar("Num", float, Any)  # float, or a numpy array for vectorised passes


@dataclass(frozen=True)
class Config:
    """Every tunable of the model, in one place.

    Attributes:
        half_life_days: time for an unreinforced edge (or read) to count half as much.
        read_bonus: weight of the "read recently" term; a new memory counts as just read.
        spread: damping ``δ`` of the one hop of spreading activation from neighbours.
        hot_ratio / warm_ratio / cold_ratio: tier cuts on activation normalised against the
            reference memory: ``≥ hot_ratio`` is hot (1), ``≥ warm_ratio`` warm (2),
            ``≥ cold_ratio`` cold (3), below that frozen (4: queued for human review).
        reference_quantile: which memory is the reference: the most active non-pinned one
            ranked at ``floor(count × (1 − q))`` — the top one until there are 1/(1 − q).
        text_weight / activation_weight: recall blend of normalised text match and normalised
            activation.
        text_contrast: exponent on a candidate's text score normalised by the best one
            (``(score / best) ** text_contrast``): 1 keeps BM25's ratios; 1.5 makes a match half
            as strong as the best count 0.35, so partial matches on one common word sink
            below memories that strong matches spread to.
        candidate_pool: how many full-text candidates recall considers before blending.
        warm_prior / cold_prior: recall's tier fall-through: a warm (cold) candidate's blended
            score is multiplied by this, so hot memories come first and a deeper one surfaces
            only when hot holds nothing comparably strong. Frozen memories never surface.
        spread_share: query-time spreading: each of the ``spread_sources`` strongest text
            matches passes this share of its normalised text score one hop along its links,
            each damped by its decayed weight relative to the source's strongest link, so a
            memory tied to strong matches can surface with few shared words. 0 turns it off.
        spread_sources: how many of the strongest text matches spread (and how many of the
            memories they reach relay a second hop).
        spread_second_hop: spreading's second hop: the ``spread_sources`` memories that
            received the most from the first hop (the sources aside) pass this share of what
            they received one hop further along their live links, damped as in the first hop
            (never back to a source). 0 keeps spreading to one hop. In a conversation the answer
            is often two turns from the turn that matches (a question, its reply, the reply's
            follow-up): on LoCoMo with the default model 0.75 lifted R@10 from 0.713 to 0.730
            on the dev set and from 0.695 to 0.713 on its held-out part.
        spread_link_min: a link passes spreading only while its decayed weight is at least
            this (0: every link the source's link list holds).
        superseded_weight: a memory replaced by a live newer one (a ``supersedes`` link) has
            its score multiplied by this, and always ranks below its replacement.
        reinforce_tail: how much less the tail of a recall is reinforced: the hit at rank r
            (0-based) gets the share ``1 / (1 + reinforce_tail · r)`` of a full reinforcement
            (the top hit always a full one); 0 reinforces every hit fully.
        reinforce_min_share: hits whose share would be below this are not reinforced at all
            (each reinforcement is a write: with the default tail, recall reinforces its top
            five).
        decay_alone_freezes: whether ``maintain`` queues a memory for deletion (frozen) only
            because its activation fell below ``cold_ratio``. Off by default: decay archives
            (cold, still found by recall's fall-through) and a decayed memory is frozen only
            when it was superseded or everything it links to was.
        live_link_min: an edge whose decayed weight is at least this is reported as "live".
        eager_spreading: update neighbours' keys on every event (exact at all times, one more
            graph query per touched node); off by default: a touched memory's own activation is
            always current and its neighbours' one-hop share of the change arrives at
            ``maintain``.
        max_push_degree: with eager spreading, a change at a node with more edges than this
            still waits for ``maintain`` (see ``Brain._adjust``).
        rebase_after_half_lives: move the epoch forward once "now" is this many half-lives past it.
        vector_weight: with an embedder, a candidate's match is ``(1 − w) · text + w ·
            similarity`` (each normalised against the best candidate's); 0 ignores vectors.
        vector_pool: how many nearest vectors recall takes as candidates (beside the text ones).
        vector_floor: a cosine similarity at or below this counts as no similarity at all
            (unrelated sentences score 0-0.2 with small sentence models).
        vector_contrast: exponent on the normalised similarity, as ``text_contrast`` for text.
        fusion: ``"score"`` (the weighted sum above) or ``"rrf"`` (reciprocal-rank fusion of
            the text ranking and the vector ranking, ``Σ 1 / (60 + rank)``, rescaled to [0, 1]).
        vector_unmatched_spread: with vectors fused, the share of what spreads to it that a
            memory keeps when it matched neither the query's words nor its meaning (match 0:
            no text match and no similarity above the floor). Without an embedder such a
            memory is often the answer to a question worded differently, and keeps all of it;
            with one, the meaning was searched too and found nothing, so linked-only memories
            are weaker evidence (LoCoMo: 1% of them relevant against 10% of matched ones).

    >>> Config(half_life_days=7).half_life_us == 7 * 86_400 * 1_000_000
    True
    """

    half_life_days: float = 30.0
    read_bonus: float = 1.0
    spread: float = 0.15
    hot_ratio: float = 0.25
    warm_ratio: float = 0.08
    cold_ratio: float = 0.02
    reference_quantile: float = 0.99
    text_weight: float = 0.96
    activation_weight: float = 0.04
    text_contrast: float = 1.5
    candidate_pool: int = 100
    warm_prior: float = 0.95
    cold_prior: float = 0.9
    spread_share: float = 0.5
    spread_sources: int = 10
    spread_link_min: float = 0.0
    spread_second_hop: float = 0.75
    superseded_weight: float = 0.5
    reinforce_tail: float = 1.0
    reinforce_min_share: float = 0.2
    decay_alone_freezes: bool = False
    live_link_min: float = 0.1
    eager_spreading: bool = False
    max_push_degree: int = 128
    rebase_after_half_lives: float = 64.0
    vector_weight: float = 0.3
    vector_pool: int = 50
    vector_floor: float = 0.3
    vector_contrast: float = 1.5
    fusion: str = "score"
    vector_unmatched_spread: float = 0.5
    half_life_us: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive("half_life_days", self.half_life_days)
        _non_negative("read_bonus", self.read_bonus)
        if not 0.0 <= self.spread < 1.0:
            raise InvalidInput(f"spread must be in [0, 1), got {self.spread!r}", field="spread")
        if not 0.0 <= self.cold_ratio <= self.warm_ratio <= self.hot_ratio <= 1.0:
            raise InvalidInput(
                "tier ratios must satisfy 0 <= cold_ratio <= warm_ratio <= hot_ratio <= 1, got "
                f"{self.cold_ratio}, {self.warm_ratio}, {self.hot_ratio}",
                field="hot_ratio",
            )
        if not 0.0 < self.reference_quantile <= 1.0:
            raise InvalidInput("reference_quantile must be in (0, 1]", field="reference_quantile")
        _non_negative("text_weight", self.text_weight)
        _non_negative("activation_weight", self.activation_weight)
        if self.text_weight + self.activation_weight <= 0:
            raise InvalidInput("text_weight + activation_weight must be > 0", field="text_weight")
        _positive("text_contrast", self.text_contrast)
        if self.candidate_pool < 1:
            raise InvalidInput("candidate_pool must be >= 1", field="candidate_pool")
        for name in ("warm_prior", "cold_prior", "superseded_weight"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise InvalidInput(f"{name} must be in [0, 1], got {value!r}", field=name)
        _non_negative("spread_share", self.spread_share)
        _non_negative("spread_link_min", self.spread_link_min)
        _non_negative("spread_second_hop", self.spread_second_hop)
        _non_negative("reinforce_tail", self.reinforce_tail)
        if not 0.0 <= self.reinforce_min_share <= 1.0:
            raise InvalidInput(
                f"reinforce_min_share must be in [0, 1], got {self.reinforce_min_share!r}",
                field="reinforce_min_share",
            )
        if self.spread_sources < 0:
            raise InvalidInput("spread_sources must be >= 0", field="spread_sources")
        _non_negative("live_link_min", self.live_link_min)
        if self.max_push_degree < 0:
            raise InvalidInput("max_push_degree must be >= 0", field="max_push_degree")
        if not 1.0 <= self.rebase_after_half_lives <= 512.0:
            raise InvalidInput(
                "rebase_after_half_lives must be in [1, 512]", field="rebase_after_half_lives"
            )
        if not (isinstance(self.vector_weight, (int, float)) and 0.0 <= self.vector_weight <= 1):
            raise InvalidInput(
                f"vector_weight must be in [0, 1], got {self.vector_weight!r}",
                field="vector_weight",
            )
        if self.vector_pool < 0:
            raise InvalidInput("vector_pool must be >= 0", field="vector_pool")
        if not -1.0 <= self.vector_floor < 1.0:
            raise InvalidInput("vector_floor must be in [-1, 1)", field="vector_floor")
        _positive("vector_contrast", self.vector_contrast)
        if not 0.0 <= self.vector_unmatched_spread <= 1.0:
            raise InvalidInput(
                "vector_unmatched_spread must be in [0, 1]", field="vector_unmatched_spread"
            )
        if self.fusion not in ("score", "rrf"):
            raise InvalidInput(
                f"fusion must be 'score' or 'rrf', got {self.fusion!r}", field="fusion"
            )
        object.__setattr__(self, "half_life_us", self.half_life_days * US_PER_DAY)

    def scoring_signature(self) -> dict[str, float]:
        """The parameters stored keys depend on; a change means keys must be recomputed."""
        return {
            "half_life_days": self.half_life_days,
            "read_bonus": self.read_bonus,
            "spread": self.spread,
        }


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InvalidInput(f"{name} must be a positive finite number, got {value!r}", field=name)


def _non_negative(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise InvalidInput(
            f"{name} must be a non-negative finite number, got {value!r}", field=name
        )


def decay(age_us: Num, half_life_us: float) -> Num:
    """``2^(-age / half_life)``; ages below zero (clock skew) count as zero."""
    if isinstance(age_us, (int, float)):
        return float(2.0 ** (-max(age_us, 0) / half_life_us))
    import numpy as np

    return np.exp2(-np.maximum(age_us, 0) / half_life_us)


def term_key(weight: Num, at_us: Num, epoch_us: int, half_life_us: float) -> Num:
    """One term of a key, ``weight · 2^((at − epoch)/h)``; at T it counts ``term · scale(T)``."""
    if isinstance(at_us, (int, float)):
        return weight * float(2.0 ** ((at_us - epoch_us) / half_life_us))
    import numpy as np

    return weight * np.exp2((at_us - epoch_us) / half_life_us)


def scale(now_us: Num, epoch_us: int, half_life_us: float) -> Num:
    """The factor turning a key into an activation at ``now``: ``2^(−(now − epoch)/h)``
    (``now`` may be a numpy array of times, before or after ``epoch``)."""
    if isinstance(now_us, (int, float)):
        return float(2.0 ** (-(now_us - epoch_us) / half_life_us))
    import numpy as np

    return np.exp2(-(now_us - epoch_us) / half_life_us)


def base_key(
    edges: Iterable[tuple[float, int]],
    last_read_us: int | None,
    epoch_us: int,
    cfg: Config,
) -> float:
    """Key of a node's base: its edges ``(weight, reinforced_us)`` plus the read-recency bonus."""
    h = cfg.half_life_us
    total = sum(term_key(w, t, epoch_us, h) for w, t in edges)
    if last_read_us is not None and cfg.read_bonus > 0:
        total += term_key(cfg.read_bonus, last_read_us, epoch_us, h)
    return float(total)


def share(base: float, degree: int) -> float:
    """What a node passes to each neighbour before damping: its base split over its degree."""
    return base / degree if degree > 0 else 0.0


def graph_keys(
    size: int,
    src: Any,
    dst: Any,
    weight: Any,
    reinforced_us: Any,
    read_us: Any,
    has_read: Any,
    epoch_us: int,
    half_life_us: float,
    read_bonus: float,
    spread: float,
) -> tuple[Any, Any, Any]:
    """Every node's ``(base_key, key, degree)`` at once, as numpy arrays of length ``size``.

    Nodes are positions ``0..size-1``; edge ``i`` joins ``src[i]`` and ``dst[i]`` with
    ``weight[i]``, last reinforced at ``reinforced_us[i]``; ``read_us`` is each node's read
    clock where ``has_read``. The whole-graph form of :func:`activation_key` (one damped hop,
    shares split over the neighbour's degree): what ``maintain`` and imports store.
    """
    import numpy as np

    terms = term_key(weight, reinforced_us, epoch_us, half_life_us) if len(src) else np.zeros(0)
    base = (np.bincount(src, terms, size) + np.bincount(dst, terms, size)).astype(float)
    degree = np.bincount(src, minlength=size) + np.bincount(dst, minlength=size)
    base += np.where(
        has_read, term_key(read_bonus, np.where(has_read, read_us, 0), epoch_us, half_life_us), 0.0
    )
    share = np.divide(base, degree, out=np.zeros(size), where=degree > 0)
    key = base + spread * (np.bincount(src, share[dst], size) + np.bincount(dst, share[src], size))
    return base, key, degree


def keys_changed(
    base: Any, old_base: Any, key: Any, old_key: Any, degree: Any, old_degree: Any
) -> Any:
    """The boolean mask of rows whose computed ``(base, key, degree)`` differ from the stored
    ones (numpy; a missing stored value is NaN, or -1 for the degree). Float noise of
    incremental sums (relative 1e-12) is not a change: what ``maintain`` writes back on
    every backend."""
    import numpy as np

    return (
        ~np.isclose(base, old_base, rtol=1e-12, atol=1e-300)
        | ~np.isclose(key, old_key, rtol=1e-12, atol=1e-300)
        | (degree != old_degree)
    )


def reference_of(live_keys: Any, quantile: float) -> tuple[float, int]:
    """The tier reference among ``live_keys`` (numpy; unpinned, unfrozen memories): the key at
    rank ``int(n · (1 − quantile))`` from the top (0: the maximum), and that rank."""
    import numpy as np

    if not len(live_keys):
        return 0.0, 0
    rank = int(len(live_keys) * (1.0 - quantile))
    return float(-np.partition(-np.asarray(live_keys, float), rank)[rank]), rank


def activation_key(own_base: float, neighbours: Iterable[tuple[float, int]], cfg: Config) -> float:
    """Key of a node's activation: its base plus ``spread`` times its neighbours' shares.

    ``neighbours`` gives ``(base_key, degree)`` of the node at the other end of each edge.
    """
    return float(own_base + cfg.spread * sum(share(b, d) for b, d in neighbours))


def activation_direct(
    edges: Iterable[tuple[float, int]],
    last_read_us: int | None,
    neighbours: Iterable[tuple[Iterable[tuple[float, int]], int | None, int]],
    now_us: int,
    cfg: Config,
) -> float:
    """``A(n, T)`` from first principles (no keys, no epoch): the reference the key form must equal.

    ``neighbours`` gives, per edge, the other end's own ``(edges, last_read_us, degree)``.
    """
    h = cfg.half_life_us

    def base(es: Iterable[tuple[float, int]], read: int | None) -> float:
        total = sum(w * decay(now_us - t, h) for w, t in es)
        if read is not None:
            total += cfg.read_bonus * decay(now_us - read, h)
        return float(total)

    return base(edges, last_read_us) + cfg.spread * sum(
        share(base(es, r), d) for es, r, d in neighbours
    )


@dataclass(frozen=True)
class ActivationParts:
    """Activation at one moment, split into where it comes from."""

    edges: float
    read: float
    spread: float

    @property
    def total(self) -> float:
        return self.edges + self.read + self.spread


def activation_parts(
    base: float,
    key: float,
    last_read_us: int | None,
    now_us: int,
    epoch_us: int,
    cfg: Config,
) -> ActivationParts:
    """Split a node's activation at ``now`` into edges, read bonus and spreading parts."""
    s = scale(now_us, epoch_us, cfg.half_life_us)
    read = 0.0
    if last_read_us is not None:
        read = cfg.read_bonus * decay(now_us - last_read_us, cfg.half_life_us)
    total_base = base * s
    return ActivationParts(
        edges=max(total_base - read, 0.0),
        read=read,
        spread=max((key - base) * s, 0.0),
    )


def tier_for(ratio: float, pinned: bool, cfg: Config) -> Tier:
    """The tier a node belongs in, given ``K(n) / K(reference)``. Pinned nodes are always hot."""
    if pinned or ratio >= cfg.hot_ratio:
        return Tier.HOT
    if ratio >= cfg.warm_ratio:
        return Tier.WARM
    if ratio >= cfg.cold_ratio:
        return Tier.COLD
    return Tier.FROZEN


def tiers_for(ratios: Any, pinned: Any, hot: float, warm: float, cold: float) -> Any:
    """:func:`tier_for` over numpy arrays (tier numbers, int64), for whole-graph passes."""
    import numpy as np

    return np.where(
        pinned | (ratios >= hot),
        int(Tier.HOT),
        np.where(ratios >= warm, int(Tier.WARM), np.where(ratios >= cold, int(Tier.COLD), 4)),
    ).astype(np.int64)


def ratio(key: float, reference: float) -> float:
    """``key / reference`` clamped to [0, 1]; no reference yet (0) gives 1: nothing archives."""
    if reference <= 0:
        return 1.0
    return min(max(key / reference, 0.0), 1.0)


def blend(text_norm: float, activation_norm: float, cfg: Config) -> float:
    """Recall score: weighted mean of normalised text match and normalised activation, in
    [0, 1] for inputs in [0, 1] (the text part can exceed 1 when spreading adds to a match)."""
    total = cfg.text_weight + cfg.activation_weight
    return (cfg.text_weight * text_norm + cfg.activation_weight * activation_norm) / total


def tier_prior(tier: int, cfg: Config) -> float:
    """Recall's fall-through factor for a candidate in ``tier`` (hot 1; frozen 0)."""
    if tier <= Tier.HOT:
        return 1.0
    if tier == Tier.WARM:
        return cfg.warm_prior
    if tier == Tier.COLD:
        return cfg.cold_prior
    return 0.0


def reinforce_share(rank: int, cfg: Config) -> float:
    """The share of a full reinforcement the hit at ``rank`` (0-based) of a recall gets."""
    return 1.0 / (1.0 + cfg.reinforce_tail * max(rank, 0))


def partial_read_us(share_: float, last_read_us: int | None, now_us: int, cfg: Config) -> int:
    """The read clock that gives a node ``share_`` of a full reinforcement at ``now``.

    A full reinforcement sets the read term ``read_bonus · decay(now − t_read)`` to
    ``read_bonus``; a partial one moves it ``share_`` of the way there, which is the same as
    moving the read clock forward to ``now − h · log2(read_bonus / target)``. The clock never
    moves back.

    >>> cfg = Config()
    >>> partial_read_us(1.0, None, 10**12, cfg) == 10**12
    True
    """
    if share_ >= 1.0 or cfg.read_bonus <= 0:
        return now_us
    if share_ <= 0.0:  # no reinforcement at all
        return last_read_us if last_read_us is not None else now_us - int(1000 * cfg.half_life_us)
    old = 0.0 if last_read_us is None else decay(now_us - last_read_us, cfg.half_life_us)
    target = old + max(share_, 0.0) * (1.0 - old)  # in units of read_bonus
    target = max(target, 2.0**-1000)  # a vanishing share: a read clock ~1000 half-lives ago
    at = now_us - int(cfg.half_life_us * math.log2(1.0 / target))
    return at if last_read_us is None else max(at, last_read_us)


def needs_rebase(now_us: int, epoch_us: int, cfg: Config) -> bool:
    """Whether keys have grown enough that the epoch should move forward to ``now``."""
    return (now_us - epoch_us) / cfg.half_life_us > cfg.rebase_after_half_lives


def rebase_factor(old_epoch_us: int, new_epoch_us: int, cfg: Config) -> float:
    """Multiply every stored key by this when the epoch moves from old to new."""
    return float(2.0 ** (-(new_epoch_us - old_epoch_us) / cfg.half_life_us))
