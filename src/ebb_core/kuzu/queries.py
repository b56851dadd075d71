"""The Kùzu store's primary key, recent-link encoding and the constants and helpers its modules
share."""

from __future__ import annotations

from contextlib import suppress

SEP = "\x1f"  # joins namespace and id into the primary key; control chars are refused in both
RECENT_LINKS = 8  # links kept per memory for recall's explanations
LINK_SEP = "\x1e"  # between links in a recent-link list (fields are joined by SEP)
_SMALL = 32  # up to this many rows, single statements beat one LOAD FROM (~5-20 ms fixed)


def uid(namespace: str, id: str) -> str:
    return f"{namespace}{SEP}{id}"


def _release_arrow_memory() -> None:
    """Hand freed memory back to the system: Arrow's allocator and the C library's keep freed
    pages for reuse (after a 1M-memory import the process held 2.3 GB, 1.2 GB once they let
    go), which a large store's next pass would add to."""
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
