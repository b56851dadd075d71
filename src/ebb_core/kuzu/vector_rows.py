"""How the Kùzu store's unindexed vector tails keep their vectors: one base64 ``STRING`` a row.

A tail (``MemoryVectorTail_<h>``, see :mod:`ebb_core.kuzu.vectors`) is ``(uid, ns, vb STRING)``:
``vb`` is the base64 of the vector's float32 little-endian bytes (lossless, 2,048 characters for
384 dimensions). Why not ``FLOAT[dim]``, as the indexed table keeps: Kùzu 0.11.3's Python binding
turns a list parameter into one engine value per float, so a ``remember``'s 384-float vector
cost more than the rest of its statement (a raw Kùzu ``CREATE`` of a memory row with its vector
row, CPU p50: 0.94-1.21 ms with the float list, 0.58-0.79 ms with this string, 0.35-0.53 ms
without a vector; the binding refuses ``bytes`` and numpy arrays, and a ``CAST`` of a
``'[...]'`` string costs as much as the list). The HNSW index needs ``FLOAT[dim]``: a move into
the indexed table decodes the rows in Python (:meth:`KuzuVectors.index_vectors`).

Stores written before this kept their tails as ``MemoryVectorTail_<h>(uid, ns, vec FLOAT[dim])``;
the base64 ones are ``MemoryVectorTail64_<h>``. A store opened for writing converts the old ones
(:func:`upgrade_tail`: the old table is dropped only once every row is in the new one, so a kill
at any point leaves it whole and the next open redoes the conversion); a read-only open reads
the old table while it is there.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import EbbError

if TYPE_CHECKING:  # numpy is imported where vectors are read: a one-shot command may need none
    import numpy as np

#: the tail's vector column (base64 of float32 bytes); a tail with ``vec`` is of the old form
COLUMN = "vb"
OLD_COLUMN = "vec"
_BATCH = 4096  # rows encoded or decoded at a time (bounds the transient strings)


def encode(mat: Any) -> list[str]:
    """Each row of ``mat`` as the base64 of its float32 little-endian bytes."""
    import numpy as np

    m = np.ascontiguousarray(np.asarray(mat, dtype="<f4"))
    if m.ndim != 2:
        m = m.reshape(1, -1)
    width = 4 * m.shape[1]
    if width % 3:  # each row's string ends in padding: encoded one by one
        return [base64.b64encode(row.tobytes()).decode("ascii") for row in m]
    n = width // 3 * 4  # no padding: one encoding a batch, cut into equal strings
    out: list[str] = []
    for start in range(0, len(m), _BATCH):
        s = base64.b64encode(m[start : start + _BATCH].tobytes()).decode("ascii")
        out += [s[i : i + n] for i in range(0, len(s), n)]
    return out


def decode(values: Sequence[str], dim: int) -> np.ndarray:
    """The float32 matrix (one row per string) of :func:`encode`'s strings; a string that is
    not one ``dim``-dimensional vector is a clear error (never a misaligned matrix)."""
    import numpy as np

    out = np.empty((len(values), dim), dtype=np.float32)
    pad = (4 * dim) % 3 != 0
    for start in range(0, len(values), _BATCH):
        part = values[start : start + _BATCH]
        try:
            if pad:
                raw = b"".join(base64.b64decode(v, validate=True) for v in part)
            else:
                raw = base64.b64decode("".join(part), validate=True)
        except (ValueError, TypeError) as exc:
            raise EbbError(
                f"a stored vector cannot be read ({exc}): run `ebb embed --rebuild`"
            ) from None
        if len(raw) != 4 * dim * len(part) or any(len(v) != len(part[0]) for v in part):
            raise EbbError(f"a stored vector is not {dim}-dimensional: run `ebb embed --rebuild`")
        out[start : start + len(part)] = np.frombuffer(raw, dtype="<f4").reshape(-1, dim)
    return out


def read_rows(
    store: Any, name: str, column: str, dim: int, uids: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """The uids and float32 vectors (a matrix) of the vector table ``name``'s rows (those of
    ``uids`` only, when given), read from ``column`` (``vec``: ``FLOAT[dim]``, ``vb``: strings)."""
    import numpy as np

    where, params = ("WHERE v.uid IN $us ", {"us": list(uids)}) if uids is not None else ("", {})
    result = store._run(
        f"MATCH (v:{name}) {where}RETURN v.uid AS u, v.{column} AS v", params, read=True
    )
    arrow = result.get_as_arrow(chunk_size=1_000_000)
    got = arrow.column("u").to_pylist()
    if column == COLUMN:
        return got, decode(arrow.column("v").to_pylist(), dim)
    flat = arrow.column("v").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return got, np.asarray(flat, dtype=np.float32).reshape(len(got), dim)


def move_rows(
    store: Any, namespace: str, table: str, tail: str, uids: Sequence[str], mat: np.ndarray
) -> None:
    """Write the tail's rows ``uids`` (their vectors ``mat``) into the indexed ``table`` and
    delete them from the tail, in the caller's transaction."""
    import pyarrow as pa

    if uids:
        vecs = pa.FixedSizeListArray.from_arrays(
            pa.array(mat.reshape(-1), type=pa.float32()), int(mat.shape[1])
        )
        store._run(
            f"LOAD FROM $rows CREATE (:{table} {{uid: u, ns: $ns, vec: v}})",
            {"rows": pa.table({"u": pa.array(uids, type=pa.string()), "v": vecs}), "ns": namespace},
        )
        store._q(f"MATCH (v:{tail}) WHERE v.uid IN $us DELETE v", {"us": list(uids)})


def dim_of(value: str) -> int:
    """The dimension of the vector :func:`encode` made ``value`` of."""
    return len(base64.b64decode(value)) // 4


def upgrade_tail(store: Any, old: str, new: str) -> int:
    """Convert the older ``FLOAT[dim]`` tail ``old`` into the base64 tail ``new``; returns how
    many rows were converted. Each step can be redone, and ``old`` stays whole until the
    last: ``new`` made afresh (a conversion killed midway left it partly filled), the rows
    copied a batch per transaction, then ``old`` dropped. (Not ``ALTER TABLE ... DROP vec``
    in place: Kùzu 0.11.3 crashes at the next checkpoint after dropping that column.)"""
    import pyarrow as pa

    if new in {str(r[0]) for r in store._rows("CALL show_tables() RETURN name")}:
        store._exec(f"DROP TABLE {new}")
    store._exec(f"CREATE NODE TABLE {new}(uid STRING PRIMARY KEY, ns STRING, {COLUMN} STRING)")
    dims = [str(r[2]) for r in store._rows(f"CALL table_info('{old}') RETURN *") if r[1] == "vec"]
    uids, mat = read_rows(store, old, OLD_COLUMN, int(dims[0].rsplit("[", 1)[1].rstrip("]")))
    spaces = [str(r[0]) for r in store._q(f"MATCH (v:{old}) RETURN v.ns LIMIT 1")]
    for start in range(0, len(uids), _BATCH):
        part = uids[start : start + _BATCH]
        rows = pa.table(
            {
                "u": pa.array(part, type=pa.string()),
                "b": pa.array(encode(mat[start : start + _BATCH]), type=pa.string()),
            }
        )
        with store.transaction():
            store._run(
                f"LOAD FROM $rows CREATE (:{new} {{uid: u, ns: $ns, {COLUMN}: b}})",
                {"rows": rows, "ns": spaces[0]},
            )
    store._exec(f"DROP TABLE {old}")
    return len(uids)
