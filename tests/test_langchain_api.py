"""The public API of ``ebb_langchain``, pinned: a refactor cannot silently drop a name."""

from __future__ import annotations

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.retrievers import BaseRetriever
from langgraph.store.base import BaseStore

import ebb_langchain

PUBLIC = [
    "EbbChatMessageHistory",
    "EbbRetriever",
    "EbbStore",
    "create_ebb_tools",
    "ebb_namespace",
    "hit_metadata",
    "hit_to_document",
    "langgraph_namespace",
]


def test_all_is_pinned() -> None:
    assert sorted(ebb_langchain.__all__) == PUBLIC
    for name in PUBLIC:
        obj = getattr(ebb_langchain, name)
        assert obj.__doc__, f"{name} needs a docstring"


def test_adapters_implement_the_framework_interfaces() -> None:
    assert issubclass(ebb_langchain.EbbRetriever, BaseRetriever)
    assert issubclass(ebb_langchain.EbbChatMessageHistory, BaseChatMessageHistory)
    assert issubclass(ebb_langchain.EbbStore, BaseStore)
