"""The running epoch's phase, for a console that shows it.

The algorithms call :func:`phase` at each phase of an epoch (sampling round
k of K+1, the update, the meta-test). It goes to the listener that
:class:`garage_promp.experiment.progress.ProgressOutput` installs, and is a
no-op without one (e.g. under garage's own console output).
"""
import io
import os
import stat
import sys
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
    for name in ('stdout', 'stderr'):
        stream = getattr(sys, name)
        if _is_pipe(stream) and not stream.closed:
            stream.flush()
            setattr(sys, name, io.TextIOWrapper(
                io.BufferedWriter(_ReaderMayLeave(stream.fileno())), encoding=stream.encoding,
                line_buffering=True, write_through=name == 'stderr'))
            stream = getattr(sys, name)
        try:
            stream.reconfigure(errors='backslashreplace')
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's capture)
            pass


def _is_pipe(stream) -> bool:
    """Whether ``stream`` writes to a pipe or socket (``| head``), whose reader may leave."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, ValueError, OSError):  # no descriptor (a test's capture)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _ReaderMayLeave(io.RawIOBase):
    """A pipe's writing end that drops what it cannot write once its reader has left.

    ``train.py | head -1``: the console's next line raised ``BrokenPipeError`` and ended
    the run in its first epoch (``meta_test.py``'s before its table was written). The
    console is for the eye; the run's files are what it is for, so it goes on.
    """

    def __init__(self, fd: int):
        super().__init__()
        self._fd, self._reader_left = fd, False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    def write(self, data) -> int:
        if not self._reader_left:
            try:
                return os.write(self._fd, data)
            except (BrokenPipeError, ConnectionResetError):
                self._reader_left = True
        return len(data)
