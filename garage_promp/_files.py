"""Files the package writes and checks: one home for the atomic write and for naming
what a path is.

Every file a run must never find half-written (snapshots, ``variant.json``,
``progress.csv`` rewritten by a resume, a meta-test table) goes through
:func:`replace_atomically`; every message about a path that should be a plain file
names what it is with :func:`file_kind`.
"""
import contextlib
import errno
import os
import secrets
import stat


def replace_atomically(path: str, write, binary: bool = False):
    """Write ``path`` anew through ``write(file)``: into a new temporary file beside it,
    synced to disk, then renamed over it, so that a kill leaves the old file or the new one
    whole; where the write fails (a full disk) the temporary file is removed and the error
    raised.

    The file is text (UTF-8, newlines as written) or, with ``binary``, bytes. The
    temporary name is short whatever the file's (``.<name>.<pid>.<random>.tmp``, the
    name cut to 100 characters: a name near the file system's limit that ``path`` itself
    fits still works) and never an existing file's; the file keeps its permissions; a
    ``path`` that is a symbolic link has the file it names replaced, the link kept. The
    temporary files of ``path`` that killed processes left are removed.
    """
    target = os.path.realpath(path)
    directory, name = os.path.split(target)
    while True:
        tmp = os.path.join(directory, f'.{name[:100]}.{os.getpid()}.{secrets.token_hex(4)}.tmp')
        try:  # (created with the umask's permissions, as open() would)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        try:
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass
        with (open(fd, 'wb') if binary else
              open(fd, 'w', newline='', encoding='utf-8')) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _remove_leftovers(directory, name)


def _remove_leftovers(directory: str, name: str) -> None:
    """Remove the temporary files of writes of ``name`` that a killed process left behind
    (each has its own name, so none is written over: a run killed at every snapshot would
    pile them up); a living process's are its own, kept."""
    prefix = f'.{name[:100]}.'
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if not entry.name.startswith(prefix):
                continue
            parts = entry.name[len(prefix):].split('.')  # pid, random, 'tmp'
            if not (len(parts) == 3 and parts[2] == 'tmp' and parts[0].isdigit()):
                continue
            try:
                os.kill(int(parts[0]), 0)
            except ProcessLookupError:  # (PermissionError: another user's living process)
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            except (OSError, OverflowError):
                continue


def file_kind(path: str) -> str:
    """What ``path`` is, in words, for a message about a file that should be a plain one
    (``'a named pipe'``, ``'a symbolic link to a device'``, ``'a symbolic link loop'``...)."""
    def kind(mode):
        for test, word in ((stat.S_ISREG, 'a file'), (stat.S_ISDIR, 'a directory'),
                           (stat.S_ISFIFO, 'a named pipe'), (stat.S_ISSOCK, 'a socket'),
                           (stat.S_ISCHR, 'a device'), (stat.S_ISBLK, 'a device')):
            if test(mode):
                return word
        return 'not a regular file'

    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        return f'unreadable: {error.strerror}'
    if not stat.S_ISLNK(mode):
        return kind(mode)
    try:
        return f'a symbolic link to {kind(os.stat(path).st_mode)}'
    except OSError as error:
        return ('a symbolic link loop' if error.errno == errno.ELOOP
                else 'a symbolic link to nothing')
