"""The Brain's writes: ``remember``, ``connect``, ``supersede`` and ``reinforce``.

:class:`WriteMixin` stores a memory (or its next version, the old one kept in an audited
``revise`` entry), links memories and marks them used, keeping every key in step through the
incremental scoring of :mod:`ebb_core.keys`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .brain_base import BrainBase
from .clock import as_utc, from_us, to_us
from .embeddings import META_MODEL
from .errors import InvalidInput, NotFound
from .model import Edge, Node, Tier, slugify
from .store import SUPERSEDES, Adjustment
from .validation import (
    MAX_K,
    validate_actor,
    validate_id,
    validate_kind,
    validate_props,
    validate_text,
    validate_weight,
)


class WriteMixin(BrainBase):
    """The Brain's write calls (on :class:`BrainBase`)."""

    # -- writing ---------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        kind: str | None = None,
        id: str | None = None,
        props: Mapping[str, Any] | None = None,
        links: Iterable[str] = (),
        link_kind: str = "related",
        weight: float = 1.0,
        pinned: bool = False,
        at: datetime | None = None,
        supersedes: Iterable[str] = (),
        actor: str = "agent",
    ) -> Node:
        """Store a memory (or a new version of the one with this ``id``) and link it to ``links``.

        A new memory counts as just read, so it starts with the read bonus. ``at`` backdates it
        (for ingesting old sources); by default it is the clock's now. ``kind`` defaults to
        ``note`` for a new memory and to the existing kind otherwise; ``props`` left out keep the
        existing ones. New text (or an explicit new kind or props) under an existing id is a
        new *version*: the old one is kept in an audited ``revise`` entry (see :meth:`history`),
        never silently overwritten. ``supersedes`` names memories this one replaces: each gets a
        ``supersedes`` link from it and ranks below it in recall (see :meth:`supersede`).
        Returns the stored node. With an embedder, the text is embedded first (outside the
        store's lock) and its vector written in the memory's own transaction: both are stored
        or neither (a memory stored without an embedder has none; ``ebb embed``,
        :meth:`embed`, fills those in).

        >>> brain.remember("Acme renews in March", kind="fact", links=["client:acme"])
        ... # doctest: +SKIP
        """
        text = validate_text(text)
        vec = self._embed([text])  # outside the store's lock: the slow part
        kind = validate_kind(kind) if kind is not None else None
        validate_weight(weight)
        clean_props = validate_props(props) if props is not None else None
        link_ids = list(dict.fromkeys(validate_id(x) for x in links))
        old_ids = list(dict.fromkeys(validate_id(x) for x in supersedes))
        link_kind = validate_kind(link_kind, "link_kind")
        actor = validate_actor(actor)
        if vec is not None:  # the vector tables, made outside the transaction (schema)
            with self._s.lock:
                self._s.store.prepare_vectors(self._ns, int(vec.shape[1]))
        with self._tx():
            now_us = self._now_us()
            self._maybe_rebase(now_us)
            when = as_utc(at) if at is not None else from_us(now_us)
            id, generated = self._memory_id(id, kind, text, link_ids, old_ids)
            existing = None if generated else self._s.store.get_nodes(self._ns, [id]).get(id)
            stale = self._vector_goes_stale(vec, existing, text)
            linked = self._link_targets(id, existing, link_ids, old_ids)
            node = _version(id, self._ns, text, kind, clean_props, pinned, existing, when)
            audits: list[dict[str, Any]] = []
            if existing is not None and (existing.text, existing.kind, existing.props) != (
                text,
                node.kind,
                node.props,
            ):
                audits.append(self._revision(existing, actor))
            if existing is not None:
                self._s.store.upsert_nodes([node])
            new_edges, changed = self._edges_out(
                id, link_ids, link_kind, weight, old_ids, when, existing is not None
            )
            audits += [_superseded(old, linked[old].tier, id, actor) for old in old_ids]
            self._audit(audits)
            # a new memory's vector goes with it (one statement on Kùzu); an existing one's
            # replaces or drops the old vector after it
            last = existing is None or (vec is None and not stale)
            node = self._write_version(node, existing, linked, when, new_edges, changed, last, vec)
            if existing is not None:
                self._write_vector(node.id, vec, stale)
        return node

    def _memory_id(
        self,
        id: str | None,
        kind: str | None,
        text: str,
        link_ids: Sequence[str],
        old_ids: Sequence[str],
    ) -> tuple[str, bool]:
        """The id ``remember`` stores under (``id``, else a new one from ``kind`` and ``text``)
        and whether it was generated; refuses an id that links to or supersedes itself."""
        generated = id is None
        if id is None:
            id = self._new_id(kind or "note", text)
        else:
            validate_id(id)
        if id in link_ids:
            raise InvalidInput(f"memory {id!r} cannot link to itself", field="links")
        if id in old_ids:
            raise InvalidInput(f"memory {id!r} cannot supersede itself", field="supersedes")
        return id, generated

    def _vector_goes_stale(self, vec: Any, existing: Node | None, text: str) -> bool:
        """Whether ``existing``'s stored vector must go: its text changes and there is no
        embedder at hand to replace the vector (the old one would mislead recall)."""
        return (
            vec is None
            and existing is not None
            and existing.text != text
            and self._s.store.supports_vectors
            and self._s.store.get_meta(META_MODEL) is not None
        )

    def _link_targets(
        self, id: str, existing: Node | None, link_ids: list[str], old_ids: list[str]
    ) -> dict[str, Node]:
        """The memories ``remember`` links to and supersedes, read; refuses a write to or a
        link to a memory in the review queue, and a link to a memory that does not exist."""
        if existing is not None and existing.tier == Tier.FROZEN:
            raise InvalidInput(
                f"memory {id!r} is in the review queue: restore it first to change it",
                field="id",
            )
        linked = self._require(list(dict.fromkeys(link_ids + old_ids)))
        frozen = [i for i, n in linked.items() if n.tier == Tier.FROZEN]
        if frozen:
            raise InvalidInput(
                f"cannot link to {frozen[0]!r}: it is in the review queue",
                field="supersedes" if frozen[0] in old_ids else "links",
            )
        return linked

    def _edges_out(
        self,
        id: str,
        link_ids: Sequence[str],
        link_kind: str,
        weight: float,
        old_ids: Sequence[str],
        when: datetime,
        exists: bool,
    ) -> tuple[list[Edge], list[tuple[Edge, Edge]]]:
        """The edges ``remember`` writes from ``id``: (new edges, (old, new) for the edges an
        existing memory already had, which keep their creation time)."""
        wanted = [(link, link_kind, weight) for link in link_ids]
        wanted += [
            (old, SUPERSEDES, 1.0)
            for old in old_ids
            if not (link_kind == SUPERSEDES and old in link_ids)
        ]
        new_edges, changed = [], []
        for dst, edge_kind, w in wanted:
            edge = Edge(
                namespace=self._ns,
                src=id,
                dst=dst,
                kind=edge_kind,
                weight=w,
                created_at=when,
                reinforced_at=when,
            )
            old = self._s.store.get_edge(self._ns, id, dst, edge_kind) if exists else None
            if old is None:
                new_edges.append(edge)
            else:
                changed.append((old, edge.model_copy(update={"created_at": old.created_at})))
        return new_edges, changed

    def _write_version(
        self,
        node: Node,
        existing: Node | None,
        linked: Mapping[str, Node],
        when: datetime,
        new_edges: list[Edge],
        changed: list[tuple[Edge, Edge]],
        last: bool = True,
        vec: Any = None,
    ) -> Node:
        """Write ``remember``'s memory (read at ``when``) and its edges with every key kept in
        step; returns the memory as stored. ``last``: nothing follows in the transaction.
        ``vec``: a new memory's vector, written in the same event."""
        id = node.id
        before = {id: node, **linked}
        changes = self._plan(before, read={id: to_us(when)}, new_edges=new_edges, changed=changed)
        keys = self._new_keys(before, changes)
        if existing is None:
            # A new memory is created with its scores already final, together with its
            # links and its neighbours' changes (one round on stores that can fold them).
            node = _applied(node, changes.pop(id))
            # Last step (but for its vector): a new memory is hot, so there is nothing to
            # promote after it.
            self._s.store.write_event(
                self._ns,
                new_nodes=[node],
                changes=changes,
                new_edges=new_edges,
                final=last,
                vectors=vec,
            )
            return node
        self._s.store.adjust(self._ns, changes)
        self._s.store.insert_edges(new_edges)
        self._s.store.upsert_edges([new for _, new in changed])
        if existing.tier != Tier.HOT:
            self._audit(
                [
                    {
                        "action": "promote",
                        "node_id": id,
                        "from_tier": existing.tier,
                        "to_tier": Tier.HOT,
                        "reason": "rewritten",
                    }
                ]
            )
        self._promote({id: node}, keys)
        return self._s.store.get_nodes(self._ns, [id])[id]

    def _write_vector(self, id: str, vec: Any, stale: bool) -> None:
        """Replace an existing memory's vector with ``remember``'s for ``id`` (or, when
        ``stale``, drop the old one), in its transaction (the tables are made beforehand:
        ``prepare_vectors``). A new memory's vector goes with its write event instead."""
        if vec is not None:
            self._s.store.put_vectors(self._ns, [id], vec)
        elif stale:
            self._s.store.delete_vectors(self._ns, [id])

    def _revision(self, old: Node, actor: str) -> dict[str, Any]:
        """The audit entry keeping ``old`` (text, kind, props) as a version when it changes."""
        n = len(self._s.store.audit_log(self._ns, MAX_K * 100, node_id=old.id, action="revise"))
        return {
            "action": "revise",
            "node_id": old.id,
            "from_tier": old.tier,
            "to_tier": Tier.HOT,
            "actor": actor,
            "reason": f"version {n + 1} replaced by version {n + 2}",
            "payload": {
                "version": n + 1,
                "text": old.text,
                "kind": old.kind,
                "props": old.props,
                "at": old.updated_at.isoformat(),
            },
        }

    def supersede(self, old: str, new: str, *, actor: str = "agent") -> Edge:
        """Record that memory ``new`` replaces memory ``old``: a ``new -supersedes-> old`` link.

        From now on ``old`` ranks below ``new`` in recall at every depth (and ``new`` comes up
        where only ``old`` matched), its ``why`` names its replacement, it leaves hot at the
        next :meth:`maintain` and use no longer lifts it back. Nothing is deleted: ``old`` stays
        findable, below what replaced it. Audited (action ``supersede``). Returns the link.

        >>> brain.supersede("decision:seat-pricing", "decision:outcome-pricing")  # doctest: +SKIP
        """
        actor = validate_actor(actor)
        if old == new:
            raise InvalidInput(f"memory {old!r} cannot supersede itself", field="new")
        return self.connect(new, old, kind=SUPERSEDES, actor=actor)

    def _new_id(self, kind: str, text: str) -> str:
        """``kind:slug``, then ``-2``, ``-3``; after that a short hash (no long probing when
        the same text recurs, like "thanks" in a chat)."""
        base = f"{kind}:{slugify(text)}"
        store, attempt = self._s.store, 1
        candidate = base
        while store.existing_ids(self._ns, [candidate]):
            attempt += 1
            if attempt <= 3:
                candidate = f"{base}-{attempt}"
            else:
                import hashlib  # only on the fourth clash of an id

                seed = f"{text}|{self._now_us()}|{attempt}".encode()
                candidate = f"{base}-{hashlib.blake2b(seed, digest_size=4).hexdigest()}"
        return candidate

    def connect(
        self,
        src: str,
        dst: str,
        *,
        kind: str = "related",
        weight: float | None = None,
        props: Mapping[str, Any] | None = None,
        actor: str = "agent",
    ) -> Edge:
        """Link two memories (or reinforce the existing ``src -kind-> dst`` edge).

        ``weight`` defaults to 1.0 for a new edge and leaves an existing edge's weight unchanged.
        A new ``supersedes`` link says ``src`` replaces ``dst`` (see :meth:`supersede`) and is
        audited.
        """
        actor = validate_actor(actor)
        kind = validate_kind(kind)
        if weight is not None:
            validate_weight(weight)
        clean_props = validate_props(props)
        if src == dst:
            raise InvalidInput(f"memory {src!r} cannot link to itself", field="dst")
        with self._tx():
            now_us = self._now_us()
            self._maybe_rebase(now_us)
            nodes = self._require([src, dst])
            for i in (src, dst):
                if nodes[i].tier == Tier.FROZEN:
                    raise InvalidInput(
                        f"memory {i!r} is in the review queue: restore it first", field="src"
                    )
            now = from_us(now_us)
            old = self._s.store.get_edge(self._ns, src, dst, kind)
            edge = Edge(
                namespace=self._ns,
                src=src,
                dst=dst,
                kind=kind,
                weight=weight if weight is not None else (old.weight if old else 1.0),
                created_at=old.created_at if old else now,
                reinforced_at=now,
                props=clean_props if props is not None else (old.props if old else {}),
            )
            if old is None:
                if kind == SUPERSEDES:
                    self._audit([_superseded(dst, nodes[dst].tier, src, actor)])
                changes = self._plan(nodes, new_edges=[edge])
                keys = self._new_keys(nodes, changes)
                self._s.store.write_event(self._ns, changes=changes, new_edges=[edge])
            else:
                keys = self._adjust(nodes, changed=[(old, edge)])
                self._s.store.upsert_edges([edge])
            # being replaced is not a use: a supersedes link lifts only its source
            self._promote(nodes, keys, {dst: nodes[dst].tier} if kind == SUPERSEDES else None)
            return edge

    def reinforce(self, id: str, *, with_id: str | None = None) -> Node:
        """Mark a memory as used: reset its read clock and the clocks of its edges (except the
        ``supersedes`` links to what it replaced: using the new keeps nothing old alive).

        With ``with_id``, only the edges between the two are reinforced (and both read clocks).
        Returns the memory as it is now.
        """
        with self._tx():
            now_us = self._now_us()
            self._maybe_rebase(now_us)
            ids = [id] if with_id is None else [id, with_id]
            nodes = self._require(ids)
            for i in ids:
                if nodes[i].tier == Tier.FROZEN:
                    raise InvalidInput(
                        f"memory {i!r} is in the review queue: restore it first", field="id"
                    )
            now = from_us(now_us)
            incident = self._s.store.incident(self._ns, [id])
            # A replacement's use does not keep what it replaced alive: its supersedes links
            # are reinforced only when asked for by name (with_id).
            chosen = [
                inc
                for inc in incident
                if (inc.other.id == with_id) or (with_id is None and inc.edge.kind != SUPERSEDES)
            ]
            if with_id is not None and not chosen:
                raise NotFound(f"no edge between {id!r} and {with_id!r}", id=with_id)
            changed = [
                (inc.edge, inc.edge.model_copy(update={"reinforced_at": now})) for inc in chosen
            ]
            touched = dict(nodes)
            for inc in chosen:
                touched.setdefault(inc.other.id, inc.other)
            keys = self._adjust(touched, read=dict.fromkeys(ids, now_us), changed=changed)
            self._s.store.upsert_edges([new for _, new in changed])
            self._promote(touched, keys)
            return self._s.store.get_nodes(self._ns, [id])[id]


