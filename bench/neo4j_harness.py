"""bench_core's Neo4j server for one size: ``scripts/neo4j-test-server`` in a state directory of
its own, loaded through Bolt or through the offline bulk path, with its RSS read at the end.

The bulk path is docs/neo4j.md's three stages, each timed (wall, CPU, peak RSS): ``ebb
neo4j-bulk prepare`` (a process of its own), the ``neo4j-admin database import full`` it prints
(``scripts/neo4j-test-server admin``, the server stopped), a server ``start``, then ``ebb
neo4j-bulk finish`` (Ebb's indexes, the hubs' lists, the counts checked). The server is a
benchmark server (``EBB_NEO4J_BENCH=1``, GDS off unless ``EBB_NEO4J_GDS`` says otherwise) with
the heap and page cache given; its store is kept in ``<state>/data`` (``EBB_NEO4J_KEEP_DATA=1``)
and deleted with the state directory when the size is done.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "neo4j-test-server"
BULK_FROM = 100_000  # --neo4j-import auto: the bulk path from this size, Bolt below it


def import_path(n: int, mode: str, external: bool) -> str:
    """``bulk`` or ``bolt`` for ``n`` memories (``mode``: auto, bulk or bolt)."""
    if external:  # NEO4J_URI names a server this script does not run: only Bolt reaches it
        if mode == "bulk":
            raise SystemExit("--neo4j-import bulk drives the test server: unset NEO4J_URI")
        return "bolt"
    if mode == "auto":
        return "bulk" if n >= BULK_FROM else "bolt"
    return mode


def measured(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``: its wall and CPU seconds, its peak RSS (its own and its children's) and
    its stdout; raises with its output if it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])} failed:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": round(usage.ru_maxrss / 1024),
        "stdout": stdout,
    }


def proc_cpu(pid: int) -> float:
    """User + system seconds of a live process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ebb_cli(*args: str, src: Path | None = None) -> list[str]:
    """The ``ebb`` command of the ebb_core this process imports (PYTHONPATH=OLD/src included),
    or of the one in ``src`` (another tree's ``src/``: an A/B of two trees' code)."""
    import sys

    code = "from ebb_core.cli import main; main()"
    if src is not None:
        code = f"import sys; sys.path.insert(0, {str(src)!r}); {code}"
    return [sys.executable, "-c", code, *args]


def status_rss(pid: int | str) -> dict[str, int]:
    """A live process's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = round(int(value.split()[0]) / 1024)
    return {"server_rss_mb": found["VmRSS"], "server_peak_rss_mb": found["VmHWM"]}


def external_rss() -> dict[str, int]:
    """With NEO4J_URI given: the test server's RSS if ``$EBB_NEO4J_STATE_DIR`` names a live
    one on this host (else nothing: a remote server's memory is not seen from here)."""
    state = os.environ.get("EBB_NEO4J_STATE_DIR")
    try:
        return status_rss(Path(state or "", "java.pid").read_text().strip()) if state else {}
    except (OSError, KeyError, ValueError):
        return {}


class HarnessServer:
    """One benchmark test server in ``state`` (deleted by :meth:`close`)."""

    def __init__(self, state: Path, heap: str, pagecache: str, admin_heap: str = "") -> None:
        self.state, self.heap, self.pagecache = state, heap, pagecache
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(parents=True)
        self.env = {
            **os.environ,
            "EBB_NEO4J_STATE_DIR": str(state),
            "EBB_NEO4J_BENCH": "1",
            "EBB_NEO4J_GDS": os.environ.get("EBB_NEO4J_GDS", "0"),
            "EBB_NEO4J_KEEP_DATA": "1",
            "EBB_NEO4J_HEAP": heap,
            "EBB_NEO4J_PAGECACHE": pagecache,
            "EBB_NEO4J_ADMIN_HEAP": admin_heap or os.environ.get("EBB_NEO4J_ADMIN_HEAP", "2g"),
        }
        self.env.pop("NEO4J_URI", None)
        self.uri = ""

    def _script(self, *args: str) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), *args], env=self.env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"neo4j-test-server {args[0]} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def start(self) -> str:
        """Start the server; its Bolt URI (also put in ``NEO4J_URI`` for ``open_store``)."""
        self.uri = self._script("start").split()[-1]
        os.environ["NEO4J_URI"] = self.uri
        return self.uri

    def stop(self) -> None:
        self._script("stop")

    def pid(self) -> int:
        return int((self.state / "pid").read_text())

    def rss(self) -> dict[str, int]:
        """The running server's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
        return status_rss(self.pid())

    def bulk_load(
        self,
        data: Path,
        files: Path,
        namespace: str,
        at: datetime,
        off_heap: str = "3g",
        src: Path | None = None,
    ) -> dict[str, Any]:
        """prepare, neo4j-admin, start, finish: the store holds ``data`` in ``namespace`` (``""``:
        the export's own namespaces); ``src``: prepare and finish with another tree's code."""
        shutil.rmtree(files, ignore_errors=True)
        prepare = ["neo4j-bulk", "prepare", str(data), str(files), "--at", at.isoformat()]
        prepare += ["--into", namespace] if namespace else []
        prep = measured(ebb_cli(*prepare, "--json", src=src), self.env)
        manifest = json.loads(prep["stdout"])
        admin_cmd = manifest["command"][1:] + (
            [f"--max-off-heap-memory={off_heap}"] * bool(off_heap)
        )
        admin = measured(["bash", str(SCRIPT), "admin", *admin_cmd], self.env)
        (self.state / "admin.log").write_text(admin["stdout"])
        t0 = time.perf_counter()
        self.start()
        start_s = time.perf_counter() - t0
        server0 = proc_cpu(self.pid())
        finish = ebb_cli("neo4j-bulk", "finish", str(files), "--json", src=src)
        fin = measured(finish, os.environ.copy())
        found = json.loads(fin["stdout"])
        shutil.rmtree(files, ignore_errors=True)
        total = prep["wall"] + admin["wall"] + start_s + fin["wall"]
        return {
            "memories": found["memories"],
            "links": found["links"],
            "audit": found.get("audit"),
            "import_s": total,
            "import_cpu_s": prep["cpu"] + fin["cpu"],  # the client's: prepare and finish
            "import_prepare_s": round(prep["wall"], 2),
            "import_admin_s": round(admin["wall"], 2),
            "import_start_s": round(start_s, 2),
            "import_finish_s": round(fin["wall"], 2),
            "import_index_s": found.get("index_s"),  # finish's index builds
            "import_prepare_cpu_s": round(prep["cpu"], 1),
            "import_finish_cpu_s": round(fin["cpu"], 1),
            "import_admin_cpu_s": round(admin["cpu"], 1),
            "import_server_cpu_s": round(proc_cpu(self.pid()) - server0, 1),  # during finish
            "import_peak_rss_mb": prep["rss_mb"],  # prepare's: the client side of the import
            "import_admin_peak_rss_mb": admin["rss_mb"],
        }

    def close(self) -> None:
        """Stop the server and delete its state directory (the store with it)."""
        try:
            self.stop()
        finally:
            os.environ.pop("NEO4J_URI", None)
            shutil.rmtree(self.state, ignore_errors=True)
