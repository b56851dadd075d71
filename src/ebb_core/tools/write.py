"""The tools that change memory: remember, connect, reinforce, forget, pin, maintain.

None of them deletes anything: ``forget`` and ``maintain`` only move memories into the review
queue, where a person approves a deletion at the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..model import Edge, MaintainReport, Node, ReviewItem
from ..validation import MAX_TEXT_LEN, MAX_WEIGHT
from .outputs import Forgotten, Link, Memory, tier_label
from .spec import Args, ToolSpec, as_json, described

if TYPE_CHECKING:
    from ..engine import Brain


# -- remember ------------------------------------------------------------------------------------
class RememberArgs(Args):
    text: str = Field(
        description=f"The memory itself, in plain words (one idea; up to {MAX_TEXT_LEN:,} "
        "characters)."
    )
    kind: str | None = Field(
        None,
        description="What it is: note, decision, fact, preference, person, client, meeting... "
        "(lowercase letters, digits, '-' or '_'). Left out: 'note' for a new memory, the "
        "existing kind for an existing one.",
    )
    id: str | None = Field(
        None,
        description="Optional stable id like 'person:ana'. Leave it out to get one made from "
        "kind and text; pass an existing id to store a new version of that memory (the old "
        "text is kept: see the history tool).",
    )
    links: list[str] | None = Field(
        None, description="Ids of existing memories this one refers to; each gets a link."
    )
    link_kind: str = Field(
        "related", description="Kind of those links, e.g. related, about, supersedes."
    )
    props: dict[str, Any] | None = Field(
        None, description="Optional JSON metadata (source, url, author...)."
    )
    supersedes: list[str] | None = Field(
        None,
        description="Ids of memories this one replaces (an old decision, an outdated fact): "
        "they rank below it from now on and fade from hot memory.",
    )


def _remember(brain: Brain, a: RememberArgs, actor: str) -> Node:
    return brain.remember(
        a.text,
        kind=a.kind,
        id=a.id,
        links=a.links or (),
        link_kind=a.link_kind,
        props=a.props,
        supersedes=a.supersedes or (),
        actor=actor,
    )


def _remembered(a: RememberArgs, node: Node) -> str:
    linked = f", linked to {', '.join(a.links)}" if a.links else ""
    replaced = f", superseding {', '.join(a.supersedes)}" if a.supersedes else ""
    return f"Remembered {node.id} ({node.kind}{linked}{replaced})."


REMEMBER: ToolSpec[RememberArgs, Node] = ToolSpec(
    name="remember",
    title="Remember",
    description=described("""
        Store something worth keeping across sessions — a fact, decision, preference, person,
        meeting or note — as one memory, linked to the memories it refers to.

        Use it whenever you learn something durable. Keep one idea per memory and link related
        ones (here with `links`, or later with `connect`): links keep memories relevant to each
        other. When something changed, remember the new statement with `supersedes` naming the
        old memory (or pass the old `id` to store a new version of it): the old one is kept but
        ranks below its replacement. Returns the stored memory with its id (use that id with
        the other tools)."""),
    args=RememberArgs,
    output=Memory,
    run=_remember,
    structured=lambda a, node: Memory.of(node),
    text=_remembered,
)


# -- connect -------------------------------------------------------------------------------------
class ConnectArgs(Args):
    src: str = Field(description="Id of the memory the link starts from.")
    dst: str = Field(description="Id of the memory it points to.")
    kind: str = Field(
        "related",
        description="Kind of link: related, about, attended, ... 'supersedes' says src "
        "replaces dst (dst then ranks below src and fades from hot memory).",
    )
    weight: float | None = Field(
        None,
        gt=0,
        le=MAX_WEIGHT,
        description="Strength of the link (default 1.0 for a new link; an existing link keeps "
        "its weight).",
    )


CONNECT: ToolSpec[ConnectArgs, Edge] = ToolSpec(
    name="connect",
    title="Connect",
    description=described("""
        Link two memories (src -kind-> dst), or refresh the link if it already exists.

        Linked memories keep each other relevant; a link fades unless it is used again. Use it
        when you notice that two memories belong together (a decision and the meeting that made
        it, a person and their client). Returns the link."""),
    args=ConnectArgs,
    output=Link,
    run=lambda b, a, actor: b.connect(a.src, a.dst, kind=a.kind, weight=a.weight, actor=actor),
    structured=lambda a, edge: Link.of(edge),
    text=lambda a, edge: f"Linked {edge.src} -{edge.kind}-> {edge.dst}.",
)


# -- reinforce -----------------------------------------------------------------------------------
class ReinforceArgs(Args):
    id: str = Field(description="Id of the memory that was useful.")
    with_id: str | None = Field(
        None, description="Optional: reinforce only the link between `id` and this memory."
    )


def _reinforced(a: ReinforceArgs, node: Node) -> str:
    via = f" (the link with {a.with_id})" if a.with_id else ""
    return f"Reinforced {node.id}{via}: it stays relevant ({tier_label(node.tier)})."


REINFORCE: ToolSpec[ReinforceArgs, Node] = ToolSpec(
    name="reinforce",
    title="Reinforce",
    description=described("""
        Mark a memory as used, so it stays relevant: resets its decay clock and the clocks of
        its links.

        Call it when a memory actually helped (you acted on a recalled decision, a fact proved
        right). Returns the memory as it is now."""),
    args=ReinforceArgs,
    output=Memory,
    run=lambda b, a, actor: b.reinforce(a.id, with_id=a.with_id),
    structured=lambda a, node: Memory.of(node),
    text=_reinforced,
)


# -- forget --------------------------------------------------------------------------------------
class ForgetArgs(Args):
    id: str = Field(description="Id of the memory that is wrong or obsolete.")
    reason: str = Field("", description="Why it should go, for the person who reviews it.")


def _forgotten(a: ForgetArgs, item: ReviewItem) -> Forgotten:
    return Forgotten(
        id=item.id,
        tier="frozen",
        in_review_queue=True,
        reason=item.reason,
        queued_at=item.queued_at,
        message="Nothing was deleted: the memory waits in the review queue. A person approves "
        "its deletion with `ebb approve` or keeps it with `ebb restore`.",
    )


FORGET: ToolSpec[ForgetArgs, ReviewItem] = ToolSpec(
    name="forget",
    title="Forget",
    description=described("""
        Ask for a memory to be removed because it is wrong, obsolete or unwanted.

        It is not deleted: the memory is frozen, hidden from recall and put in the review queue,
        where a person approves its deletion or restores it. Pinned memories cannot be
        forgotten (a person must unpin them first). Returns the review-queue entry."""),
    args=ForgetArgs,
    output=Forgotten,
    run=lambda b, a, actor: b.forget(a.id, a.reason, actor=actor),
    structured=_forgotten,
    text=lambda a, item: (
        f"Forgot {item.id}: it no longer appears in recall. It waits in the review queue; "
        "only a person can approve deleting it or restore it."
    ),
    idempotent=True,
)


# -- pin -----------------------------------------------------------------------------------------
class PinArgs(Args):
    id: str = Field(description="Id of the memory that must not fade.")


PIN: ToolSpec[PinArgs, Node] = ToolSpec(
    name="pin",
    title="Pin",
    description=described("""
        Pin a memory that must never fade: a standing instruction, a key fact about the user.

        A pinned memory stays hot and is never archived or queued for deletion. Only a person
        can unpin it (with the `ebb` command line). Returns the memory."""),
    args=PinArgs,
    output=Memory,
    run=lambda b, a, actor: b.pin(a.id, actor=actor),
    structured=lambda a, node: Memory.of(node),
    text=lambda a, node: (
        f"Pinned {node.id}: it stays hot and never fades; only a person can unpin it."
    ),
    idempotent=True,
)


# -- maintain ------------------------------------------------------------------------------------
class MaintainArgs(Args):
    pass


MAINTAIN: ToolSpec[MaintainArgs, MaintainReport] = ToolSpec(
    name="maintain",
    title="Maintain",
    description=described("""
        Re-score every memory and re-tier them: what decayed moves to warm or cold (archived),
        what fell below the last cut-off goes to the review queue for a person.

        Nothing is deleted. Run it now and then (for example at the end of a long session); it
        is safe to repeat. Returns how many memories moved between which tiers."""),
    args=MaintainArgs,
    output=MaintainReport,
    run=lambda b, a, actor: b.maintain(),
    structured=lambda a, report: report,
    text=as_json,
    short=False,  # re-scores every memory: seconds on a large store
)
