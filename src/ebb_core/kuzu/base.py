"""What the Kùzu store's mixins use of :class:`~ebb_core.kuzu_store.KuzuStore`.

Each mixin of the ``ebb_core.kuzu`` package inherits :class:`KuzuBase`, which declares (for the
type checker only) the session methods and state ``KuzuStore`` defines: ``_q`` and ``_run``
(queries), ``_lock``, ``transaction`` and the meta table come from the store itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..store import GraphStore

if TYPE_CHECKING:
    from .copies import _RecallCache, _RowCache


class KuzuBase(GraphStore):
    """The shared base of the Kùzu store's mixins (no state or behaviour of its own)."""

    if TYPE_CHECKING:  # provided by KuzuStore
        _lock: Any
        _path: str
        _cache: _RecallCache
        _rows_cache: _RowCache
        _depth: int
        _index_dropped: bool
        _supersedes: dict[str, list[str]] | None
        _text: Any
        _searches: int
        _cold_left: int

        def _ensure_cache(self) -> None: ...
        def _text_copy(self) -> Any: ...
        def check_room(self, extra: int = 0) -> None: ...
        def _drop_text_index(self) -> None: ...
        def _create_text_index(self) -> None: ...
        def _let_go_of_tables(self) -> None: ...
        def _maybe_checkpoint(self, force: bool = False) -> None: ...
        def _copy(self, name: str, table: Any) -> None: ...
        def _load(
            self, query: str, columns: Mapping[str, list[Any]], types: Mapping[str, str]
        ) -> None: ...
        def _arrow(self, query: str, params: Mapping[str, Any]) -> Any: ...

        def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]: ...
        def _run(
            self, query: Any, params: Mapping[str, Any] | None = None, *, read: bool = False
        ) -> Any: ...
