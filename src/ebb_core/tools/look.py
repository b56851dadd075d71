"""The tools that find and read memories: recall, neighbors, history, read, explore,
review_queue and stats. Only ``recall`` (and ``read``/``explore`` when asked) counts what it
returns as used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ..model import Neighbor, Node, RecallHit, ReviewItem, Stats, Tier, Version
from ..validation import MAX_EXPLORE, MAX_LIST, MAX_READ, MAX_RECALL_K
from .outputs import (
    History,
    Hit,
    Memory,
    NearLink,
    NearMemory,
    NeighborOut,
    Neighbors,
    Neighbourhood,
    ReadResult,
    RecallResult,
    ReviewQueue,
    VersionOut,
    Why,
    tier_label,
)
from .spec import Args, ToolSpec, as_json, described, same

if TYPE_CHECKING:
    from ..engine import Brain


# -- recall --------------------------------------------------------------------------------------
class RecallArgs(Args):
    query: str = Field(description="What you want to remember: a few keywords or a question.")
    k: int = Field(5, ge=1, le=MAX_RECALL_K, description="How many memories to return.")
    depth: Literal[1, 2, 3] | None = Field(
        None,
        description="Leave it out to search every live tier, hot first (warm and cold memories "
        "come up when nothing hot matches as well). A limit: 1 hot memories only; 2 also warm; "
        "3 also cold (archived).",
    )
    include_archived: bool = Field(False, description="Also search cold (archived) memories.")
    kinds: list[str] | None = Field(
        None, description="Only these kinds of memory, e.g. ['decision', 'fact']."
    )
    reinforce: bool = Field(
        True, description="Count the returned memories as used (resets their decay)."
    )
    explain: bool = Field(
        False,
        description="Give each hit's `why` in full (each score part, live links, how it was "
        "found) besides its one-line summary.",
    )


def _recall(brain: Brain, a: RecallArgs, actor: str) -> list[RecallHit]:
    return brain.recall(
        a.query,
        a.k,
        depth=a.depth,
        include_archived=a.include_archived,
        kinds=a.kinds or (),
        reinforce=a.reinforce,
    )


def _hit(h: RecallHit, explain: bool) -> Hit:
    w = h.why
    return Hit(
        id=h.node.id,
        kind=h.node.kind,
        text=h.node.text,
        props=h.node.props,
        tier=tier_label(h.node.tier),
        pinned=h.node.pinned,
        score=h.score,
        why=Why.of(w, explain),
    )


def _recall_hint(a: RecallArgs, hits: list[RecallHit]) -> str | None:
    if hits:
        return None
    return (
        f"nothing matched down to depth {a.depth}: try other words, or leave depth out to "
        "search every tier"
        if a.depth in (1, 2) and not a.include_archived
        else "nothing matched: try other words"
    )


def _recall_result(a: RecallArgs, hits: list[RecallHit]) -> RecallResult:
    return RecallResult(
        query=a.query, hits=[_hit(h, a.explain) for h in hits], hint=_recall_hint(a, hits)
    )


def _recall_plain(a: RecallArgs, hits: list[RecallHit]) -> dict[str, Any]:
    """:func:`_recall_result` dumped as JSON, built directly for the one-line ``why`` (the
    default): the hits' fields are already JSON values (props are checked JSON when stored)."""
    if a.explain:  # every part of why, with its dates and links: through the models
        data: dict[str, Any] = _recall_result(a, hits).model_dump(mode="json", by_alias=True)
        return data
    out = []
    for h in hits:
        node, why = h.node, h.why
        brief: dict[str, Any] = {"summary": why.summary}
        if why.superseded_by:
            brief["superseded_by"] = list(why.superseded_by)
        out.append(
            {
                "id": node.id,
                "kind": node.kind,
                "text": node.text,
                "props": dict(node.props),
                "tier": tier_label(node.tier),
                "pinned": node.pinned,
                "score": float(h.score),
                "why": brief,
            }
        )
    return {"query": a.query, "hits": out, "hint": _recall_hint(a, hits)}


def _recall_text(a: RecallArgs, hits: list[RecallHit]) -> str:
    if not hits:
        return "No memories found."
    return "\n".join(
        f"{i}. [{h.node.id}] ({h.node.kind}, {h.why.tier.label}"
        + (
            f", OUTDATED: superseded by {', '.join(h.why.superseded_by)}"
            if h.why.superseded_by
            else ""
        )
        + f") {h.node.text}\n   why: {h.why.summary}"
        for i, h in enumerate(hits, 1)
    )


