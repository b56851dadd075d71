"""Ebb's tool catalog (:mod:`ebb_core.tools`) as MCP tools: each registered with the schemas
the SDK publishes (input from the catalog's arguments, output from its result model, inlined),
and the checks every call passes before it runs (unknown argument names, text that is not valid
Unicode, schema violations explained in one line). The server itself, and how it reaches the
store, are in :mod:`ebb_core.mcp_server`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError

from .tools import CATALOG, ToolSpec

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def add_tools(
    server: MCPServer[Any],
    run: Callable[..., Any],
    short_call: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> dict[str, tuple[frozenset[str], Callable[..., Any]]]:
    """Register every catalog tool on ``server``: ``run(what, work)`` does a call's work on the
    store, ``short_call`` wraps the tools that take milliseconds (see ``_on_loop_when_free``).
    Returns each tool's argument names (for :func:`check_arguments`) and the function
    registered for it (a coroutine function for the short tools, a plain one otherwise)."""
    from mcp.types import ToolAnnotations

    tools: dict[str, tuple[frozenset[str], Callable[..., Any]]] = {}
    for spec in CATALOG:
        fn = _tool_function(spec, run, _result_maker())
        if spec.short:
            fn = short_call(fn)
        tools[spec.name] = (frozenset(spec.args.model_fields), fn)
        server.add_tool(
            fn,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=False,
                idempotent_hint=spec.idempotent,
                open_world_hint=False,
            ),
            structured_output=True,
        )
        _inline_output_schema(server, spec.name)
        _skip_output_revalidation(server, spec.name)
    return tools


def _result_maker() -> Callable[[dict[str, Any]], Any]:
    """``make(data)``: the ``CallToolResult`` of a structured result given as JSON-ready values
    (:meth:`ToolSpec.json_data`), made once (see :func:`_skip_output_revalidation`): the
    values as its structured content and, as its text, the same as compact JSON."""
    from mcp.types import CallToolResult, TextContent
    from pydantic_core import to_json

    def make(data: dict[str, Any]) -> Any:
        text = to_json(data).decode()  # json.dumps(..., separators=(",", ":")), in half the time
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data
        )

    return make


def _tool_function(
    spec: ToolSpec[Any, Any], run: Callable[..., Any], make: Callable[[Any], Any]
) -> Callable[..., Any]:
    """A catalog tool as the plain function the SDK registers: its signature (the catalog's
    arguments, with their descriptions and limits, and the output model) is what the SDK
    publishes as the tool's input and output schemas and validates each call's arguments
    against. It returns the finished ``CallToolResult`` (``make``), built from the tool's
    JSON-ready result (:meth:`ToolSpec.json_data`: for ``recall`` without building a model per
    hit)."""

    def call(**kwargs: Any) -> Any:
        args = spec.args.model_construct(**kwargs)  # the SDK validated them on the same fields
        return make(run(spec.name, lambda b: spec.json_data(args, spec.run(b, args, "agent"))))

    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if info.is_required() else info.default,
            annotation=_annotated(
                (info.annotation, *info.metadata, Field(description=info.description))
            ),
        )
        for name, info in spec.args.model_fields.items()
    ]
    call.__name__ = call.__qualname__ = spec.name
    call.__doc__ = spec.description
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=spec.output
    )
    return call


def _annotated(parts: tuple[Any, ...]) -> Any:
    """``Annotated[type, *metadata]`` from a tuple (the same as writing it out)."""
    return Annotated[parts]


def check_arguments(
    tool: str, arguments: Mapping[str, Any], allowed: frozenset[str] | None
) -> None:
    """Refuse unknown argument names and strings that are not valid Unicode, before any work."""
    from mcp.server.mcpserver.exceptions import ToolError

    from .mcp_wire import WIRE_ERROR_KEY

    if WIRE_ERROR_KEY in arguments:  # refused on the wire already (see mcp_wire)
        raise ToolError(str(arguments[WIRE_ERROR_KEY]))
    if allowed is not None:
        unknown = sorted(k for k in arguments if k not in allowed)
        if unknown:
            takes = ", ".join(sorted(allowed)) or "no arguments"
            raise ToolError(
                f"invalid arguments for {tool}: unknown argument "
                + ", ".join(repr(u[:40]) for u in unknown[:5])
                + f" ({tool} takes: {takes})"
            )
    bad = _bad_unicode(arguments)
    if bad is not None:
        raise ToolError(
            f"invalid arguments for {tool}: {bad} contains an unpaired UTF-16 surrogate, which "
            "is not valid Unicode text; send valid UTF-8"
        )


def _bad_unicode(value: Any, where: str = "") -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "a value"
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _bad_unicode(k, where or "a key") or _bad_unicode(
                v, f"{where}.{k}" if where else str(k)
            )
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _bad_unicode(v, f"{where}[{i}]")
            if found:
                return found
    return None


def explain_invalid(tool: str, error: ValidationError) -> str:
    """A schema violation as one line naming each bad argument (never echoing its value)."""
    parts = []
    for e in error.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        if e["type"] == "missing":
            parts.append(f"{loc} is required")
            continue
        got = type(e.get("input")).__name__
        got = {"NoneType": "null", "str": "string", "dict": "object", "list": "array"}.get(got, got)
        parts.append(f"{loc}: {e['msg']} (got {got})")
    more = f" (and {len(parts) - 5} more)" if len(parts) > 5 else ""
    return f"invalid arguments for {tool}: " + "; ".join(parts[:5]) + more


def _inline_output_schema(server: Any, name: str) -> None:
    """Publish the tool's output schema with its ``$ref``s inlined.

    The SDK's client validates every structured result against the schema; with pydantic's
    ``$defs``/``$ref`` layout that costs twice as long as with the same schema inlined (about
    7 ms against 3.5 ms for a ten-hit recall on a busy 2-core machine). The SDK reads the
    schema from the tool's metadata on each call, so replacing it here is all it takes.
    """
    manager = getattr(server, "_tool_manager", None)
    registered = manager.get_tool(name) if manager is not None else None
    metadata = getattr(registered, "fn_metadata", None)
    schema = getattr(metadata, "output_schema", None)
    if metadata is None or not isinstance(schema, dict) or "$defs" not in schema:
        return
    defs = schema["$defs"]

    def inline(value: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = ref.removeprefix("#/$defs/")
                if target in seen or target not in defs:  # recursive: keep the reference
                    return value
                merged = {**defs[target], **{k: v for k, v in value.items() if k != "$ref"}}
                return inline(merged, (*seen, target))
            return {k: inline(v, seen) for k, v in value.items() if k != "$defs"}
        if isinstance(value, list):
            return [inline(v, seen) for v in value]
        return value

    flat = inline(schema, ())
    if "$ref" not in json.dumps(flat):
        metadata.output_schema = flat


def _skip_output_revalidation(server: Any, name: str) -> None:
    """Let the tool's finished result through the SDK as it is.

    The SDK turns a returned model into a result by dumping it twice (an indented JSON text,
    which Ebb then replaced with compact JSON, and the structured content) and validating it again
    against the output model; given a ``CallToolResult`` it still validates the structured
    content against the model, which builds every nested model anew. Ebb's output models are
    built (and validated) by the tool itself and published as the tool's output schema, so the
    SDK keeps publishing the schema but no longer re-checks the result: it does so only when
    the metadata has an output model.
    """
    manager = getattr(server, "_tool_manager", None)
    registered = manager.get_tool(name) if manager is not None else None
    metadata = getattr(registered, "fn_metadata", None)
    if metadata is not None and getattr(metadata, "output_schema", None) is not None:
        metadata.output_model = None


# -- running it ----------------------------------------------------------------------------------
