"""The Kùzu store's writes to memories: creating, updating and adjusting rows, one write event
as one statement, and deleting, with the in-process copies kept in step.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import (
    InvalidInput,
    NotFound,
)
from ..model import Edge, Node
from ..records import field_value, node_row
from ..store import (
    UPDATABLE_FIELDS,
    Adjustment,
    memory_exists,
)
from .base import KuzuBase
from .engine import (
    DuplicateKey,
)
from .links import lists_into_rows, unset_lists
from .mirror import Adjusted, Deleted, FieldsSet, LinksSet, NodesWritten, VectorsWritten
from .queries import (
    _SMALL,
    _edge_params,
    _node_params,
    _node_params_keys,
    uid,
)

_COLUMN = {"updated_at": "updated_us", "last_read_at": "last_read_us", "queued_at": "queued_us"}


def _set_clause(deltas: Sequence[str], cols: Sequence[str], prefix: str) -> str:
    """``SET`` items adding ``d_<col>`` to counters and assigning ``v_<col>`` to fields."""
    return ", ".join(
        [f"n.{d} = n.{d} + {prefix}d_{d}" for d in deltas]
        + [f"n.{c} = {prefix}v_{c}" for c in cols]
    )


def _change_sets(
    v: str, adj: Adjustment, held: Mapping[str, Any] | None, params: dict[str, Any]
) -> list[str]:
    """``SET`` items applying ``adj`` to the node bound to ``v`` (their values go in ``params``).

    With ``held``, the store's cached row, already changed in step, the new scores are sent as
    values: ~0.2 ms cheaper per node than Kùzu adding to what it reads, and the same float
    additions, so the same numbers.
    """
    items = []
    for col, attr in _DELTA_OF.items():
        delta = getattr(adj, attr)
        if delta and held is not None:
            items.append(f"{v}.{col} = ${v}_a_{col}")
            params[f"{v}_a_{col}"] = held[col]
        elif delta:
            items.append(f"{v}.{col} = {v}.{col} + ${v}_d_{col}")
            params[f"{v}_d_{col}"] = delta
    for f, value in adj.fields.items():
        col, stored = _field_value(f, value)
        items.append(f"{v}.{col} = ${v}_v_{col}")
        params[f"{v}_v_{col}"] = stored
    return items


def _field_value(field: str, value: Any) -> tuple[str, Any]:
    return field_value(field, value)


class KuzuWrites(KuzuBase):
    """Writing memories (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        sets = ", ".join(f"n.{c} = ${c}" for c in _node_params_keys() if c != "uid")
        with self.transaction():
            for n in nodes:
                rows = self._q(
                    f"MERGE (n:Memory {{uid: $uid}}) SET {sets} RETURN offset(id(n))",
                    _node_params(n),
                )
                self._mirror.apply(NodesWritten((n,), (int(rows[0][0]),), fresh=False))

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        # a new memory has no links yet: its recent-link list starts empty, not unset
        props = ", ".join(f"{c}: ${c}" for c in _node_params_keys())
        props += ", recent_links: ''"
        with self._creating(nodes), self.transaction():
            for n in nodes:
                rows = self._q(
                    f"CREATE (n:Memory {{{props}}}) RETURN offset(id(n))", _node_params(n)
                )
                self._mirror.apply(NodesWritten((n,), (int(rows[0][0]),), fresh=True))

    @contextmanager
    def _creating(self, nodes: Sequence[Node]) -> Iterator[None]:
        """Around a write creating ``nodes``: Kùzu's duplicated-key error (the transaction
        rolls back as for any error) becomes :func:`memory_exists` naming the memory. Mapped
        rather than checked first: a check would cost a statement per remember (~0.5 ms)."""
        try:
            yield
        except DuplicateKey as exc:
            text = str(exc)
            for n in nodes:
                if f"value {uid(n.namespace, n.id)}, which" in text:
                    raise memory_exists(n.namespace, n.id) from None
            raise

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        if len(changes) <= _SMALL:
            self.adjust(namespace, {i: Adjustment(fields=f) for i, f in changes.items()})
            return
        # Many rows (maintain moving tens of thousands between tiers): grouped by which fields
        # change, one LOAD FROM per group, and the in-process copies updated column-wise.
        groups: dict[tuple[str, ...], list[str]] = {}
        for node_id, fields in changes.items():
            groups.setdefault(tuple(sorted(fields)), []).append(node_id)
        bad = set().union(*groups) - UPDATABLE_FIELDS
        if bad:
            raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
        tables = []
        for names, ids in groups.items():
            uids = [uid(namespace, i) for i in ids]
            table: dict[str, list[Any]] = {"u": uids}
            for f in names:
                col = _COLUMN.get(f, f)
                table[col] = [_field_value(f, changes[i][f])[1] for i in ids]
            tables.append(table)
            texts = {i: changes[i]["text"] for i in ids} if "text" in names else {}
            columns = {c: v for c, v in table.items() if c != "u"}
            self._mirror.apply(FieldsSet(namespace, texts, uids, columns))
        with self.transaction():
            for table in tables:
                cols = [c for c in table if c != "u"]
                self._load(
                    "MATCH (n:Memory {uid: u}) SET " + ", ".join(f"n.{c} = {c}" for c in cols),
                    table,
                    {"u": "uid", **{c: c for c in cols}},
                )

    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        # Rows are grouped by the shape of their update; small groups run as single
        # primary-key statements, large ones as one LOAD FROM over an Arrow table
        # (10k rows in ~35 ms, where 10k single statements take seconds).
        groups: dict[tuple[str, ...], list[tuple[str, Adjustment]]] = {}
        for node_id, adj in changes.items():
            bad = set(adj.fields) - UPDATABLE_FIELDS
            if bad:
                raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
            deltas = tuple(col for col, attr in _DELTA_OF.items() if getattr(adj, attr))
            cols = tuple(sorted(_COLUMN.get(f, f) for f in adj.fields))
            groups.setdefault((*deltas, "|", *cols), []).append((node_id, adj))
        pushes = {i: a.push_delta for i, a in changes.items() if a.push_delta}
        self._mirror.apply(Adjusted(namespace, changes, bool(pushes)))
        with self.transaction():
            for shape, rows in groups.items():
                cut = shape.index("|")
                deltas, cols = shape[:cut], shape[cut + 1 :]
                if not deltas and not cols:
                    continue
                if len(rows) <= _SMALL:
                    for node_id, adj in rows:
                        u = uid(namespace, node_id)
                        one: dict[str, Any] = {"n_u": u}
                        items = _change_sets("n", adj, self._rows_cache.rows.get(u), one)
                        self._q("MATCH (n:Memory {uid: $n_u}) SET " + ", ".join(items), one)
                else:
                    table = {"u": [uid(namespace, i) for i, _ in rows]}
                    for d in deltas:
                        attr = _DELTA_OF[d]
                        table[f"d_{d}"] = [getattr(a, attr) for _, a in rows]
                    for c in cols:
                        table[f"v_{c}"] = [_column_value(c, a.fields) for _, a in rows]
                    self._load(
                        "MATCH (n:Memory {uid: u}) SET " + _set_clause(deltas, cols, ""),
                        table,
                        {
                            "u": "uid",
                            **{f"d_{d}": d for d in deltas},
                            **{f"v_{c}": c for c in cols},
                        },
                    )
            if len(pushes) == 1:
                ((node_id, push),) = pushes.items()
                self._q(
                    "MATCH (s:Memory {uid: $u})-[:Link]-(m:Memory) SET m.key = m.key + $d",
                    {"u": uid(namespace, node_id), "d": float(push)},
                )
            elif pushes:
                self._load(
                    "MATCH (s:Memory {uid: u})-[:Link]-(m:Memory) "
                    "WITH m, sum(d) AS total SET m.key = m.key + total",
                    {"u": [uid(namespace, i) for i in pushes], "d": list(pushes.values())},
                    {"u": "uid", "d": "key"},
                )

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
        vectors: Any = None,
    ) -> None:
        # One statement: MATCH the existing memories by primary key, CREATE the new ones, SET
        # their changes and recent-link lists, CREATE the edges and the new memories' vectors.
        # Each statement costs Kùzu ~0.5-1 ms whatever it does, and a remember with two links
        # used to take eight; with its vector in the same statement, a final event needs no
        # transaction of its own either (no BEGIN, no COMMIT).
        self._edges_written(new_edges)
        changes = dict(changes or {})
        for adj in changes.values():
            bad = set(adj.fields) - UPDATABLE_FIELDS
            if bad:
                raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
        if any(a.push_delta for a in changes.values()):
            # eager spreading pushes along the edges that exist before this event
            super().write_event(
                namespace,
                new_nodes=new_nodes,
                changes=changes,
                new_edges=new_edges,
                final=final,
                vectors=vectors,
            )
            return
        with self._creating(new_nodes), self._lock:
            new_uids = {uid(n.namespace, n.id): n for n in new_nodes}
            lists = self._merged_links(new_edges, new_uids)
            creates: list[str] = []
            vparams: dict[str, Any] = {}
            mat = None
            if vectors is not None and new_uids:  # checked before the mirror takes anything
                creates, mat = self._vector_creates(namespace, list(new_uids), vectors, vparams)
            in_rows = self._lists_in_rows()
            query, params = self._event_statement(
                namespace, new_nodes, new_uids, changes, new_edges, lists, creates, in_rows
            )
            rows = self._send_event(query, {**params, **vparams}, final)
            if len(rows) != 1:  # the Brain checked every memory exists; this is a guard
                raise NotFound(f"a memory this change needs is missing from {namespace!r}")
            offsets = [int(o) for o in rows[0][: len(new_uids)]]
            self._mirror.apply(NodesWritten(list(new_uids.values()), offsets, fresh=True))
            apart = [] if in_rows else [u for u in lists if u not in new_uids]
            self._mirror.apply(LinksSet(lists, apart))
            if mat is not None:  # a rollback drops the copy
                self._mirror.apply(VectorsWritten(namespace, list(new_uids), mat))

    def _event_statement(
        self,
        namespace: str,
        new_nodes: Sequence[Node],
        new_uids: Mapping[str, Node],
        changes: Mapping[str, Adjustment],
        new_edges: Sequence[Edge],
        lists: Mapping[str, str],
        creates: Sequence[str] = (),
        in_rows: bool = False,
    ) -> tuple[str, dict[str, Any]]:
        """The one statement of a write event and its parameters (the mirror takes
        ``changes`` as it is built: see :func:`_change_sets`); ``creates``: more ``CREATE``
        items (the new memories' vectors); ``in_rows``: the stored memories' new lists are
        SET in their Memory rows, not kept in LinkList (see ``_lists_in_rows``)."""
        params: dict[str, Any] = {}
        parts: list[str] = []
        var: dict[str, str] = {}
        ends = [uid(namespace, e) for edge in new_edges for e in (edge.src, edge.dst)]
        existing = [
            u
            for u in dict.fromkeys([*(uid(namespace, i) for i in changes), *ends])
            if u not in new_uids
        ]
        # matched first: if one is missing, nothing at all is written
        for k, u in enumerate(existing):
            var[u] = f"x{k}"
            params[f"x{k}_u"] = u
        older = [u for u in lists if u not in new_uids]  # their LinkList rows are replaced
        known, unknown = self._list_rows(older)
        if existing:
            found = [f"({var[u]}:Memory {{uid: ${var[u]}_u}})" for u in existing]
            found += [f"(l{var[u]}:LinkList {{uid: ${var[u]}_u}})" for u in known]
            parts.append("MATCH " + ", ".join(found))
        parts += [f"OPTIONAL MATCH (l{var[u]}:LinkList {{uid: ${var[u]}_u}})" for u in unknown]
        replaced = [*known, *unknown]
        for k, n in enumerate(new_nodes):
            v, u = f"n{k}", uid(n.namespace, n.id)
            var[u] = v
            row = {**node_row(n), "recent_links": lists.get(u, "")}
            props = ", ".join(f"{c}: ${v}_{c}" for c in ("uid", *row))
            parts.append(f"CREATE ({v}:Memory {{{props}}})")
            params.update({f"{v}_{c}": value for c, value in row.items()})
            params[f"{v}_uid"] = u
        # the mirror takes the change first (see _change_sets)
        self._mirror.apply(Adjusted(namespace, changes))
        sets: list[str] = []
        for node_id, adj in changes.items():
            u = uid(namespace, node_id)
            sets += _change_sets(var[u], adj, self._rows_cache.rows.get(u), params)
        if sets:
            parts.append("SET " + ", ".join(sets))
        if in_rows and older:  # ... or dropped, the lists going into the rows
            held = {u: f"l{var[u]}" for u in replaced}
            parts.append(lists_into_rows([(var[u], f"{var[u]}_l", held.get(u)) for u in older]))
        elif replaced:
            parts.append("DELETE " + ", ".join(f"l{var[u]}" for u in replaced))
        params.update({f"{var[u]}_l": lists[u] for u in older})
        if older and not in_rows:
            rows = (f"(:LinkList {{uid: ${var[u]}_u, links: ${var[u]}_l}})" for u in older)
            parts.append("CREATE " + ", ".join(rows))
        if new_edges:
            links = []
            for k, e in enumerate(new_edges):
                ep = _edge_params(e)
                links.append(
                    f"({var[ep['a']]})-[:Link {{kind: $e{k}_kind, weight: $e{k}_w, "
                    f"created_us: $e{k}_c, reinforced_us: $e{k}_r, props: $e{k}_p}}]->"
                    f"({var[ep['b']]})"
                )
                params.update({f"e{k}_{x}": ep[x] for x in ("kind", "w", "c", "r", "p")})
            parts.append("CREATE " + ", ".join(links))
        if creates:
            parts.append("CREATE " + ", ".join(creates))
        offsets = [f"offset(id({var[u]}))" for u in new_uids]
        parts.append("RETURN " + ", ".join(offsets or ["1"]))
        return " ".join(parts), params

    def _list_rows(self, older: Sequence[str]) -> tuple[list[str], list[str]]:
        """Of the stored memories whose lists an event writes: those the recall columns know
        have a LinkList row, and those not known either way (the rest have none).

        An older memory's new list replaces its LinkList row (see ``kuzu.tables``): the row is
        deleted and a new one created, never SET in place. The event statement MATCHes a row
        known to be there (a wrong bit would make it match nothing: the caller's check of its
        one row raises) and OPTIONAL MATCHes one not known: ~0.5 against ~1.4 ms a remember with
        two such ends (Kùzu 0.11.3, 100k); a row known not to be there is only created. While
        the lists go into the Memory rows (``_lists_in_rows``), a LinkList row there is deleted
        and none created."""
        apart = {u: self._lists_apart(u) for u in older}
        return [u for u in older if apart[u]], [u for u in older if apart[u] is None]

    def _send_event(self, query: str, params: dict[str, Any], final: bool) -> list[list[Any]]:
        if final and self._depth <= 1 and not self._begun:
            # Nothing was sent in this transaction and nothing will follow: the statement
            # alone is the transaction, committed by Kùzu with it (no BEGIN, no COMMIT).
            try:
                rows = self._q_locked(query, params, solo=True)
            except BaseException:
                self._forget_cached()  # they took the change that did not happen
                raise
            self._sealed = self._depth == 1
            return rows
        with self.transaction():
            return self._q(query, params)

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        self._mirror.apply(Deleted(namespace, ids))
        with self.transaction():
            for i in ids:
                # the neighbours' recent-link lists name it: unset them, to be rebuilt
                self._q(
                    "MATCH (n:Memory {uid: $uid})-[:Link]-(m:Memory) " + unset_lists("m"),
                    {"uid": uid(namespace, i)},
                )
                self._q("MATCH (l:LinkList {uid: $uid}) DELETE l", {"uid": uid(namespace, i)})
                self._q("MATCH (n:Memory {uid: $uid}) DETACH DELETE n", {"uid": uid(namespace, i)})
            self.delete_vectors(namespace, ids)


_DELTA_OF = {"base_key": "base_delta", "degree": "degree_delta", "key": "key_delta"}


def _column_value(column: str, fields: Mapping[str, Any]) -> Any:
    for f, v in fields.items():
        col, value = _field_value(f, v)
        if col == column:
            return value
    raise KeyError(column)
