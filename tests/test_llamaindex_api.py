"""The public API of ebb_llamaindex, pinned so that a refactor cannot silently drop a name."""

from __future__ import annotations

from importlib.metadata import requires

from llama_index.core.memory import BaseMemoryBlock
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.tools.tool_spec.base import BaseToolSpec

import ebb_llamaindex


def test_public_names_are_pinned() -> None:
    assert ebb_llamaindex.__all__ == ["EbbMemoryBlock", "EbbRetriever", "EbbToolSpec"]


def test_each_name_is_the_llamaindex_interface_it_claims() -> None:
    assert issubclass(ebb_llamaindex.EbbRetriever, BaseRetriever)
    assert issubclass(ebb_llamaindex.EbbMemoryBlock, BaseMemoryBlock)
    assert issubclass(ebb_llamaindex.EbbToolSpec, BaseToolSpec)
    for name in ebb_llamaindex.__all__:
        assert getattr(ebb_llamaindex, name).__doc__, f"{name} needs a docstring"


def test_the_llamaindex_extra_brings_llama_index_core() -> None:
    reqs = [r.replace('"', "'") for r in requires("ebb-memory") or []]
    extra = [r for r in reqs if "extra == 'llamaindex'" in r]
    assert any(r.startswith("llama-index-core") for r in extra), extra
