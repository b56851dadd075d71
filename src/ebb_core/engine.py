"""``Brain``: Ebb's engine API. Policy lives here; storage lives behind :class:`GraphStore`.

>>> from ebb_core import Brain
>>> brain = Brain.open("notes.kuzu")                   # doctest: +SKIP
>>> brain.remember("We price by outcome now", kind="decision", id="decision:outcome-pricing")
...                                                    # doctest: +SKIP
>>> [h.id for h in brain.recall("pricing")]             # doctest: +SKIP
['decision:outcome-pricing']
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import logs as _logs
from . import scoring
from .clock import Clock, SystemClock, as_utc, from_us, to_us
from .embeddings import META_MODEL, Embedder
from .errors import InvalidInput, NotFound
from .grouping import GroupedStore, parse_delay, validate_delay
from .keys import KeysMixin
from .maintenance import MaintenanceMixin
from .model import (
    AuditEntry,
    Edge,
    Neighbor,
    Node,
    Stats,
    Tier,
    Version,
    slugify,
)
from .recall import RecallMixin, _opt_us
from .review import ReviewMixin
from .scoring import Config
from .store import SUPERSEDES, Adjustment, GraphStore
from .text import STOP_WORDS, query_terms, stem, words

# The export names stay importable from here (testing/data.py reads _AUDIT_PAGE).
from .transfer import _AUDIT_PAGE as _AUDIT_PAGE
from .transfer import EXPORT_FORMAT as EXPORT_FORMAT
from .transfer import EXPORT_VERSION as EXPORT_VERSION
from .transfer import VECTOR_RECORD as VECTOR_RECORD
from .transfer import CommittedInterrupt as CommittedInterrupt
from .transfer import Progress as Progress
from .transfer import TransferMixin
from .validation import (  # the validate_* names are imported from here too
    MAX_ID_LEN,
    MAX_K,
    MAX_TEXT_LEN,
    is_valid_kind,
    validate_actor,
    validate_id,
    validate_k,
    validate_kind,
    validate_namespace,
    validate_props,
    validate_text,
    validate_weight,
)
from .vectors import VectorsMixin

DEFAULT_NAMESPACE = "default"


@dataclass
class _Shared:
    """State shared by every namespace view of one open store."""

    store: GraphStore
    config: Config
    clock: Clock
    lock: threading.RLock
    epoch_us: int
    embedder: Embedder | None = None


class Brain(TransferMixin, MaintenanceMixin, RecallMixin, KeysMixin, ReviewMixin, VectorsMixin):
    """Long-term memory for one namespace (user, agent or project) on a :class:`GraphStore`.

    Every method runs as one transaction and sees only this namespace; :meth:`scoped` gives a
    view of another namespace on the same store. Time comes from ``clock``.
    """

    def __init__(
        self,
        store: GraphStore,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        config: Config | None = None,
        clock: Clock | None = None,
        embedder: Any = None,
        reinforcement_delay: float = 0.0,
    ) -> None:
        self._ns = validate_namespace(namespace)
        cfg = config or Config()
        clk = clock or SystemClock()
        lock = threading.RLock()
        if validate_delay(reinforcement_delay):
            store = GroupedStore(store, reinforcement_delay, lock)
        self._s = _Shared(store, cfg, clk, lock, 0)
        self._init_scoring()
        self._init_embedder(embedder)

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        backend: str | None = None,
        namespace: str | None = None,
        config: Config | None = None,
        clock: Clock | None = None,
        wait: float = 0.0,
        create: bool = True,
        on_wait: Callable[[str], None] | None = None,
        embedder: Any = None,
        reinforcement_delay: float | None = None,
    ) -> Brain:
        """Open the store the environment (or the arguments) point at.

        ``backend`` defaults to ``EBB_BACKEND`` (``kuzu``); the Kùzu path to ``EBB_DB_PATH``
        (``./ebb_db``); the namespace to ``EBB_NAMESPACE`` (``default``). ``wait`` seconds are
        spent retrying while another process holds the embedded store (then ``StoreLocked``),
        having asked it to let go; ``on_wait`` hears once what is waited for. With
        ``create=False`` an embedded store that does not exist yet is not created:
        :class:`~ebb_core.errors.NoStore` is raised instead.

        ``embedder`` (default ``EBB_EMBEDDER``) turns on meaning-based recall: a LangChain
        ``Embeddings``, a LlamaIndex ``BaseEmbedding``, a callable from texts to vectors, or a
        name (``"minilm"``: the offline default model); see :mod:`ebb_core.embeddings`.
        ``False`` (or ``"none"``) keeps recall on text alone even in a store that has vectors.

        ``reinforcement_delay`` (default ``EBB_REINFORCEMENT_DELAY``, else 0) > 0 groups what
        recall reinforces: it counts at once for every read of this ``Brain`` but is written
        with the next write, at ``close``, or within that many seconds (see
        :mod:`ebb_core.grouping`); 0 writes it with each recall.
        """
        from .backends import open_store

        if embedder is None and os.environ.get("EBB_EMBEDDER", "").strip():
            embedder = os.environ["EBB_EMBEDDER"]
        if reinforcement_delay is None:
            raw = os.environ.get("EBB_REINFORCEMENT_DELAY", "").strip()
            reinforcement_delay = parse_delay(raw, "EBB_REINFORCEMENT_DELAY") if raw else 0.0
        validate_delay(reinforcement_delay)
        store = open_store(backend=backend, path=path, wait=wait, create=create, on_wait=on_wait)
        try:
            ns = namespace or os.environ.get("EBB_NAMESPACE") or DEFAULT_NAMESPACE
            return cls(
                store,
                namespace=ns,
                config=config,
                clock=clock,
                embedder=embedder,
                reinforcement_delay=reinforcement_delay,
            )
        except BaseException:
            store.close()
            raise

    #: counts of the last import through this view that committed (see :meth:`import_`)
    last_import: dict[str, int] | None = None
    #: seconds the last recall through this view spent embedding its query (0: no embedder)
    last_query_embed_s: float = 0.0

    def scoped(self, namespace: str) -> Brain:
        """A view of ``namespace`` on the same store, config and clock."""
        other = object.__new__(Brain)
        other._ns = validate_namespace(namespace)
        other._s = self._s
        return other

    def close(self) -> None:
        """Close the underlying store (all namespace views share it)."""
        self._s.store.close()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def namespace(self) -> str:
        return self._ns

    @property
    def config(self) -> Config:
        return self._s.config

    @property
    def clock(self) -> Clock:
        return self._s.clock

    @property
    def store(self) -> GraphStore:
        return self._s.store

    @property
    def embedder(self) -> Embedder | None:
        """The embedder recall and remember use (None: text alone)."""
        return self._s.embedder

    # -- internals ---------------------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[None]:
        with self._s.lock, self._s.store.transaction():
            yield

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run several calls as one unit of work: every change in the block takes effect, or
        (when the block raises) none does. Calls inside see each other's writes.

        >>> with brain.batch():  # doctest: +SKIP
        ...     brain.remember("Alice drinks dark roast", id="fact:alice-coffee")
        ...     brain.connect("fact:alice-coffee", "person:alice")
        """
        with self._tx():
            yield

    def _now_us(self) -> int:
        return to_us(self._s.clock.now())

    def _require(self, ids: Sequence[str]) -> dict[str, Node]:
        for i in ids:
            validate_id(i, existing=True)
        found = self._s.store.get_nodes(self._ns, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(
                f"no memory {missing[0]!r} in namespace {self._ns!r}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                id=missing[0],
            )
        return found

    def _audit(self, entries: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        if not entries:
            return []
        seq = self._s.store.last_audit_seq(self._ns)
        now = self._s.clock.now()
        out = []
        for e in entries:
            seq += 1
            out.append(AuditEntry(seq=seq, namespace=self._ns, at=now, **e))
        self._s.store.append_audit(out)
        return out

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
        store's lock) and its vector stored once the memory is: a kill in between leaves a
        memory without a vector, which ``ebb embed`` (:meth:`embed`) fills in.

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
        with self._tx():
            now_us = self._now_us()
            self._maybe_rebase(now_us)
            when = as_utc(at) if at is not None else from_us(now_us)
            generated = id is None
            if id is None:
                id = self._new_id(kind or "note", text)
            else:
                validate_id(id)
            if id in link_ids:
                raise InvalidInput(f"memory {id!r} cannot link to itself", field="links")
            if id in old_ids:
                raise InvalidInput(f"memory {id!r} cannot supersede itself", field="supersedes")
            existing = None if generated else self._s.store.get_nodes(self._ns, [id]).get(id)
            # text changed with no embedder at hand: its old vector would mislead recall
            stale = (
                vec is None
                and existing is not None
                and existing.text != text
                and self._s.store.supports_vectors
                and self._s.store.get_meta(META_MODEL) is not None
            )
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
            new_kind = kind or (existing.kind if existing else "note")
            if clean_props is None:
                clean_props = dict(existing.props) if existing else {}
            node = Node(
                id=id,
                namespace=self._ns,
                kind=new_kind,
                text=text,
                props=clean_props,
                created_at=existing.created_at if existing else when,
                updated_at=when,
                pinned=pinned or (existing.pinned if existing else False),
                tier=Tier.HOT,
                last_read_at=existing.last_read_at if existing else None,
                base_key=existing.base_key if existing else 0.0,
                key=existing.key if existing else 0.0,
                degree=existing.degree if existing else 0,
            )
            audits: list[dict[str, Any]] = []
            if existing is not None and (existing.text, existing.kind, existing.props) != (
                text,
                new_kind,
                clean_props,
            ):
                audits.append(self._revision(existing, actor))
            if existing is not None:
                self._s.store.upsert_nodes([node])
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
                old = self._s.store.get_edge(self._ns, id, dst, edge_kind) if existing else None
                if old is None:
                    new_edges.append(edge)
                else:
                    changed.append((old, edge.model_copy(update={"created_at": old.created_at})))
            audits += [
                {
                    "action": "supersede",
                    "node_id": old,
                    "from_tier": linked[old].tier,
                    "to_tier": linked[old].tier,
                    "actor": actor,
                    "reason": f"superseded by {id}",
                    "payload": {"by": id},
                }
                for old in old_ids
            ]
            self._audit(audits)
            before = {id: node, **linked}
            changes = self._plan(
                before, read={id: to_us(when)}, new_edges=new_edges, changed=changed
            )
            keys = self._new_keys(before, changes)
            if existing is None:
                # A new memory is created with its scores already final, together with its
                # links and its neighbours' changes (one round on stores that can fold them).
                node = _applied(node, changes.pop(id))
                # Last step: a new memory is hot, so there is nothing to promote after it.
                self._s.store.write_event(
                    self._ns, new_nodes=[node], changes=changes, new_edges=new_edges, final=True
                )
            else:
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
                node = self._s.store.get_nodes(self._ns, [id])[id]
        if vec is not None:
            with self._s.lock:
                # a new memory has no vector to replace: no lookup and delete before the insert
                self._s.store.put_vectors(self._ns, [node.id], vec, new=existing is None)
        elif stale:
            with self._s.lock:
                self._s.store.delete_vectors(self._ns, [node.id])
        return node

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

    def history(self, id: str) -> list[Version]:
        """Every version of a memory's text, oldest first; the last one is the current text.

        Remembering new text under an existing id keeps the old text here (each old version
        is an audited ``revise`` entry), so an update never loses what was there before.
        """
        with self._tx():
            node = self._require([id])[id]
            entries = self._s.store.audit_log(self._ns, MAX_K * 100, node_id=id, action="revise")
        out = []
        for n, e in enumerate(entries, 1):
            p = e.payload or {}
            out.append(
                Version(
                    id=id,
                    version=n,
                    text=str(p.get("text", "")),
                    kind=str(p.get("kind", node.kind)),
                    props=p.get("props") or {},
                    at=p.get("at") or e.at,
                    current=False,
                    replaced_at=e.at,
                    actor=e.actor,
                )
            )
        out.append(
            Version(
                id=id,
                version=len(entries) + 1,
                text=node.text,
                kind=node.kind,
                props=node.props,
                at=node.updated_at,
                current=True,
            )
        )
        return out

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
                    self._audit(
                        [
                            {
                                "action": "supersede",
                                "node_id": dst,
                                "from_tier": nodes[dst].tier,
                                "to_tier": nodes[dst].tier,
                                "actor": actor,
                                "reason": f"superseded by {src}",
                                "payload": {"by": src},
                            }
                        ]
                    )
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

    # -- reading ---------------------------------------------------------------------------------
    def namespaces(self) -> list[str]:
        """Every namespace in the store that holds memories or audit entries."""
        return self._s.store.namespaces()

    def get(self, id: str) -> Node:
        """One memory by id (any tier), without reinforcing it."""
        return self._require([id])[id]

    def read(self, ids: Sequence[str], *, reinforce: bool = True) -> list[Node]:
        """The memories among ``ids`` that exist and are not in the review queue, in the order
        given. Missing and frozen ids are skipped. What is returned is reinforced as recall
        reinforces its hits (read clock reset) unless ``reinforce=False``.

        For adapters that fetch memories by id (a chat transcript, a key-value get).
        """
        wanted = list(dict.fromkeys(validate_id(i) for i in ids))
        with self._tx():
            found = self._s.store.get_nodes(self._ns, wanted) if wanted else {}
            nodes = {i: found[i] for i in wanted if i in found and found[i].tier != Tier.FROZEN}
            if reinforce and nodes:
                self._mark_read(nodes, self._now_us())
            return list(nodes.values())

    def _mark_read(
        self,
        nodes: Mapping[str, Node],
        now_us: int,
        shares: Mapping[str, float] | None = None,
        caps: Mapping[str, Tier] | None = None,
    ) -> None:
        """Reset the read clock of ``nodes`` (what recall and read return), then re-tier them.

        ``shares`` gives a node a part of a full reinforcement (recall reinforces its top hit
        fully and its tail less; see :func:`scoring.partial_read_us`); ``caps`` keeps a node
        from being lifted above a tier (a superseded memory never returns to hot by use).
        """
        cfg = self._s.config
        read = {
            i: scoring.partial_read_us(
                (shares or {}).get(i, 1.0), _opt_us(n.last_read_at), now_us, cfg
            )
            for i, n in nodes.items()
        }
        # a share too small to move a read clock (already read since) writes nothing
        moved = {i: at for i, at in read.items() if at != _opt_us(nodes[i].last_read_at)}
        keys = {i: n.key for i, n in nodes.items()}
        if moved:  # a store may hold these writes a moment (see reinforcement_delay)
            with self._s.store.grouping():
                keys.update(self._adjust({i: nodes[i] for i in moved}, read=moved))
        self._promote(nodes, keys, caps)  # use lifts an archived memory even so

    def activation(self, id: str) -> float:
        """A memory's activation right now (no reinforcement)."""
        node = self.get(id)
        return self._activation(node.key, self._now_us())

    def top(self, k: int = 10, *, depth: int = 3, kinds: Sequence[str] = ()) -> list[Node]:
        """The ``k`` most active memories up to tier ``depth`` (read from the stored key index)."""
        validate_k(k)
        return self._s.store.top_by_key(self._ns, Tier(min(max(depth, 1), 3)), k, kinds)

    def mentioned_in(
        self, text: str, *, exclude_kinds: Sequence[str] = (), limit: int = 10
    ) -> list[Node]:
        """The memories ``text`` mentions, without reinforcing them (frozen ones never count).

        A memory is mentioned by its id (``client:acme``) or by the words of its id's slug as a
        phrase ("Acme", "outcome pricing" for ``decision:outcome-pricing``). Candidates come from
        the ids written in the text and the full-text index, never a scan. Ids come first, then
        full-text rank. Adapters use it to link a message to what it talks about.
        """
        if not isinstance(text, str):
            raise InvalidInput("text must be a string", field="text")
        validate_k(limit, "limit")
        excluded = {validate_kind(x, "exclude_kinds") for x in exclude_kinds}
        text = text[:MAX_TEXT_LEN]
        written = []
        for token in text.split():
            token = token.strip(".,;:!?()[]{}<>\"'`")
            kind, sep, rest = token.partition(":")
            if sep and rest and is_valid_kind(kind) and len(token) <= MAX_ID_LEN:
                written.append(token)
        written = list(dict.fromkeys(written))[:MAX_K]
        terms = query_terms(text)
        phrase = f" {' '.join(stem(w) for w in words(text))} "
        with self._tx():
            found = self._s.store.get_nodes(self._ns, written) if written else {}
            out = [found[i] for i in written if i in found]
            if terms:
                pool = self._s.config.candidate_pool
                for node, _ in self._s.store.text_candidates(
                    self._ns, " ".join(terms), Tier.COLD, pool
                ):
                    slug = words(node.id.partition(":")[2] or node.id)
                    if (
                        node.id not in found
                        and any(w not in STOP_WORDS for w in slug)
                        and f" {' '.join(stem(w) for w in slug)} " in phrase
                    ):
                        out.append(node)
        return [n for n in out if n.tier != Tier.FROZEN and n.kind not in excluded][:limit]

    def neighbors(self, id: str, *, limit: int = 50) -> list[Neighbor]:
        """Memories linked to ``id``, strongest decayed link first (without reinforcing)."""
        validate_k(limit, "limit")
        with self._tx():
            self._require([id])
            now_us = self._now_us()
            h = self._s.config.half_life_us
            out = [
                Neighbor(
                    node=inc.other,
                    edge=inc.edge,
                    decayed_weight=inc.edge.weight
                    * scoring.decay(now_us - to_us(inc.edge.reinforced_at), h),
                )
                for inc in self._s.store.incident(self._ns, [id])
            ]
        out.sort(key=lambda n: (-n.decayed_weight, n.node.id, n.edge.kind))
        return out[:limit]

    def audit_log(
        self,
        limit: int = 100,
        *,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        """Recorded state changes, oldest first: the newest ``limit`` of them, or with
        ``after_seq`` the first ``limit`` whose ``seq`` is above it (``after_seq=0``, then the
        last ``seq`` seen, pages through the whole log)."""
        validate_k(limit, "limit", MAX_K * 100)
        return self._s.store.audit_log(self._ns, limit, node_id, action, after_seq)

    def stats(self) -> Stats:
        """Counts for this namespace."""
        c = self._s.store.counts(self._ns)
        return Stats(
            namespace=self._ns,
            backend=self._s.store.backend,
            location=self._s.store.location,
            nodes=c.nodes,
            edges=c.edges,
            by_tier={Tier(t).label: c.by_tier.get(int(t), 0) for t in Tier},
            pinned=c.pinned,
            review_queue=c.by_tier.get(4, 0),
            audit_entries=c.audit_entries,
            half_life_days=self._s.config.half_life_days,
            reference_activation=self._activation(self._ref_key(), self._now_us()),
        )

    def memories(
        self,
        *,
        kinds: Sequence[str] = (),
        tiers: Sequence[Tier | int] = (),
        limit: int = 100,
        after: str | None = None,
    ) -> list[Node]:
        """This namespace's memories in id order (any tier unless ``tiers`` says), without
        reinforcing them: at most ``limit``, starting after the id ``after`` (for paging).

        A listing reads the namespace in id order and stops once it has ``limit``; for the most
        active memories use :meth:`top`, for the review queue :meth:`review_queue`.
        """
        validate_k(limit, "limit", MAX_K * 100)
        wanted_kinds = {validate_kind(k, "kinds") for k in kinds}
        try:
            wanted_tiers = {Tier(int(t)) for t in tiers}
        except (TypeError, ValueError):
            raise InvalidInput(
                f"tiers must be 1 (hot), 2 (warm), 3 (cold) or 4 (frozen), got {list(tiers)!r}",
                field="tiers",
            ) from None
        out: list[Node] = []
        for batch in self._s.store.scan_nodes(self._ns):
            for node in batch:
                if after is not None and node.id <= after:
                    continue
                if wanted_kinds and node.kind not in wanted_kinds:
                    continue
                if wanted_tiers and node.tier not in wanted_tiers:
                    continue
                out.append(node)
                if len(out) >= limit:
                    return out
        return out


def _applied(node: Node, adj: Adjustment) -> Node:
    """``node`` with ``adj`` applied, as the store would apply it to a stored node."""
    update: dict[str, Any] = {
        "base_key": node.base_key + adj.base_delta,
        "degree": node.degree + adj.degree_delta,
        "key": node.key + adj.key_delta,
        **adj.fields,
    }
    return node.model_copy(update=update)


# EBB_LOG=debug: each Brain call, its store and its timing on standard error (see logs.py).
_logs.instrument(Brain)
_logs.configure_from_env()
