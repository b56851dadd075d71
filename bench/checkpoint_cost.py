"""What a Kùzu checkpoint costs after each kind of write a Kùzu store of Ebb's makes, on a copy of
a large synthetic store (issue 15: a linked ``remember`` stalled 16.6 s at 1M when the WAL's
checkpoint came, and "maintain again" paid ~7 s of checkpoint for bench_core's writes).

Each probe copies the store, opens the copy with Kùzu itself (auto-checkpoint off), and runs
``--rounds`` rounds of: one transaction of ``--k`` writes of one kind on random old memories, then
a timed ``CHECKPOINT`` (wall and this process's CPU). The probes:

- ``recent``: a new recent-link list on two memories (what a remember with two links, or a
  reinforced link, writes to its old ends' ``Memory.recent_links``);
- ``reason``: ``review_reason`` (another STRING column of Memory, short values) on two memories;
- ``key``: ``key`` (a DOUBLE) on two memories;
- ``link``: a new ``Link`` between two old memories (both directions of the rel table);
- ``relset``: ``weight`` and ``reinforced_us`` of one memory's outgoing links (a reinforcement);
- ``side``: the same lists as ``recent``, MERGEd by uid into a small side table
  ``LinkList(uid, links)`` created in the copy (what a side table for changed lists would cost);
- ``nulls``: ``recent_links`` set to NULL on two memories (unsetting a list, to be rebuilt on
  read, instead of writing it);
- ``remember``: what a remember with two links writes besides the old ends' lists: a new memory
  (its text and list in its own row), two new links to old memories, their ``key`` (DOUBLE);
- ``versioned``: ``remember`` plus the old ends' lists as new rows of a side table keyed by
  (uid, version), never updated in place, and the version in an INT64 column of Memory
  (``links_ver``, added to the copy): lists that are never SET.
- ``replaced``: ``remember`` plus the old ends' lists in the side table ``LinkList(uid, links)``,
  each one's row deleted and created again (``OPTIONAL MATCH ... DELETE ... CREATE``), never
  SET: what Ebb writes since schema 5.

Build the store with ``maintain_bench.py --keep`` (it stays unmaintained; the import already
wrote every memory's recent-link list), then, on a quiet machine:

    python bench/checkpoint_cost.py /tmp/mb/maintain-1000000-5.kuzu --k 2 200

Prints a table, or JSON with ``--json``. The copies are deleted as it goes (``--workdir``: where
they go, default beside the store).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import kuzu

PROBES = (
    "recent",
    "reason",
    "key",
    "link",
    "relset",
    "side",
    "nulls",
    "remember",
    "versioned",
    "replaced",
)
_LIST = "\x1e".join(f"m:{i:07d}\x1frelated\x1f1\x1f1.25\x1f1760000000000000" for i in range(10))


def _writes(conn: Any, probe: str, uids: list[str], rng: random.Random, k: int, n: int) -> None:
    for j in range(k):
        a, b = rng.choice(uids), rng.choice(uids)
        fresh = f"{_LIST}\x1e{n}:{j}"  # a new value each time, as a real list is
        if probe == "recent":
            for u in (a, b):
                conn.execute(
                    "MATCH (n:Memory {uid: $u}) SET n.recent_links = $l", {"u": u, "l": fresh}
                )
        elif probe == "reason":
            for u in (a, b):
                conn.execute(
                    "MATCH (n:Memory {uid: $u}) SET n.review_reason = $r", {"u": u, "r": f"r{j}"}
                )
        elif probe == "key":
            for u in (a, b):
                conn.execute("MATCH (n:Memory {uid: $u}) SET n.key = n.key + 1.0", {"u": u})
        elif probe == "link":
            conn.execute(
                "MATCH (a:Memory {uid: $a}), (b:Memory {uid: $b}) CREATE (a)-[:Link {kind: "
                "'related', weight: 1.0, created_us: 1, reinforced_us: 1, props: '{}'}]->(b)",
                {"a": a, "b": b},
            )
        elif probe == "relset":
            conn.execute(
                "MATCH (a:Memory {uid: $a})-[e:Link]->(:Memory) "
                "SET e.weight = e.weight + 1.0, e.reinforced_us = e.reinforced_us + 1",
                {"a": a},
            )
        elif probe == "side":
            for u in (a, b):
                conn.execute("MERGE (s:LinkList {uid: $u}) SET s.links = $l", {"u": u, "l": fresh})
        elif probe == "nulls":
            for u in (a, b):
                conn.execute("MATCH (n:Memory {uid: $u}) SET n.recent_links = NULL", {"u": u})
        elif probe in ("remember", "versioned", "replaced"):
            new: dict[str, Any] = {
                "a": a,
                "b": b,
                "u": f"probe\x1f{n}:{j}",
                "t": f"probe {n} {j} harbor lantern",
            }
            query = "MATCH (a:Memory {uid: $a}), (b:Memory {uid: $b}) "
            if probe == "replaced" and a != b:
                query += (
                    "OPTIONAL MATCH (la:LinkList {uid: $a}) OPTIONAL MATCH (lb:LinkList {uid: $b}) "
                    "DELETE la, lb CREATE (:LinkList {uid: $a, links: $l}), "
                    "(:LinkList {uid: $b, links: $l}) WITH a, b "
                )
            query += (
                "CREATE (m:Memory {uid: $u, text: $t, recent_links: $l}) "
                "SET a.key = a.key + 1.0, b.key = b.key + 1.0 "
            )
            if probe == "versioned":
                version = n * k + j + 1
                query += (
                    "SET a.links_ver = $v, b.links_ver = $v "
                    "CREATE (:LinkVersion {uv: $av, links: $l}), "
                    "(:LinkVersion {uv: $bv, links: $l}) "
                )
                new |= {"v": version, "av": f"{a}\x1f{version}", "bv": f"{b}\x1f{version}"}
            query += (
                "CREATE (m)-[:Link {kind: 'related', weight: 1.0, created_us: 1, "
                "reinforced_us: 1, props: '{}'}]->(a), (m)-[:Link {kind: 'related', weight: 1.0, "
                "created_us: 1, reinforced_us: 1, props: '{}'}]->(b)"
            )
            conn.execute(query, {**new, "l": fresh})


def probe_once(store: Path, workdir: Path, probe: str, k: int, rounds: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(dir=workdir, prefix="ckpt-"))
    try:
        path = tmp / store.name
        shutil.copyfile(store, path)
        db = kuzu.Database(str(path), auto_checkpoint=False)
        conn = kuzu.Connection(db)
        result = conn.execute("MATCH (n:Memory) RETURN n.uid")
        assert not isinstance(result, list)  # one statement, one result
        # rows are lists (the stub's dict is for a connection option not set here)
        uids = [r[0] for r in cast(list[list[Any]], result.get_all())]
        if probe in ("side", "replaced"):  # a schema-5 store has it
            conn.execute(
                "CREATE NODE TABLE IF NOT EXISTS LinkList(uid STRING PRIMARY KEY, links STRING)"
            )
        if probe == "versioned":
            conn.execute("ALTER TABLE Memory ADD links_ver INT64")
            conn.execute("CREATE NODE TABLE LinkVersion(uv STRING PRIMARY KEY, links STRING)")
        rng = random.Random(7)
        out = []
        for n in range(rounds):
            t = time.perf_counter()
            conn.execute("BEGIN TRANSACTION")
            _writes(conn, probe, uids, rng, k, n)
            conn.execute("COMMIT")
            write_s = time.perf_counter() - t
            wal = os.path.getsize(str(path) + ".wal")
            t, c = time.perf_counter(), time.process_time()
            conn.execute("CHECKPOINT")
            out.append(
                {
                    "write_s": round(write_s, 3),
                    "wal_kb": wal >> 10,
                    "checkpoint_s": round(time.perf_counter() - t, 3),
                    "checkpoint_cpu_s": round(time.process_time() - c, 3),
                }
            )
        del conn, db
        return {"probe": probe, "k": k, "memories": len(uids), "rounds": out}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", type=Path, help="a synthetic store (copied, never changed)")
    ap.add_argument("--probes", nargs="+", choices=PROBES, default=list(PROBES))
    ap.add_argument("--k", type=int, nargs="+", default=[2, 200], help="writes per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, help="where the copies go (default: beside the store)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    workdir = args.workdir or args.store.parent
    rows = [probe_once(args.store, workdir, p, k, args.rounds) for k in args.k for p in args.probes]
    load = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps({"load": load, "results": rows}, indent=2))
        return
    head = ("probe", "k", "round", "write s", "WAL KiB", "ckpt s", "ckpt CPU")
    print(" ".join(f"{h:>8}" for h in head))
    for r in rows:
        for i, x in enumerate(r["rounds"], 1):
            print(
                f"{r['probe']:>8} {r['k']:>8} {i:>8} {x['write_s']:>8} {x['wal_kb']:>8} "
                f"{x['checkpoint_s']:>8} {x['checkpoint_cpu_s']:>8}"
            )
    print(f"load {load}")


if __name__ == "__main__":
    main()
