"""``python garage_promp/sampler/_worker_entry.py FD WORKER_ID [PARENT_PID]``: a pool worker.

Run as a file rather than with ``-m``: ``-m`` imports the package (torch, garage,
MuJoCo: seconds) before the module's first line, and two things must come before
that. The worker gets SIGKILL when the process that started it dies
(:func:`garage_promp._process.die_with_parent`), busy, stopped or stuck alike, even
while it is still importing; and ``kill -USR1`` prints its stacks rather than
ending it (SIGUSR1's default action). ``garage_promp/_process.py`` needs only the
standard library, so it is loaded from its file for that, without the package.

The worker's classes are then those of :mod:`garage_promp.sampler.backends` (this
script defines none), which the main process can unpickle.
"""
import importlib.util
import json
import os
import sys

#: The environment variable that carries the main process's ``sys.path`` (JSON).
SYS_PATH_VARIABLE = 'GARAGE_PROMP_WORKER_SYS_PATH'


def _process_module():
    """``garage_promp/_process.py`` loaded on its own (not through the package)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        '_process.py')
    spec = importlib.util.spec_from_file_location('_garage_promp_process_early', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    early = _process_module()
    early.dump_stacks_on_usr1()
    early.die_with_parent(parent_pid=int(argv[3]) if len(argv) > 3 else None)
    # The main process's import path, as multiprocessing's spawn gives its children: a
    # module beside the researcher's script, or put on ``sys.path`` by it, is found
    # when the configuration (its env, its policy) is unpickled here.
    parent_path = os.environ.pop(SYS_PATH_VARIABLE, None)
    if parent_path is not None:
        sys.path[:] = json.loads(parent_path)
    # Else what ``-m`` would have put first on the path (the working directory), not
    # this script's directory, whose module names must not shadow others (neither is
    # there under PYTHONSAFEPATH / -P: then the path is left as it is).
    # (Python puts the script's directory there with links resolved: compared so.)
    elif sys.path and os.path.realpath(sys.path[0] or '.') == os.path.dirname(
            os.path.realpath(__file__)):
        sys.path[0] = os.getcwd()
    from multiprocessing import connection  # pylint: disable=import-outside-toplevel

    from garage_promp.sampler.backends import worker_main  # pylint: disable=import-outside-toplevel
    worker_main(connection.Connection(int(argv[1])), int(argv[2]))


if __name__ == '__main__':
    main(sys.argv)
