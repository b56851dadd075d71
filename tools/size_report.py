"""Print the code units over issue 14's structural targets: modules over 600 lines, classes over
400, functions over 80 (tests aside).

    python tools/size_report.py [PATH ...]      # default: src

Sizes are lines from a definition's first line (its first decorator) to its last, as ``ast``
reports them; a module's size is its line count. Nested classes and functions are measured too.
Exit status 0 always: this reports; tests/test_size_report.py gates src on it (make test).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

LIMITS = {"module": 600, "class": 400, "function": 80}


def _units(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, str, int, int]]:
    """(kind, qualified name, first line, size) of every class and function in ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            last = node.end_lineno or node.lineno
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            name = f"{prefix}{node.name}"
            yield kind, name, first, last - first + 1
            yield from _units(node, f"{name}.")
        else:
            yield from _units(node, prefix)


def report(paths: list[Path]) -> list[tuple[str, str, int, int]]:
    """Every unit over its limit: (kind, "file:line name", size, limit), largest first per kind."""
    over: list[tuple[str, str, int, int]] = []
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py")))
    for path in files:
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > LIMITS["module"]:
            over.append(("module", str(path), lines, LIMITS["module"]))
        for kind, name, first, size in _units(ast.parse(text, str(path))):
            if size > LIMITS[kind]:
                over.append((kind, f"{path}:{first} {name}", size, LIMITS[kind]))
    order = list(LIMITS)
    return sorted(over, key=lambda row: (order.index(row[0]), -row[2], row[1]))


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [Path("src")]
    rows = report(paths)
    for kind in LIMITS:
        mine = [r for r in rows if r[0] == kind]
        plural = "classes" if kind == "class" else kind + "s"
        print(f"{plural} over {LIMITS[kind]} lines: {len(mine)}")
        for _, where, size, _limit in mine:
            print(f"  {size:5d}  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
