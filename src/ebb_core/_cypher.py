"""Cypher text that encodes a policy rule, kept once so the rule cannot drift between queries.

Only backend modules import this; nothing above the ``GraphStore`` seam writes a query language.
"""

from __future__ import annotations

#: Nodes whose tier differs from what ``key / $mx`` says (see ``GraphStore.tier_moves``):
#: pinned belong in hot, frozen never leave frozen here, otherwise ``scoring.tier_for``'s cuts.
#: (Kùzu runs the same rule in numpy, ``scoring.tiers_for``; the store contract suite,
#: :mod:`ebb_core.testing`, holds the backends to the same moves.)
#: Parameters: ``$ns, $mx, $hot, $warm, $cold``. Returns ``id, tier, t, r`` by id.
TIER_MOVES = (
    "MATCH (n:Memory) WHERE n.ns = $ns AND n.tier < 4 "
    "WITH n, CASE WHEN $mx <= 0.0 THEN 1.0 ELSE n.key / $mx END AS r "
    "WITH n, r, CASE WHEN n.pinned OR r >= $hot THEN 1 WHEN r >= $warm THEN 2 "
    "WHEN r >= $cold THEN 3 ELSE 4 END AS t "
    "WHERE t <> n.tier RETURN n.id AS id, n.tier AS tier, t, r ORDER BY n.id"
)
