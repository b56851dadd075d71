"""MCP benchmark: ``ebb mcp`` against the reference memory server, through the official SDK client.

For each size it writes the same corpus for both servers (every memory: ten Zipf-distributed
words plus a token of its own), preloads Ebb with ``ebb import`` and the reference server with its
own JSON Lines file, then times, through the ``mcp`` SDK's ``Client``:

- Ebb over stdio (``ebb mcp``) and over streamable HTTP (``ebb mcp --transport http``):
  ``recall`` (k = 10) and ``remember`` (one memory per call);
- the reference server ``@modelcontextprotocol/server-memory`` over stdio: ``search_nodes`` and
  ``create_entities`` with one entity; only up to ``--ref-max`` memories (its every call reads
  and scans the whole file), and not past a size where its search p50 went over 2 s;
- the in-process ``Brain`` on the same store, same queries: what the MCP figures add to, both
  as the library runs by default (every reinforcement written with its recall) and with the
  grouped reinforcement ``ebb mcp`` uses (``reinforcement_delay=1``);
- with ``--other-src DIR``, also ``ebb mcp`` from another source tree (say ``main``'s, from
  ``git archive main | tar -x -C DIR``) over stdio and over streamable HTTP, in the same turns:
  an A/B of two versions of the server in one run.

Every side works on its own copy of the store and they take turns call by call (Ebb stdio, Ebb
HTTP, in-process, reference, then the next query), so all of them meet the same moments of a
shared machine. The client's own check of each result against the tool's output schema
(``jsonschema``, in the SDK's client) is timed apart and reported, for Ebb and the reference.
So is the CPU time each call costs (on Linux): the server process's (all its threads, from
``/proc``) and the client's (this process's ``time.process_time`` around the call). On a
machine loaded past its cores a call's wall time is roughly its CPU times the load over the
cores, so the CPU figures compare the servers where the wall times mostly measure the load.

Queries: half one common word (Zipf ranks 10-100 of a 20,000-word vocabulary, each in roughly
1-8 % of the memories; ``--common-ranks`` to change), half the token of one memory.

It also times a person's ``ebb approve`` while a client calls ``recall`` in a tight loop (the
server's idle release set to 10 minutes, so only asking for the store lets the person in), next
to the same command run with no server at all.

The reference server is installed with npm into a temporary folder (``--ref-dir`` to reuse
one); without npm it is skipped, and the table says so.

    python bench/mcp_bench.py                          # 1k, 10k, 30k, 100k
    python bench/mcp_bench.py --sizes 1000 10000 --json
    python bench/mcp_bench.py --sizes 1000 10000 --other-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client, StdioServerParameters

import synth
from ebb_core import Brain

REFERENCE = "@modelcontextprotocol/server-memory"
NAMESPACE = "bench"
EBB = Path(sys.executable).with_name("ebb")
PASSED = ("PATH", "HOME", "PYTHONPATH", "EBB_KUZU_MODULE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


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
        """Memory ``i``'s own word: letters only (``zqaaaaabcx``), since full-text tokenizers
        split at digits (Kùzu made ``zq0001234x`` the words ``zq`` and ``x``, in every memory,
        so such a query matched all of them equally instead of the one)."""
        letters = ""
        for _ in range(7):
            i, r = divmod(i, 26)
            letters = chr(ord("a") + r) + letters
        return f"zq{letters}x"

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


_CHECKED = [0.0]  # ms the client spent checking results against output schemas, so far


def count_client_checks() -> None:
    """Time the SDK client's check of each result against the tool's output schema.

    The client validates every structured result with ``jsonschema`` (pure Python); for a rich
    result that is a fixed part of each round trip, whichever server answers. Only timed here,
    never changed or skipped.
    """
    from mcp.client.session import ClientSession

    checks = ClientSession.validate_tool_result
    if getattr(checks, "timed", False):
        return

    async def timed_checks(self: ClientSession, name: str, result: Any) -> None:
        t0 = time.perf_counter()
        try:
            await checks(self, name, result)
        finally:
            _CHECKED[0] += (time.perf_counter() - t0) * 1000

    timed_checks.timed = True  # type: ignore[attr-defined]
    ClientSession.validate_tool_result = timed_checks  # type: ignore[method-assign]


class Side:
    """One way in to a memory: a name, a search call and a write call (async)."""

    def __init__(
        self,
        name: str,
        search: Callable[[str], Awaitable[Any]],
        write: Callable[[int], Awaitable[Any]],
    ) -> None:
        self.name, self.search, self.write = name, search, write
        self.pid: int | None = None  # the server's process, for its CPU time


def cpu_seconds(pid: int | None) -> float | None:
    """CPU time (user + system, all threads) a process has used, or ``None`` (not Linux, gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def child_pids() -> dict[int, str]:
    """This process's child processes and their command lines (Linux; empty elsewhere)."""
    found: dict[int, str] = {}
    me = str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] != me:
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
    return found


