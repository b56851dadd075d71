"""``ebb_core.kuzu_store``: the import path of :class:`KuzuStore`, the embedded backend.

The backend lives in :mod:`ebb_core.kuzu` (one module per concern; the class in
``ebb_core.kuzu.store``). This module gives the names it always gave (the store, its error
types, constants and the helpers other modules and tests take from it) from there.
"""

from __future__ import annotations

from .errors import InvalidInput as InvalidInput
from .errors import NoStore as NoStore
from .errors import StorageError as StorageError
from .errors import StoreFull as StoreFull
from .errors import StoreLocked as StoreLocked
from .errors import StoreRebuilt as StoreRebuilt
from .kuzu.copies import _BASE_COLUMNS as _BASE_COLUMNS
from .kuzu.copies import _ROW_KEYS as _ROW_KEYS
from .kuzu.engine import _ABANDONED as _ABANDONED
from .kuzu.engine import DEFAULT_MEMORY_BUDGET as DEFAULT_MEMORY_BUDGET
from .kuzu.engine import DuplicateKey as DuplicateKey
from .kuzu.engine import _buffer_pool as _buffer_pool
from .kuzu.engine import _held_elsewhere as _held_elsewhere
from .kuzu.engine import _open_database as _open_database
from .kuzu.engine import _room_for as _room_for
from .kuzu.engine import abandoned_engines as abandoned_engines
from .kuzu.engine import memory_budget_from_env as memory_budget_from_env
from .kuzu.engine import open_stores as open_stores
from .kuzu.engine import parse_memory_budget as parse_memory_budget
from .kuzu.engine import storage_error as storage_error
from .kuzu.links import _decode_links as _decode_links
from .kuzu.queries import _SMALL as _SMALL
from .kuzu.queries import FTS_INDEX as FTS_INDEX
from .kuzu.queries import INDEX_STATE as INDEX_STATE
from .kuzu.queries import _node_ret as _node_ret
from .kuzu.schema import SCHEMA_VERSION as SCHEMA_VERSION
from .kuzu.schema import STOPWORDS_TABLE as STOPWORDS_TABLE
from .kuzu.store import _COLD_CALLS as _COLD_CALLS
from .kuzu.store import _OFF as _OFF
from .kuzu.store import KuzuStore as KuzuStore
