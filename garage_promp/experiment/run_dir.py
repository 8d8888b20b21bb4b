"""A run directory: one writer at a time, and its files read back.

**One writer.**
Two processes training into one directory (two ``--resume DIR`` at once, or a
campaign runner racing a run it has lost track of) would append the same
epochs twice to ``progress.csv`` and overwrite each other's snapshots.
:func:`owned_run_dir` takes an exclusive ``fcntl.flock`` on ``DIR/.lock``
for as long as the run lasts and refuses a second writer, naming the holder's
pid; the kernel drops the lock when the holder exits, however it exits, so a
killed run never leaves a stale lock behind.

**Its files read back.** :func:`read_progress` and :func:`read_variant` are the one
way the launchers, the resume and the campaign tools read ``progress.csv`` and
``variant.json``. A run killed while dowel was writing a row leaves that row cut
short: only newline-terminated lines are rows (a cut number would otherwise read as a
smaller, valid one). Anything else that is not what ``launchers/train.py`` writes (a
row with too few or too many fields, a ``variant.json`` that is not a JSON object,
bytes that are not text) raises :class:`DamagedRunFile`, naming the file and the line.

**A disk that refuses a write.** A full disk (or quota, or a read-only remount) met by
the run's logs ends the run with :class:`RunWriteError`, naming the directory, what is
kept and how to continue (:func:`run_files_written`); the loggers' own retries as the
process ends (dowel's and tensorboardX's finalizers) do not print the same error again.
"""
import contextlib
import csv
import errno
import fcntl
import io
import json
import math
import os
import pathlib
import stat
import sys
import threading
from typing import List

from garage_promp._files import file_kind
from garage_promp._garage_compat import SnapshotWriteError
from garage_promp.validation import check_run_dir, shown

LOCK_NAME = '.lock'


#: The errors of a disk that refuses a write, whatever file is written.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


class RunWriteError(OSError):
    """The run's files could not be written (a full disk, a quota, a read-only remount);
    the snapshots already saved are kept. A run ends on it with one ``Error:`` line."""

    def __str__(self):
        return self.strerror or super().__str__()


def _disk_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_ERRNOS


@contextlib.contextmanager
def run_files_written(log_dir: str):
    """Train inside: a disk that refuses one of the run's writes ends it with
    :class:`RunWriteError` naming ``log_dir`` (garage's trainer meets it in dowel's
    ``dump_all``, as a bare ``OSError`` and a traceback); a snapshot that could not be
    written keeps its own message (``SnapshotWriteError``, which names the file).

    The loggers are then closed, and what they raise again as the process ends (dowel's
    ``LogOutput.__del__``, tensorboardX's ``atexit`` flush: the same full disk) is not
    printed: the one ``Error:`` line has said it. A logging thread that meets the full
    disk first (tensorboardX's event writer) is one ``Warning:`` line, not a traceback.
    A sampler worker's traceback goes to the run's ``debug.log``
    (:func:`worker_tracebacks_logged`).
    """
    previous = threading.excepthook

    def thread_hook(args):
        if _disk_error(args.exc_value):
            print(f'Warning: a logging thread ({args.thread.name if args.thread else "?"}) '
                  f'stopped: {args.exc_value}', file=sys.stderr)
            return
        previous(args)

    threading.excepthook = thread_hook
    try:
        with worker_tracebacks_logged(log_dir):
            yield
    except OSError as error:
        if not _disk_error(error):
            raise
        _close_loggers_quietly()
        if isinstance(error, SnapshotWriteError):  # (it names the file and what is kept)
            raise
        what = f'{error.strerror or error}' + (f': {error.filename}' if error.filename else '')
        remedy = ('make room, then' if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
                  else 'once the disk takes writes again,')
        kept = (f'the snapshots saved so far are kept: {remedy} --resume {log_dir} continues '
                'from the newest' if _holds_a_snapshot(log_dir) else
                'no snapshot was saved yet, so the run starts again once the disk takes writes')
        raise RunWriteError(error.errno, f"the run's logs in {log_dir} could not be written "
                                         f'({what}); {kept}') from error
    finally:
        threading.excepthook = previous


@contextlib.contextmanager
def worker_tracebacks_logged(log_dir: str):
    """A sampler worker's error raised inside (``SamplerWorkerError``, which carries the
    worker's traceback) has its whole message appended to the run's ``debug.log``, and the
    file noted on it (``traceback_file``): the launchers print what the worker raised and
    where (its ``summary``) and name the file, rather than a traceback. Where the file
    cannot be written the message keeps the traceback: nothing is lost."""
    try:
        yield
    except Exception as error:
        full = getattr(error, 'full_message', None)
        if getattr(error, 'worker_traceback', None) and full and not getattr(
                error, 'traceback_file', None):
            path = os.path.join(log_dir, 'debug.log')
            if _append_to_regular_file(path, f'\n{full}\n'):
                error.traceback_file = path
        raise


