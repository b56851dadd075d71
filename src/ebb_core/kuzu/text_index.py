"""An in-process copy of the Kùzu store's full-text index, answering its BM25 queries in numpy.

Kùzu 0.11.3's ``QUERY_FTS_INDEX`` costs ~4 µs for every posting of the query's words (measured
at 1M memories: a word in 1% of them costs ~45 ms) and scores every matching document before it
takes its top, so a recall at 1M memories cost 3-6× one at 100k. This copy holds the same
postings as compact arrays (a term's documents and term frequencies, ~8 bytes a posting: ~100 MB
for 1M memories of ~12 indexed words) and scores a query's postings with a few vectorised
operations (~10-20 ns a posting), with exactly Kùzu's formula and statistics
(``log10((N - df + 0.5) / (df + 0.5) + 1) · tf·(k+1) / (tf + k·(1 - b + b·len/avglen))``,
k = 1.2, b = 0.75; N and avglen over the documents that have an indexed word).

It is built from Kùzu's own index tables (so its terms are Kùzu's) the first time a process
needs it, and every write the store makes after that goes through :meth:`TextIndex.put` or
:meth:`TextIndex.drop`, which tokenize as Kùzu does: lower-case, the punctuation and digits of
Kùzu's default ignore pattern replaced by spaces, split on spaces, Kùzu's stop words (read from
its table) removed, Porter-stemmed with the same Snowball stemmer (``PyStemmer`` wraps the C
library Kùzu links). Rows written after the build are kept apart (``_delta``) and the built
arrays' postings of a rewritten or deleted memory are masked (``_dirty``) until the next
compaction. Nothing is written to disk: a process that opens the store builds its copy again
from the index Kùzu keeps (and rebuilds after a crash).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

K1, B = 1.2, 0.75  # Kùzu's defaults for QUERY_FTS_INDEX
BYTES_PER_POSTING = 8  # int32 document offset + uint32 term frequency

# Kùzu's default ignore pattern (documents) and the query's (the same without * and ?, which a
# query uses as wildcards: such a query is left to Kùzu).
_IGNORE = re.compile(r"[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\/\|'\"`-]+")
_IGNORE_QUERY = re.compile(r"[0-9!@#$%^&()_+={}\[\]:;<>,.~\/\|'\"`-]+")


def _lower(text: str) -> str:
    """Lower-case one character at a time, as Kùzu does (utf8proc's simple mapping: no final
    sigma, ``İ`` to ``i``)."""
    if text.isascii():
        return text.lower()
    out = []
    for ch in text:
        low = ch.lower()
        out.append(low if len(low) == 1 else low[0])
    return "".join(out)


class Tokenizer:
    """Kùzu's document and query tokenizer for an index built with ``stemmer := 'porter'``."""

    def __init__(self, stop_words: frozenset[str]) -> None:
        import Stemmer

        self._stop = stop_words
        self._stem = Stemmer.Stemmer("porter").stemWord
        self._stems: dict[str, str] = {}

    def stem(self, word: str) -> str:
        s = self._stems.get(word)
        if s is None:
            if len(self._stems) > 200_000:
                self._stems.clear()
            s = self._stems[word] = self._stem(word)
        return s

    def document(self, text: str | None) -> list[str]:
        """The terms Kùzu indexes for ``text``, repeats included (their count is its length)."""
        if not text:
            return []
        stop, stem = self._stop, self.stem
        return [stem(w) for w in _IGNORE.sub(" ", _lower(text)).split(" ") if w and w not in stop]

    def query(self, query: str) -> list[str] | None:
        """The distinct terms Kùzu looks up for ``query``; None when it has a wildcard."""
        if "*" in query or "?" in query:
            return None
        words = _IGNORE_QUERY.sub(" ", _lower(query)).split(" ")
        return list(dict.fromkeys(self.stem(w) for w in words if w))


