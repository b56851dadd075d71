"""The Kùzu store's metadata (``Meta`` rows: key and value), read once and kept in process."""

from __future__ import annotations

from .base import KuzuBase
from .mirror import MetaSet


class KuzuMeta(KuzuBase):
    """``get_meta`` / ``set_meta`` (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def get_meta(self, key: str) -> str | None:
        # Only this process can write the file, so a value read once stays true until this
        # store changes it (or a rollback, which forgets every copy).
        with self._lock:
            if key in self._meta:
                return self._meta[key]
            rows = self._q("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})
            value: str | None = rows[0][0] if rows else None
            self._mirror.meta_read(key, value)
            return value

    def set_meta(self, key: str, value: str) -> None:
        # a Meta row changes no score (the scoring settings are part of the watermark's value)
        with self._lock, self.keys_kept():
            try:
                self._q("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})
            except BaseException:
                self._mirror.invalidate()  # whether it was written is not known
                raise
            self._mirror.apply(MetaSet(key, value))
