"""The embedded Kùzu backend, one module per concern (being split out of ``ebb_core.kuzu_store``).

* ``ebb_core.kuzu_store``: :class:`~ebb_core.kuzu_store.KuzuStore` itself, which assembles the
  mixins below with its session, schema, transactions, writes, reads and recall copies.
* ``base``: :class:`KuzuBase`, what every mixin uses of the store (declared for the type checker).
* ``audit``: the audit log (``Audit`` rows: appended row-wise or column-wise, read, last seq).
* ``maintain``: the scoring pass (``recompute_keys``, ``scale_keys``), the tier reference and
  tier moves, and the recent-link lists built in bulk.
* ``queries``: the primary key (``uid``, ``SEP``) and constants shared by the modules.

Nothing is imported here, so ``ebb_core.kuzu_store`` can import these modules without a cycle.
"""
