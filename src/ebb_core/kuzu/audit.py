"""The Kùzu store's audit log: ``Audit`` rows, appended row-wise or column-wise, and read.

Each namespace's highest sequence number is kept in the meta table (``audit_seq:<ns>``), so
``last_audit_seq`` is one lookup rather than a ``max()`` over the log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..clock import from_us, to_us
from ..model import AuditEntry, Tier
from .base import KuzuBase
from .queries import _SMALL, SEP, uid
from .tables import AUDIT_COLUMNS, AUDIT_CREATE, audit_arrow_types

COPY_AUDIT_MIN = 50_000
"""Audit rows from which one write goes in by ``COPY`` at the commit rather than by ``LOAD FROM
… CREATE``. A ``COPY`` into a table that holds rows already costs Kùzu 0.11.3 a commit that
grows with the table, not with the rows copied (raw Kùzu, a ``STRING`` primary key: 300 rows
copied into 100k took 0.1-0.4 s to commit, against ~0.01 s for ``LOAD FROM … CREATE``; the 10k
benchmark's second maintain, a few hundred audit rows into 8.5k, 0.22 s of ``COPY`` and 0.39 s of
commit against under 0.1 s in all). That fixed cost is what made every later maintain 3-5x
slower when every batch past ``_SMALL`` rows was copied (a9b7f5f); past this many rows the
``COPY``'s lower cost per row wins (a first maintain: 82k rows at 100k memories, batches of up to
~196k at 1M)."""


def _opt_int(value: int | None) -> int | None:
    return None if value is None else int(value)


class KuzuAudit(KuzuBase):
    """The audit half of ``KuzuStore``."""

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return
        columns: dict[str, list[Any]] = {name: [] for name in AUDIT_COLUMNS}
        for a in entries:
            columns["uid"].append(uid(a.namespace, f"{a.seq:012d}"))
            columns["ns"].append(a.namespace)
            columns["seq"].append(a.seq)
            columns["at_us"].append(to_us(a.at))
            columns["action"].append(a.action)
            columns["node_id"].append(a.node_id)
            columns["from_tier"].append(_opt_int(a.from_tier))
            columns["to_tier"].append(_opt_int(a.to_tier))
            columns["actor"].append(a.actor)
            columns["reason"].append(a.reason)
            columns["payload"].append(None if a.payload is None else json.dumps(a.payload))
        self._append_audit(columns)

    def append_audit_columns(
        self, namespace: str, first_seq: int, at: datetime, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        # One table built column-wise (uids and constants by Arrow compute), one COPY.
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        size = len(columns["action"])
        if not size:
            return
        if size <= _SMALL:
            super().append_audit_columns(namespace, first_seq, at, columns)
            return
        seq = pa.array(np.arange(first_seq, first_seq + size, dtype=np.int64))
        padded = pc.utf8_lpad(pc.cast(seq, pa.string()), width=12, padding="0")
        built = {
            "uid": pc.binary_join_element_wise(f"{namespace}{SEP}", padded, ""),
            "ns": pa.array(np.full(size, namespace, dtype=object), pa.string()),
            "seq": seq,
            "at_us": pa.array(np.full(size, to_us(at), dtype=np.int64)),
            # tiers (ints, Tier members or None) converted by Arrow itself: a Python call per
            # value took ~0.3 s per column at 809k moves
            "from_tier": pa.array(columns["from_tier"], pa.int64()),
            "to_tier": pa.array(columns["to_tier"], pa.int64()),
            "payload": pa.nulls(size, pa.string()),
        }
        table = pa.table(
            {
                name: built[name] if name in built else pa.array(list(columns[name]), t)
                for name, t in audit_arrow_types().items()
            }
        )
        self._write_audit(table, {namespace: first_seq + size - 1})

    def _append_audit(self, columns: Mapping[str, list[Any]]) -> None:
        import pyarrow as pa

        types = audit_arrow_types()
        table = pa.table({name: pa.array(columns[name], t) for name, t in types.items()})
        last: dict[str, int] = {}
        for ns, seq in zip(columns["ns"], columns["seq"], strict=True):
            last[ns] = max(last.get(ns, 0), seq)
        self._write_audit(table, last)

    def _write_audit(self, table: Any, last: Mapping[str, int]) -> None:
        """Write the Audit rows of ``table``; ``last``: each namespace's highest seq in it."""
        with self.transaction(), self.keys_kept():  # changes no score (see kuzu.rescored)
            # each namespace's last seq before these rows (read first: a read of the log would
            # write rows waiting for the commit at once, see KuzuSession._flush_deferred)
            before = {ns: self.last_audit_seq(ns) for ns in last}
            if table.num_rows <= _SMALL:
                for row in table.to_pylist():
                    self._q(AUDIT_CREATE, row)
            elif table.num_rows < COPY_AUDIT_MIN:
                self._copy("Audit", table, may_roll_back=True)  # LOAD FROM … CREATE
            else:
                # COPY, sent last before the commit (see KuzuSession._copy_at_commit): half the
                # CPU of LOAD FROM … CREATE, and less peak RSS, at a first maintain of 1M
                # memories (800k rows); past _COPY_VIA_FILE rows through a Parquet file
                self._copy_at_commit("Audit", table)
            # keep each namespace's last seq at hand: max() over the log is a scan (~20-80 ms
            # at 1M entries, for every entry appended while no value was kept)
            for ns, seq in last.items():
                if seq >= before[ns]:
                    self.set_meta(f"audit_seq:{ns}", str(seq))

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        self._flush_deferred()  # this transaction's own entries, if any wait for its commit
        # newest `limit` (descending, reversed below) or, paging forward, oldest above after_seq
        newest = after_seq is None
        rows = self._q(
            "MATCH (a:Audit) WHERE a.ns = $ns AND a.seq > $after "
            "AND ($node IS NULL OR a.node_id = $node) AND ($action IS NULL OR a.action = $action) "
            "RETURN a.seq, a.ns, a.at_us, a.action, a.node_id, a.from_tier, a.to_tier, a.actor, "
            "a.reason, a.payload ORDER BY a.seq " + ("DESC" if newest else "ASC") + " LIMIT $lim",
            {
                "ns": namespace,
                "after": 0 if after_seq is None else int(after_seq),
                "node": node_id,
                "action": action,
                "lim": int(limit),
            },
        )
        if newest:
            rows.reverse()
        return [
            AuditEntry(
                seq=int(r[0]),
                namespace=r[1],
                at=from_us(r[2]),
                action=r[3],
                node_id=r[4],
                from_tier=None if r[5] is None else Tier(int(r[5])),
                to_tier=None if r[6] is None else Tier(int(r[6])),
                actor=r[7],
                reason=r[8] or "",
                payload=json.loads(r[9]) if r[9] else None,
            )
            for r in rows
        ]

    def last_audit_seq(self, namespace: str) -> int:
        kept = self.get_meta(f"audit_seq:{namespace}")
        if kept is not None:
            return int(kept)
        self._flush_deferred()
        rows = self._q("MATCH (a:Audit) WHERE a.ns = $ns RETURN max(a.seq)", {"ns": namespace})
        return int(rows[0][0] or 0) if rows else 0
