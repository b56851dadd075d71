"""The Kùzu store's full-text search: ``text_matches`` and ``text_candidates``.

A search asks the in-process copy of the full-text index when there is one (``_copy_hits``),
else Kùzu's ``QUERY_FTS_INDEX``, widened until it holds the namespace's share
(``_namespace_hits``); before the recall columns are built (a one-shot command), lookups are
answered by queries instead (``_text_matches_cold``), with the same answers.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..model import Node, Tier
from ..store import Match
from .base import KuzuBase
from .queries import FTS_INDEX, SEP


class KuzuSearch(KuzuBase):
    """The text-search half of ``KuzuStore``."""

    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        with self._lock:
            self._ensure_cache()
            cache, wanted = self._cache, set(kinds)
            picked = [
                (cache.uid[off], score)
                for off, score in self._namespace_hits(namespace, query, int(pool))
                if cache.tier[off] <= int(max_tier) and (not wanted or cache.kind[off] in wanted)
            ]
            cut = len(namespace) + len(SEP)
            found = self.get_nodes(namespace, [u[cut:] for u, _ in picked if u is not None])
            return [(found[u[cut:]], s) for u, s in picked if u is not None and u[cut:] in found]

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        with self._lock:
            self._searches += 1
            if not self._warm():
                return self._text_matches_cold(namespace, query, max_tier, pool, kinds)
            cache, cut, wanted = self._cache, len(namespace) + len(SEP), set(kinds)
            out: list[Match] = []
            # The namespace's own top max(4 × pool, 200), then its tier and kind filters.
            for off, score in self._namespace_hits(namespace, query, max(4 * pool, 200)):
                u = cache.uid[off]
                if u is None or cache.tier[off] > int(max_tier):
                    continue
                if wanted and cache.kind[off] not in wanted:
                    continue
                out.append(
                    Match(
                        u[cut:],
                        float(score),
                        float(cache.key[off]),
                        bool(cache.pinned[off]),
                        int(cache.tier[off]),
                    )
                )
                if len(out) >= pool:
                    break
            return out

    def _warm(self) -> bool:
        """Whether the recall columns answer lookups (building them if it is time).

        Building them reads every memory (and imports numpy and pyarrow, ~0.1 s): worth it for
        a process that keeps calling, not for a one-shot command. Until a process's second
        text search (and for at most ``_COLD_CALLS`` lookups: one recall makes three to five)
        lookups are answered by queries instead, which give the same answers.
        """
        if self._cache.ready:
            return True
        if self._searches <= 1 and self._cold_left > 0:
            self._cold_left -= 1
            return False
        self._ensure_cache()
        return True

    def _columns_of(self, uids: Sequence[str]) -> dict[str, tuple[int, float, bool, str]]:
        """(tier, key, pinned, kind) of each stored memory among ``uids``."""
        wanted = list(dict.fromkeys(uids))
        if not wanted:
            return {}
        if self._warm():
            cache, out = self._cache, {}
            for u in wanted:
                o = cache.offset.get(u)
                if o is not None:
                    out[u] = (
                        int(cache.tier[o]),
                        float(cache.key[o]),
                        bool(cache.pinned[o]),
                        cache.kind[o],
                    )
            return out
        return {
            r[0]: (int(r[1]), float(r[2]), bool(r[3]), r[4])
            for r in self._q(
                "UNWIND $us AS u MATCH (n:Memory {uid: u}) "
                "RETURN n.uid, n.tier, n.key, n.pinned, n.kind",
                {"us": wanted},
            )
        }

    def _text_matches_cold(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str]
    ) -> list[Match]:
        """:meth:`text_matches` without the recall columns: the index's hits come with their
        rows' columns (a scan of the node table, ~1 ms at 10k memories, where building the
        columns reads every row). The same widening, order and filters as
        :meth:`_namespace_hits`."""
        want, prefix, wanted = max(4 * pool, 200), f"{namespace}{SEP}", set(kinds)
        top, size = want, -1
        while True:
            rows = self._q(
                f"CALL QUERY_FTS_INDEX('Memory', '{FTS_INDEX}', $q, TOP := $top) "
                "RETURN node.uid, score, node.tier, node.key, node.pinned, node.kind",
                {"q": query, "top": int(top)},
            )
            ours = [r for r in rows if r[0].startswith(prefix)]
            found = len(ours)
            if found >= want or len(rows) < top:
                break
            if size < 0:  # the offsets' range, as the recall columns count it
                size = int(self._q("MATCH (n:Memory) RETURN max(offset(id(n)))")[0][0] or 0) + 1
            if top >= size:
                break
            top = size if found == 0 else min(size, max(2 * top, top * 2 * want // found))
        ours.sort(key=lambda r: (-r[1], r[0]))
        out: list[Match] = []
        for u, score, tier, key, pinned, kind in ours[:want]:
            if tier > int(max_tier) or (wanted and kind not in wanted):
                continue
            out.append(Match(u[len(prefix) :], float(score), float(key), bool(pinned), int(tier)))
            if len(out) >= pool:
                break
        return out

    def _copy_hits(self, namespace: str, query: str, want: int) -> list[tuple[int, float]] | None:
        """:meth:`_namespace_hits` from the text copy: every match scored (postings of the
        query's words only), this namespace's kept, its top ``want`` (ties by id)."""
        import numpy as np

        text = self._text_copy()
        found = text.search(query) if text is not None else None
        if found is None:
            return None
        cache = self._cache
        offs, scores = found
        ours = offs < len(cache.uid)
        ours[ours] = cache.ns[offs[ours]] == cache.ns_code(namespace)
        offs, scores = offs[ours], scores[ours]
        tied: list[tuple[int, float]] = []
        if len(offs) > want:  # the top `want`: all above the last one's score, then its ties
            last = scores[np.argpartition(-scores, want - 1)[want - 1]]
            above = scores > last
            # Only as many of the ties as are missing, smallest ids first: a query word in
            # every memory (part of a token) ties thousands, which sorting all took ~20 ms.
            tied = heapq.nsmallest(
                want - int(above.sum()),
                ((o, float(last)) for o in offs[scores == last].tolist()),
                key=lambda h: cache.uid[h[0]] or "",
            )
            offs, scores = offs[above], scores[above]
        mine = sorted(
            zip(offs.tolist(), scores.tolist(), strict=True),
            key=lambda h: (-h[1], cache.uid[h[0]] or ""),
        )
        return (mine + tied)[:want]

    def _namespace_hits(self, namespace: str, query: str, want: int) -> list[tuple[int, float]]:
        """The ``want`` best full-text hits among ``namespace``'s memories, as (row offset,
        score), best first (ties by id). Needs the lock and a ready row cache.

        The index is shared by every namespace and Kùzu cannot filter inside its query, so its
        top is widened until it holds ``want`` of this namespace's memories or has no more
        matches: what one namespace finds never depends on how large the others are. A store
        with one namespace (or a query whose best matches are mostly its own) asks once.
        """
        import numpy as np

        copied = self._copy_hits(namespace, query, want)
        if copied is not None:
            return copied
        cache = self._cache
        code, size = cache.ns_code(namespace), len(cache.uid)
        top = want
        while True:
            rows = self._q(
                f"CALL QUERY_FTS_INDEX('Memory', '{FTS_INDEX}', $q, TOP := $top) "
                "RETURN offset(id(node)), score",
                {"q": query, "top": int(top)},
            )
            offs = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            scores = np.fromiter((r[1] for r in rows), np.float64, len(rows))
            ours = offs < size  # a row the cache has not seen is a concurrent insert: not ours
            ours[ours] = cache.ns[offs[ours]] == code
            found = int(ours.sum())
            if found >= want or len(rows) < top or top >= size:
                break
            # Widen in proportion to this namespace's share of the hits so far (all at once
            # when it had none), so a crowded query costs two or three index calls, not many.
            top = size if found == 0 else min(size, max(2 * top, top * 2 * want // found))
        mine = sorted(
            zip(offs[ours].tolist(), scores[ours].tolist(), strict=True),
            key=lambda h: (-h[1], cache.uid[h[0]] or ""),
        )
        return mine[:want]
