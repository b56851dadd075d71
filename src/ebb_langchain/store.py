"""``EbbStore``: Ebb as LangGraph's long-term store (``create_agent(store=...)``, LangMem)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.runnables.config import run_in_executor
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from ebb_core import Brain, Node, NotFound, RecallHit, Tier
from ebb_core.validation import MAX_K

#: Where a store item's value lives in the memory's props.
VALUE_PROP = "langgraph_value"
SEPARATOR = "."  # LangGraph forbids it inside a namespace label, so the mapping is reversible


def ebb_namespace(namespace: tuple[str, ...]) -> str:
    """The Ebb namespace a LangGraph namespace maps to: ``("memories", "u1")`` → ``memories.u1``.

    Raises ``InvalidNamespaceError`` for an empty namespace or a label that is empty, not a
    string or contains ``.`` (it would address another namespace).
    """
    if not namespace:
        raise InvalidNamespaceError("a LangGraph namespace needs at least one label")
    for label in namespace:
        if not isinstance(label, str) or not label or SEPARATOR in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {namespace}: labels are non-empty "
                f"strings without {SEPARATOR!r}"
            )
    return SEPARATOR.join(namespace)


def langgraph_namespace(namespace: str) -> tuple[str, ...]:
    """Inverse of :func:`ebb_namespace`."""
    return tuple(namespace.split(SEPARATOR))


class EbbStore(BaseStore):
    """LangGraph's ``BaseStore`` on an Ebb :class:`~ebb_core.Brain`.

    - A LangGraph namespace tuple is the Ebb namespace of its labels joined by ``.``
      (``("memories", "alice")`` → ``memories.alice``); an item is the memory whose id is its key,
      its value kept whole in the memory's props and its text fields (``fields``, or the
      ``index`` given to ``put``) as the memory's text.
    - ``search`` ranks with Ebb's recall (text match blended with activation) and reinforces
      what it returns; ``get`` reinforces the item it returns. ``reinforce=False`` to look only.
      Without a query, ``search`` lists the most active items. Recall searches every live
      tier, hot first, or tiers up to ``depth`` (1 hot, 2 +warm, 3 +cold); ``get`` sees any
      tier but frozen. ``put`` on an existing key stores a new version: the old value is kept
      in the memory's history (``Brain.history``).
    - ``delete`` is Ebb's ``forget``: the item is hidden from reads at once and waits in the
      review queue for a person to approve its deletion. An agent never destroys a memory.
      ``put`` on a forgotten key brings it back.
    - Memories written through Ebb itself (tools, MCP, ``Brain.remember``) show up as items
      whose value is ``{"content": text, "kind": kind}``.
    - Items do not expire (``supports_ttl = False``): Ebb lets unused memories decay instead.
    - ``embedder`` (or LangGraph's ``index={"embed": embeddings}``) makes ``search`` find items
      by meaning too: a LangChain ``Embeddings``, a callable, or ``"minilm"`` (offline).

    >>> agent = create_agent(model, tools, store=EbbStore(brain))   # doctest: +SKIP
    """

    supports_ttl = False

    def __init__(
        self,
        brain: Brain,
        *,
        kind: str = "memory",
        fields: Sequence[str] | None = None,
        depth: int | None = None,
        reinforce: bool = True,
        actor: str = "agent",
        embedder: Any = None,
        index: Mapping[str, Any] | None = None,
    ) -> None:
        # LangGraph's own way to ask for semantic search: index={"embed": ..., "fields": [...]}
        if index is not None:
            embedder = embedder if embedder is not None else index.get("embed")
            if fields is None and index.get("fields") is not None:
                fields = list(index["fields"])
        if embedder is not None:
            brain.set_embedder(embedder)
        self.brain = brain
        self.kind = kind
        self.fields = list(fields) if fields is not None else None
        self.depth = depth
        self.reinforce = reinforce
        self.actor = actor

    # -- batch -----------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The engine is in-process and synchronous: run it off the event loop.
        return await run_in_executor(None, self.batch, list(ops))

    # -- operations ------------------------------------------------------------------------------
    def _view(self, namespace: tuple[str, ...]) -> Brain:
        return self.brain.scoped(ebb_namespace(namespace))

    def _get(self, op: GetOp) -> Item | None:
        nodes = self._view(op.namespace).read([op.key], reinforce=self.reinforce)
        return _item(nodes[0]) if nodes else None

    def _put(self, op: PutOp) -> None:
        brain = self._view(op.namespace)
        if op.value is None:
            # Deleting what is not there is not an error in LangGraph.
            with contextlib.suppress(NotFound):
                brain.forget(op.key, "deleted through the LangGraph store", actor=self.actor)
            return
        if op.ttl is not None:
            raise NotImplementedError(
                "EbbStore does not expire items (ttl): unused memories decay and archive instead; "
                "put the item without a ttl"
            )
        value = dict(op.value)
        kind = self.kind
        try:
            existing = brain.get(op.key)
        except NotFound:
            existing = None
        if existing is not None:
            kind = existing.kind
            if existing.tier == Tier.FROZEN:
                # Writing a forgotten key again means the agent needs it again.
                brain.restore(op.key, actor=self.actor)
        # On an existing key this is a new version: the old value stays in the history.
        brain.remember(
            self._text(value, op.index, op.key),
            kind=kind,
            id=op.key,
            props={VALUE_PROP: value},
            actor=self.actor,
        )

    def _text(
        self, value: Mapping[str, Any], index: Literal[False] | list[str] | None, key: str
    ) -> str:
        """The memory text recall matches: the indexed fields' text (the key if not indexed)."""
        if index is False:
            return key
        paths = index if index is not None else self.fields
        if paths is None:
            texts = _strings(value)
        else:
            texts = [t for p in paths for t in get_text_at_path(value, p)]
        text = "\n".join(t for t in texts if t.strip())
        if text:
            return text
        return json.dumps(value, sort_keys=True, ensure_ascii=False) if value else key

    def _search(self, op: SearchOp) -> list[SearchItem]:
        want = op.offset + op.limit
        if op.limit <= 0 or want <= 0:
            return []
        # A filter is applied to recall's ranking, so it looks at the best MAX_K per namespace.
        k = MAX_K if op.filter else min(want, MAX_K)
        hits: list[RecallHit] = []
        for ns in self._namespaces(op.namespace_prefix):
            hits += self.brain.scoped(ns).recall(
                op.query or "", k=k, depth=self.depth, reinforce=False
            )
        if op.filter:
            hits = [h for h in hits if _matches(_value(h.node), op.filter)]
        hits.sort(key=lambda h: (-h.score, h.node.namespace, h.node.id))
        chosen = hits[max(op.offset, 0) : want]
        if self.reinforce:
            by_ns: dict[str, list[str]] = {}
            for h in chosen:
                by_ns.setdefault(h.node.namespace, []).append(h.node.id)
            for ns, ids in by_ns.items():
                self.brain.scoped(ns).read(ids)
        return [_item(h.node, h.score) for h in chosen]

    def _namespaces(self, prefix: tuple[str, ...]) -> list[str]:
        n = len(prefix)
        return [ns for ns in self.brain.store.namespaces() if langgraph_namespace(ns)[:n] == prefix]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [langgraph_namespace(ns) for ns in self.brain.store.namespaces()]
        if op.match_conditions:
            found = [ns for ns in found if all(_does_match(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            found = [ns[: op.max_depth] for ns in found]
        return sorted(set(found))[op.offset : op.offset + op.limit]


# -- conversions -----------------------------------------------------------------------------------
def _value(node: Node) -> dict[str, Any]:
    """The item value of a memory: what was put, or its text and kind if Ebb wrote it."""
    if VALUE_PROP in node.props:
        value: dict[str, Any] = node.props[VALUE_PROP]
        return value
    return {"content": node.text, "kind": node.kind}


def _item(node: Node, score: float | None = None) -> SearchItem:
    return SearchItem(
        namespace=langgraph_namespace(node.namespace),
        key=node.id,
        value=_value(node),
        created_at=node.created_at,
        updated_at=node.updated_at,
        score=score,
    )


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value, depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


# -- LangGraph's filter and namespace-match languages, read as its in-memory store reads them --
def _matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    return all(_compare(value.get(k), f) for k, f in filter.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(actual, op, v) for op, v in wanted.items())
        return isinstance(actual, Mapping) and _matches(actual, wanted)
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(actual == wanted)
    if op == "$ne":
        return bool(actual != wanted)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, w = float(actual), float(wanted)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > w, "$gte": a >= w, "$lt": a < w, "$lte": a <= w}[op]
    raise ValueError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported namespace match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)
