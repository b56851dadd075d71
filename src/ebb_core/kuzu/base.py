"""What the Kùzu store's mixins use of :class:`~ebb_core.kuzu_store.KuzuStore`.

Each mixin of the ``ebb_core.kuzu`` package inherits :class:`KuzuBase`, which declares (for the
type checker only) the session methods and state ``KuzuStore`` defines: ``_q`` and ``_run``
(queries), ``_lock``, ``transaction`` and the meta table come from the store itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..store import GraphStore

if TYPE_CHECKING:
    from ..model import Edge
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
        _conn: Any
        _db: Any
        _folder: str
        _budget: int
        _prepared: dict[str, Any]
        _begun: bool
        _sealed: bool
        _closed: bool
        _held: int
        _wal_failed: bool
        _meta: dict[str, str | None]
        _row_reads: int
        _snapshot: bool
        _text_skip: bool

        def _ensure_cache(self) -> None: ...
        def _exec(self, query: str) -> None: ...
        def _rows(self, query: str) -> list[list[Any]]: ...
        def _q_locked(
            self, query: str, params: Mapping[str, Any] | None, *, solo: bool = False
        ) -> list[list[Any]]: ...
        def _forget_cached(self) -> None: ...
        def _forget_vectors(self) -> None: ...
        def _row(self, u: str, *, snapshot: bool = True) -> dict[str, Any] | None: ...
        def _snapshot_fits(self) -> bool: ...
        def _columns_of(self, uids: Sequence[str]) -> dict[str, tuple[int, float, bool, str]]: ...
        def _edges_written(self, edges: Sequence[Edge]) -> None: ...
        def _merged_links(
            self, edges: Sequence[Edge], fresh: Collection[str] = ()
        ) -> dict[str, str]: ...
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
