"""What the catalog's tools return: the structured results an MCP client gets (each a JSON
object with a published schema), and that the text renderings are written from."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..model import Edge, LiveLink, Node, ReviewItem, Tier

TierLabel = Literal["hot", "warm", "cold", "frozen"]


def tier_label(tier: Tier) -> TierLabel:
    labels: dict[Tier, TierLabel] = {
        Tier.HOT: "hot",
        Tier.WARM: "warm",
        Tier.COLD: "cold",
        Tier.FROZEN: "frozen",
    }
    return labels[Tier(tier)]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Memory(_Out):
    """One memory as an agent sees it."""

    id: str = Field(description="Stable id like 'decision:outcome-pricing'; use it in other tools.")
    kind: str = Field(description="What it is: note, decision, fact, person, meeting, ...")
    text: str
    props: dict[str, Any] = Field(description="Metadata stored with the memory.")
    tier: TierLabel = Field(
        description="hot: searched first; warm and cold: archived, found when nothing hotter "
        "matches as well (or with depth 2 / 3); frozen: waiting in the review queue for a "
        "person, never recalled."
    )
    pinned: bool = Field(description="Pinned memories stay hot and never archive.")
    created_at: datetime
    updated_at: datetime
    last_read_at: datetime | None

    @classmethod
    def of(cls, node: Node) -> Memory:
        return cls(
            id=node.id,
            kind=node.kind,
            text=node.text,
            props=node.props,
            tier=tier_label(node.tier),
            pinned=node.pinned,
            created_at=node.created_at,
            updated_at=node.updated_at,
            last_read_at=node.last_read_at,
        )


def _absent(value: Any) -> bool:
    return value is None


def _detail(default: Any = None, **kw: Any) -> Any:
    """A part of the full explanation: present only with ``explain=true``."""
    return Field(default, exclude_if=_absent, **kw)


class Why(_Out):
    """Why a memory surfaced. Always: ``summary`` (every reason in one line) and, when newer
    memories replaced it, ``superseded_by``. With ``explain=true`` also each part on its own:
    its text match, the parts of its activation, its live links, how recall reached it."""

    summary: str = Field(
        description="The reasons in one line: matched terms, activation and its parts, live "
        "links, when last reinforced, tier, similarity, what it spread from, what superseded it."
    )
    superseded_by: list[str] = _detail(
        description="Memories that replaced this one: it ranks below them; prefer them. "
        "Present when there are any."
    )
    matched_terms: list[str] = _detail()
    text_score: float = _detail()
    text_norm: float = _detail(description="Text match relative to the best hit, 0..1.")
    activation: float = _detail(description="Recency-weighted connection strength now.")
    activation_norm: float = _detail(description="Activation relative to the most active memory.")
    edges_part: float = _detail(description="Activation from its own links, after decay.")
    read_part: float = _detail(description="Activation from having been read recently.")
    spread_part: float = _detail(description="Activation flowing in from its neighbours.")
    live_links: list[LiveLink] = _detail(description="Links that still count, strongest first.")
    last_reinforced_at: datetime = _detail(
        description="When it or one of its live links was last used (absent: never)."
    )
    tier: TierLabel = _detail()
    reached: str = _detail(
        description="Which tier it came from, and why recall went deeper than hot."
    )
    spread_text: float = _detail(
        description="Text score passed on by linked strong matches (spreading)."
    )
    spread_from: list[str] = _detail(
        description="The memories that passed it spreading: strong matches linked to it, or "
        "memories those matches reached (a second hop).",
    )
    similarity: float = _detail(
        description="Cosine similarity to the query by meaning (absent: no embedder)."
    )
    match: float = _detail(description="Text match and similarity fused, 0..1.")
    found_by: list[str] = _detail(description="How recall found it: text, vector, link, replaces.")

    @classmethod
    def of(cls, why: Any, explain: bool) -> Why:
        """The tool's view of the engine's explanation: brief, or in full."""
        if not explain:
            if why.superseded_by:
                return cls(summary=why.summary, superseded_by=why.superseded_by)
            return cls(summary=why.summary)
        parts = {
            "summary": why.summary,
            "superseded_by": why.superseded_by,
            "matched_terms": why.matched_terms,
            "text_score": why.text_score,
            "text_norm": why.text_norm,
            "activation": why.activation,
            "activation_norm": why.activation_norm,
            "edges_part": why.edges_part,
            "read_part": why.read_part,
            "spread_part": why.spread_part,
            "live_links": why.live_links,
            "last_reinforced_at": why.last_reinforced_at,
            "tier": tier_label(why.tier),
            "reached": why.reached,
            "spread_text": why.spread_text,
            "spread_from": why.spread_from,
            "similarity": why.similarity,
            "match": why.match,
            "found_by": why.found_by,
        }
        return cls(**{k: v for k, v in parts.items() if v is not None})


class Hit(_Out):
    """One recall result."""

    id: str
    kind: str
    text: str
    props: dict[str, Any]
    tier: TierLabel
    pinned: bool
    score: float = Field(description="Blend of normalised text match and activation.")
    why: Why


class RecallResult(_Out):
    """The memories most relevant to a query, best first, each with why it surfaced."""

    query: str
    hits: list[Hit]
    hint: str | None = Field(None, description="What to try when nothing matched.")


class VersionOut(_Out):
    """One version of a memory's text."""

    version: int = Field(description="1 is the oldest.")
    text: str
    kind: str
    props: dict[str, Any]
    at: datetime = Field(description="When this version was written.")
    current: bool = Field(description="Whether this is the memory's text now.")
    replaced_at: datetime | None = Field(None, description="When a newer version replaced it.")


