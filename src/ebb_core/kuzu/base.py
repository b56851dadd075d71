"""What the Kùzu store's mixins use of :class:`~ebb_core.kuzu_store.KuzuStore`.

Each mixin of the ``ebb_core.kuzu`` package inherits :class:`KuzuBase`, which declares (for the
type checker only) the session methods and state ``KuzuStore`` defines: ``_q`` and ``_run``
(queries), ``_lock``, ``transaction`` and the meta table come from the store itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..store import GraphStore

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..model import Edge
    from .copies import _RecallCache, _RowCache
    from .mirror import Mirror


class KuzuBase(GraphStore):
    """The shared base of the Kùzu store's mixins (no state or behaviour of its own)."""

    #: opened read-only (``read_only``, or ``only_reads`` on a clean store): writes are refused
    read_only: bool = False

    if TYPE_CHECKING:  # provided by KuzuStore
        _lock: Any
        _path: str
        _mirror: Mirror
        _depth: int
        _index_dropped: bool
        _searches: int
        _cold_left: int
        _conn: Any
        _db: Any
        _folder: str
        _budget: int
        _prepared: dict[str, Any]
        _begun: bool
        _sealed: bool
        _at_commit: dict[str, list[Any]]
        _closed: bool
        _held: int
        _wal_failed: bool
        _reshaped: bool
        _commits: int
        _row_reads: int
        _snapshot: bool
        _text_skip: bool
        _import_marker: str | None
        _rescored: Any  # the watermark's entries, or kuzu.rescored.UNKNOWN
        _keys_kept: int

        def _ensure_cache(self) -> None: ...
        def _exec(self, query: str) -> None: ...
        def _rows(self, query: str) -> list[list[Any]]: ...
        def _q_locked(
            self, query: str, params: Mapping[str, Any] | None, *, solo: bool = False
        ) -> list[list[Any]]: ...
        def _forget_cached(self) -> None: ...
        def _reopen_after_stop(self, copy_why: str | None = None) -> None: ...
        def _failed(self, exc: RuntimeError) -> Any: ...
        def _exec_params(self, query: str, params: Mapping[str, Any]) -> None: ...
        def _clear_rescored(self) -> None: ...
        def _mark_rescored(self, namespaces: Iterable[str], sig: str) -> None: ...
        def rescored(self, namespace: str, sig: str) -> bool: ...
        def keys_kept(self) -> AbstractContextManager[None]: ...
        def _copy_at_commit(self, name: str, table: Any) -> None: ...
        def _flush_deferred(self, *, at_commit: bool = False) -> None: ...
        def _row(self, u: str, *, snapshot: bool = True) -> dict[str, Any] | None: ...
        def _snapshot_fits(self) -> bool: ...
        def _listed(self, u: str) -> str | None: ...
        def _lists_apart(self, u: str) -> bool | None: ...
        def _lists_in_rows(self) -> bool: ...
        def _columns_of(self, uids: Sequence[str]) -> dict[str, tuple[int, float, bool, str]]: ...
        def _edges_written(self, edges: Sequence[Edge]) -> None: ...
        def _vector_creates(
            self, namespace: str, uids: Sequence[str], vectors: Any, params: dict[str, Any]
        ) -> tuple[list[str], Any]: ...
        def _merged_links(
            self, edges: Sequence[Edge], fresh: Collection[str] = ()
        ) -> dict[str, str]: ...
        def _text_copy(self) -> Any: ...
        def check_room(self, extra: int = 0) -> None: ...
        def _drop_text_index(self) -> None: ...
        def _create_text_index(self) -> None: ...
        def _internal_rows(self, query: str) -> list[list[Any]] | None: ...
        def _text_index_prefix(self) -> str: ...
        def text_index_state(self) -> str: ...
        def _index_past_pool(self, share: float = 1.0) -> int | None: ...
        def _build_past_pool(self) -> int | None: ...
        def _too_small_to_rebuild(self, words: int, doing: str) -> Any: ...
        def _let_go_of_tables(self) -> None: ...
        def _maybe_checkpoint(self, force: bool = False) -> None: ...
        def _copy(
            self,
            name: str,
            table: Any,
            *,
            may_roll_back: bool,
            ends: tuple[str, str] | None = None,
            solo: bool = False,
        ) -> None: ...
        def _parquet_ahead(self, table: Any, *, any_size: bool = False) -> Any: ...
        def _load(
            self,
            query: str,
            columns: Mapping[str, list[Any]],
            types: Mapping[str, str],
            *,
            solo: bool = False,
        ) -> None: ...
        def _arrow(
            self, query: str, params: Mapping[str, Any], *, one_chunk: bool = False
        ) -> Any: ...

        def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]: ...
        def _run(
            self,
            query: Any,
            params: Mapping[str, Any] | None = None,
            *,
            read: bool = False,
            solo: bool = False,
        ) -> Any: ...

    # The in-process copies, all owned by the mirror (``kuzu.mirror``): read them here, change
    # them only through ``self._mirror.apply`` / ``invalidate``.
    @property
    def _cache(self) -> _RecallCache:
        return self._mirror.recall

    @property
    def _rows_cache(self) -> _RowCache:
        return self._mirror.rows

    @property
    def _meta(self) -> dict[str, str | None]:
        return self._mirror.meta

    @property
    def _supersedes(self) -> dict[str, list[str]] | None:
        return self._mirror.supersedes

    @property
    def _text(self) -> Any:
        return self._mirror.text
