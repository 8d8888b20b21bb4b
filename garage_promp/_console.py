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


def ensure_std_streams() -> None:
    """Give a launcher standard streams it can always write to.

    A stream closed by the caller (``python train.py >&-``) is ``None`` in Python and
    its file descriptor free: the console's ``isatty``/``flush`` failed in the first
    epoch, after the run directory was made, and the next file opened (a log) would
    take the descriptor, so that MuJoCo's or garage's console output landed in it. A
    closed stream is reopened on ``os.devnull`` at its own descriptor. Text that the
    console's encoding cannot hold (a path of non-UTF-8 bytes, any text under an ASCII
    locale) is written escaped rather than ending the run.
    """
    import os  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    for fd, name, mode in ((0, 'stdin', 'r'), (1, 'stdout', 'w'), (2, 'stderr', 'w')):
        try:
            os.fstat(fd)
        except OSError:  # closed: the lowest free descriptor is this one, in this order
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, closefd=False,  # pylint: disable=consider-using-with
                                    encoding='utf-8'))
        if getattr(sys, name) is None:  # (a descriptor open but not to Python)
            setattr(sys, name, open(os.devnull, mode,  # pylint: disable=consider-using-with
                                    encoding='utf-8'))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors='backslashreplace')
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's capture)
            pass