class TextIndex:
    """Postings by term (built arrays plus what was written since), document lengths and
    frequencies by row offset. Not thread-safe: the store calls it under its lock."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        import numpy as np

        self.tokenizer = tokenizer
        self.terms: dict[str, int] = {}
        self.df = np.zeros(0, np.int64)
        self.start = np.zeros(1, np.int64)  # term t's built postings: start[t]:start[t+1]
        self.doc = np.zeros(0, np.int32)
        self.tf = np.zeros(0, np.uint32)
        self.length = np.zeros(0, np.int64)  # indexed words per row offset
        self._row = np.zeros(0, np.bool_)  # a memory is stored at this offset
        self._dirty = np.zeros(0, np.bool_)  # the built postings of this offset are stale
        self._any_dirty = False
        self._delta: dict[int, dict[int, int]] = {}  # term -> {offset: tf}, written since
        self._delta_docs: dict[int, dict[int, int]] = {}  # offset -> {term: tf}, the same
        self._delta_postings = 0
        self.docs = 0
        self.total_len = 0

    # -- building ------------------------------------------------------------------------------
    def load(
        self,
        terms: list[str],
        postings: tuple[Any, Any, Any],
        lengths: Any,
        docs: int,
        rows: Any,
    ) -> None:
        """Take Kùzu's index: its terms (by term offset), its postings as columns (term offset,
        document row offset, term frequency), the documents' lengths (by row offset), the
        number of documents it counts, and which row offsets hold a memory (a mask).

        Kùzu counts a document for every memory inserted after the index was built, words or
        not (and uncounts every deleted one), but one built with the index only if it has an
        indexed word: ``docs`` is its document table's size, and writes count as Kùzu does."""
        import numpy as np

        term_of, doc_of, tf_of = postings

        self.terms = {t: i for i, t in enumerate(terms)}
        term_of = np.asarray(term_of, np.int64)
        if len(term_of) and not bool(np.all(term_of[1:] >= term_of[:-1])):
            order = np.argsort(term_of, kind="stable")
            term_of, doc_of, tf_of = term_of[order], np.asarray(doc_of)[order], tf_of[order]
        self.doc = np.asarray(doc_of, np.int32)
        self.tf = np.asarray(tf_of, np.uint32)
        counts = np.bincount(term_of, minlength=len(terms)).astype(np.int64)
        self.df = counts
        self.start = np.zeros(len(terms) + 1, np.int64)
        np.cumsum(counts, out=self.start[1:])
        size = max(len(lengths), len(rows))
        self.length = np.zeros(size, np.int64)
        self.length[: len(lengths)] = lengths
        self._row = np.zeros(size, np.bool_)
        self._row[: len(rows)] = rows
        self._dirty = np.zeros(size, np.bool_)
        self._any_dirty = False
        self._delta, self._delta_docs, self._delta_postings = {}, {}, 0
        self.docs = int(docs)
        self.total_len = int(self.length.sum())

    @property
    def nbytes(self) -> int:
        return int(self.doc.nbytes + self.tf.nbytes + self.start.nbytes + self.df.nbytes) + int(
            self.length.nbytes + self._dirty.nbytes
        )

    # -- writes --------------------------------------------------------------------------------
    def _grow(self, offset: int) -> None:
        import numpy as np

        if offset >= len(self.length):
            grow = max(offset + 1, 2 * len(self.length), 1024) - len(self.length)
            self.length = np.concatenate([self.length, np.zeros(grow, np.int64)])
            self._row = np.concatenate([self._row, np.zeros(grow, np.bool_)])
            self._dirty = np.concatenate([self._dirty, np.zeros(grow, np.bool_)])

    def _term(self, term: str) -> int:
        import numpy as np

        t = self.terms.get(term)
        if t is None:
            t = self.terms[term] = len(self.terms)
            if t >= len(self.df):
                self.df = np.concatenate([self.df, np.zeros(max(1024, len(self.df)), np.int64)])
        return t

    def drop(self, offset: int) -> None:
        """The memory at ``offset`` is gone."""
        if offset < len(self._row) and self._row[offset]:
            self._unindex(offset)
            self._row[offset] = False
            self.docs -= 1

    def _unindex(self, offset: int) -> None:
        """Remove the words of the memory at ``offset`` (its text is gone or replaced)."""
        import numpy as np

        if not self.length[offset]:
            return
        old = self._delta_docs.pop(offset, None)
        if old is not None:
            for t in old:
                del self._delta[t][offset]
            self._delta_postings -= len(old)
            terms: Any = list(old)
        else:  # in the built arrays (a rewrite of an old memory: rare, one pass over them)
            at = np.flatnonzero(self.doc == offset)
            terms = np.searchsorted(self.start, at, side="right") - 1
            self._dirty[offset] = self._any_dirty = True
        self.df[terms] -= 1
        self.total_len -= int(self.length[offset])
        self.length[offset] = 0

    def put(self, offset: int, text: str | None) -> None:
        """The memory at ``offset`` now has ``text`` (a new memory, or a new text)."""
        self._grow(offset)
        if self._row[offset]:
            self._unindex(offset)
        else:
            self._row[offset] = True
            self.docs += 1
        words = self.tokenizer.document(text)
        if not words:
            return
        counts = {self._term(w): n for w, n in Counter(words).items()}
        for t, n in counts.items():
            self._delta.setdefault(t, {})[offset] = n
            self.df[t] += 1
        self._delta_docs[offset] = counts
        self._delta_postings += len(counts)
        self.length[offset] = len(words)
        self.total_len += len(words)
        if self._delta_postings > max(50_000, len(self.doc) // 8):
            self.compact()

    def compact(self) -> None:
        """Fold what was written since the build into the built arrays."""
        import numpy as np

        keep = ~self._dirty[self.doc] if self._any_dirty else slice(None)
        old_terms = np.repeat(np.arange(len(self.start) - 1), np.diff(self.start))[keep]
        nd = self._delta_postings
        d_term = np.empty(nd, np.int64)
        d_doc = np.empty(nd, np.int32)
        d_tf = np.empty(nd, np.uint32)
        i = 0
        for t, docs in self._delta.items():
            n = len(docs)
            d_term[i : i + n] = t
            d_doc[i : i + n] = list(docs)
            d_tf[i : i + n] = list(docs.values())
            i += n
        term_of = np.concatenate([old_terms, d_term])
        order = np.argsort(term_of, kind="stable")
        self.doc = np.concatenate([self.doc[keep], d_doc])[order]
        self.tf = np.concatenate([self.tf[keep], d_tf])[order]
        counts = np.bincount(term_of, minlength=len(self.terms))
        self.start = np.zeros(len(self.terms) + 1, np.int64)
        np.cumsum(counts, out=self.start[1:])
        self._dirty[:] = False
        self._any_dirty = False
        self._delta, self._delta_docs, self._delta_postings = {}, {}, 0

    # -- queries -------------------------------------------------------------------------------
    def search(self, query: str) -> tuple[Any, Any] | None:
        """Every document matching ``query`` and its BM25 score as Kùzu computes it, as
        (row offsets, scores) in no particular order; None for a query Kùzu must answer
        (wildcards)."""
        import numpy as np

        words = self.tokenizer.query(query)
        if words is None:
            return None
        ids = [self.terms[w] for w in words if w in self.terms]
        n, avg = self.docs, (self.total_len / self.docs if self.docs else 0.0)
        docs_parts, score_parts = [], []
        for t in ids:
            df = int(self.df[t])
            if df <= 0:
                continue
            built = t < len(self.start) - 1  # a term first seen since the build has none
            lo, hi = (int(self.start[t]), int(self.start[t + 1])) if built else (0, 0)
            docs, tfs = self.doc[lo:hi], self.tf[lo:hi]
            if self._any_dirty and hi > lo:
                live = ~self._dirty[docs]
                docs, tfs = docs[live], tfs[live]
            extra = self._delta.get(t)
            if extra:
                docs = np.concatenate([docs, np.fromiter(extra, np.int32, len(extra))])
                tfs = np.concatenate([tfs, np.fromiter(extra.values(), np.uint32, len(extra))])
            if not len(docs):
                continue
            idf = math.log10((n - df + 0.5) / (df + 0.5) + 1)
            tf = tfs.astype(np.float64)
            norm = K1 * (1 - B + B * (self.length[docs] / avg))
            docs_parts.append(docs)
            score_parts.append(idf * (tf * (K1 + 1) / (tf + norm)))
        if not docs_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        if len(docs_parts) == 1:
            return docs_parts[0].astype(np.int64), score_parts[0]
        docs = np.concatenate(docs_parts)
        uniq, inverse = np.unique(docs, return_inverse=True)
        return uniq.astype(np.int64), np.bincount(inverse, np.concatenate(score_parts))


def load_from_kuzu(
    arrow: Any, table: str, index_name: str, max_bytes: int, rows: Any
) -> TextIndex | None:
    """Build a :class:`TextIndex` from the tables of Kùzu's index ``index_name`` on the node
    table ``table``, read with ``arrow(query, params)`` (internal tables visible). None when
    its postings would take more than ``max_bytes``: recall then asks Kùzu, only slower.
    ``rows``: a mask of the row offsets that hold a memory."""
    import numpy as np

    table_id = arrow(f"CALL show_tables() WHERE name = '{table}' RETURN id AS i")["i"][0]
    prefix = f"{table_id.as_py()}_{index_name}_"
    terms_t, docs_t, rel_t = f"`{prefix}terms`", f"`{prefix}docs`", f"`{prefix}appears_in`"
    postings = arrow(
        f"MATCH (:{terms_t})-[a:{rel_t}]->(:{docs_t}) RETURN count(*) AS n"  # bare ()s fail
    )["n"][0].as_py()
    if postings * BYTES_PER_POSTING > max_bytes:
        return None
    stop = arrow("MATCH (s:default_english_stopwords) RETURN s.sw AS w")["w"].to_pylist()
    index = TextIndex(Tokenizer(frozenset(stop)))
    terms = arrow(f"MATCH (t:{terms_t}) RETURN offset(id(t)) AS o, t.term AS t")
    offs = terms["o"].to_numpy()
    names = [""] * (int(offs.max()) + 1 if len(offs) else 0)  # "" is never a term
    for o, t in zip(offs.tolist(), terms["t"].to_pylist(), strict=True):
        names[o] = t
    docs = arrow(f"MATCH (d:{docs_t}) RETURN d.docID AS d, d.len AS l")
    doc_ids = docs["d"].to_numpy()
    lengths = np.zeros(int(doc_ids.max()) + 1 if len(doc_ids) else 0, np.int64)
    lengths[doc_ids] = docs["l"].to_numpy()
    rel = arrow(
        f"MATCH (t:{terms_t})-[a:{rel_t}]->(d:{docs_t}) "
        "RETURN offset(id(t)) AS t, d.docID AS d, a.tf AS f"
    )
    postings = (rel["t"].to_numpy(), rel["d"].to_numpy(), rel["f"].to_numpy())
    index.load(names, postings, lengths, len(doc_ids), rows)
    index.docs = _documents_counted(index, arrow, table, index_name)
    return index


def _documents_counted(index: TextIndex, arrow: Any, table: str, index_name: str) -> int:
    """How many documents Kùzu counts (its N), which its tables do not tell: a build counts the
    memories that have an indexed word, later inserts every memory, deletes every memory. The
    sum of the lengths is the same either way, so one score of one document (of the rarest
    term that queries as itself) tells N: the count whose score matches it."""
    import numpy as np

    rows = int(index._row.sum())
    if not index.total_len:
        return index.docs
    for t in np.argsort(index.df[: len(index.start) - 1], kind="stable")[:50].tolist():
        term = next((w for w, i in index.terms.items() if i == t), "")
        if not term or index.df[t] <= 0 or index.tokenizer.query(term) != [term]:
            continue
        got = arrow(
            f"CALL QUERY_FTS_INDEX('{table}', '{index_name}', $q) "
            "RETURN offset(id(node)) AS o, score AS s LIMIT 1",
            {"q": term},
        )
        if not got.num_rows:
            continue
        o, score = got["o"][0].as_py(), got["s"][0].as_py()
        lo, hi = int(index.start[t]), int(index.start[t + 1])
        tf = float(index.tf[lo:hi][index.doc[lo:hi] == o][0])
        df = float(index.df[t])
        n = np.arange(max(1, int(df)), 2 * max(rows, index.docs) + 2, dtype=np.float64)
        idf = np.log10((n - df + 0.5) / (df + 0.5) + 1)
        norm = K1 * (1 - B + B * (float(index.length[o]) / (index.total_len / n)))
        return int(n[np.argmin(np.abs(idf * (tf * (K1 + 1) / (tf + norm)) - score))])
    return index.docs
