"""The Kùzu store's primary key and the constants its modules share."""

from __future__ import annotations

SEP = "\x1f"  # joins namespace and id into the primary key; control chars are refused in both
_SMALL = 32  # up to this many rows, single statements beat one LOAD FROM (~5-20 ms fixed)


def uid(namespace: str, id: str) -> str:
    return f"{namespace}{SEP}{id}"