RECALL: ToolSpec[RecallArgs, list[RecallHit]] = ToolSpec(
    name="recall",
    title="Recall",
    description=described("""
        Find what you remember about a topic. Call it before answering anything that may
        depend on earlier sessions: people, decisions, preferences, past work.

        Memories are ranked by text match blended with recency-weighted connection strength
        (memories that are used and well linked rank higher; stale ones sink). Each hit comes
        with `why` it surfaced, in one line: the terms it matched, the parts of its activation,
        its live links, when it was last reinforced, its tier, what linked match it came through
        and what superseded it (`superseded_by` lists the replacements); explain=true gives
        each part as its own field too. Searches hot memories first and falls through to warm
        and cold when they match better; depth=1 or 2 limits the search. Memories replaced by
        newer ones rank below their replacements. Returned memories count as used (the top hit
        most) unless reinforce=false."""),
    args=RecallArgs,
    output=RecallResult,
    run=_recall,
    structured=_recall_result,
    text=_recall_text,
    plain=_recall_plain,
)


# -- neighbors -----------------------------------------------------------------------------------
class NeighborsArgs(Args):
    id: str = Field(description="Id of the memory whose links you want.")
    limit: int = Field(20, ge=1, le=MAX_LIST, description="At most this many neighbours.")


def _neighbors(a: NeighborsArgs, found: list[Neighbor]) -> Neighbors:
    out = [
        NeighborOut(
            id=n.node.id,
            kind=n.node.kind,
            text=n.node.text,
            tier=tier_label(n.node.tier),
            pinned=n.node.pinned,
            link_kind=n.edge.kind,
            direction="out" if n.edge.src == a.id else "in",
            weight=n.edge.weight,
            decayed_weight=n.decayed_weight,
            reinforced_at=n.edge.reinforced_at,
        )
        for n in found
    ]
    return Neighbors(id=a.id, neighbors=out)


NEIGHBORS: ToolSpec[NeighborsArgs, list[Neighbor]] = ToolSpec(
    name="neighbors",
    title="Neighbors",
    description=described("""
        List the memories linked to a memory, strongest link first (after decay), with each
        link's kind, direction, weight and when it was last used.

        Use it to explore around a recalled memory. Read-only: nothing is reinforced."""),
    args=NeighborsArgs,
    output=Neighbors,
    run=lambda b, a, actor: b.neighbors(a.id, limit=a.limit),
    structured=_neighbors,
    text=lambda a, found: as_json(a, _neighbors(a, found)),
    read_only=True,
    idempotent=True,
)


# -- history -------------------------------------------------------------------------------------
class HistoryArgs(Args):
    id: str = Field(description="Id of the memory whose versions you want.")


def _history(a: HistoryArgs, versions: list[Version]) -> History:
    return History(
        id=a.id,
        versions=[
            VersionOut(
                version=v.version,
                text=v.text,
                kind=v.kind,
                props=v.props,
                at=v.at,
                current=v.current,
                replaced_at=v.replaced_at,
            )
            for v in versions
        ],
    )


HISTORY: ToolSpec[HistoryArgs, list[Version]] = ToolSpec(
    name="history",
    title="History",
    description=described("""
        List every version of a memory's text, oldest first; the last is the current one.

        Storing new text under an existing id keeps the old text as a version, so nothing is
        lost when a memory is updated. Read-only: nothing is reinforced."""),
    args=HistoryArgs,
    output=History,
    run=lambda b, a, actor: b.history(a.id),
    structured=_history,
    text=lambda a, versions: as_json(a, _history(a, versions)),
    read_only=True,
    idempotent=True,
)


# -- review_queue --------------------------------------------------------------------------------
class ReviewQueueArgs(Args):
    limit: int = Field(50, ge=1, le=MAX_LIST, description="At most this many entries.")


def _queue(a: ReviewQueueArgs, items: list[ReviewItem]) -> ReviewQueue:
    return ReviewQueue(
        count=len(items),
        items=items,
        message="Only a person can approve deletions: `ebb approve ID --by NAME` (or `ebb "
        "restore ID` to keep it).",
    )


REVIEW_QUEUE: ToolSpec[ReviewQueueArgs, list[ReviewItem]] = ToolSpec(
    name="review_queue",
    title="Review queue",
    description=described("""
        List the memories waiting for a person's decision: forgotten ones and ones that decayed
        below the archive cut-off. Read-only.

        You cannot approve deletions. If the user asks, tell them to run `ebb review` to see the
        queue, `ebb approve ID --by NAME` to delete, or `ebb restore ID` to keep a memory."""),
    args=ReviewQueueArgs,
    output=ReviewQueue,
    run=lambda b, a, actor: b.review_queue(a.limit),
    structured=_queue,
    text=lambda a, items: as_json(a, _queue(a, items)),
    read_only=True,
    idempotent=True,
)


# -- stats ---------------------------------------------------------------------------------------
class StatsArgs(Args):
    pass


