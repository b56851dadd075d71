"""Ebb's result types as plain classes, for a one-shot ``ebb recall`` or ``ebb stats`` process.

The public types (:mod:`ebb_core.model`) are pydantic models. Importing pydantic and building
the twelve models cost a one-shot command ~0.15 s of CPU, a third of an ``ebb recall``, for
objects that live a few milliseconds and are printed once. So ``ebb`` run as a command
(:func:`ebb_core.cli.app._Commands.main`, never a library, a test's ``CliRunner`` or
``ebb mcp``/``ebb ui``) asks :mod:`ebb_core.model` for these instead, before anything imports
it: the same classes by name, with the same fields in the same order, the same defaults, the
same conversions the engine relies on (a ``float`` field holds a float, a ``list`` field a
list, a tier a :class:`~ebb_core.model.Tier`), frozen, and the same ``model_dump`` (Python and
JSON mode, RecallHit's computed ``id``/``text``/``kind``/``tier`` after its fields) and
``model_copy(update=...)``. They do not validate: the engine builds them from checked values.

``tests/test_cli_plain.py`` holds them to the pydantic models: the same field lists and
defaults, and the same JSON from the same recall and stats.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

from .model import Tier

_REQUIRED: Any = object()


def _same(v: Any) -> Any:
    return v


def _float(v: Any) -> float:
    return float(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _tier(v: Any) -> Tier:
    return Tier(v)


def _opt_tier(v: Any) -> Tier | None:
    return None if v is None else Tier(v)


def _dict(v: Any) -> dict[str, Any]:
    return dict(v)


def _opt_dict(v: Any) -> dict[str, Any] | None:
    return None if v is None else dict(v)


def _list(v: Any) -> list[Any]:
    return list(v)


def _json(v: Any) -> Any:
    """A value as pydantic's JSON mode gives it: times ISO-8601 (UTC as ``Z``), enums their
    value, tuples lists, nested models dicts."""
    if isinstance(v, _Plain):
        return v.model_dump(mode="json")
    if isinstance(v, datetime):
        text = v.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json(x) for x in v]
    return v


def _python(v: Any) -> Any:
    if isinstance(v, _Plain):
        return v.model_dump()
    if isinstance(v, dict):
        return {k: _python(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_python(x) for x in v]
    return v


class _Plain:
    """Frozen, keyword-built records with pydantic's ``model_dump`` and ``model_copy``."""

    #: (name, conversion, default or _REQUIRED, default factory or None), in field order
    _fields: ClassVar[tuple[tuple[str, Callable[[Any], Any], Any, Any], ...]] = ()
    _computed: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **values: Any) -> None:
        own = self.__dict__
        for name, convert, default, factory in self._fields:
            if name in values:
                own[name] = convert(values.pop(name))
            elif factory is not None:
                own[name] = factory()
            elif default is _REQUIRED:
                raise TypeError(f"{type(self).__name__}: {name} is required")
            else:
                own[name] = default
        if values:
            raise TypeError(f"{type(self).__name__}: unexpected {', '.join(sorted(values))}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise TypeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({inner})"

    def model_dump(
        self, *, mode: str = "python", exclude: set[str] | frozenset[str] | None = None
    ) -> dict[str, Any]:
        convert = _json if mode == "json" else _python
        skip = exclude or ()
        names = [f[0] for f in self._fields] + list(self._computed)
        return {n: convert(getattr(self, n)) for n in names if n not in skip}

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Any:
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(update or {})  # as pydantic's: the update is not validated
        return copy


def _f(
    name: str, convert: Callable[[Any], Any] = _same, default: Any = _REQUIRED, factory: Any = None
) -> tuple[str, Callable[[Any], Any], Any, Any]:
    return (name, convert, default, factory)


class Node(_Plain):
    _fields = (
        _f("id"),
        _f("namespace"),
        _f("kind"),
        _f("text"),
        _f("props", _dict, factory=dict),
        _f("created_at"),
        _f("updated_at"),
        _f("last_read_at", default=None),
        _f("pinned", bool, False),
        _f("tier", _tier, Tier.HOT),
        _f("review_reason", default=None),
        _f("queued_at", default=None),
        _f("base_key", _float, 0.0),
        _f("key", _float, 0.0),
        _f("degree", int, 0),
    )


class Edge(_Plain):
    _fields = (
        _f("namespace"),
        _f("src"),
        _f("dst"),
        _f("kind", default="related"),
        _f("weight", _float, 1.0),
        _f("created_at"),
        _f("reinforced_at"),
        _f("props", _dict, factory=dict),
    )


class LiveLink(_Plain):
    _fields = (
        _f("id"),
        _f("kind"),
        _f("direction"),
        _f("weight", _float),
        _f("decayed_weight", _float),
        _f("reinforced_at"),
    )


class Why(_Plain):
    _fields = (
        _f("matched_terms", _list),
        _f("text_score", _float),
        _f("text_norm", _float),
        _f("activation", _float),
        _f("activation_norm", _float),
        _f("edges_part", _float),
        _f("read_part", _float),
        _f("spread_part", _float),
        _f("live_links", _list),
        _f("last_reinforced_at"),
        _f("tier", _tier),
        _f("summary"),
        _f("spread_text", _float, 0.0),
        _f("spread_from", _list, factory=list),
        _f("superseded_by", _list, factory=list),
        _f("reached", default=""),
        _f("similarity", _opt_float, None),
        _f("similarity_norm", _float, 0.0),
        _f("match", _float, 0.0),
        _f("found_by", _list, factory=list),
    )


class RecallHit(_Plain):
    _fields = (_f("node"), _f("score", _float), _f("why"))
    _computed = ("id", "text", "kind", "tier")

    @property
    def id(self) -> str:
        return str(self.__dict__["node"].id)

    @property
    def text(self) -> str:
        return str(self.__dict__["node"].text)

    @property
    def kind(self) -> str:
        return str(self.__dict__["node"].kind)

    @property
    def tier(self) -> Tier:
        return Tier(self.__dict__["node"].tier)


class Version(_Plain):
    _fields = (
        _f("id"),
        _f("version", int),
        _f("text"),
        _f("kind"),
        _f("props", _dict, factory=dict),
        _f("at"),
        _f("current", bool),
        _f("replaced_at", default=None),
        _f("actor", default="ebb"),
    )


class Neighbor(_Plain):
    _fields = (_f("node"), _f("edge"), _f("decayed_weight", _float))


class ReviewItem(_Plain):
    _fields = (
        _f("id"),
        _f("namespace"),
        _f("kind"),
        _f("text"),
        _f("reason"),
        _f("queued_at"),
        _f("activation", _float),
        _f("pinned", bool),
    )


class AuditEntry(_Plain):
    _fields = (
        _f("seq", int),
        _f("namespace"),
        _f("at"),
        _f("action"),
        _f("node_id"),
        _f("from_tier", _opt_tier, None),
        _f("to_tier", _opt_tier, None),
        _f("actor", default="ebb"),
        _f("reason", default=""),
        _f("payload", _opt_dict, None),
    )


class Stats(_Plain):
    _fields = (
        _f("namespace"),
        _f("backend"),
        _f("location"),
        _f("nodes", int),
        _f("edges", int),
        _f("by_tier", _dict),
        _f("pinned", int),
        _f("review_queue", int),
        _f("audit_entries", int),
        _f("half_life_days", _float),
        _f("reference_activation", _float),
    )


class MaintainReport(_Plain):
    _fields = (
        _f("namespace"),
        _f("scanned", int),
        _f("moved", _dict),
        _f("newly_queued", _list),
        _f("reference_activation", _float),
        _f("rebased", bool),
        _f("spreading"),
    )
