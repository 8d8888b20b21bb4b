"""Child processes that do not outlive their parent (Linux's parent-death signal), and
``kill -USR1`` stack dumps that reach the sampler's workers too."""
import ctypes
import faulthandler
import os
import signal
import sys

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


def dump_stacks_on_usr1(worker_pids=None) -> None:
    """``kill -USR1 PID`` prints every thread's stack, then every worker's.

    In the main process (``launchers/train.py``): its own threads' stacks go to
    stderr, and the signal is passed on to each live sampler worker
    (``worker_pids()``, a callable), which prints its stacks the same way
    (``garage_promp/sampler/_worker_entry.py`` registers this first thing, before its imports):
    what a run that seems stuck is doing, on every side.

    The dump is taken in a Python-level handler, with the GIL held, so that no
    other thread is changing its frames while they are read. faulthandler's own
    C-level handler (``faulthandler.register``) reads them without the GIL; with
    a thread running Python beside the main one (tensorboardX's event writer, the
    workers' heartbeat) that read now and then meets a half-built frame and
    crashes the process (SIGSEGV in the dump). The price: a main thread stuck in
    native code that holds the GIL prints nothing until it returns; such a
    sampler worker is named, with what it was doing, by the pool's
    ``worker_timeout`` supervision instead.
    """
    def dump(signum, frame):
        del signum, frame
        sys.stderr.write(f'\nkill -USR1: the stacks of process {os.getpid()}\n')
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        for pid in (worker_pids() if worker_pids else []):
            try:
                os.kill(pid, signal.SIGUSR1)
            except OSError:
                pass

    signal.signal(signal.SIGUSR1, dump)
    # A pool worker starts with SIGUSR1 blocked (``backends._usr1_blocked``): a dump
    # asked for before this point is delivered now.
    if hasattr(signal, 'pthread_sigmask'):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
