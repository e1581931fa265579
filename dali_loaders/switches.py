"""Placement switches read from the environment, so that every loader made in the process sees
them (check-gpu's, the probes', a user's); `overridden` sets one for a while, as the GPU checks
and probes do to make and time both sides. Each switch's name, default and meaning live where it
is read (loader/build.py, ops/chain_tail.py)."""
import contextlib
import os
from typing import Iterator, Sequence


def value(name: str, default: str, allowed: Sequence[str]) -> str:
    """The environment's `name`, or `default`; a value outside `allowed` is refused by name."""
    given = os.environ.get(name, default).strip()
    if given not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {given!r}")
    return given


@contextlib.contextmanager
def overridden(name: str, setting: str) -> Iterator[None]:
    """The environment's `name` is `setting` meanwhile, then as it was (unset if it was)."""
    saved = os.environ.get(name)
    os.environ[name] = setting
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
