"""Child processes that do not outlive their parent (Linux's parent-death signal)."""
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL, parent_pid: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies.

    Called in a child (a sampler worker, a benchmark's training run): it then
    ends with its parent however the parent ends, SIGKILL included, and
    whatever the child is doing (busy in native code, stopped: SIGKILL ends
    a stopped process too). ``parent_pid``, if given, closes the race of a
    parent that died before the call: the child then sends itself ``sig``.

    Returns:
        bool: Whether the signal was set up (False off Linux / glibc).

    """
    try:
        libc = ctypes.CDLL('libc.so.6', use_errno=True)
    except OSError:
        return False
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True