class History(_Out):
    """Every version of one memory, oldest first."""

    id: str
    versions: list[VersionOut]


class Link(_Out):
    """A typed, weighted, timestamped link between two memories."""

    src: str
    dst: str
    kind: str
    weight: float
    created_at: datetime
    reinforced_at: datetime = Field(
        description="When the link was last used; decay counts from here."
    )

    @classmethod
    def of(cls, edge: Edge) -> Link:
        return cls(
            src=edge.src,
            dst=edge.dst,
            kind=edge.kind,
            weight=edge.weight,
            created_at=edge.created_at,
            reinforced_at=edge.reinforced_at,
        )


class Forgotten(_Out):
    """A memory queued for a person's review (nothing was deleted)."""

    id: str
    tier: TierLabel
    in_review_queue: bool
    reason: str
    queued_at: datetime | None
    message: str


class NeighborOut(_Out):
    """A memory linked to another, with the link between them."""

    id: str
    kind: str
    text: str
    tier: TierLabel
    pinned: bool
    link_kind: str
    direction: Literal["out", "in"] = Field(
        description="out: the asked-about memory links to this one; in: this one links to it."
    )
    weight: float
    decayed_weight: float = Field(description="What the link counts for now, after decay.")
    reinforced_at: datetime


class Neighbors(_Out):
    """The memories linked to ``id``, strongest decayed link first."""

    id: str
    neighbors: list[NeighborOut]


class ReadResult(_Out):
    """Memories read by id, in the order asked."""

    memories: list[Memory]
    missing: list[str] = Field(
        description="Ids asked for that are not there (never stored, deleted, or waiting in the "
        "review queue)."
    )
    reinforced: bool = Field(description="Whether reading them counted as using them.")


class NearMemory(_Out):
    """A memory in a neighbourhood, and how many links away from the centre it is."""

    id: str
    kind: str
    text: str
    tier: TierLabel
    pinned: bool
    hops: int = Field(description="Links between it and the centre (0 for the centre).")


class NearLink(_Out):
    """A link in a neighbourhood, with what it counts for now."""

    src: str
    dst: str
    kind: str
    weight: float
    decayed_weight: float = Field(description="What the link counts for now, after decay.")
    reinforced_at: datetime


class Neighbourhood(_Out):
    """The memories within ``depth`` links of ``id`` (strongest links first) and the links
    that reach them."""

    id: str
    memories: list[NearMemory]
    links: list[NearLink]
    truncated: bool = Field(
        description="True when per_node or max_memories left some linked memories out."
    )
    reinforced: bool


class ReviewQueue(_Out):
    """Memories waiting for a person: forgotten, or decayed below the archive cut-off."""

    count: int
    items: list[ReviewItem]
    message: str
