"""MCP benchmark: ``ebb mcp`` against the reference memory server, through the official SDK client.

For each size it writes the same corpus for both servers (every memory: ten Zipf-distributed
words plus a token of its own), preloads Ebb with ``ebb import`` and the reference server with its
own JSON Lines file, then times, through the ``mcp`` SDK's ``Client``:

- Ebb over stdio (``ebb mcp``) and over streamable HTTP (``ebb mcp --transport http``):
  ``recall`` (k = 10) and ``remember`` (one memory per call);
- the reference server ``@modelcontextprotocol/server-memory`` over stdio: ``search_nodes`` and
  ``create_entities`` with one entity; only up to ``--ref-max`` memories (its every call reads
  and scans the whole file), and not past a size where its search p50 went over 2 s;
- the in-process ``Brain`` on the same store, same queries: what the MCP figures add to.

Queries: half one common word (Zipf ranks 10-100 of a 20,000-word vocabulary, each in roughly
1-8 % of the memories; ``--common-ranks`` to change), half the token of one memory.

It also times a person's ``ebb approve`` while a client calls ``recall`` in a tight loop (the
server's idle release set to 10 minutes, so only asking for the store lets the person in), next
to the same command run with no server at all.

The reference server is installed with npm into a temporary folder (``--ref-dir`` to reuse
one); without npm it is skipped, and the table says so.

    python bench/mcp_bench.py                          # 1k, 10k, 30k, 100k
    python bench/mcp_bench.py --sizes 1000 10000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client, StdioServerParameters

import synth
from ebb_core import Brain

REFERENCE = "@modelcontextprotocol/server-memory"
NAMESPACE = "bench"
EBB = Path(sys.executable).with_name("ebb")
PASSED = ("PATH", "HOME", "EBB_KUZU_MODULE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(ms), 2), "p95": round(pct(ms, 95), 2)}


# -- the corpus ----------------------------------------------------------------------------------


class Corpus:
    """Texts of ten Zipf words plus a token of their own, and the queries over them."""

    def __init__(
        self, size: int, ops: int, seed: int = 7, common: tuple[int, int] = (10, 100)
    ) -> None:
        rng = random.Random(seed)
        vocab = synth.vocabulary(20_000, rng)
        words = synth.Zipf(len(vocab), 1.07, rng)
        self.texts = [self.text(vocab, words, i) for i in range(size)]
        qrng = random.Random(seed + 1)
        # Common words: Zipf ranks 10-100 by default, each in roughly 1-8 % of the memories
        # (the top ten behave like stop words).
        words_common = [vocab[r] for r in range(*common)]
        self.queries = [
            qrng.choice(words_common) if i % 2 == 0 else self.token(qrng.randrange(size))
            for i in range(ops)
        ]
        self.new_texts = [self.text(vocab, words, size + i) for i in range(ops)]

    @staticmethod
    def token(i: int) -> str:
        return f"zq{i:07d}x"

    def text(self, vocab: list[str], words: synth.Zipf, i: int) -> str:
        return " ".join([*(vocab[words.draw()] for _ in range(10)), self.token(i)])

    def write_ebb(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            header = {"type": "ebb-export", "version": 1, "namespaces": [NAMESPACE]}
            out.write(json.dumps(header) + "\n")
            at = synth.iso(synth.NOW)
            for i, text in enumerate(self.texts):
                record = {
                    "type": "node",
                    "id": f"note:{i:07d}",
                    "namespace": NAMESPACE,
                    "kind": "note",
                    "text": text,
                    "props": {},
                    "created_at": at,
                    "updated_at": at,
                    "last_read_at": at,
                    "pinned": False,
                    "tier": 1,
                    "review_reason": None,
                    "queued_at": None,
                }
                out.write(json.dumps(record) + "\n")

    def write_reference(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(
                "\n".join(
                    json.dumps(
                        {
                            "type": "entity",
                            "name": f"note-{i:07d}",
                            "entityType": "note",
                            "observations": [t],
                        }
                    )
                    for i, t in enumerate(self.texts)
                )
            )


# -- driving a server ----------------------------------------------------------------------------


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> list[float]:
    out = []
    for fn in calls:
        t0 = time.perf_counter()
        result = await fn()
        out.append((time.perf_counter() - t0) * 1000)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"a benchmark call failed: {result.content}")
    return out


async def drive(
    client: Client, corpus: Corpus, search: str, write: str, ops: int
) -> dict[str, dict[str, float]]:
    def search_args(q: str) -> dict[str, Any]:
        return {"query": q, "k": 10} if search == "recall" else {"query": q}

    def write_args(i: int) -> dict[str, Any]:
        text = corpus.new_texts[i]
        if write == "remember":
            return {"text": text}
        return {"entities": [{"name": f"new-{i}", "entityType": "note", "observations": [text]}]}

    for q in corpus.queries[:5]:  # warm up: first open, prepared statements, JIT
        await client.call_tool(search, search_args(q))
    searches = await timed(
        [lambda q=q: client.call_tool(search, search_args(q)) for q in corpus.queries[:ops]]
    )
    writes = await timed(
        [lambda i=i: client.call_tool(write, write_args(i)) for i in range(ops // 2)]
    )
    return {"search": summary(searches), "write": summary(writes)}


def store_env(db: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED if k in os.environ}
    return {**env, "EBB_DB_PATH": str(db), "EBB_NAMESPACE": NAMESPACE, "EBB_BACKEND": "kuzu"}


async def ebb_stdio(db: Path, corpus: Corpus, ops: int) -> dict[str, dict[str, float]]:
    params = StdioServerParameters(command=str(EBB), args=["mcp"], env=store_env(db))
    async with Client(params) as client:
        return await drive(client, corpus, "recall", "remember", ops)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def ebb_http(db: Path, corpus: Corpus, ops: int) -> dict[str, dict[str, float]]:
    port = free_port()
    proc = subprocess.Popen(
        [str(EBB), "mcp", "--transport", "http", "--port", str(port)],
        env={**os.environ, **store_env(db)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("ebb mcp --transport http did not start") from None
                await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            return await drive(client, corpus, "recall", "remember", ops)
    finally:
        proc.terminate()
        proc.wait(30)


async def reference(
    server_js: Path, data: Path, corpus: Corpus, ops: int
) -> dict[str, dict[str, float]]:
    params = StdioServerParameters(
        command="node",
        args=[str(server_js)],
        env={"MEMORY_FILE_PATH": str(data), "PATH": os.environ.get("PATH", "")},
    )
    async with Client(params) as client:
        return await drive(client, corpus, "search_nodes", "create_entities", ops)


def in_process(db: Path, corpus: Corpus, ops: int) -> dict[str, dict[str, float]]:
    with Brain.open(db, backend="kuzu", namespace=NAMESPACE) as brain:
        for q in corpus.queries[:5]:
            brain.recall(q, k=10)
        searches = []
        for q in corpus.queries[:ops]:
            t0 = time.perf_counter()
            brain.recall(q, k=10)
            searches.append((time.perf_counter() - t0) * 1000)
        writes = []
        for i in range(ops // 2):
            t0 = time.perf_counter()
            brain.remember(corpus.new_texts[i] + " again")
            writes.append((time.perf_counter() - t0) * 1000)
    return {"search": summary(searches), "write": summary(writes)}


def cli_seconds(db: Path, *args: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(EBB), "--db", str(db), "-n", NAMESPACE, *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"ebb {' '.join(args)} failed: {done.stderr}")
    return time.perf_counter() - t0


async def approve_while_looping(db: Path, corpus: Corpus) -> dict[str, float]:
    """Seconds for `ebb approve` while a client calls recall in a loop, and with no server."""
    env = {**store_env(db), "EBB_MCP_IDLE_RELEASE": "600"}
    params = StdioServerParameters(command=str(EBB), args=["mcp"], env=env)
    async with Client(params) as client:
        for i in range(2):
            await client.call_tool("remember", {"text": f"to approve {i}", "id": f"note:bye-{i}"})
            await client.call_tool("forget", {"id": f"note:bye-{i}"})
        stop = asyncio.Event()
        calls = 0

        async def loop() -> None:
            nonlocal calls
            while not stop.is_set():
                await client.call_tool("recall", {"query": corpus.queries[calls % 50], "k": 10})
                calls += 1

        task = asyncio.create_task(loop())
        await asyncio.sleep(1.0)
        before = calls
        busy = await asyncio.to_thread(
            cli_seconds, db, "approve", "note:bye-0", "--by", "bench", "--json"
        )
        after = calls
        stop.set()
        await task
    idle = cli_seconds(db, "approve", "note:bye-1", "--by", "bench", "--json")
    return {
        "approve_while_looping_s": round(busy, 3),
        "approve_no_server_s": round(idle, 3),
        "loop_calls_during_approve": after - before,
    }


def install_reference(folder: Path) -> Path | None:
    """The reference server's entry point, installed with npm into ``folder`` if needed."""
    entry = folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
    if (entry / "index.js").exists():
        return entry / "index.js"
    if shutil.which("npm") is None or shutil.which("node") is None:
        log("npm (or node) is not installed: the reference server is skipped")
        return None
    log(f"installing {REFERENCE} with npm into {folder} ...")
    done = subprocess.run(
        ["npm", "install", "--prefix", str(folder), REFERENCE, "--no-audit", "--no-fund"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not (entry / "index.js").exists():
        log(f"npm could not install {REFERENCE}: {done.stderr.strip()[-300:]}")
        return None
    return entry / "index.js"


def reference_version(server_js: Path) -> str:
    package = server_js.parent.parent / "package.json"
    try:
        version: str = json.loads(package.read_text())["version"]
        return version
    except (OSError, ValueError, KeyError):
        return "?"


# -- the run -------------------------------------------------------------------------------------


def run_size(
    n: int,
    ops: int,
    work: Path,
    server_js: Path | None,
    with_reference: bool,
    common: tuple[int, int] = (10, 100),
) -> dict[str, Any]:
    corpus = Corpus(n, ops, common=common)
    data = work / f"ebb-{n}.jsonl"
    corpus.write_ebb(data)
    db = work / f"ebb-{n}.kuzu"
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(EBB), "--db", str(db), "-n", NAMESPACE, "import", str(data), "--json"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ebb import failed: {done.stderr}")
    log(f"{n:,}: ebb import {time.perf_counter() - t0:.1f} s")
    row: dict[str, Any] = {"memories": n, "ops": ops, "load_before": round(os.getloadavg()[0], 2)}
    row["ebb_stdio"] = asyncio.run(ebb_stdio(db, corpus, ops))
    log(f"{n:,}: ebb stdio {row['ebb_stdio']}")
    row["ebb_http"] = asyncio.run(ebb_http(db, corpus, ops))
    log(f"{n:,}: ebb http {row['ebb_http']}")
    row["approval"] = asyncio.run(approve_while_looping(db, corpus))
    log(f"{n:,}: approval {row['approval']}")
    row["in_process"] = in_process(db, corpus, ops)
    log(f"{n:,}: in-process {row['in_process']}")
    if server_js is not None and with_reference:
        ref_data = work / f"reference-{n}.jsonl"
        corpus.write_reference(ref_data)
        row["reference"] = asyncio.run(reference(server_js, ref_data, corpus, ops))
        log(f"{n:,}: reference {row['reference']}")
    row["load_after"] = round(os.getloadavg()[0], 2)  # a busy machine shows in every p95
    mcp, local = row["ebb_stdio"], row["in_process"]
    row["targets"] = {
        "recall_p95_overhead_ms": round(mcp["search"]["p95"] - local["search"]["p95"], 2),
        "remember_p50_overhead_ms": round(mcp["write"]["p50"] - local["write"]["p50"], 2),
        "http_over_stdio_recall_p50": round(
            row["ebb_http"]["search"]["p50"] / mcp["search"]["p50"], 2
        ),
    }
    if "reference" in row:
        ref = row["reference"]
        row["targets"]["faster_than_reference"] = (
            mcp["search"]["p95"] < ref["search"]["p95"]
            and mcp["write"]["p50"] < ref["write"]["p50"]
        )
    return row


def table(rows: list[dict[str, Any]], ref_note: str) -> str:
    head = (
        "| memories | Ebb stdio recall p50 / p95 | Ebb HTTP recall p50 / p95 | in-process recall "
        "p50 / p95 | reference search_nodes p50 / p95 | Ebb stdio remember p50 | Ebb HTTP "
        "remember p50 | in-process remember p50 | reference create_entities (1) p50 | recall p95 "
        "over in-process | remember p50 over in-process |"
    )
    lines = [head, "|" + "---|" * 11]

    def pair(d: dict[str, Any] | None) -> str:
        return f"{d['search']['p50']:.1f} / {d['search']['p95']:.1f} ms" if d else "—"

    def one(d: dict[str, Any] | None) -> str:
        return f"{d['write']['p50']:.1f} ms" if d else "—"

    for r in rows:
        ref = r.get("reference")
        t = r["targets"]
        lines.append(
            f"| {r['memories']:,} | {pair(r['ebb_stdio'])} | {pair(r['ebb_http'])} | "
            f"{pair(r['in_process'])} | {pair(ref)} | {one(r['ebb_stdio'])} | "
            f"{one(r['ebb_http'])} | {one(r['in_process'])} | {one(ref)} | "
            f"{t['recall_p95_overhead_ms']:+.1f} ms | {t['remember_p50_overhead_ms']:+.1f} ms |"
        )
    lines += [
        "",
        "| memories | `ebb approve` while a client calls recall in a loop | the same with no "
        "server | loop calls served meanwhile |",
        "|---|---|---|---|",
    ]
    loads = ", ".join(f"{r['memories']:,}: {r['load_before']}–{r['load_after']}" for r in rows)
    for r in rows:
        a = r["approval"]
        lines.append(
            f"| {r['memories']:,} | {a['approve_while_looping_s']:.2f} s | "
            f"{a['approve_no_server_s']:.2f} s | {a['loop_calls_during_approve']} |"
        )
    return "\n".join(lines) + f"\n\n{ref_note}\nload average (1 min) during each size: {loads}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 30_000, 100_000])
    ap.add_argument(
        "--ops", type=int, default=200, help="searches per server and size (writes: half)"
    )
    ap.add_argument(
        "--ref-max", type=int, default=30_000, help="largest size the reference server is run at"
    )
    ap.add_argument("--ref-dir", help="where the reference server is (or gets) installed")
    ap.add_argument(
        "--common-ranks",
        type=int,
        nargs=2,
        default=[10, 100],
        metavar=("FROM", "TO"),
        help="Zipf ranks the common-word queries are drawn from",
    )
    ap.add_argument("--workdir", help="keep the generated stores here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    if not EBB.exists():
        sys.exit(f"no ebb command next to {sys.executable}: pip install -e '.[mcp]' first")

    with tempfile.TemporaryDirectory(prefix="ebb-mcp-bench-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        server_js = install_reference(Path(args.ref_dir or Path(tmp) / "reference"))
        if server_js is None:
            ref_note = "reference server: not run (npm or node missing, or the install failed)"
        else:
            ref_note = f"reference server: {REFERENCE} {reference_version(server_js)} (stdio)"
        rows = []
        ref_slow = False
        for n in args.sizes:
            row = run_size(
                n,
                args.ops,
                work,
                server_js,
                n <= args.ref_max and not ref_slow,
                (args.common_ranks[0], args.common_ranks[1]),
            )
            rows.append(row)
            if "reference" in row and row["reference"]["search"]["p50"] > 2000:
                ref_slow = True  # its scan is past a few seconds: not run at larger sizes
    if args.json:
        print(
            json.dumps(
                {"reference": ref_note, "common_ranks": args.common_ranks, "rows": rows}, indent=2
            )
        )
    else:
        print(table(rows, ref_note))


if __name__ == "__main__":
    main()