def new_child(before: dict[int, str]) -> int | None:
    """The one child process started since ``before`` was taken, if there is exactly one."""
    new = [pid for pid in child_pids() if pid not in before]
    return new[0] if len(new) == 1 else None


def mcp_side(name: str, client: Client, corpus: Corpus, search: str, write: str) -> Side:
    """A server reached through the SDK client: Ebb's recall/remember or the reference's tools."""

    async def do_search(q: str) -> Any:
        args = {"query": q, "k": 10} if search == "recall" else {"query": q}
        return await client.call_tool(search, args)

    async def do_write(i: int) -> Any:
        text = corpus.new_texts[i]
        if write == "remember":
            return await client.call_tool(write, {"text": text})
        entity = {"name": f"new-{i}", "entityType": "note", "observations": [text]}
        return await client.call_tool(write, {"entities": [entity]})

    return Side(name, do_search, do_write)


def local_side(brain: Brain, corpus: Corpus, name: str = "in_process") -> Side:
    """The in-process ``Brain``: what the MCP figures add to."""

    async def do_search(q: str) -> Any:
        return brain.recall(q, k=10)

    async def do_write(i: int) -> Any:
        return brain.remember(corpus.new_texts[i])

    return Side(name, do_search, do_write)


async def interleaved(sides: list[Side], corpus: Corpus, ops: int) -> dict[str, dict[str, Any]]:
    """Time every side on the same searches and writes, taking turns call by call.

    On a shared machine the load moves latency more than most changes do; taking turns gives
    every side the same moments, where timing one side after another would not.
    """
    for side in sides:  # warm up: first open, prepared statements, recall columns
        for q in corpus.queries[:5]:
            await side.search(q)
    names = [s.name for s in sides]
    times: dict[str, dict[str, list[float]]] = {
        n: {"search": [], "write": [], "search_check": [], "write_check": []} for n in names
    }
    client_cpu = {n: {"search": 0.0, "write": 0.0} for n in names}

    async def one(side: Side, op: str, call: Awaitable[Any]) -> None:
        before = _CHECKED[0]
        c0 = time.process_time()
        t0 = time.perf_counter()
        result = await call
        times[side.name][op].append((time.perf_counter() - t0) * 1000)
        client_cpu[side.name][op] += time.process_time() - c0
        times[side.name][f"{op}_check"].append(_CHECKED[0] - before)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"a benchmark call to {side.name} failed: {result.content}")

    start = {s.name: cpu_seconds(s.pid) for s in sides}
    for i, q in enumerate(corpus.queries[:ops]):
        for side in sides[i % len(sides) :] + sides[: i % len(sides)]:
            await one(side, "search", side.search(q))
    middle = {s.name: cpu_seconds(s.pid) for s in sides}
    for i in range(ops // 2):
        for side in sides[i % len(sides) :] + sides[: i % len(sides)]:
            await one(side, "write", side.write(i))
    end = {s.name: cpu_seconds(s.pid) for s in sides}

    def per_call(a: float | None, b: float | None, calls: int) -> float | None:
        return None if a is None or b is None else round((b - a) / calls * 1000, 2)

    writes = ops // 2
    return {
        n: {
            "search": summary(t["search"]),
            "write": summary(t["write"]),
            "client_check": {
                "search_p50": round(statistics.median(t["search_check"]), 2),
                "write_p50": round(statistics.median(t["write_check"]), 2),
            },
            "cpu_ms_per_call": {
                "server_search": per_call(start[n], middle[n], ops),
                "server_write": per_call(middle[n], end[n], writes),
                "client_search": round(client_cpu[n]["search"] / ops * 1000, 2),
                "client_write": round(client_cpu[n]["write"] / writes * 1000, 2),
            },
        }
        for n, t in times.items()
    }


def store_env(db: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED if k in os.environ}
    return {**env, "EBB_DB_PATH": str(db), "EBB_NAMESPACE": NAMESPACE, "EBB_BACKEND": "kuzu"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def http_server(db: Path, src: Path | None = None) -> AsyncIterator[str]:
    """``ebb mcp --transport http`` on ``db`` (from the source tree ``src`` if given); yields
    its URL."""
    port = free_port()
    command = [str(EBB)] if src is None else [sys.executable, "-m", "ebb_core.cli"]
    env = {**os.environ, **store_env(db)}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    proc = subprocess.Popen(
        [*command, "mcp", "--transport", "http", "--port", str(port)],
        env=env,
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
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(30)


def copy_store(db: Path, to: Path) -> Path:
    """A copy of a closed store, so that each side has its own (one process per store file)."""
    for suffix in ("", ".wal"):
        target = Path(str(to) + suffix)
        target.unlink(missing_ok=True)
        if Path(str(db) + suffix).exists():
            shutil.copyfile(str(db) + suffix, target)
    return to


async def run_sides(
    db: Path,
    corpus: Corpus,
    ops: int,
    reference_js: Path | None,
    reference_data: Path | None,
    other_src: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Ebb over stdio and over HTTP, in process, and the reference server, taking turns."""
    http_db = copy_store(db, db.with_name(db.stem + "-http.kuzu"))
    local_db = copy_store(db, db.with_name(db.stem + "-local.kuzu"))
    grouped_db = copy_store(db, db.with_name(db.stem + "-grouped.kuzu"))
    async with contextlib.AsyncExitStack() as stack:
        children = child_pids()
        stdio = await stack.enter_async_context(
            Client(StdioServerParameters(command=str(EBB), args=["mcp"], env=store_env(db)))
        )
        stdio_pid = new_child(children)
        children = child_pids()
        url = await stack.enter_async_context(http_server(http_db))
        http_pid = new_child(children)
        http = await stack.enter_async_context(Client(url))
        brain = stack.enter_context(Brain.open(local_db, backend="kuzu", namespace=NAMESPACE))
        grouped = stack.enter_context(
            Brain.open(grouped_db, backend="kuzu", namespace=NAMESPACE, reinforcement_delay=1.0)
        )
        sides = [
            mcp_side("ebb_stdio", stdio, corpus, "recall", "remember"),
            mcp_side("ebb_http", http, corpus, "recall", "remember"),
            local_side(brain, corpus),
            local_side(grouped, corpus, "in_process_grouped"),
        ]
        sides[0].pid, sides[1].pid = stdio_pid, http_pid
        if other_src is not None:
            other_db = copy_store(db, db.with_name(db.stem + "-other.kuzu"))
            env = {**store_env(other_db), "PYTHONPATH": str(other_src)}
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "ebb_core.cli", "mcp"], env=env
            )
            children = child_pids()
            other = await stack.enter_async_context(Client(params))
            sides.append(mcp_side("other_stdio", other, corpus, "recall", "remember"))
            sides[-1].pid = new_child(children)
            other_http_db = copy_store(db, db.with_name(db.stem + "-other-http.kuzu"))
            children = child_pids()
            other_url = await stack.enter_async_context(http_server(other_http_db, other_src))
            other_http_pid = new_child(children)
            other_http = await stack.enter_async_context(Client(other_url))
            sides.append(mcp_side("other_http", other_http, corpus, "recall", "remember"))
            sides[-1].pid = other_http_pid
        if reference_js is not None and reference_data is not None:
            params = StdioServerParameters(
                command="node",
                args=[str(reference_js)],
                env={"MEMORY_FILE_PATH": str(reference_data), "PATH": os.environ.get("PATH", "")},
            )
            children = child_pids()
            ref = await stack.enter_async_context(Client(params))
            sides.append(mcp_side("reference", ref, corpus, "search_nodes", "create_entities"))
            sides[-1].pid = new_child(children)
        return await interleaved(sides, corpus, ops)


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
                await client.call_tool(
                    "recall",
                    {"query": corpus.queries[calls % min(50, len(corpus.queries))], "k": 10},
                )
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


def preloaded(n: int, corpus: Corpus, work: Path) -> Path:
    """The store of ``n`` memories preloaded with ``ebb import``, made once per ``work`` folder
    and never changed afterwards (every side runs on a copy), so a ``--workdir`` kept between
    runs imports each size once (at 100k that saves minutes)."""
    base = work / f"ebb-{n}-preloaded.kuzu"
    done_marker = Path(str(base) + ".done")
    if done_marker.exists() and base.exists():
        log(f"{n:,}: reusing the preloaded store {base}")
        return base
    for suffix in ("", ".wal", ".done"):
        Path(str(base) + suffix).unlink(missing_ok=True)
    data = work / f"ebb-{n}.jsonl"
    corpus.write_ebb(data)
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(EBB), "--db", str(base), "-n", NAMESPACE, "import", str(data), "--json"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ebb import failed: {done.stderr}")
    log(f"{n:,}: ebb import {time.perf_counter() - t0:.1f} s")
    done_marker.write_text(f"{n}\n")
    return base


def run_size(
    n: int,
    ops: int,
    work: Path,
    server_js: Path | None,
    with_reference: bool,
    common: tuple[int, int] = (10, 100),
    other_src: Path | None = None,
) -> dict[str, Any]:
    corpus = Corpus(n, ops, common=common)
    db = copy_store(preloaded(n, corpus, work), work / f"ebb-{n}.kuzu")
    row: dict[str, Any] = {"memories": n, "ops": ops, "load_before": round(os.getloadavg()[0], 2)}
    ref_data = None
    if server_js is not None and with_reference:
        ref_data = work / f"reference-{n}.jsonl"
        corpus.write_reference(ref_data)
    sides = asyncio.run(
        run_sides(db, corpus, ops, server_js if ref_data else None, ref_data, other_src)
    )
    row.update(sides)
    for name, figures in sides.items():
        log(f"{n:,}: {name} {figures}")
    row["approval"] = asyncio.run(approve_while_looping(db, corpus))
    log(f"{n:,}: approval {row['approval']}")
    row["load_after"] = round(os.getloadavg()[0], 2)  # a busy machine shows in every p95
    mcp, local, http = row["ebb_stdio"], row["in_process"], row["ebb_http"]
    grouped = row["in_process_grouped"]
    row["targets"] = {
        "recall_p95_overhead_ms": round(mcp["search"]["p95"] - local["search"]["p95"], 2),
        "remember_p50_overhead_ms": round(mcp["write"]["p50"] - local["write"]["p50"], 2),
        "recall_p95_over_grouped_ms": round(mcp["search"]["p95"] - grouped["search"]["p95"], 2),
        "remember_p50_over_grouped_ms": round(mcp["write"]["p50"] - grouped["write"]["p50"], 2),
        "http_over_stdio_recall_p50": round(http["search"]["p50"] / mcp["search"]["p50"], 2),
        "http_over_stdio_remember_p50": round(http["write"]["p50"] / mcp["write"]["p50"], 2),
    }
    if "other_stdio" in row:
        other, other_http = row["other_stdio"], row["other_http"]
        row["ab_vs_other"] = {
            f"{op}_{p}": round(mcp[op][p] / other[op][p], 3)
            for op in ("search", "write")
            for p in ("p50", "p95")
        }
        row["ab_vs_other_http"] = {
            f"{op}_{p}": round(http[op][p] / other_http[op][p], 3)
            for op in ("search", "write")
            for p in ("p50", "p95")
        }
        row["targets"]["other_http_over_stdio_recall_p50"] = round(
            other_http["search"]["p50"] / other["search"]["p50"], 2
        )
    if "reference" in row:
        ref = row["reference"]
        row["targets"]["faster_than_reference"] = {
            "search_p50": mcp["search"]["p50"] < ref["search"]["p50"],
            "search_p95": mcp["search"]["p95"] < ref["search"]["p95"],
            "write_p50": mcp["write"]["p50"] < ref["write"]["p50"],
        }
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
        "| memories | HTTP / stdio recall p50 | HTTP / stdio remember p50 | client's schema check "
        "of a recall / of a search_nodes result (p50) | stdio recall p50 / p95 and remember p50 "
        "faster than the reference |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        t, ref = r["targets"], r.get("reference")
        faster = t.get("faster_than_reference")
        verdict = (
            " / ".join(
                "yes" if faster[k] else "no" for k in ("search_p50", "search_p95", "write_p50")
            )
            if faster
            else "—"
        )
        ref_check = f"{ref['client_check']['search_p50']:.2f} ms" if ref else "—"
        lines.append(
            f"| {r['memories']:,} | {t['http_over_stdio_recall_p50']:.2f}× | "
            f"{t['http_over_stdio_remember_p50']:.2f}× | "
            f"{r['ebb_stdio']['client_check']['search_p50']:.2f} ms / {ref_check} | {verdict} |"
        )
    lines += [
        "",
        "| memories | in-process recall p50 / p95, grouped reinforcement | stdio recall p95 over "
        "it | in-process remember p50, grouped | stdio remember p50 over it |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        t, g = r["targets"], r["in_process_grouped"]
        lines.append(
            f"| {r['memories']:,} | {pair(g)} | {t['recall_p95_over_grouped_ms']:+.1f} ms | "
            f"{one(g)} | {t['remember_p50_over_grouped_ms']:+.1f} ms |"
        )
    lines += [
        "",
        "| memories | CPU per search call, server · client (Ebb stdio / Ebb HTTP / reference) | "
        "CPU per write call, server · client (Ebb stdio / Ebb HTTP / reference) |",
        "|---|---|---|",
    ]

    def cpu(d: dict[str, Any] | None, op: str) -> str:
        if not d:
            return "—"
        c = d["cpu_ms_per_call"]
        server = c[f"server_{op}"]
        return f"{'?' if server is None else f'{server:.2f}'} · {c[f'client_{op}']:.2f}"

    for r in rows:
        sides = (r["ebb_stdio"], r["ebb_http"], r.get("reference"))
        lines.append(
            f"| {r['memories']:,} | "
            + " / ".join(cpu(d, "search") for d in sides)
            + " ms | "
            + " / ".join(cpu(d, "write") for d in sides)
            + " ms |"
        )
    if any("other_stdio" in r for r in rows):
        lines += [
            "",
            "| memories | other tree's stdio recall p50 / p95 | this / other recall p50, p95 | "
            "other tree's stdio remember p50 | this / other remember p50 |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            if "other_stdio" not in r:
                continue
            o, ab = r["other_stdio"], r["ab_vs_other"]
            lines.append(
                f"| {r['memories']:,} | {pair(o)} | {ab['search_p50']:.2f}×, "
                f"{ab['search_p95']:.2f}× | {one(o)} | {ab['write_p50']:.2f}× |"
            )
        lines += [
            "",
            "| memories | other tree's HTTP recall p50 / p95 | this / other over HTTP: recall "
            "p50, p95; remember p50 | HTTP / stdio recall p50, this · other |",
            "|---|---|---|---|",
        ]
        for r in rows:
            if "other_http" not in r:
                continue
            o, ab, t = r["other_http"], r["ab_vs_other_http"], r["targets"]
            lines.append(
                f"| {r['memories']:,} | {pair(o)} | {ab['search_p50']:.2f}×, "
                f"{ab['search_p95']:.2f}×; {ab['write_p50']:.2f}× | "
                f"{t['http_over_stdio_recall_p50']:.2f}× · "
                f"{t['other_http_over_stdio_recall_p50']:.2f}× |"
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
    ap.add_argument(
        "--workdir",
        help="keep the generated stores here (default: a temp dir); a preloaded store left "
        "there by an earlier run is reused (each side still works on its own copy)",
    )
    ap.add_argument(
        "--other-src",
        type=Path,
        help="also run `ebb mcp` from this source tree (its src/ folder), in the same turns",
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    if args.other_src is not None and not (args.other_src / "ebb_core").is_dir():
        sys.exit(f"--other-src {args.other_src}: no ebb_core package there (give its src/ folder)")
    if not EBB.exists():
        sys.exit(f"no ebb command next to {sys.executable}: pip install -e '.[mcp]' first")
    count_client_checks()

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
                args.other_src,
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
