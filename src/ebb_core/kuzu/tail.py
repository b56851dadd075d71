"""A namespace's unindexed vectors in process (``_Tail``), searched for the Kùzu store's recall.

The matrix, the rows' sign bits and their uids; up to ``EXACT_MAX`` rows a search is one
matrix-vector product (computed ``DOT_BLOCK`` rows at a time), above it a sign-bit shortlist
re-ranked exactly. The mirror (``kuzu.mirror``) holds one per namespace; ``kuzu.vectors`` keeps
it equal to the namespace's vector tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where vectors are read: a one-shot command may need none
    import numpy as np

#: up to this many rows the in-process search is exact (a matrix-vector product) ...
EXACT_MAX = 20_000
#: ... above, a sign-bit shortlist of ``max(SHORTLIST_MIN, 10 × pool)`` is re-ranked exactly
SHORTLIST_MIN = 500
#: the similarities are computed this many rows at a time (see :func:`_similarities`)
DOT_BLOCK = 512


_BYTE_BITS: list[Any] = []  # set bits per byte value, made on first use (numpy < 2)


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per element of a uint64 array (numpy 2's ``bitwise_count``, else a table)."""
    import numpy as np

    count = getattr(np, "bitwise_count", None)
    if count is not None:
        return np.asarray(count(words))
    if not _BYTE_BITS:
        _BYTE_BITS.append(np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8))
    per_byte = _BYTE_BITS[0][words.view(np.uint8)]
    return np.asarray(per_byte.reshape(*words.shape, 8).sum(axis=-1, dtype=np.uint8))


def _similarities(mat: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``mat @ query``, ``DOT_BLOCK`` rows at a time: the BLAS runs a product this small on the
    calling thread, and splits a larger one across threads that stall on a busy machine (the
    figures: docs/benchmarks.md, "The similarities in blocks")."""
    import numpy as np

    if len(mat) <= DOT_BLOCK:
        return np.asarray(mat @ query)
    out = np.empty(len(mat), dtype=np.result_type(mat.dtype, query.dtype))
    for start in range(0, len(mat), DOT_BLOCK):
        np.matmul(mat[start : start + DOT_BLOCK], query, out=out[start : start + DOT_BLOCK])
    return out


class _Tail:
    """A namespace's unindexed vectors in process: a growing float32 matrix, the rows' sign
    bits (packed, for the shortlist), a uid per row (None: deleted) and each uid's row."""

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self.words = (dim + 63) // 64  # sign bits per row, as uint64 words
        self.mat = np.zeros((64, dim), dtype=np.float32)
        # one row per word of sign bits, one column per vector: each word is XOR-ed and counted
        # over a contiguous row (measured ~2x faster than a row of words per vector)
        self.bits = np.zeros((self.words, 64), dtype=np.uint64)
        self.uids: list[str | None] = []
        self.where: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.where)

    def _signs(self, mat: np.ndarray) -> np.ndarray:
        import numpy as np

        packed = np.packbits(mat > 0, axis=1)
        padded = np.zeros((len(mat), self.words * 8), dtype=np.uint8)
        padded[:, : packed.shape[1]] = packed
        return padded.view(np.uint64)

    def _room(self, need: int) -> None:
        import numpy as np

        if need <= len(self.mat):
            return
        size = max(need, len(self.mat) + max(64, len(self.mat) // 4))  # +25%: RAM is capped
        mat = np.zeros((size, self.dim), dtype=np.float32)
        mat[: len(self.mat)] = self.mat
        bits = np.zeros((self.words, size), dtype=np.uint64)
        bits[:, : self.bits.shape[1]] = self.bits
        self.mat, self.bits = mat, bits

    def add(self, uids: Sequence[str], mat: np.ndarray) -> None:
        import numpy as np

        rows = []
        for u in uids:
            i = self.where.get(u)
            if i is None:
                i = len(self.uids)
                self.uids.append(u)
                self.where[u] = i
            rows.append(i)
        self._room(len(self.uids))
        at = np.asarray(rows, dtype=np.int64)
        self.mat[at] = mat
        self.bits[:, at] = self._signs(mat).T

    def remove(self, uids: Iterable[str]) -> None:
        import numpy as np

        for u in uids:
            i = self.where.pop(u, None)
            if i is not None:
                self.uids[i] = None
                self.mat[i] = 0.0
                self.bits[:, i] = 0
        if len(self.uids) > 64 and len(self.where) < len(self.uids) // 2:  # compact
            live = [i for i, u in enumerate(self.uids) if u is not None]
            size = max(64, len(live) + len(live) // 4)
            mat = np.zeros((size, self.dim), dtype=np.float32)
            bits = np.zeros((self.words, size), dtype=np.uint64)
            mat[: len(live)] = self.mat[live]
            bits[:, : len(live)] = self.bits[:, live]
            self.mat, self.bits = mat, bits
            self.uids = [self.uids[i] for i in live]
            self.where = {u: i for i, u in enumerate(self.uids) if u is not None}

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` rows most similar to ``query`` (rows are unit vectors): exact up to
        ``EXACT_MAX`` rows; above, the ``max(SHORTLIST_MIN, 10 k)`` rows whose sign bits differ
        least from the query's (and those tied with the last), re-ranked by exact cosine."""
        import numpy as np

        n = len(self.uids)
        if not self.where or k <= 0:
            return []
        short = max(SHORTLIST_MIN, 10 * k)
        if n <= EXACT_MAX or short >= n:
            rows = np.arange(n)
            sims = _similarities(self.mat[:n], query)
        else:
            q = self._signs(query.reshape(1, -1))[0]
            differ = np.zeros(n, dtype=np.uint16)
            for w in range(self.words):
                differ += _popcount(self.bits[w, :n] ^ q[w])
            # the smallest count of differing bits that takes in ``short`` rows (a histogram:
            # ~10x cheaper than a partition); rows tied at it all come in
            cut = int(np.searchsorted(np.cumsum(np.bincount(differ)), short))
            rows = np.flatnonzero(differ <= cut)
            if len(rows) > 4 * short:  # very many ties: the partition bounds the re-ranking
                rows = np.argpartition(differ, short)[:short]
            sims = _similarities(self.mat[rows], query)
        top = np.argpartition(-sims, k)[:k] if len(rows) > k else np.arange(len(rows))
        out = []
        for j in top:
            u = self.uids[int(rows[int(j)])]
            if u is not None:
                out.append((u, float(sims[int(j)])))
        return out

    def nbytes(self) -> int:
        return int(self.mat.nbytes + self.bits.nbytes)