def _append_to_regular_file(path: str, text: str) -> bool:
    """Append ``text`` to ``path`` if it is a regular file or missing (then made), not
    through a link, without blocking on a named pipe; whether it was written whole."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = text.encode('utf-8', errors='replace')
        return os.write(fd, data) == len(data)
    except OSError:
        return False
    finally:
        os.close(fd)


def _holds_a_snapshot(log_dir: str) -> bool:
    try:
        check_run_dir(log_dir)
    except (ValueError, OSError):
        return False
    return True


def _close_loggers_quietly():
    """Close dowel's outputs, ignoring the full disk's errors, and keep the interpreter from
    printing those errors again from finalizers (:func:`run_files_written`)."""
    from dowel import logger  # pylint: disable=import-outside-toplevel
    for output in list(logger._outputs):  # pylint: disable=protected-access
        try:
            output.close()
        except OSError:
            pass
    logger.remove_all()
    if getattr(sys.unraisablehook, 'quiet_about_the_disk', False):
        return
    previous = sys.unraisablehook

    def unraisable_hook(unraisable):
        if not _disk_error(unraisable.exc_value):
            previous(unraisable)

    unraisable_hook.quiet_about_the_disk = True
    sys.unraisablehook = unraisable_hook


class RunDirBusy(ValueError):
    """Another live process is writing to this run directory."""


@contextlib.contextmanager
def owned_run_dir(path: str, record_pid: bool = True):
    """Hold ``path``'s lock for the body; raise :class:`RunDirBusy` if another process has it.

    ``record_pid``: write this process's id into the lock file (what tools such as
    ``benchmarks/paper.py`` read to tell a run that is writing there); False for a
    check that the directory is free, by a process that will not write there.
    """
    os.makedirs(path, exist_ok=True)
    lock_path = os.path.join(path, LOCK_NAME)
    def not_a_lock():
        return DamagedRunFile(f'{lock_path} is not a file ({file_kind(lock_path)}): not the '
                              'lock a run writes; move it away')

    try:  # never through a link: writing the pid there would overwrite what it points to
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise not_a_lock() from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a device
        os.close(fd)
        raise not_a_lock()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode(errors='replace').strip() or '?'
            raise RunDirBusy(f'{path} is in use by another run (pid {holder}): one writer at '
                             'a time; wait for it to end or stop it first') from None
        if record_pid:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def lock_holder(path) -> int | None:
    """The pid of the live process holding ``path``'s lock (:func:`owned_run_dir`), or None.

    Read from the kernel's table of locks (``/proc/locks``), not taken: a check never
    makes a run starting at that moment find its directory busy, and a pid left in the
    lock file by a run that has ended (and since reused by another process) is not
    mistaken for a writer. Only the pid the lock file names is looked for, on the lock
    file's own inode. None where there is no lock file (or no ``/proc/locks``).
    """
    lock_path = os.path.join(path, LOCK_NAME)
    try:
        info = os.lstat(lock_path)
        if not stat.S_ISREG(info.st_mode):
            return None
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            pid = int(os.pread(fd, 32, 0) or b'0')
        finally:
            os.close(fd)
        with open('/proc/locks', encoding='ascii', errors='replace') as table:
            locks = table.read().splitlines()
    except (OSError, ValueError):
        return None
    for line in locks:  # "1: FLOCK  ADVISORY  WRITE 2637 fe:00:2147498 0 EOF"
        fields = line.split()
        if (len(fields) > 5 and fields[1] == 'FLOCK' and fields[4] == str(pid)
                and fields[5].rsplit(':', 1)[-1] == str(info.st_ino)):
            return pid
    return None


class DamagedRunFile(ValueError):
    """A run directory's ``progress.csv`` or ``variant.json`` is not what a run writes."""


def complete_lines(path) -> List[str]:
    """The newline-terminated lines of a text file (a last line cut short is left out).

    Raises:
        DamagedRunFile: If the file is not UTF-8 text.

    """
    try:
        with open(path, newline='', encoding='utf-8') as f:
            lines = f.readlines()
    except UnicodeDecodeError as error:
        raise DamagedRunFile(f'{path} is not a text file ({error})') from None
    if lines and not lines[-1].endswith('\n'):
        lines.pop()  # a row being written when the run was killed
    if lines and lines[0].startswith('\ufeff'):  # (its header's first name would differ)
        raise DamagedRunFile(f'{path} starts with a byte-order mark (as some editors save '
                             'text): not as a run writes it; remove the mark (its first 3 bytes)')
    for number, line in enumerate(lines, 1):
        # A run ends its lines with '\r\n' (or '\n' where rewritten); a carriage return
        # elsewhere would split rows (and a resumed run glue its rows onto them).
        if not line.endswith('\n'):  # (read with newline='': a lone '\r' ends a line too)
            raise DamagedRunFile(f'{path}, line {number}: a carriage return that ends no '
                                 "line: not as a run writes its log")
    return lines


