"""The embedded Kùzu backend, one module per concern (being split out of ``ebb_core.kuzu_store``).

* ``ebb_core.kuzu_store``: :class:`~ebb_core.kuzu_store.KuzuStore` itself, which assembles the
  mixins below with its session, schema, transactions, writes, reads and recall copies.
* ``base``: :class:`KuzuBase`, what every mixin uses of the store (declared for the type checker).
* ``search``: full-text search (``text_matches``, ``text_candidates``) through the text copy or
  Kùzu's index, and the recall columns' lookups (``_columns_of``).
* ``copies``: the in-process copies of the Memory table (the recall columns, recent rows).
* ``bulk``: ``bulk_load`` (the text index dropped and rebuilt around a large load) and
  ``bulk_insert`` (an import's columns as Arrow tables).
* ``audit``: the audit log (``Audit`` rows: appended row-wise or column-wise, read, last seq).
* ``maintain``: the scoring pass (``recompute_keys``, ``scale_keys``), the tier reference and
  tier moves, and the recent-link lists built in bulk.
* ``queries``: the primary key (``uid``, ``SEP``), the Memory table's columns and their Arrow
  types, and the constants and helpers the modules share.

Nothing is imported here, so ``ebb_core.kuzu_store`` can import these modules without a cycle.
"""
