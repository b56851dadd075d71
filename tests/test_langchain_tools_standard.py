"""LangChain's own tool suites (``langchain-tests``), run on every catalog tool as
``create_ebb_tools(brain, tools="all")`` gives it, against a real Kùzu store."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from ebb_core import Brain
from ebb_core.tools import TOOLS
from ebb_langchain import create_ebb_tools

EXAMPLES: dict[str, dict[str, Any]] = {
    "remember": {"text": "Dana prefers email", "kind": "fact", "links": ["p:dana"]},
    "recall": {"query": "Acme renewal"},
    "connect": {"src": "p:dana", "dst": "client:acme", "kind": "works_on"},
    "reinforce": {"id": "client:acme"},
    "forget": {"id": "fact:june", "reason": "a test"},
    "neighbors": {"id": "client:acme"},
    "history": {"id": "fact:june"},
    "pin": {"id": "p:dana"},
    "maintain": {},
    "review_queue": {},
    "stats": {},
    "read": {"ids": ["p:dana", "fact:june"]},
    "explore": {"id": "p:dana"},
}


def test_every_catalog_tool_has_an_example() -> None:
    assert set(EXAMPLES) == set(TOOLS)


class _EbbTool:
    """What both suites need: the tool (fresh, on a seeded store) and an example call."""

    name: str
    brain: Brain

    @pytest.fixture(autouse=True)
    def _seeded(self, kuzu_brain: Brain) -> None:
        kuzu_brain.remember("Acme is a logistics client", kind="client", id="client:acme")
        kuzu_brain.remember("Dana runs the Acme account", kind="person", id="p:dana")
        kuzu_brain.remember(
            "Acme renews in June", kind="fact", id="fact:june", links=["client:acme"]
        )
        self.brain = kuzu_brain

    @property
    def tool_constructor(self) -> BaseTool:
        return {t.name: t for t in create_ebb_tools(self.brain, tools="all")}[self.name]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return EXAMPLES[self.name]


# Two classes per tool (LangChain's suites refuse to be mixed in one class), each under its name.
for _name in EXAMPLES:
    for _suite, _base in (("Unit", ToolsUnitTests), ("Integration", ToolsIntegrationTests)):
        _cls = f"Test{_suite}_{_name}"
        globals()[_cls] = type(_cls, (_EbbTool, _base), {"name": _name})
