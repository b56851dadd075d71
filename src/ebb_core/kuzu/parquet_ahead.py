"""A Parquet file written in a thread for a later ``COPY`` (``KuzuFiles._parquet_ahead``)."""

from __future__ import annotations

import os
import threading
from contextlib import suppress
from typing import Any

#: Rows per row group of the Parquet files a ``COPY`` reads: Kùzu 0.11.3 reads a file one row
#: group per thread, and pyarrow's default (1Mi rows) made a million memories one group, read on
#: one core: their ``COPY`` took 5.6-5.9 s against 3.8-3.9 s with groups of 131,072 rows (Kùzu's
#: node group), five million links 8.6-9.1 s against 8.1-8.3 s (2026-12-03, alternated).
ROW_GROUP = 131_072


def write_parquet(table: Any, path: str) -> None:
    """Write ``table`` for a ``COPY`` that reads it once, at once (from the page cache): in
    row groups of :data:`ROW_GROUP`, uncompressed. Snappy cost a million memories' file
    1.6-1.9 s against 0.7 s to write (278 against 494 MB), and their ``COPY`` read it no faster
    (3.5-3.8 against 3.2 s; 2026-12-03, alternated)."""
    import pyarrow.parquet as pq

    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="none")


class ParquetAhead:
    """A Parquet file written in a thread from ``start`` (``KuzuFiles._parquet_ahead``):
    pyarrow's writer releases the GIL, so the file is written while Kùzu ``COPY``s another
    table. The table is let go as soon as it is written; ``discard`` waits for the thread and
    deletes the file (a killed process leaves it to ``_remove_copy_files``)."""

    def __init__(self, table: Any, path: str) -> None:
        self._table: Any = table
        self._path = path
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write, name="ebb-parquet", daemon=True)
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def _write(self) -> None:
        try:
            write_parquet(self._table, self._path)
        except BaseException as exc:  # raised again by wait(), in the caller's thread
            self._error = exc
        finally:
            self._table = None

    def wait(self) -> str:
        """The written file's path, once written (the writer's error raised here)."""
        self.start()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._path

    def discard(self) -> None:
        if self._started:
            self._thread.join()
        self._table = None
        with suppress(OSError):
            os.unlink(self._path)
