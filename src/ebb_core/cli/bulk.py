"""``ebb neo4j-bulk``: a first load of an empty Neo4j database through ``neo4j-admin``.

Imported only when it runs (see :mod:`.app`); the work is :mod:`ebb_core.neo4j.offline`.
"""

from __future__ import annotations

import os
import shlex

import click

from .base import _clock_at, emit_json, err, handle_errors, json_option, out


@click.group("neo4j-bulk")
def neo4j_bulk() -> None:
    """Load an export into an EMPTY Neo4j database with neo4j-admin (offline, much faster).

    \b
    1. `ebb neo4j-bulk prepare EXPORT DIR` writes the CSV files and prints the command;
    2. stop the server and run that `neo4j-admin database import full` (it refuses a
       database that exists);
    3. start the server and run `ebb neo4j-bulk finish DIR` (NEO4J_URI, ...): it builds Ebb's
       indexes, waits for them, and checks the counts.
    """


@neo4j_bulk.command("prepare")
@click.argument("src", type=click.Path(dir_okay=False, exists=True))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--into", "into", help="Put every memory into this namespace instead.")
@click.option(
    "--at", "at", metavar="ISO", help="The new store's scoring epoch (default: now; ISO-8601)."
)
@json_option
@handle_errors
def prepare_cmd(src: str, out_dir: str, into: str | None, at: str | None, as_json: bool) -> None:
    """Write neo4j-admin's CSV files for export SRC into the new directory OUT_DIR."""
    from ..neo4j.offline import prepare

    manifest = prepare(src, out_dir, namespace=into, clock=_clock_at(at))
    if as_json:
        emit_json(manifest)
        return
    err.print(
        f"wrote {manifest['memories']} memories, {manifest['links']} links and "
        f"{manifest['audit']} audit entries to {out_dir}. With the server stopped, run:"
    )
    out.print(shlex.join(manifest["command"]), markup=False)
    err.print(f"then start the server and run: ebb neo4j-bulk finish {shlex.quote(out_dir)}")


@neo4j_bulk.command("finish")
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True))
@json_option
@handle_errors
def finish_cmd(out_dir: str, as_json: bool) -> None:
    """After neo4j-admin and a server start: Ebb's indexes, built and checked (NEO4J_URI)."""
    from ..neo4j.offline import finish
    from ..neo4j.queries import DEFAULT_URI

    password = os.environ.get("NEO4J_PASSWORD")
    auth = (os.environ.get("NEO4J_USER") or "neo4j", password) if password is not None else None
    uri = os.environ.get("NEO4J_URI") or DEFAULT_URI
    found = finish(uri, out_dir, auth=auth, database=os.environ.get("NEO4J_DATABASE") or None)
    if as_json:
        emit_json(found)
        return
    err.print(
        f"{uri}: {found['memories']} memories, {found['links']} links, {found['audit']} audit "
        f"entries; Ebb's indexes online after {found['index_s']} s. Ready."
    )
