"""What every part of :class:`~ebb_core.engine.Brain` shares: its state and its internals.

``Brain`` is a façade assembled from mixins (``writing``, ``recall``, ``keys``, ``maintenance``,
``review``, ``transfer``, ``vectors``). Each of them subclasses :class:`BrainBase`, which holds
the state they share (``_s``: one open store with its config, clock, lock and embedder; ``_ns``:
this view's namespace), the internals every part uses (``_tx``, ``_now_us``, ``_require``,
``_audit``) and, for the type checker only, the signatures of the internals one mixin provides
to the others, so that no mixin declares them again.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .clock import Clock, to_us
from .embeddings import Embedder
from .errors import NotFound
from .model import AuditEntry, Edge, Node, Tier
from .scoring import Config
from .store import Adjustment, GraphStore
from .validation import validate_id


@dataclass
class _Shared:
    """State shared by every namespace view of one open store."""

    store: GraphStore
    config: Config
    clock: Clock
    lock: threading.RLock
    epoch_us: int
    embedder: Embedder | None = None


class BrainBase:
    """The state and internals every part of the Brain uses (see the module's docstring)."""

    _s: _Shared
    _ns: str

    @contextmanager
    def _tx(self) -> Iterator[None]:
        with self._s.lock, self._s.store.transaction():
            yield

    def _now_us(self) -> int:
        return to_us(self._s.clock.now())

    def _require(self, ids: Sequence[str]) -> dict[str, Node]:
        """The nodes ``ids`` of this namespace; ``NotFound`` names the first one missing."""
        for i in ids:
            validate_id(i, existing=True)
        found = self._s.store.get_nodes(self._ns, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(
                f"no memory {missing[0]!r} in namespace {self._ns!r}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                id=missing[0],
            )
        return found

    def _audit(self, entries: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        """Append ``entries`` to this namespace's audit log, numbered and stamped now."""
        if not entries:
            return []
        seq = self._s.store.last_audit_seq(self._ns)
        now = self._s.clock.now()
        out = []
        for e in entries:
            seq += 1
            out.append(AuditEntry(seq=seq, namespace=self._ns, at=now, **e))
        self._s.store.append_audit(out)
        return out

    if TYPE_CHECKING:  # provided by the mixins named, used by the others
        # keys.KeysMixin
        def _recompute(self, namespace: str) -> int: ...
        def _maybe_rebase(self, now_us: int) -> bool: ...
        def _ref_key(self) -> float: ...
        def _refresh_reference(self, namespace: str | None = None) -> None: ...
        def _activation(self, key: float, now_us: int) -> float: ...
        def _adjust(self, nodes: Mapping[str, Node], **event: Any) -> dict[str, float]: ...
        def _plan(
            self,
            nodes: Mapping[str, Node],
            *,
            read: Mapping[str, int] | None = None,
            new_edges: Sequence[Edge] = (),
            changed: Sequence[tuple[Edge, Edge]] = (),
            removed: Sequence[Edge] = (),
            gone: Collection[str] = (),
            fields: Mapping[str, Mapping[str, Any]] | None = None,
        ) -> dict[str, Adjustment]: ...
        def _new_keys(
            self, nodes: Mapping[str, Node], changes: Mapping[str, Adjustment]
        ) -> dict[str, float]: ...
        def _promote(
            self,
            nodes: Mapping[str, Node],
            keys: Mapping[str, float],
            caps: Mapping[str, Tier] | None = None,
        ) -> None: ...

        # vectors.VectorsMixin
        def _embed(self, texts: Sequence[str]) -> Any: ...

        # engine.Brain
        def _mark_read(
            self,
            nodes: Mapping[str, Node],
            now_us: int,
            shares: Mapping[str, float] | None = None,
            caps: Mapping[str, Tier] | None = None,
        ) -> None: ...
