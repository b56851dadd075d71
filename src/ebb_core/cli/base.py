"""What every command shares: the lazy console and engine, error handling, JSON output, the
store options and the per-invocation :class:`Ctx`."""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..clock import Clock, FixedClock, as_utc
from ..errors import (
    EbbError,
    InvalidInput,
    NoStore,
    NotFound,
    StorageError,
    StoreFull,
    StoreLocked,
)

# Exit codes (documented in docs/cli.md, "Exit codes").
EXIT_ERROR = 1  # any other Ebb error (e.g. a backend that is not installed)
EXIT_INPUT = 2  # bad input or an unknown id
EXIT_LOCKED = 3  # another process holds the embedded store
EXIT_STORAGE = 4  # the store cannot be read or written (`ebb doctor`, `ebb repair`)
EXIT_FULL = 5  # the disk is full: nothing of the failed call was stored
EXIT_NO_STORE = 6  # a read command on a path with no store (none is created)
EXIT_INTERRUPTED = 130  # Ctrl-C: what was in progress was rolled back

F = TypeVar("F", bound=Callable[..., Any])


class _Lazy:
    """A class (or an instance of one) imported on first use.

    Keeps `ebb --help`, and commands that never print a table or never open a store, from
    loading rich, pydantic or the storage engine: each name below behaves as the real one
    (calls, attributes) once touched.
    """

    def __init__(self, module: str, name: str, *args: Any, **kwargs: Any) -> None:
        self._where = (module, name)
        self._args: tuple[Any, ...] | None = (args, kwargs) if args or kwargs else None
        self._target: Any = None

    def _get(self) -> Any:
        if self._target is None:
            target = getattr(importlib.import_module(self._where[0]), self._where[1])
            if self._args is not None:
                args, kwargs = self._args
                target = target(*args, **kwargs)
            self._target = target
        return self._target

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._get(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._get()(*args, **kwargs)


if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as Table

    from ..engine import Brain as Brain

    out: Console
    err: Console
else:
    Brain = _Lazy("ebb_core.engine", "Brain")
    Table = _Lazy("rich.table", "Table")
    out = _Lazy("rich.console", "Console", highlight=False, soft_wrap=True)
    err = _Lazy("rich.console", "Console", stderr=True, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True)
    from .. import kuzu_store

    if kuzu_store.abandoned_engines():
        # Kùzu failed to append to its WAL (a disk filled up under it): destroying that engine
        # at interpreter exit would abort the process. Everything committed is on disk.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def handle_errors(fn: F) -> F:
    """Turn Ebb errors (and anything unexpected) into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except StoreLocked as exc:
            _fail(str(exc), EXIT_LOCKED)
        except (NotFound, InvalidInput) as exc:
            _fail(str(exc), EXIT_INPUT)
        except StoreFull as exc:
            _fail(str(exc), EXIT_FULL)
        except StorageError as exc:
            _fail(str(exc), EXIT_STORAGE)
        except NoStore as exc:
            _fail(str(exc), EXIT_NO_STORE)
        except EbbError as exc:
            _fail(str(exc), EXIT_ERROR)
        except KeyboardInterrupt:
            _fail("interrupted: the change in progress was rolled back", EXIT_INTERRUPTED)
        except BrokenPipeError:  # e.g. `ebb recall ... | head`
            raise SystemExit(0) from None
        except RuntimeError as exc:  # the engine's own errors are RuntimeErrors
            if os.environ.get("EBB_DEBUG"):
                raise
            _fail(
                f"the store failed: {exc}. Check it with `ebb doctor`; `ebb repair` fixes what "
                "it can without losing a committed memory",
                EXIT_STORAGE,
            )
        except Exception as exc:
            if os.environ.get("EBB_DEBUG"):
                raise
            _fail(f"unexpected {type(exc).__name__}: {exc} (set EBB_DEBUG=1 for details)", 1)

    return wrapper  # type: ignore[return-value]


def _dump(value: Any) -> Any:
    # A result type: a pydantic model, or its plain twin in a one-shot process (model_plain).
    if not isinstance(value, type) and callable(getattr(value, "model_dump", None)):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(_dump(value), indent=2, ensure_ascii=False))


class Ctx:
    #: ``-n/--namespace`` was typed on this command line (not taken from EBB_NAMESPACE).
    namespace_from_flag: bool = False

    def __init__(self, db: str | None, backend: str | None, namespace: str | None) -> None:
        self.db, self.backend, self.namespace = db, backend, namespace

    @contextmanager
    def brain(
        self,
        clock: Clock | None = None,
        *,
        create: bool = True,
        embedder: Any = None,
        only_reads: bool = False,
    ) -> Iterator[Brain]:
        """The Brain for this command; ``clock``: run as if at another time; ``create=False``
        (read commands): never create a store, raise :class:`NoStore` where there is none;
        ``only_reads``: the command writes nothing, so a clean embedded store is opened
        read-only and left untouched on disk (see ``Brain.open``)."""
        # A running `ebb mcp` keeps the embedded store open between calls: the open asks it to
        # let go (it does after its current call) and says on stderr what it is waiting for.
        brain = Brain.open(
            self.db,
            backend=self.backend,
            namespace=self.namespace,
            wait=15.0,
            create=create,
            on_wait=_waiting,
            clock=clock,
            embedder=embedder,
            only_reads=only_reads,
        )
        try:
            yield brain
        finally:
            brain.close()


def _waiting(message: str) -> None:
    click.echo(f"ebb: {message}", err=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def store_options(fn: F) -> F:
    """``--db``, ``--backend`` and ``-n/--namespace``, with their environment variables: the
    same three on ``ebb`` itself, ``ebb mcp`` and ``ebb ui``."""
    fn = click.option(
        "--namespace", "-n", envvar="EBB_NAMESPACE", help="Namespace (EBB_NAMESPACE)."
    )(fn)
    fn = click.option(
        "--backend", envvar="EBB_BACKEND", help="kuzu (default) or neo4j (EBB_BACKEND)."
    )(fn)
    return click.option(
        "--db", envvar="EBB_DB_PATH", help="Embedded store file (EBB_DB_PATH, ./ebb_db)."
    )(fn)


def _when(value: str | None, option: str = "--at") -> datetime | None:
    """An ISO-8601 time from the command line (``2026-03-02``, ``2026-03-02T09:30:00Z``; no
    zone means UTC)."""
    if value is None:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):  # Python 3.10 does not read "Z"
        text = text[:-1] + "+00:00"
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        raise InvalidInput(
            f"{option} {value!r} is not an ISO-8601 time (e.g. 2026-03-02 or 2026-03-02T09:30Z)",
            field=option.lstrip("-"),
        ) from None


def _clock_at(value: str | None, option: str = "--at") -> FixedClock | None:
    """A clock stopped at ``value``, for a command run as if at that time."""
    when = _when(value, option)
    return None if when is None else FixedClock(when)


at_option = click.option(
    "--at", "at", metavar="ISO", help="Do it as of this time (backdating; ISO-8601, UTC default)."
)


pass_ctx = click.make_pass_decorator(Ctx)


def _short(text: str, n: int = 80) -> str:
    """The text on one line, cut to ``n`` characters, for a table cell: brackets stay as typed
    (``[[roadmap]]`` is not rich markup)."""
    from rich.markup import escape

    text = " ".join(text.split())
    return escape(text if len(text) <= n else text[: n - 1] + "…")