STATS: ToolSpec[StatsArgs, Stats] = ToolSpec(
    name="stats",
    title="Stats",
    description=described("""
        Counts for this memory store: memories per tier, links, pinned memories, the size of
        the review queue, the decay half-life. Read-only."""),
    args=StatsArgs,
    output=Stats,
    run=lambda b, a, actor: b.stats(),
    structured=same,
    text=as_json,
    read_only=True,
    idempotent=True,
)


# -- read ----------------------------------------------------------------------------------------
class ReadArgs(Args):
    ids: list[str] = Field(
        min_length=1,
        max_length=MAX_READ,
        description=f"Ids of the memories to read (1 to {MAX_READ}).",
    )
    reinforce: bool = Field(
        False,
        description="Count this as using them (resets their decay clock, as recall does). "
        "Default false: just look.",
    )


def _read(brain: Brain, a: ReadArgs, actor: str) -> ReadResult:
    nodes = brain.read(a.ids, reinforce=a.reinforce)
    if a.reinforce and nodes:  # as they are now, read clocks reset
        nodes = brain.read([n.id for n in nodes], reinforce=False)
    found = {n.id for n in nodes}
    missing = [i for i in dict.fromkeys(a.ids) if i not in found]
    return ReadResult(
        memories=[Memory.of(n) for n in nodes], missing=missing, reinforced=a.reinforce
    )


READ: ToolSpec[ReadArgs, ReadResult] = ToolSpec(
    name="read",
    title="Read memories",
    description=described("""
        Read one or several memories by id: their full text, kind, props, tier and dates.

        Use it when you already know the ids (from recall, neighbors, explore or an earlier
        turn). Ids that do not exist or wait in the review queue are listed in `missing`.
        Read-only unless `reinforce` is true."""),
    args=ReadArgs,
    output=ReadResult,
    run=_read,
    structured=same,
    text=as_json,
    read_only=True,
    idempotent=True,
)


# -- explore -------------------------------------------------------------------------------------
class ExploreArgs(Args):
    id: str = Field(description="Id of the memory at the centre.")
    depth: int = Field(2, ge=1, le=3, description="How many links out to go (1 to 3).")
    per_node: int = Field(
        5, ge=1, le=20, description="Follow at most this many strongest links per memory."
    )
    max_memories: int = Field(
        25,
        ge=1,
        le=MAX_EXPLORE,
        description=f"At most this many memories in all (up to {MAX_EXPLORE}).",
    )
    reinforce: bool = Field(
        False, description="Count the memories returned as used. Default false: just look."
    )


def _near(node: Node, hops: int) -> NearMemory:
    return NearMemory(
        id=node.id,
        kind=node.kind,
        text=node.text,
        tier=tier_label(node.tier),
        pinned=node.pinned,
        hops=hops,
    )


def _explore(brain: Brain, a: ExploreArgs, actor: str) -> Neighbourhood:
    centre = brain.get(a.id)
    places = {centre.id: _near(centre, 0)}
    links: dict[tuple[str, str, str], NearLink] = {}
    truncated = False
    frontier = [centre.id]
    for hops in range(1, a.depth + 1):
        following: list[str] = []
        for at in frontier:
            around = [n for n in brain.neighbors(at, limit=MAX_LIST) if n.node.tier != Tier.FROZEN]
            truncated |= len(around) > a.per_node
            for n in around[: a.per_node]:
                if n.node.id not in places:
                    if len(places) >= a.max_memories:
                        truncated = True
                        continue
                    places[n.node.id] = _near(n.node, hops)
                    following.append(n.node.id)
                e = n.edge
                links.setdefault(
                    (e.src, e.dst, e.kind),
                    NearLink(
                        src=e.src,
                        dst=e.dst,
                        kind=e.kind,
                        weight=e.weight,
                        decayed_weight=n.decayed_weight,
                        reinforced_at=e.reinforced_at,
                    ),
                )
        frontier = following
        if not frontier:
            break
    if a.reinforce:
        brain.read(list(places), reinforce=True)
    ordered = sorted(links.values(), key=lambda p: (-p.decayed_weight, p.src, p.dst))
    return Neighbourhood(
        id=centre.id,
        memories=list(places.values()),
        links=ordered,
        truncated=truncated,
        reinforced=a.reinforce,
    )


EXPLORE: ToolSpec[ExploreArgs, Neighbourhood] = ToolSpec(
    name="explore",
    title="Explore",
    description=described("""
        A bounded view of a memory's neighbourhood: the memories within `depth` links of it,
        following the strongest links first (after decay), and the links between them.

        Use it to see the context around a memory (the meeting behind a decision, the people
        around a client). Memories waiting in the review queue are left out. Read-only unless
        `reinforce` is true."""),
    args=ExploreArgs,
    output=Neighbourhood,
    run=_explore,
    structured=same,
    text=as_json,
    read_only=True,
    idempotent=True,
)
