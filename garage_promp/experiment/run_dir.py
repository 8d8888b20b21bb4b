"""One writer per run directory: an advisory lock held for the run's life.

Two processes training into one directory (two ``--resume DIR`` at once, or a
campaign runner racing a run it has lost track of) would append the same
epochs twice to ``progress.csv`` and overwrite each other's snapshots.
:func:`owned_run_dir` takes an exclusive ``fcntl.flock`` on ``DIR/.lock``
for as long as the run lasts and refuses a second writer, naming the holder's
pid; the kernel drops the lock when the holder exits, however it exits, so a
killed run never leaves a stale lock behind.
"""
import contextlib
import errno
import fcntl
import os

LOCK_NAME = '.lock'


class RunDirBusy(ValueError):
    """Another live process is writing to this run directory."""


@contextlib.contextmanager
def owned_run_dir(path: str):
    """Hold ``path``'s lock for the body; raise :class:`RunDirBusy` if another process has it."""
    os.makedirs(path, exist_ok=True)
    lock_path = os.path.join(path, LOCK_NAME)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode(errors='replace').strip() or '?'
            raise RunDirBusy(f'{path} is in use by another run (pid {holder}): one writer at '
                             'a time; wait for it to end or stop it first') from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock
