"""``Brain``: Ebb's engine API. Policy lives here; storage lives behind :class:`GraphStore`.

>>> from ebb_core import Brain
>>> brain = Brain.open("notes.kuzu")                   # doctest: +SKIP
>>> brain.remember("We price by outcome now", kind="decision", id="decision:outcome-pricing")
...                                                    # doctest: +SKIP
>>> [h.id for h in brain.recall("pricing")]             # doctest: +SKIP
['decision:outcome-pricing']
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from . import logs as _logs
from . import scoring
from .brain_base import _Shared
from .clock import Clock, SystemClock, to_us
from .embeddings import Embedder
from .errors import InvalidInput
from .explain import _opt_us
from .grouping import GroupedStore, parse_delay, validate_delay
from .keys import KeysMixin
from .maintenance import MaintenanceMixin
from .model import (
    AuditEntry,
    Neighbor,
    Node,
    Stats,
    Tier,
)
from .recall import RecallMixin
from .review import ReviewMixin
from .scoring import Config
from .store import GraphStore
from .text import STOP_WORDS, query_terms, stem, words

# The export names stay importable from here (testing/data.py reads _AUDIT_PAGE).
from .transfer import _AUDIT_PAGE as _AUDIT_PAGE
from .transfer import EXPORT_FORMAT as EXPORT_FORMAT
from .transfer import EXPORT_VERSION as EXPORT_VERSION
from .transfer import VECTOR_RECORD as VECTOR_RECORD
from .transfer import CommittedInterrupt as CommittedInterrupt
from .transfer import Progress as Progress
from .transfer import TransferMixin
from .validation import (
    MAX_ID_LEN,
    MAX_K,
    MAX_TEXT_LEN,
    is_valid_kind,
    validate_id,
    validate_k,
    validate_kind,
    validate_namespace,
)
from .vectors import VectorsMixin
from .writing import WriteMixin

DEFAULT_NAMESPACE = "default"


class Brain(
    WriteMixin, TransferMixin, MaintenanceMixin, RecallMixin, KeysMixin, ReviewMixin, VectorsMixin
):
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
        only_reads: bool = False,
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

        ``only_reads=True`` promises that this ``Brain`` will only read (no recall that
        reinforces): an embedded store that needs no recovery is then opened read-only and
        left byte for byte as it was; a write through it fails with a ``StorageError``.
        """
        from .backends import open_store

        if embedder is None and os.environ.get("EBB_EMBEDDER", "").strip():
            embedder = os.environ["EBB_EMBEDDER"]
        if reinforcement_delay is None:
            raw = os.environ.get("EBB_REINFORCEMENT_DELAY", "").strip()
            reinforcement_delay = parse_delay(raw, "EBB_REINFORCEMENT_DELAY") if raw else 0.0
        validate_delay(reinforcement_delay)
        store = open_store(
            backend=backend,
            path=path,
            wait=wait,
            create=create,
            on_wait=on_wait,
            only_reads=only_reads,
        )
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
    def batch(self) -> Iterator[None]:
        """Run several calls as one unit of work: every change in the block takes effect, or
        (when the block raises) none does. Calls inside see each other's writes.

        >>> with brain.batch():  # doctest: +SKIP
        ...     brain.remember("Alice drinks dark roast", id="fact:alice-coffee")
        ...     brain.connect("fact:alice-coffee", "person:alice")
        """
        with self._tx():
            yield

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


# EBB_LOG=debug: each Brain call, its store and its timing on standard error (see logs.py).
_logs.instrument(Brain)
_logs.configure_from_env()
