"""LlamaIndex adapters for Ebb: a retriever, a memory block for ``Memory`` and agent tools.

>>> from ebb_core import Brain
>>> from ebb_llamaindex import EbbMemoryBlock, EbbRetriever, EbbToolSpec
>>> brain = Brain.open("./ebb_db")                                  # doctest: +SKIP
>>> nodes = EbbRetriever(brain, k=3).retrieve("pricing")            # doctest: +SKIP
"""

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ebb_llamaindex needs llama-index-core: install the extra, "
        "pip install 'ebb-memory[llamaindex]'"
    ) from exc

from .memory_block import EbbMemoryBlock
from .retriever import EbbRetriever
from .tools import EbbToolSpec

__all__ = ["EbbMemoryBlock", "EbbRetriever", "EbbToolSpec"]
