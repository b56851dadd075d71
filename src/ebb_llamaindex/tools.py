"""``EbbToolSpec``: Ebb's tool catalog (:mod:`ebb_core.tools`) as LlamaIndex function tools.

The tools, their descriptions and their arguments are the catalog's, the same as the MCP
server's and the LangChain tools': ``connect`` takes ``src``, ``dst`` and ``kind`` (before the
catalog, this adapter named them ``source_id`` and ``target_id``; those names still work for one
release, with a ``DeprecationWarning``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llama_index.core.tools import ToolMetadata
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec
from pydantic import BaseModel

from ebb_core import Brain
from ebb_core.tools import AGENT_TOOLS, TOOLS, renamed, select, with_defaults
from ebb_core.validation import validate_k

OLD_NAMES = {"connect": {"source_id": "src", "target_id": "dst"}}
"""Argument names this adapter used before the catalog: accepted until the next release."""


class EbbToolSpec(BaseToolSpec):
    """Ebb's agent tools on one :class:`~ebb_core.Brain` namespace.

    ``to_tool_list()`` gives ``FunctionTool``s named ``remember``, ``recall``, ``connect`` and
    ``forget`` (``tools`` names others from the catalog; ``"all"``: every one), with argument
    schemas and descriptions written for a model. There is no delete tool: ``forget`` only
    queues a memory for human review. ``k`` and ``reinforce`` are recall's defaults. Each
    tool is also a method: ``spec.remember(text=...)`` returns the text the model would read.

    >>> agent = FunctionAgent(tools=EbbToolSpec(brain).to_tool_list(), llm=llm)
    ... # doctest: +SKIP
    """

    def __init__(
        self,
        brain: Brain,
        *,
        k: int = 5,
        reinforce: bool = True,
        embed_model: Any = None,
        tools: Iterable[str] | str = AGENT_TOOLS,
    ) -> None:
        if embed_model is not None:  # a LlamaIndex BaseEmbedding (or any embedder Ebb takes)
            brain.set_embedder(embed_model)
        self.spec_functions: list[SPEC_FUNCTION_TYPE] = [t.name for t in select(tools)]
        self.brain = brain
        self.k = validate_k(k)
        self.recall_reinforces = reinforce  # (``self.reinforce`` is the reinforce tool)
        self._schemas: dict[str, type[BaseModel]] = {
            "recall": with_defaults(TOOLS["recall"].args, {"k": self.k, "reinforce": reinforce})
        }

    def _schema(self, name: str) -> type[BaseModel]:
        return self._schemas.get(name) or TOOLS[name].args

    def get_metadata_from_fn_name(
        self, fn_name: str, spec_functions: list[SPEC_FUNCTION_TYPE] | None = None
    ) -> ToolMetadata | None:
        """Each tool's model-facing name, description and argument schema (the catalog's)."""
        return ToolMetadata(
            name=fn_name, description=TOOLS[fn_name].description, fn_schema=self._schema(fn_name)
        )

    def __getattr__(self, name: str) -> Callable[..., str]:
        if name.startswith("_") or name not in TOOLS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        spec, schema = TOOLS[name], self._schema(name)

        def call(**kwargs: Any) -> str:
            if name in OLD_NAMES:
                renamed(name, kwargs, OLD_NAMES[name], "ebb_llamaindex.EbbToolSpec")
            args = schema.model_validate(kwargs)
            return spec.text(args, spec.run(self.brain, args, "agent"))

        call.__name__ = call.__qualname__ = name
        call.__doc__ = spec.description
        return call
