"""Ebb's data model: memories (nodes), typed weighted edges, tiers, and what the API returns."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import ebb_core as _package

# The limits and checks live in .validation; imported here for the code that reads them from here.
from .validation import (  # noqa: F401
    MAX_ID_LEN,
    MAX_TEXT_LEN,
    has_control_chars,
    has_visible_chars,
    id_problem,
    is_valid_kind,
)


class Tier(IntEnum):
    """Archive tiers: recall sees hot by default, warm on request, cold when asked, frozen never."""

    HOT = 1
    WARM = 2
    COLD = 3
    FROZEN = 4

    @property
    def label(self) -> str:
        return self.name.lower()


#: The parts of a recall hit's score, as :class:`Why` names them.
SCORE_PARTS = (
    "text_score",
    "text_norm",
    "activation",
    "activation_norm",
    "edges_part",
    "read_part",
    "spread_part",
)


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


# The result types: pydantic models, or (in a one-shot `ebb recall` / `ebb stats` process, which
# asks for them before anything imports this module) the plain classes of .model_plain, with the
# same fields, defaults and JSON and no pydantic to import (see there).
if TYPE_CHECKING or not _package._plain_models:
    from pydantic import BaseModel, ConfigDict, Field, computed_field

    class _Model(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

    class Node(_Model):
        """One memory: a note, decision, meeting, person, client, fact, message...

        ``id`` looks like ``kind:slug`` (``decision:outcome-pricing``). ``props`` holds any
        JSON-able metadata. The scoring fields are derived state maintained by the engine (see
        :mod:`ebb_core.scoring`): ``key`` is the scoring key ``K(n)``, the node's activation
        written at the scoring epoch (a number recall ranks by and tiers are cut on, not a lookup
        key; the lookup key is ``id``), ``base_key`` its part from the node's own edges and
        reads, ``degree`` its number of edges.
        """

        id: str
        namespace: str
        kind: str
        text: str
        props: dict[str, Any] = Field(default_factory=dict)
        created_at: datetime
        updated_at: datetime
        last_read_at: datetime | None = None
        pinned: bool = False
        tier: Tier = Tier.HOT
        review_reason: str | None = None
        queued_at: datetime | None = None
        base_key: float = 0.0
        key: float = 0.0
        degree: int = 0

    class Edge(_Model):
        """A typed, weighted, timestamped reference from ``src`` to ``dst`` (unique per kind).

        For relevance an edge counts for both ends; ``reinforced_at`` is the clock that decay reads.
        """

        namespace: str
        src: str
        dst: str
        kind: str = "related"
        weight: float = 1.0
        created_at: datetime
        reinforced_at: datetime
        props: dict[str, Any] = Field(default_factory=dict)

    class LiveLink(_Model):
        """An edge of a recalled node, with what it contributes now."""

        id: str
        kind: str
        direction: str  # "out" or "in"
        weight: float
        decayed_weight: float
        reinforced_at: datetime

    class Why(_Model):
        """Why a memory surfaced in recall: the parts of its score and its live connections."""

        matched_terms: list[str]
        text_score: float
        text_norm: float
        activation: float
        activation_norm: float
        edges_part: float
        read_part: float
        spread_part: float
        live_links: list[LiveLink]
        last_reinforced_at: datetime | None
        tier: Tier
        summary: str
        #: text score passed on by linked strong matches (query-time spreading), in text_norm units
        spread_text: float = 0.0
        #: the memories that passed it spreading, strongest first: strong matches linked to it,
        #: or (``Config.spread_second_hop``) memories those matches reached, relaying it on
        spread_from: list[str] = Field(default_factory=list)
        #: the memories that replaced this one (``supersedes`` links); it ranks below them
        superseded_by: list[str] = Field(default_factory=list)
        #: why recall reached this memory's tier: "hot", or why a warm/cold memory came up
        reached: str = ""
        #: cosine similarity of its vector to the query's (None: no embedder, or no vector)
        similarity: float | None = None
        #: the similarity normalised against the best candidate's, as fused (0 without vectors)
        similarity_norm: float = 0.0
        #: the fused match (text and similarity) that spreading and the blend start from
        match: float = 0.0
        #: how recall found it: any of "text", "vector", "link", "replaces"
        found_by: list[str] = Field(default_factory=list)

    class RecallHit(_Model):
        """One recall result: the memory, its blended score and why it surfaced.

        Its JSON (``model_dump``, ``ebb recall --json``) carries the memory's ``id``, ``text``,
        ``kind`` and ``tier`` at the top level too, beside ``node`` (the whole memory).
        """

        node: Node
        score: float
        why: Why

        @computed_field  # type: ignore[prop-decorator]
        @property
        def id(self) -> str:
            return self.node.id

        @computed_field  # type: ignore[prop-decorator]
        @property
        def text(self) -> str:
            return self.node.text

        @computed_field  # type: ignore[prop-decorator]
        @property
        def kind(self) -> str:
            return self.node.kind

        @computed_field  # type: ignore[prop-decorator]
        @property
        def tier(self) -> Tier:
            return self.node.tier

        def flat(self) -> dict[str, Any]:
            """The hit as one flat, JSON-friendly dict: what the framework adapters shape into
            their own metadata (LangChain's ``hit_metadata``, LlamaIndex's ``hit_to_node``), so a
            hit's fields are listed once. Times are ISO strings (or None), the tier its label (and
            ``tier_level`` its number), each score part under ``SCORE_PARTS``' names, live links as
            dicts of id, kind, direction and decayed weight."""
            node, why = self.node, self.why
            return {
                "id": node.id,
                "namespace": node.namespace,
                "kind": node.kind,
                "tier": why.tier.label,
                "tier_level": int(why.tier),
                "pinned": node.pinned,
                "props": dict(node.props),
                "score": self.score,
                **{part: getattr(why, part) for part in SCORE_PARTS},
                "matched_terms": list(why.matched_terms),
                "superseded_by": list(why.superseded_by),
                "spread_from": list(why.spread_from),
                "reached": why.reached,
                "live_links": [
                    {
                        "id": link.id,
                        "kind": link.kind,
                        "direction": link.direction,
                        "decayed_weight": link.decayed_weight,
                    }
                    for link in why.live_links
                ],
                "why": why.summary,
                "created_at": _iso(node.created_at),
                "updated_at": _iso(node.updated_at),
                "last_read_at": _iso(node.last_read_at),
                "last_reinforced_at": _iso(why.last_reinforced_at),
            }

        def metadata(self) -> dict[str, Any]:
            """The metadata both framework adapters give a hit (LangChain's ``Document.metadata``,
            LlamaIndex's ``TextNode.metadata``): :meth:`flat`, plus each name the other adapter
            used before they were unified, so code written for either finds its keys in both:
            ``memory_id`` (LlamaIndex's name for ``id``), ``score_parts`` (LangChain's: the score
            parts nested, ``edges``/``read``/``spread`` without ``_part``) and ``live_link_ids``.
            ``live_links`` alone keeps each adapter's own shape (dicts here and in LangChain, ids in
            LlamaIndex): ``live_link_ids`` reads the same in both."""
            flat = self.flat()
            return {
                **flat,
                "memory_id": flat["id"],
                "score_parts": {part.removesuffix("_part"): flat[part] for part in SCORE_PARTS},
                "live_link_ids": [link["id"] for link in flat["live_links"]],
            }

    class Version(_Model):
        """One version of a memory's text, as :meth:`Brain.history` lists them (oldest first).

        Remembering new text under an existing id keeps the old text as a version: an audit entry
        (action ``revise``) holds it, so nothing is overwritten without a trace.
        """

        id: str
        version: int
        text: str
        kind: str
        props: dict[str, Any] = Field(default_factory=dict)
        at: datetime
        current: bool
        replaced_at: datetime | None = None
        actor: str = "ebb"

    class Neighbor(_Model):
        """A neighbour of a memory and the edge that links them."""

        node: Node
        edge: Edge
        decayed_weight: float

    class ReviewItem(_Model):
        """A memory waiting in the review queue for a human to approve its deletion (or to
        restore it)."""

        id: str
        namespace: str
        kind: str
        text: str
        reason: str
        queued_at: datetime | None
        activation: float
        pinned: bool

    class AuditEntry(_Model):
        """One recorded change of state: tier moves, forget, restore, pin, approved deletions."""

        seq: int
        namespace: str
        at: datetime
        action: str
        node_id: str
        from_tier: Tier | None = None
        to_tier: Tier | None = None
        actor: str = "ebb"
        reason: str = ""
        payload: dict[str, Any] | None = None

    class Stats(_Model):
        """Counts for one namespace."""

        namespace: str
        backend: str
        location: str
        nodes: int
        edges: int
        by_tier: dict[str, int]
        pinned: int
        review_queue: int
        audit_entries: int
        half_life_days: float
        reference_activation: float

    class MaintainReport(_Model):
        """What one ``maintain`` pass did."""

        namespace: str
        scanned: int
        moved: dict[str, int]
        newly_queued: list[str]
        reference_activation: float
        rebased: bool
        spreading: str
else:
    from .model_plain import (  # noqa: F401
        AuditEntry,
        Edge,
        LiveLink,
        MaintainReport,
        Neighbor,
        Node,
        RecallHit,
        ReviewItem,
        Stats,
        Version,
        Why,
    )


_SLUG_STRIP = re.compile(r"[\W_]+", re.UNICODE)


def slugify(text: str, max_words: int = 6, max_len: int = 48) -> str:
    """A lowercase slug of the first words of ``text``: ``"Seat pricing!"`` → ``seat-pricing``."""
    # Accents fold to ASCII where they can ("café" → "cafe"); other scripts keep their letters.
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    words = [w for w in _SLUG_STRIP.split(folded.lower()) if w][:max_words]
    slug = "-".join(words)[:max_len].strip("-")
    return slug or "memory"
