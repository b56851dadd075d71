"""Agent tools: Ebb's tool catalog (:mod:`ebb_core.tools`) as LangChain ``StructuredTool``s.

The tools, their descriptions and their arguments are the catalog's, the same as the MCP
server's and the LlamaIndex tools': ``connect`` takes ``src``, ``dst`` and ``kind`` (before
the catalog, this adapter named them ``src_id``, ``dst_id`` and ``relation``; those names still
work for one release, with a ``DeprecationWarning``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ValidationError, model_validator

from ebb_core import Brain, EbbError
from ebb_core.tools import AGENT_TOOLS, ToolSpec, renamed, select, with_defaults

from ._convert import hit_metadata, view

OLD_NAMES = {"connect": {"src_id": "src", "dst_id": "dst", "relation": "kind"}}
"""Argument names this adapter used before the catalog: accepted until the next release."""


def create_ebb_tools(
    brain: Brain,
    *,
    namespace: str | None = None,
    depth: int | None = None,
    actor: str = "agent",
    embedder: Any = None,
    tools: Iterable[str] | str = AGENT_TOOLS,
) -> list[BaseTool]:
    """Ebb's agent tools on ``brain``: by default ``remember``, ``recall``, ``connect`` and
    ``forget``; ``tools`` names others from the catalog (``"all"``: every one of them).

    Errors Ebb raises on purpose (an unknown id, a memory waiting for review...) come back to
    the model as the tool's answer, so it can correct itself. ``recall`` reinforces what it
    returns and also gives the hits' metadata as the tool message's artifact; ``depth`` is its
    default depth. ``forget`` never deletes: the memory waits in the review queue for a
    person. ``actor`` is who the audit log names for the tools' changes.

    ``embedder`` (a LangChain ``Embeddings``, a callable, ``"minilm"``) makes ``recall`` find
    memories by meaning too (set on the brain; ``None`` keeps its own).

    >>> agent = create_agent(model, create_ebb_tools(brain))   # doctest: +SKIP
    """
    if embedder is not None:
        brain.set_embedder(embedder)
    mem = view(brain, namespace)
    defaults = {"recall": {"depth": depth}} if depth is not None else {}
    return [_tool(spec, mem, actor, defaults.get(spec.name, {})) for spec in select(tools)]


def _tool(spec: ToolSpec[Any, Any], brain: Brain, actor: str, defaults: dict[str, Any]) -> BaseTool:
    schema = _schema(spec, defaults)

    def func(**kwargs: Any) -> Any:
        args = schema.model_validate(kwargs)
        try:
            result = spec.run(brain, args, actor)
        except EbbError as exc:  # a deliberate error: the model reads it and can correct itself
            raise ToolException(str(exc)) from exc
        text = spec.text(args, result)
        if spec.name == "recall":
            return text, [hit_metadata(h) for h in result]
        return text

    async def coroutine(**kwargs: Any) -> Any:
        return await run_in_executor(None, func, **kwargs)

    return StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=spec.name,
        description=spec.description,
        args_schema=schema,
        response_format="content_and_artifact" if spec.name == "recall" else "content",
        handle_tool_error=True,
        handle_validation_error=_explain_invalid,
    )


def _schema(spec: ToolSpec[Any, Any], defaults: dict[str, Any]) -> type[BaseModel]:
    """The catalog's arguments (with this adapter's defaults), taking the old names too."""
    model = with_defaults(spec.args, defaults)
    if spec.name not in OLD_NAMES:
        return model
    old = OLD_NAMES[spec.name]

    class WithOldNames(model):  # type: ignore[misc,valid-type]
        @model_validator(mode="before")
        @classmethod
        def accept_old_names(cls, data: Any) -> Any:
            if isinstance(data, dict):
                data = dict(data)
                renamed(spec.name, data, old, "ebb_langchain.create_ebb_tools")
            return data

    WithOldNames.__name__ = WithOldNames.__qualname__ = spec.args.__name__
    return WithOldNames


def _explain_invalid(error: Exception) -> str:
    """Tell the model which argument was wrong and how, so it can call again."""
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
        )
        return f"Invalid arguments ({problems}). Fix them and call the tool again."
    return f"Invalid arguments: {error}. Fix them and call the tool again."