def read_progress(run_dir) -> List[dict]:
    """The complete rows of ``run_dir/progress.csv`` (empty if there is none).

    Every field a run logs is a number (or blank, where a column was added later); the
    env-step count a whole number, at least 0 and never decreasing; returns finite or NaN.

    Raises:
        DamagedRunFile: Naming the file and line of a row whose fields do not match
            the header, or the column of a field that is not what a run logs
            (``progress.csv`` being something other than a file, too).

    """
    path = pathlib.Path(run_dir) / 'progress.csv'
    if not path.is_file():
        if path.exists() or path.is_symlink():
            raise DamagedRunFile(f'{path} is not a file: not the log of a run (move it away)')
        return []
    lines = complete_lines(path)
    if not lines:
        return []
    reader = csv.reader(io.StringIO(''.join(lines)))
    header = next(reader)
    rows, steps = [], 0.
    for row in reader:
        if len(row) != len(header):
            raise DamagedRunFile(f'{path}, line {reader.line_num}: {len(row)} fields where its '
                                 f'header has {len(header)}: not a row of a run\'s log')
        fields = dict(zip(header, row))
        steps = _check_fields(path, reader.line_num, fields, steps)
        rows.append(fields)
    return rows


def _check_fields(path: pathlib.Path, line: int, fields: dict, steps: float) -> float:
    """Refuse a ``progress.csv`` row that a run cannot have logged; returns its env steps
    (``steps``, the row before's, where it has none)."""
    for key, value in fields.items():
        if value == '':
            continue
        try:
            number = float(value)
        except ValueError:
            raise DamagedRunFile(f'{path}, line {line}: {key} is {value!r}, not a number: not '
                                 'a row of a run\'s log') from None
        if key == 'TotalEnvSteps':
            if not (number >= steps and number.is_integer() and math.isfinite(number)):
                raise DamagedRunFile(
                    f'{path}, line {line}: TotalEnvSteps is {value!r}, not a whole number of '
                    f'env steps at least the row before\'s ({steps:,.0f}): not a run\'s log')
            steps = number
        elif 'Return' in key and math.isinf(number):
            raise DamagedRunFile(f'{path}, line {line}: {key} is {value!r}; a run logs finite '
                                 'returns (or NaN where none): not a row of a run\'s log')
    return steps


#: The largest variant.json read (a run's options are a few hundred bytes).
MAX_VARIANT_BYTES = 1 << 20


def read_variant(run_dir) -> dict:
    """``run_dir/variant.json`` (the run's options), or ``{}`` if there is none.

    Raises:
        DamagedRunFile: If it is not a JSON object.

    """
    path = pathlib.Path(run_dir) / 'variant.json'
    if not path.is_file():
        if os.path.lexists(path):  # a directory, a dangling link: not "none"
            raise DamagedRunFile(f'{path} is not a file: not the options of a run (move it away)')
        return {}
    if path.stat().st_size > MAX_VARIANT_BYTES:  # a run writes a few hundred bytes
        raise DamagedRunFile(f'{path} holds {path.stat().st_size:,} bytes, not the options of a '
                             f'run (at most {MAX_VARIANT_BYTES:,})')
    try:
        variant = json.loads(path.read_text(encoding='utf-8'))
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        raise DamagedRunFile(f'{path} is not valid JSON ({error})') from None
    except RecursionError:
        raise DamagedRunFile(f'{path} is not the options of a run (JSON nested too deeply '
                             'to read)') from None
    if not isinstance(variant, dict):
        raise DamagedRunFile(f'{path} holds a JSON {type(variant).__name__}, not the object of '
                             'options a run writes')
    overrides = variant.get('overrides')
    if overrides is not None and not isinstance(overrides, dict):
        # (what --set gave, by name: every reader looks its entries up by key)
        raise DamagedRunFile(f'{path}: its overrides are {shown(overrides)}, not the object '
                             'of constructor arguments by name a run records')
    return variant


def variant_mismatch(run_dir, want: dict) -> str | None:
    """Why ``run_dir``'s ``variant.json`` is not that of the run with the options ``want``
    (entries by name, e.g. ``algo``, ``env``, ``seed``; None for one the run must not
    record), or None if it is: a runner's check before it counts, continues or reports
    what a directory holds as that run's.

    Raises:
        DamagedRunFile: If ``variant.json`` is not a JSON object.

    """
    if not (pathlib.Path(run_dir) / 'variant.json').is_file():
        return 'it has no variant.json (a run writes one before its first epoch)'
    variant = read_variant(run_dir)
    have = {key: variant.get(key) for key in want}
    if have != want:
        return f"its variant.json is not this run's ({have}, not {want})"
    return None


def env_steps_done(run_dir) -> int:
    """``TotalEnvSteps`` of the last logged epoch of a run (0 if none).

    Raises:
        DamagedRunFile: If ``progress.csv`` has no such column or no number in it.

    """
    rows = read_progress(run_dir)
    if not rows:
        return 0
    path = pathlib.Path(run_dir) / 'progress.csv'
    if 'TotalEnvSteps' not in rows[-1]:
        raise DamagedRunFile(f'{path} has no TotalEnvSteps column: not the log of a training run')
    try:
        return int(float(rows[-1]['TotalEnvSteps']))
    except ValueError:
        raise DamagedRunFile(f'{path}: TotalEnvSteps of its last row is '
                             f'{rows[-1]["TotalEnvSteps"]!r}, not a number') from None
