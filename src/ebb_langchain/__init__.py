"""LangChain and LangGraph adapters for Ebb: memory that reinforces what it retrieves.

- :class:`EbbRetriever`: recall as a ``BaseRetriever`` (Documents carry the memory id and why).
- :class:`EbbChatMessageHistory`: a chat session kept as linked memories.
- :class:`EbbStore`: LangGraph's long-term ``BaseStore`` (``create_agent(store=...)``, LangMem).
- :func:`create_ebb_tools`: ``remember``, ``recall``, ``connect`` and ``forget`` agent tools.

Adapters only translate: every decision (ranking, reinforcement, what forgetting means) is
made by :class:`ebb_core.Brain`.
"""

try:
    import langchain_core  # noqa: F401
    import langgraph  # noqa: F401
except ImportError as exc:  # exercised by a test that hides the extra
    raise ImportError(
        "ebb_langchain needs langchain-core and langgraph: install the extra, "
        "pip install 'ebb-memory[langchain]' (from a checkout: pip install '.[langchain]')"
    ) from exc

from ._convert import hit_metadata, hit_to_document
from .chat_history import EbbChatMessageHistory
from .retriever import EbbRetriever
from .store import EbbStore, ebb_namespace, langgraph_namespace
from .tools import create_ebb_tools

__all__ = [
    "EbbChatMessageHistory",
    "EbbRetriever",
    "EbbStore",
    "create_ebb_tools",
    "ebb_namespace",
    "hit_metadata",
    "hit_to_document",
    "langgraph_namespace",
]
