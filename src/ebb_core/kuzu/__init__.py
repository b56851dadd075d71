"""The embedded Kùzu backend, one module per concern.

* ``store``: :class:`~ebb_core.kuzu.store.KuzuStore` itself (opening a store and its state),
  which assembles the mixins below; ``ebb_core.kuzu_store`` is its import path and gives the
  names other modules take from the backend.
* ``module``: the one import of the Kùzu engine (``EBB_KUZU_MODULE`` picks a fork).
* ``base``: :class:`KuzuBase`, what every mixin uses of the store (declared for the type
  checker), and read access to the mirror's copies.
* ``engine``: opening the database, Kùzu errors as ``EbbError`` exceptions, reading results,
  the memory budget.
* ``session``: the connection, prepared statements, transactions (begun lazily), room checks,
  checkpoints, rollback, closing, bulk loads through Arrow.
* ``tables``: each table's columns with their Kùzu and Arrow types, written once; the CREATE
  statements and the bulk path's Arrow types are built from them.
* ``schema``: creating the tables, the schema version and the full-text index (built, dropped,
  cleaned up after a kill). ``meta``: ``get_meta`` / ``set_meta``.
* ``reads``: memories by id, the recall columns, the text copy, scans and counts.
* ``writes``: creating, updating, adjusting and deleting memories; a write event as one
  statement.
* ``links``: edges, each memory's recent-link list, ``supersedes`` edges, incident edges.
* ``mirror``: :class:`~ebb_core.kuzu.mirror.Mirror`, the one owner of every in-process copy,
  changed only by ``apply(change)`` and ``invalidate()``; ``copies``: the copies it holds.
* ``search``: full-text search through the text copy or Kùzu's index, and the recall columns'
  lookups (``_columns_of``).
* ``bulk``: ``bulk_load`` and ``bulk_insert``; ``index_steps``: the text index built in steps
  during an import the pool cannot index at once; ``parquet_ahead``: a ``COPY``'s Parquet file
  written in a thread. ``audit``: the audit log. ``maintain``: the
  scoring pass, the tier reference and tier moves, recent-link lists built in bulk.
* ``text_index``: the in-process copy of the full-text index (BM25 in numpy, Kùzu's formula),
  held by the mirror.
* ``vectors``: :class:`~ebb_core.kuzu.vectors.KuzuVectors` (and ``KuzuVectorScans``, its
  whole-table counts), each namespace's vectors: an
  unindexed tail searched in process up to a cap, an HNSW index past it.
* ``queries``: the primary key (``uid``, ``SEP``), row and edge helpers, and the constants the
  modules share.

Nothing is imported here, so the modules import each other without a cycle.
"""
