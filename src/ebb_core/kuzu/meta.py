"""The Kùzu store's metadata (``Meta`` rows: key and value), read once and kept in process."""

from __future__ import annotations

from .base import KuzuBase


class KuzuMeta(KuzuBase):
    """``get_meta`` / ``set_meta`` (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def get_meta(self, key: str) -> str | None:
        # Only this process can write the file, so a value read once stays true until this
        # store changes it (or a rollback, which forgets every copy).
        with self._lock:
            if key not in self._meta:
                rows = self._q("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})
                self._meta[key] = rows[0][0] if rows else None
            return self._meta[key]

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._meta.pop(key, None)
            self._q("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})
            self._meta[key] = value
