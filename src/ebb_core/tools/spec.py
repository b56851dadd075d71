"""What one tool of the catalog is: :class:`ToolSpec`, and the helpers adapters share."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_json

if TYPE_CHECKING:
    from ..engine import Brain

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R")


class Args(BaseModel):
    """The arguments of one tool. Unknown names are ignored here: the MCP server refuses them
    before validation, and the agent frameworks pass only the names the schema declares."""

    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True)
class ToolSpec(Generic[A, R]):
    """One agent tool, free of any framework.

    ``run(brain, args, actor)`` does the work in one call on ``brain`` and returns ``R`` (what
    the engine returned, e.g. recall's hits, so an adapter can attach more of it);
    ``structured(args, result)`` is the JSON object an MCP client gets (an ``output`` model);
    ``text(args, result)`` is the text a model reads from the LangChain and LlamaIndex tools.
    ``read_only`` and ``idempotent`` are hints for clients; ``short`` says the call takes
    milliseconds (``maintain`` re-scores every memory and is not short). ``plain(args,
    result)``, where given, is the structured result as JSON-ready Python values built without
    the output models (equal to ``structured(...).model_dump(mode="json", by_alias=True)``, a
    test holds it to that): what the MCP server sends, so a call does not build and validate
    every nested model only to dump it again (:meth:`json_data`).
    """

    name: str
    title: str
    description: str
    args: type[A]
    output: type[BaseModel]
    run: Callable[[Brain, A, str], R]
    structured: Callable[[A, R], BaseModel]
    text: Callable[[A, R], str]
    read_only: bool = False
    idempotent: bool = False
    short: bool = True
    plain: Callable[[A, R], dict[str, Any]] | None = None

    def json_data(self, args: A, result: R) -> dict[str, Any]:
        """The structured result as JSON-ready values (``plain`` when the tool has one)."""
        if self.plain is not None:
            return self.plain(args, result)
        data: dict[str, Any] = self.structured(args, result).model_dump(mode="json", by_alias=True)
        return data

    def __call__(self, brain: Brain, arguments: Mapping[str, Any], actor: str = "agent") -> str:
        """Validate ``arguments``, run the tool on ``brain`` and return the text a model reads."""
        args = self.args.model_validate(dict(arguments))
        return self.text(args, self.run(brain, args, actor))


def described(doc: str) -> str:
    """A tool or argument description: dedented, each paragraph on one line."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def as_json(args: Any, result: Any) -> str:
    """The default text of a result: its structured form as compact JSON."""
    return to_json(result).decode()


def same(args: Any, result: BaseModel) -> BaseModel:
    """The structured form of a result that already is an output model."""
    return result


def with_defaults(model: type[A], defaults: Mapping[str, Any]) -> type[A]:
    """``model`` with other defaults for some arguments (an adapter's settings, such as the
    number of memories recall returns); the descriptions and limits stay the same."""
    if not defaults:
        return model
    fields: dict[str, Any] = {}
    for name, value in defaults.items():
        info = model.model_fields[name]
        fields[name] = (info.annotation, FieldInfo.merge_field_infos(info, default=value))
    return create_model(model.__name__, __base__=model, **fields)


def renamed(tool: str, arguments: dict[str, Any], old: Mapping[str, str], where: str) -> None:
    """Accept the argument names an adapter used before the catalog (``old`` maps them to the
    catalog's), in place, with a :class:`DeprecationWarning`. Kept for one release."""
    for before, after in old.items():
        if before in arguments and after not in arguments:
            arguments[after] = arguments.pop(before)
            warnings.warn(
                f"{where}: the {tool} tool's argument {before!r} is now {after!r} (the same "
                f"name in every adapter); {before!r} will stop working in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
