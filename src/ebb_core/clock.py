"""Injectable time. Everything in Ebb asks a :class:`Clock` for "now", never ``datetime.now``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything with a ``now()`` returning an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class FixedClock:
    """A clock that only moves when told to: for tests, the demo and benchmarks.

    >>> c = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    >>> c.advance(days=2).now().day
    3
    """

    def __init__(self, start: datetime) -> None:
        self._now = as_utc(start)

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> FixedClock:
        self._now = as_utc(when)
        return self

    def advance(self, **delta: float) -> FixedClock:
        self._now = self._now + timedelta(**delta)
        return self


def as_utc(when: datetime) -> datetime:
    """Return ``when`` as an aware UTC datetime (naive values are taken to be UTC)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def to_us(when: datetime) -> int:
    """Microseconds since the Unix epoch: how stores keep time, exactly."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - _EPOCH) // _ONE_US


def from_us(us: int) -> datetime:
    """Inverse of :func:`to_us`."""
    return _EPOCH + timedelta(microseconds=us)
