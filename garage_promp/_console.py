"""The running epoch's phase, for a console that shows it.

The algorithms call :func:`phase` at each phase of an epoch (sampling round
k of K+1, the update, the meta-test). It goes to the listener that
:class:`garage_promp.experiment.progress.ProgressOutput` installs, and is a
no-op without one (e.g. under garage's own console output).
"""
from typing import Callable

_listener: Callable[[str], None] | None = None


def set_listener(listener: Callable[[str], None] | None) -> None:
    """Send phases to ``listener`` (None: drop them)."""
    global _listener  # pylint: disable=global-statement
    _listener = listener


def listener() -> Callable[[str], None] | None:
    """The current listener, if any."""
    return _listener


def phase(what: str) -> None:
    """Report what the running epoch is doing."""
    if _listener is not None:
        _listener(what)
