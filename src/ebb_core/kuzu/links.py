"""The Kùzu store's links: writing edges, each memory's list of its most recently reinforced
links (what recall expands and explains from), ``supersedes`` edges, and incident edges.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from typing import Any

from .. import scoring
from ..clock import to_us
from ..errors import StorageError
from ..model import Edge, Tier
from ..store import (
    SUPERSEDES,
    Incident,
    Link,
)
from . import reads
from .base import KuzuBase
from .mirror import EdgesWritten, LinksSet
from .queries import (
    _EDGE_RET,
    LINK_SEP,
    RECENT_LINKS,
    SEP,
    _edge_from,
    _edge_params,
    _node_ret,
    _row_to_node,
    uid,
)


class KuzuLinks(KuzuBase):
    """Edges and recent-link lists (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def _merged_links(self, edges: Sequence[Edge], fresh: Collection[str] = ()) -> dict[str, str]:
        """The encoded recent-link lists of the ends of ``edges`` (by uid) once they exist
        (``fresh`` memories start from an empty list; unset lists stay unset, built on first
        use)."""
        lists: dict[str, list[list[Any]] | None] = {}
        for e in edges:
            for me, other, out in ((e.src, e.dst, 1), (e.dst, e.src, 0)):
                u = uid(e.namespace, me)
                if u not in lists:
                    raw = "" if u in fresh else self._recent_links(u)
                    lists[u] = None if raw is None else _decode_links(raw)
                current = lists[u]
                if current is not None:
                    lists[u] = _merge_link(
                        current, [other, e.kind, out, e.weight, to_us(e.reinforced_at)]
                    )
        return {u: _encode_links(links) for u, links in lists.items() if links is not None}

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        self._edges_written(edges)
        with self.transaction():
            for e in edges:
                found = self._q(
                    "MATCH (a:Memory {uid: $a})-[e:Link]->(b:Memory {uid: $b}) "
                    "WHERE e.kind = $kind SET e.weight = $w, e.created_us = $c, "
                    "e.reinforced_us = $r, e.props = $p RETURN count(e)",
                    _edge_params(e),
                )
                if not found or not found[0][0]:
                    self.insert_edges([e])
                else:
                    self._note_links([e])

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        self._edges_written(edges)
        with self.transaction():
            for e in edges:
                self._q(
                    "MATCH (a:Memory {uid: $a}), (b:Memory {uid: $b}) "
                    "CREATE (a)-[:Link {kind: $kind, weight: $w, created_us: $c, "
                    "reinforced_us: $r, props: $p}]->(b)",
                    _edge_params(e),
                )
            self._note_links(edges)

    def _edges_written(self, edges: Sequence[Edge]) -> None:
        self._mirror.apply(EdgesWritten(edges))  # supersedes edges: read again at next recall

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        """From an in-process copy of every ``supersedes`` edge (one query builds it; a write
        of such an edge drops it): recall asks for its best candidates on every call, and
        per-memory reads would cost a query each."""
        with self._lock:
            found = self._supersedes
            if found is None:
                found = {}
                for old, new in self._q(
                    "MATCH (a:Memory)-[e:Link]->(b:Memory) WHERE e.kind = $k "
                    "RETURN b.uid, a.uid ORDER BY a.uid",
                    {"k": SUPERSEDES},
                ):
                    found.setdefault(old, []).append(new)
                self._mirror.supersedes_read(found)
            prefix, frozen = f"{namespace}{SEP}", int(Tier.FROZEN)
            if ids is None:
                olds = [u for u in found if u.startswith(prefix)]
            else:
                olds = [prefix + i for i in dict.fromkeys(ids) if prefix + i in found]
            columns = self._columns_of([n for u in olds for n in found[u]])
            out: dict[str, list[str]] = {}
            for u in olds:
                live = []
                for n in found[u]:
                    col = columns.get(n)
                    if col is not None and col[0] < frozen:
                        live.append(n[len(prefix) :])
                if live:
                    out[u[len(prefix) :]] = sorted(live)
            return out

    def _note_links(self, edges: Sequence[Edge]) -> None:
        """Keep each end's short list of its most recently reinforced links up to date."""
        for u, encoded in self._merged_links(edges).items():
            self._set_recent_links(u, encoded)

    def _recent_links(self, u: str) -> str | None:
        """A memory's encoded recent-link list (None: never built, or no such memory)."""
        row = self._rows_cache.get(u)
        if row is not None:
            return row["recent_links"]  # type: ignore[no-any-return]
        listed = self._listed(u)
        if listed is not None:
            return listed
        rows = self._q("MATCH (n:Memory {uid: $u}) RETURN n.recent_links", {"u": u})
        return rows[0][0] if rows else None

    def _set_recent_links(self, u: str, encoded: str, *, into_row: bool = False) -> None:
        """Write the list of ``u``, a stored memory: into LinkList (see ``kuzu.tables``) past
        one node group of memories, or into its Memory row (deleting a LinkList row it has,
        which would override it) while the table fits in one (``_lists_in_rows``). ``into_row``:
        a list that was unset (then no LinkList row is there) goes into its Memory row at any
        size, as maintain does, so that a LinkList row always stands for the memory's list."""
        in_row = into_row or self._lists_in_rows()
        apart = None if into_row else self._lists_apart(u)
        if in_row:
            query = "MATCH (n:Memory {uid: $u}) "
            row = None
            if apart is not False and not into_row:  # a row it may have would override
                query, row = query + "OPTIONAL MATCH (l:LinkList {uid: $u}) ", "l"
            query += lists_into_rows([("n", "l", row)]) + " RETURN 1"
            self._q(query, {"u": u, "l": encoded})
        else:
            # a new row, never one SET in place (see kuzu.tables)
            find = {True: "MATCH", None: "OPTIONAL MATCH"}.get(apart)
            query = "CREATE (:LinkList {uid: $u, links: $l}) RETURN 1"
            if find is not None:
                query = f"{find} (l:LinkList {{uid: $u}}) DELETE l {query}"
            if len(self._q(query, {"u": u, "l": encoded})) != 1:  # a wrong bit: nothing written
                raise StorageError(f"the recent-link list of {u!r} was not where it was kept")
        self._mirror.apply(LinksSet({u: encoded}, () if in_row else (u,)))

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        rows = self._q(
            f"MATCH (a:Memory {{uid: $a}})-[e:Link]->(b:Memory {{uid: $b}}) WHERE e.kind = $k "
            f"RETURN {_EDGE_RET}",
            {"a": uid(namespace, src), "b": uid(namespace, dst), "k": kind},
        )
        return _edge_from(namespace, src, dst, rows[0]) if rows else None

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        """From each memory's list of its most recently reinforced links (a 1-hop expansion
        costs Kùzu a node-table scan per memory; this is one primary-key read each)."""
        with self._lock:
            out: list[tuple[float, Link]] = []
            prefix, frozen = f"{namespace}{SEP}", int(Tier.FROZEN)
            found: list[tuple[str, list[list[Any]]]] = []
            wanted = list(dict.fromkeys(ids))
            # a recall asks for a few dozen; maintain for every memory about to freeze (~12k
            # at 1M): past the snapshot's share of the budget, read one by one
            bulk = len(wanted) > reads._SNAPSHOT_AFTER and not self._snapshot_fits()
            for i in wanted:
                row = self._row(prefix + i, snapshot=not bulk)
                if row is None:
                    continue
                raw = row["recent_links"]
                if raw is None:
                    found.append((i, self._build_recent_links(namespace, i)))
                else:
                    found.append((i, _decode_links(raw)))
            columns = self._columns_of([prefix + link[0] for _, links in found for link in links])
            live = [
                (i, link)
                for i, links in found
                for link in links
                if (col := columns.get(prefix + link[0])) is not None and col[0] < frozen
            ]
            if live:
                decayed = _decayed_weights(live, now_us, half_life_us)
                out = [
                    (dw, Link(i, o, kind, bool(outgoing), w, at))
                    for dw, (i, (o, kind, outgoing, w, at)) in zip(decayed, live, strict=True)
                    if dw >= min_decayed
                ]
            out.sort(key=lambda p: (-p[0], p[1].other_id))
            return [link for _, link in out[:limit]]

    def _build_recent_links(self, namespace: str, node_id: str) -> list[list[Any]]:
        u = uid(namespace, node_id)
        links: list[list[Any]] = []
        for out, pattern in ((1, "-[e:Link]->"), (0, "<-[e:Link]-")):
            links += [
                [r[0], r[1], out, float(r[2]), int(r[3])]
                for r in self._q(
                    f"MATCH (n:Memory {{uid: $u}}){pattern}(m:Memory) RETURN m.id, e.kind, "
                    "e.weight, e.reinforced_us ORDER BY e.reinforced_us DESC LIMIT $k",
                    {"u": u, "k": RECENT_LINKS},
                )
            ]
        links = sorted(links, key=lambda x: -x[4])[:RECENT_LINKS]
        self._set_recent_links(u, _encode_links(links), into_row=True)
        return links

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        out: list[Incident] = []
        with self._lock:
            for i in dict.fromkeys(ids):
                u = uid(namespace, i)
                for r in self._q(
                    f"MATCH (a:Memory {{uid: $u}})-[e:Link]->(b:Memory) "
                    f"RETURN {_EDGE_RET}, {_node_ret('b')} ORDER BY b.id, e.kind",
                    {"u": u},
                ):
                    other = _row_to_node(r[5:])
                    out.append(Incident(i, _edge_from(namespace, i, other.id, r), other))
                for r in self._q(
                    f"MATCH (a:Memory {{uid: $u}})<-[e:Link]-(b:Memory) "
                    f"RETURN {_EDGE_RET}, {_node_ret('b')} ORDER BY b.id, e.kind",
                    {"u": u},
                ):
                    other = _row_to_node(r[5:])
                    out.append(Incident(i, _edge_from(namespace, other.id, i, r), other))
        return out


def lists_into_rows(lists: Sequence[tuple[str, str, str | None]]) -> str:
    """Clauses writing recent-link lists into Memory rows: for each ``(memory, list, row)``,
    SET the query parameter ``$list`` as the list of the Memory row bound to ``memory``, and
    DELETE the LinkList row bound to ``row`` (by the caller's MATCH, or OPTIONAL MATCH where
    one may be there; None: known to have none), which would override it (see
    ``kuzu.tables``). Names of variables and parameters only: the lists stay parameters."""
    sets = ", ".join(f"{memory}.recent_links = ${list_}" for memory, list_, _ in lists)
    rows = [row for _, _, row in lists if row is not None]
    return f"SET {sets}" + (f" DELETE {', '.join(rows)}" if rows else "")


def unset_lists(var: str) -> str:
    """Clauses unsetting the recent-link lists of the memories bound to ``var`` (each once,
    however many rows name it): NULL in their Memory rows, to be rebuilt on first use, and
    their LinkList rows deleted, so that a LinkList row always stands for a set list (see
    ``kuzu.tables``)."""
    return (
        f"WITH DISTINCT {var} OPTIONAL MATCH (l:LinkList {{uid: {var}.uid}}) "
        f"SET {var}.recent_links = NULL DELETE l"
    )


def _encode_links(links: list[list[Any]]) -> str:
    return LINK_SEP.join(_encode_link(x) for x in links)


def _decode_links(raw: str) -> list[list[Any]]:
    return [_decode_link(x) for x in raw.split(LINK_SEP)] if raw else []


def _encode_link(link: list[Any]) -> str:
    other, kind, out, weight, at = link
    return SEP.join((other, kind, str(int(out)), repr(float(weight)), str(int(at))))


def _decode_link(entry: str) -> list[Any]:
    other, kind, out, weight, at = entry.split(SEP)
    return [other, kind, int(out), float(weight), int(at)]


def _merge_link(links: list[list[Any]], new: list[Any]) -> list[list[Any]]:
    """Put ``[other, kind, out, weight, reinforced_us]`` into a most-recent-first list."""
    kept = [x for x in links if (x[0], x[1], x[2]) != (new[0], new[1], new[2])]
    return sorted([*kept, new], key=lambda x: -x[4])[:RECENT_LINKS]


def _decayed_weights(
    live: list[Any], now_us: int, half_life_us: float, vectorised: bool | None = None
) -> list[float]:
    """Each live link's weight times ``scoring.decay`` of its age (the rule written once).

    Many links: over all rows at once with numpy (as fast as an inline expression). A few, in a
    process that has not loaded numpy: row by row, so a one-shot command on a store without
    vectors never pays numpy's import (~0.1-0.2 s; tests/test_cli_lazy.py holds it)."""
    n = len(live)
    if vectorised is None:
        vectorised = n >= _NUMPY_FROM or "numpy" in sys.modules
    if not vectorised:
        return [link[3] * scoring.decay(now_us - link[4], half_life_us) for _, link in live]
    import numpy as np

    weights = np.fromiter((link[3] for _, link in live), float, n)
    ages = now_us - np.fromiter((link[4] for _, link in live), np.int64, n)
    return list((weights * scoring.decay(ages, half_life_us)).tolist())


_NUMPY_FROM = 256  # links in one strongest_links call from which importing numpy pays
