"""Query text handling: terms for the full-text index and which of them a memory matched."""

from __future__ import annotations

import functools
import re

# Very common words match a large share of all memories and make full-text queries slow and
# unselective (measured: 55/123 ms p50/p95 for a word in a third of 100k rows): keep them out.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()  # noqa: SIM905
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
MAX_QUERY_TERMS = 32


def words(text: str) -> list[str]:
    """Lowercased word tokens of ``text``."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def query_terms(query: str) -> list[str]:
    """Distinct, non-stop-word terms of a query, in order, at most :data:`MAX_QUERY_TERMS`."""
    seen: dict[str, None] = {}
    for w in words(query):
        if w not in STOP_WORDS and w not in seen:
            seen[w] = None
    return list(seen)[:MAX_QUERY_TERMS]


@functools.lru_cache(maxsize=1 << 16)  # recall explains every hit: the same words recur
def stem(word: str) -> str:
    """A light suffix-stripping stem, enough to explain which query terms a text matched."""
    for suffix in ("'s", "ingly", "edly", "ing", "ies", "ied", "es", "ed", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def matched_terms(terms: list[str], text: str) -> list[str]:
    """The query terms that occur in ``text`` (comparing light stems).

    A stem is a prefix of its word, so only the words that start with a query term's stem
    are stemmed (recall explains every hit with this)."""
    if not terms:
        return []
    prefixes = tuple({stem(t) for t in terms})
    stems = {stem(w) for w in words(text) if w.startswith(prefixes)}
    return [t for t in terms if stem(t) in stems]