def _applied(node: Node, adj: Adjustment) -> Node:
    """``node`` with ``adj`` applied, as the store would apply it to a stored node."""
    update: dict[str, Any] = {
        "base_key": node.base_key + adj.base_delta,
        "degree": node.degree + adj.degree_delta,
        "key": node.key + adj.key_delta,
        **adj.fields,
    }
    return node.model_copy(update=update)


def _version(
    id: str,
    namespace: str,
    text: str,
    kind: str | None,
    props: dict[str, Any] | None,
    pinned: bool,
    existing: Node | None,
    when: datetime,
) -> Node:
    """The hot node ``remember`` writes as ``id``'s next version (its first when ``existing`` is
    None): what is left out (kind, props) is kept from ``existing``, and so are its scores."""
    return Node(
        id=id,
        namespace=namespace,
        kind=kind or (existing.kind if existing else "note"),
        text=text,
        props=props if props is not None else (dict(existing.props) if existing else {}),
        created_at=existing.created_at if existing else when,
        updated_at=when,
        pinned=pinned or (existing.pinned if existing else False),
        tier=Tier.HOT,
        last_read_at=existing.last_read_at if existing else None,
        base_key=existing.base_key if existing else 0.0,
        key=existing.key if existing else 0.0,
        degree=existing.degree if existing else 0,
    )


def _superseded(old: str, tier: Tier, by: str, actor: str) -> dict[str, Any]:
    """The audit entry recording that memory ``by`` supersedes memory ``old`` (at ``tier``)."""
    return {
        "action": "supersede",
        "node_id": old,
        "from_tier": tier,
        "to_tier": tier,
        "actor": actor,
        "reason": f"superseded by {by}",
        "payload": {"by": by},
    }
