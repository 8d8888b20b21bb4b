"""A Ray this process started ends with it, however it ends (SIGKILL included).

``ray.init`` without an address starts Ray on this machine: its GCS server and raylet die
with the process that started them (Linux's parent-death signal), but the raylet's agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) only notice their raylet is gone a
minute or more later; until then they outlive the run. :func:`watch` starts a small
process, in a session of its own (a Ctrl-C to the terminal's process group does not reach
it) and not a child of the run (it detaches, so it is none of the run's workers), that notes
the Ray processes every second and, once the run has ended (the pipe it reads from the run
closes, whatever the run died of) or the Ray has (its GCS server and raylet gone: the run
died, or called ``ray.shutdown``), ends those still running and exits. A process is ended
only if it is the one noted (its pid and start time), not one that took its pid.

Run as ``python .../_ray_reaper.py PID...`` (the Ray processes to watch, with their
descendants) by :func:`watch`, as a script: it imports the standard library and psutil
only (a tenth of a second, some 20 MB), not the package and torch.
"""
import os
import select
import subprocess
import sys
from typing import Any, Dict, Iterable, List

#: Seconds between two notes of the Ray processes.
POLL_SECONDS = 1.0

#: The write ends of the watchers' pipes, raw descriptors (no file object to be reported
#: unclosed at exit): open while this process runs, closed by the kernel when it ends.
_PIPES: List[int] = []


def watch(pids: Iterable[int]) -> subprocess.Popen | None:
    """Start the watcher of the Ray processes ``pids`` (and their descendants); None where
    there is nothing to watch."""
    pids = [int(pid) for pid in pids]
    if not pids:
        return None
    read_end, write_end = os.pipe()  # (both close-on-exec)
    try:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *map(str, pids)],
            stdin=read_end, stdout=subprocess.DEVNULL, start_new_session=True,
            close_fds=True)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    proc.wait()  # the first process forks the watcher and exits (below)
    _PIPES.append(write_end)
    return proc


def local_ray_pids() -> List[int]:
    """The processes of a Ray that ``ray.init`` started here (the head it made: GCS server,
    raylet, the monitors); none where it joined a running Ray (an address, ``ray start``)."""
    try:
        import ray  # pylint: disable=import-outside-toplevel
        node = ray._private.worker._global_node  # pylint: disable=protected-access
        if node is None or not getattr(node, 'head', False):
            return []
        return [info.process.pid for infos in node.all_processes.values() for info in infos
                if getattr(info, 'process', None) is not None]
    except Exception:  # pylint: disable=broad-except  # (a Ray whose internals moved)
        return []


def _note(roots: List, noted: Dict[int, Any]) -> None:
    """Add the live roots and their descendants (one scan of the process table) to
    ``noted``, as ``psutil.Process`` objects: each stands for the process it was made for
    (psutil tells a pid taken by another process from it), so only those are ever ended."""
    import psutil  # pylint: disable=import-outside-toplevel
    children: Dict[int, List[int]] = {}
    for proc in psutil.process_iter(['ppid']):
        children.setdefault(proc.info['ppid'], []).append(proc.pid)
    live = [root for root in roots if root.is_running()]
    for root in live:
        noted.setdefault(root.pid, root)
    todo = [root.pid for root in live]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in noted:
                try:
                    noted[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
                todo.append(pid)


def _alive(roots: List) -> bool:
    import psutil  # pylint: disable=import-outside-toplevel
    for root in roots:
        try:
            if root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            pass
    return False


def _end(noted: Dict[int, Any]) -> None:
    import psutil  # pylint: disable=import-outside-toplevel
    for proc in noted.values():
        try:
            if proc.is_running():
                proc.kill()
        except psutil.Error:
            pass


def main(pids: List[int]) -> None:
    import psutil  # pylint: disable=import-outside-toplevel
    roots = []
    for pid in pids:  # (alive: the run that passed them has not reaped them)
        try:
            roots.append(psutil.Process(pid))
        except psutil.Error:
            pass
    noted: Dict[int, Any] = {}
    stdin = sys.stdin.fileno()
    while True:
        _note(roots, noted)
        if not _alive(roots):  # Ray is down (the run died, or shut it down)
            break
        ready, _, _ = select.select([stdin], [], [], POLL_SECONDS)
        if ready and not os.read(stdin, 4096):  # the run's end of the pipe closed
            break
    _note(roots, noted)
    _end(noted)


if __name__ == '__main__':
    if os.fork():  # detached: the run waits for this first process only
        os._exit(0)  # pylint: disable=protected-access
    main([int(arg) for arg in sys.argv[1:]])
