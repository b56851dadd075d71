"""Recall of a :class:`~ebb_core.engine.Brain`: ranking its candidates and explaining each hit.

:class:`RecallMixin` holds ``Brain.recall``, its ranking (``_rank``: text and vector candidates,
tier fall-through, spreading, replacement) and each hit's :class:`~ebb_core.model.Why`
(``_hit``, ``_summary``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from . import scoring
from .brain_base import BrainBase
from .errors import InvalidInput
from .explain import explain_hit
from .model import Node, RecallHit, Tier
from .ranking import Candidate, Fusion, from_matches, pass_along
from .store import Link, Match, RecallHint
from .text import query_terms
from .validation import MAX_TEXT_LEN, _encodable, validate_k, validate_kind


class RecallMixin(BrainBase):
    """``Brain.recall`` (on :class:`BrainBase`)."""

    last_query_embed_s: float = 0.0

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        depth: int | None = None,
        include_archived: bool = False,
        kinds: Sequence[str] = (),
        reinforce: bool = True,
    ) -> list[RecallHit]:
        """The ``k`` memories most relevant to ``query``, each with why it surfaced.

        Candidates come from the full-text index (never a scan of every memory) and are ranked by
        a blend of normalised text match and normalised activation, with three corrections:

        - *tier fall-through*: every tier but frozen is searched, hot first: a warm (cold)
          candidate's score is multiplied by ``Config.warm_prior`` (``cold_prior``), so it
          surfaces when hot holds nothing comparably strong. ``depth`` is an explicit limit:
          1 hot only, 2 hot and warm, 3 (or ``include_archived=True``) down to cold; frozen
          memories never surface (they wait for a person).
        - *spreading*: the strongest text matches pass part of their text score one hop along
          their live links (``Config.spread_share``), so a memory tied to strong matches can
          surface with few shared words.
        - *supersession*: a memory that a live memory supersedes ranks below its replacement
          (the replacement is brought in if it matched nothing) and its score is multiplied by
          ``Config.superseded_weight``.

        ``why`` of every hit gives the parts of its score, the tier it came from and why recall
        reached it, what spread to it and what superseded it. What is returned is reinforced
        (its read clock moves) unless ``reinforce=False``: the top hit fully, the hit at rank r
        by ``1 / (1 + reinforce_tail · r)`` of a full reinforcement, superseded hits less still,
        none whose share is below ``reinforce_min_share``.
        """
        kinds, max_tier = _recall_scope(query, k, depth, include_archived, kinds)
        terms = query_terms(query)
        qvec = self._embed_query(query)  # outside the store's lock: it is the slow part
        with self._tx():
            now_us = self._now_us()
            if terms:
                self._hint_reads(now_us, k)
            vec, qvec = self._vector_candidates(qvec, k, max_tier, kinds)
            cands = self._text_candidates(terms, qvec, k, max_tier, kinds)
            if not cands and not vec:
                return []
            known: dict[str, list[Link]] = {}
            ranked = self._rank(
                cands, bool(terms), max_tier, set(kinds), k, now_us, known, vec, qvec
            )[:k]
            found = self._s.store.get_nodes(self._ns, [c.id for c in ranked])
            chosen = [(c, found[c.id]) for c in ranked if c.id in found]
            nodes = {n.id: n for _, n in chosen}
            by_node = self._live_links(nodes, known, now_us)
            hits = [
                explain_hit(
                    c,
                    n,
                    terms,
                    by_node.get(n.id, []),
                    now_us,
                    ranked,
                    self._s.config,
                    self._s.epoch_us,
                )
                for c, n in chosen
            ]
            if reinforce:
                self._reinforce_hits(chosen, nodes, now_us)
            return hits

    def _hint_reads(self, now_us: int, k: int) -> None:
        """Tell the store what recall reads after its text candidates (a server backend
        fetches it with them: one round trip instead of several)."""
        cfg = self._s.config
        self._s.store.prepare_recall(
            self._ns,
            RecallHint(
                now_us=now_us,
                half_life_us=cfg.half_life_us,
                link_min=min(cfg.spread_link_min, cfg.live_link_min),
                linked=cfg.spread_sources,
                links_per_node=max(16 * cfg.spread_sources, 10 * k),
                meta_keys=(f"reference:{self._ns}",),
            ),
        )

    def _embed_query(self, query: str) -> Any:
        """The query's vector (None without an embedder, a vector weight or words); the time it
        took is kept in ``last_query_embed_s``."""
        cfg = self._s.config
        self.last_query_embed_s = 0.0
        emb = self._s.embedder
        if emb is not None and cfg.vector_weight > 0 and query.strip():
            import time as _time

            t0 = _time.perf_counter()
            qvec = emb.embed_query(query)
            self.last_query_embed_s = _time.perf_counter() - t0
            return qvec
        return None

    def _vector_candidates(
        self, qvec: Any, k: int, max_tier: Tier, kinds: Sequence[str]
    ) -> tuple[list[tuple[Match, float]], Any]:
        """The vector index's candidates for ``qvec`` and the query vector to fuse with (None
        when nothing is embedded yet: recall then ranks on text alone)."""
        if qvec is None:
            return [], None
        cfg = self._s.config
        vec = self._s.store.vector_matches(self._ns, qvec, max(cfg.vector_pool, k), max_tier, kinds)
        return vec, (qvec if vec else None)

    def _text_candidates(
        self, terms: list[str], qvec: Any, k: int, max_tier: Tier, kinds: Sequence[str]
    ) -> list[Match]:
        """The full-text index's candidates for ``terms``; a query without words (and without
        a vector) takes the ``k`` most active memories instead."""
        store = self._s.store
        if terms:
            pool = max(self._s.config.candidate_pool, 4 * k)
            return store.text_matches(self._ns, " ".join(terms), max_tier, pool, kinds)
        if qvec is not None:
            return []
        return [
            Match(n.id, 0.0, n.key, n.pinned, int(n.tier))
            for n in store.top_by_key(self._ns, max_tier, k, kinds)
        ]

    def _live_links(
        self, nodes: dict[str, Node], known: dict[str, list[Link]], now_us: int
    ) -> dict[str, list[Link]]:
        """The hits' strongest live links, by hit: the spreading sources' links are known
        already (``known``), only the others' are read."""
        cfg = self._s.config
        h = cfg.half_life_us
        rest = [i for i in nodes if i not in known]
        links = self._s.store.strongest_links(
            self._ns, rest, now_us, h, cfg.live_link_min, 10 * len(rest)
        )
        links += [
            link
            for i in nodes
            for link in known.get(i, [])
            if link.weight * scoring.decay(now_us - link.reinforced_us, h) >= cfg.live_link_min
        ]
        by_node: dict[str, list[Link]] = {}
        for link in links:
            by_node.setdefault(link.node_id, []).append(link)
        return by_node

    def _reinforce_hits(
        self, chosen: list[tuple[Candidate, Node]], nodes: dict[str, Node], now_us: int
    ) -> None:
        """Reinforce what recall returns: the top hit fully, the tail (and superseded hits)
        less, none below ``reinforce_min_share``; a superseded hit is lifted no higher than
        warm."""
        cfg = self._s.config
        shares = {
            n.id: scoring.reinforce_share(rank, cfg)
            * (cfg.superseded_weight if c.superseded_by else 1.0)
            for rank, (c, n) in enumerate(chosen)
        }
        used = {i: n for i, n in nodes.items() if shares[i] >= cfg.reinforce_min_share}
        caps = {c.id: Tier.WARM for c, _ in chosen if c.superseded_by}
        if used:
            self._mark_read(used, now_us, shares, caps)

    def _rank(
        self,
        matches: Sequence[Match],
        has_terms: bool,
        max_tier: Tier,
        kinds: set[str],
        k: int,
        now_us: int,
        known: dict[str, list[Link]],
        vec: Sequence[tuple[Match, float]] = (),
        qvec: Any = None,
    ) -> list[Candidate]:
        """Recall's ranking of its text (and vector) candidates (see :meth:`recall`), best
        first. The links it reads for spreading are left in ``known`` (by memory id) for the
        explanations."""
        cfg = self._s.config
        cands = from_matches(matches, has_terms, cfg)
        pool = max(cfg.vector_pool, k)
        fuse = Fusion(cfg, qvec, vec, pool) if qvec is not None else None
        if fuse is not None:
            for m, _sim in vec:
                if m.id not in cands:
                    cands[m.id] = Candidate(m.id, 0.0, 0.0, m.key, m.pinned, m.tier)
                cands[m.id].found.append("vector")
            # A text candidate the vector index did not return is less similar than the
            # pool's last: it fuses with similarity 0 (fetching its vector measured no better
            # on LoCoMo, 0.689 vs 0.692, and costs a read per recall).
            fuse.apply(cands.values())

        def admit(ids: Iterable[str]) -> None:
            """Bring memories that matched no words in as candidates, if recall may see them."""
            self._admit(cands, ids, max_tier, kinds, fuse)

        # Query-time spreading: one hop from the strongest matches along live links.
        if (has_terms or fuse is not None) and cfg.spread_share > 0 and cfg.spread_sources > 0:
            self._spread(cands, k, now_us, known, admit, fuse is not None)

        # Normalise activation as tiers do; before the first reference exists, by the best
        # candidate.
        mx = self._ref_key() or max(c.key for c in cands.values())
        for c in cands.values():
            c.a_norm = scoring.ratio(c.key, mx)
            c.score = scoring.blend(c.match + c.spread, c.a_norm, cfg) * scoring.tier_prior(
                c.tier, cfg
            )
        self._supersede(cands, k, mx, admit)
        return sorted(cands.values(), key=lambda c: (-c.score, c.id))

    def _admit(
        self,
        cands: dict[str, Candidate],
        ids: Iterable[str],
        max_tier: Tier,
        kinds: set[str],
        fuse: Fusion | None,
    ) -> None:
        """Bring the memories ``ids`` that matched no words into ``cands``, if recall may see
        them (tier and kind), fused with the query vector when there is one."""
        wanted = [i for i in dict.fromkeys(ids) if i not in cands]
        if not wanted:
            return
        new = []
        for m in self._s.store.matches_for(self._ns, wanted):
            if m.tier <= max_tier and (not kinds or m.kind in kinds):
                cands[m.id] = Candidate(m.id, 0.0, 0.0, m.key, m.pinned, m.tier)
                new.append(cands[m.id])
        if fuse is not None and new:
            fuse.apply(new)

    def _spread(
        self,
        cands: dict[str, Candidate],
        k: int,
        now_us: int,
        known: dict[str, list[Link]],
        admit: Callable[[Iterable[str]], None],
        fused: bool = False,
    ) -> None:
        """Query-time spreading: the strongest matches pass part of their match one hop along
        their live links; a memory that matched nothing is admitted only if what it receives
        could lift it into the top ``k``. The sources' links are left in ``known``."""
        cfg, store = self._s.config, self._s.store
        sources = sorted(
            (c for c in cands.values() if c.match > 0), key=lambda c: (-c.match, c.id)
        )[: cfg.spread_sources]
        h = cfg.half_life_us
        links = store.strongest_links(
            self._ns,
            [c.id for c in sources],
            now_us,
            h,
            cfg.spread_link_min,
            16 * len(sources),
        )
        if len(links) < 16 * len(sources):  # every link of every source
            for c in sources:
                known[c.id] = []
            for link in links:
                known[link.node_id].append(link)
        gains = pass_along(
            links, now_us, cfg, cfg.spread_share, {i: c.match for i, c in cands.items()}
        )
        relays: set[str] = set()
        if cfg.spread_second_hop > 0:
            relays = self._second_hop(gains, {c.id for c in sources}, now_us)
        # With vectors fused, a memory that matched neither words nor meaning keeps only part
        # of what spreads to it (Config.vector_unmatched_spread).
        unmatched = cfg.vector_unmatched_spread if fused else 1.0
        # A memory that matched no words is worth bringing in only if what it receives
        # could lift it into the top k (text scores only grow from here).
        mx0 = self._ref_key() or max(c.key for c in cands.values())
        floor = (
            sorted(
                (scoring.blend(c.match, scoring.ratio(c.key, mx0), cfg) for c in cands.values()),
                reverse=True,
            )[min(k, len(cands)) - 1]
            if len(cands) >= k
            else 0.0
        )
        admit(
            i
            for i, got in gains.items()
            if i in cands or scoring.blend(unmatched * sum(g for g, _ in got), 1.0, cfg) > floor
        )
        for i, got in gains.items():
            if i in cands:
                got.sort(key=lambda g: (-g[0], g[1]))
                cands[i].spread = sum(g for g, _ in got)
                if cands[i].match == 0:
                    cands[i].spread *= unmatched
                cands[i].spread_from = list(dict.fromkeys(s for _, s in got))
                cands[i].spread_via = [s for s in cands[i].spread_from if s in relays]

    def _second_hop(
        self, gains: dict[str, list[tuple[float, str]]], sources: set[str], now_us: int
    ) -> set[str]:
        """Spreading's second hop (``Config.spread_second_hop``): the ``spread_sources``
        memories that received the most from the first (the sources aside) pass that share of
        what they received one hop further, each link damped as in the first hop; added to
        ``gains``. Never back to a source: their own match already counts. Returns the relays
        that passed something on (a hit's ``why`` names them as relays, not as matches)."""
        cfg = self._s.config
        got = {i: sum(g for g, _ in gs) for i, gs in gains.items() if i not in sources}
        relays = sorted(got, key=lambda i: (-got[i], i))[: cfg.spread_sources]
        if not relays:
            return set()
        links = self._s.store.strongest_links(
            self._ns, relays, now_us, cfg.half_life_us, cfg.spread_link_min, 16 * len(relays)
        )
        passed: set[str] = set()
        for other, more in pass_along(links, now_us, cfg, cfg.spread_second_hop, got).items():
            if other not in sources:  # damped against every link, sources' included
                gains.setdefault(other, []).extend(more)
                passed.update(relay for _, relay in more)
        return passed

    def _supersede(
        self,
        cands: dict[str, Candidate],
        k: int,
        mx: float,
        admit: Callable[[Iterable[str]], None],
    ) -> None:
        """Supersession: among the best candidates, a replaced memory sinks below its
        replacement (brought in if it matched nothing) and loses part of its score."""
        cfg = self._s.config
        order = sorted(cands.values(), key=lambda c: (-c.score, c.id))
        checked: set[str] = set()
        todo = [c.id for c in order[: max(3 * k, 30)]]
        for _ in range(3):  # chains of replacements, a few links deep
            todo = [i for i in todo if i not in checked]
            if not todo:
                break
            checked.update(todo)
            replaced = self._s.store.superseded_by(self._ns, todo)
            admit(x for news in replaced.values() for x in news)
            todo = []
            for old, news in replaced.items():
                c = cands[old]
                c.superseded_by = news
                for n in news:
                    if n in cands:
                        r = cands[n]
                        if r.match == 0 and r.spread == 0 and not r.supplied:
                            r.a_norm = scoring.ratio(r.key, mx)
                        # the replacement answers what the old memory answered
                        if c.score > r.score:
                            r.score, r.supplied = c.score, True
                            r.found.append("replaces")
                        todo.append(n)
                c.score *= cfg.superseded_weight
        for _ in range(3):
            for c in cands.values():
                present = [cands[n].score for n in c.superseded_by if n in cands]
                if present and c.score >= min(present):
                    c.score = min(present) * (1.0 - 1e-9)


def _recall_scope(
    query: str, k: int, depth: int | None, include_archived: bool, kinds: Sequence[str]
) -> tuple[list[str], Tier]:
    """``recall``'s arguments checked: the kinds asked for and the deepest tier searched."""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string", field="query")
    if len(query) > MAX_TEXT_LEN:
        raise InvalidInput(
            f"query is {len(query):,} characters; the limit is {MAX_TEXT_LEN:,}", field="query"
        )
    _encodable(query, "query")
    validate_k(k)
    if depth is not None and (isinstance(depth, bool) or depth not in (1, 2, 3)):
        raise InvalidInput(
            f"depth must be 1 (hot), 2 (+warm) or 3 (+cold), got {depth!r}", field="depth"
        )
    wanted = [validate_kind(x, "kinds") for x in kinds]
    max_tier = Tier.COLD if depth is None or include_archived or depth == 3 else Tier(depth)
    return wanted, max_tier
