"""Every limit and check on what comes into Ebb, in one place: the engine (``Brain``), the bulk
import (:mod:`ebb_core.records`), the agent tools (:mod:`ebb_core.tools`, so the MCP server and
the LangChain and LlamaIndex adapters) all read their limits and rules from here.

Each ``validate_*`` returns the value it checked (sometimes cleaned) or raises
:class:`~ebb_core.errors.InvalidInput` naming the field and what to do about it.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from .errors import InvalidInput

# -- limits --------------------------------------------------------------------------------------
MAX_ID_LEN = 200
MAX_TEXT_LEN = 200_000
"""The longest memory text, query, and props (as JSON) Ebb stores or searches."""
MAX_K = 1000
"""The most results one recall (or list) returns through the API."""
MAX_NAMESPACE_LEN = 200
MAX_ACTOR_LEN = 200
MAX_REASON_LEN = 2000
MAX_WEIGHT = 1000
"""Link weights are in (0, MAX_WEIGHT]."""

# What an agent tool may ask for in one call (smaller than the API's: a tool result goes into a
# model's context).
MAX_RECALL_K = 50
MAX_LIST = 200
MAX_READ = 50
MAX_EXPLORE = 100

KIND_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
"""A kind (of memory or of link): lowercase letters, digits, '-' or '_', starting with a letter,
at most 40 characters."""
CONTROL_PATTERN = r"[\x00-\x1f\x7f]"
"""Control characters, which no id, kind or namespace may contain."""

_KIND_RE = re.compile(KIND_PATTERN)
_CONTROL = re.compile(CONTROL_PATTERN)


# -- predicates ----------------------------------------------------------------------------------
def is_valid_kind(kind: str) -> bool:
    return bool(_KIND_RE.match(kind))


def has_control_chars(value: str) -> bool:
    return bool(_CONTROL.search(value))


# Characters that draw nothing: separators, controls, format characters (zero-width space and
# joiners, the byte-order mark, bidi marks), combining marks with nothing to combine with, the
# Hangul fillers and the blank Braille pattern. With the non-characters (U+FDD0..U+FDEF and the
# last two code points of every plane) they cannot make a memory's id or text on their own.
_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})
_BLANK_CHARS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _is_noncharacter(ch: str) -> bool:
    code = ord(ch)
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def has_visible_chars(value: str) -> bool:
    """Whether ``value`` has at least one character that shows (stops at the first)."""
    for ch in value:
        if ch.isspace() or ch in _BLANK_CHARS or _is_noncharacter(ch):
            continue
        if unicodedata.category(ch) in _BLANK_CATEGORIES:
            continue
        return True
    return False


def id_problem(id: str) -> str | None:
    """Why ``id`` cannot be a memory id (``None`` when it can): the one rule every interface
    (API, CLI, MCP, adapters, import) applies. Ids look like ``kind:slug``: no whitespace, and at
    least one visible character (not only zero-width, format or non-characters)."""
    if not has_visible_chars(id):
        shown = " ".join(f"U+{ord(c):04X}" for c in id[:6]) + (" ..." if len(id) > 6 else "")
        return (
            f"memory id has no visible characters (only {shown}: zero-width, format or "
            "non-characters such as U+200B, U+FEFF, U+FFFF): ids look like 'kind:slug'"
        )
    if any(c.isspace() or unicodedata.category(c) in ("Zs", "Zl", "Zp") for c in id):
        hint = "-".join(id.split())
        return (
            f"memory id {id[:60]!r} contains whitespace: ids look like 'kind:slug', with '-' "
            f"between words (e.g. {hint[:60]!r})"
        )
    return None


def _encodable(value: str, field: str) -> str:
    """Refuse strings that cannot be stored as UTF-8 (lone surrogates from broken decoders)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{field} contains characters that are not valid Unicode text (a lone surrogate)",
            field=field,
        ) from None
    return value


def _refuse_invisible(value: str, field: str, what: str, hint: str) -> None:
    if has_visible_chars(value):
        return
    shown = " ".join(f"U+{ord(c):04X}" for c in value[:6]) + (" ..." if len(value) > 6 else "")
    raise InvalidInput(
        f"{what} has no visible characters (only {shown}: zero-width, format or "
        f"non-characters such as U+200B, U+FEFF, U+FFFF); {hint}",
        field=field,
    )


def validate_namespace(namespace: str) -> str:
    if isinstance(namespace, str):
        _encodable(namespace, "namespace")
    if not isinstance(namespace, str) or not namespace.strip():
        raise InvalidInput("namespace must be a non-empty string", field="namespace")
    _refuse_invisible(namespace, "namespace", "namespace", "use a name like 'alice'")
    if len(namespace) > MAX_NAMESPACE_LEN or has_control_chars(namespace):
        raise InvalidInput(
            f"namespace must be at most {MAX_NAMESPACE_LEN} characters without control characters",
            field="namespace",
        )
    return namespace


def validate_id(id: str, *, existing: bool = False) -> str:
    """Refuse ids that are not text, too long, or (for a new id) without a visible character.

    ``existing=True`` is for looking a memory up: one stored before ids had to show (an old
    store) can still be read, forgotten and approved.
    """
    if isinstance(id, str):
        _encodable(id, "id")
    if not isinstance(id, str) or not id.strip():
        raise InvalidInput("a memory id must be a non-empty string like 'kind:slug'", field="id")
    if len(id) > MAX_ID_LEN or has_control_chars(id):
        raise InvalidInput(
            f"memory id {id[:40]!r}... must be at most {MAX_ID_LEN} characters without control "
            "characters",
            field="id",
        )
    problem = None if existing else id_problem(id)  # lookups stay lenient: old stores
    if problem:
        raise InvalidInput(problem, field="id")
    return id


def validate_text(text: str) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}", field="text")
    if not text.strip():
        raise InvalidInput("text is empty: a memory needs some text", field="text")
    _refuse_invisible(text, "text", "text", "a memory needs some text")
    if len(text) > MAX_TEXT_LEN:
        raise InvalidInput(
            f"text is {len(text):,} characters; the limit is {MAX_TEXT_LEN:,}: split it into "
            "several memories and connect them",
            field="text",
        )
    if "\x00" in text:
        raise InvalidInput("text contains a NUL character", field="text")
    return _encodable(text, "text")


def validate_kind(kind: str, field: str = "kind") -> str:
    if not isinstance(kind, str) or not is_valid_kind(kind):
        raise InvalidInput(
            f"{field} {kind!r} must be lowercase letters, digits, '-' or '_', starting with a "
            "letter, at most 40 characters (e.g. 'note', 'decision')",
            field=field,
        )
    return kind


def validate_weight(weight: float) -> float:
    if (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT)
    ):
        raise InvalidInput(f"weight must be a number in (0, 1000], got {weight!r}", field="weight")
    return float(weight)


def validate_k(k: int, field: str = "k", upper: int = MAX_K) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= upper:
        raise InvalidInput(f"{field} must be an integer from 1 to {upper}, got {k!r}", field=field)
    return k


def validate_actor(actor: str) -> str:
    if not isinstance(actor, str) or not actor.strip() or len(actor) > MAX_ACTOR_LEN:
        raise InvalidInput("actor must name who acts, at most 200 characters", field="actor")
    return _encodable(actor.strip(), "actor")


def validate_reason(reason: str) -> str:
    if not isinstance(reason, str):
        raise InvalidInput("reason must be a string", field="reason")
    if len(reason) > MAX_REASON_LEN:
        raise InvalidInput("reason is longer than 2,000 characters", field="reason")
    return _encodable(reason, "reason")


def validate_props(props: Mapping[str, Any] | None) -> dict[str, Any]:
    """``props`` as a plain dict of JSON values (None gives ``{}``), at most ``MAX_TEXT_LEN``
    (200,000) characters as JSON."""
    if props is None:
        return {}
    if not isinstance(props, Mapping):
        raise InvalidInput("props must be a mapping of JSON values", field="props")
    try:
        encoded = json.dumps(dict(props), sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"props must be JSON-serialisable: {exc}", field="props") from None
    _encodable(encoded, "props")
    if len(encoded) > MAX_TEXT_LEN:
        raise InvalidInput(
            f"props are larger than {MAX_TEXT_LEN:,} characters as JSON: keep large text in "
            "the memory's text, or split it",
            field="props",
        )
    result: dict[str, Any] = json.loads(encoded)
    return result
