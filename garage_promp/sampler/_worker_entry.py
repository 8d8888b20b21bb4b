"""``python -m garage_promp.sampler._worker_entry FD WORKER_ID [PARENT_PID]``: a pool worker.

A separate module so that the worker's classes are those of
:mod:`garage_promp.sampler.backends` (not ``__main__``'s copies), which the
main process can unpickle. A worker gets SIGKILL when the process that
started it dies (:func:`garage_promp._process.die_with_parent`), busy,
stopped or stuck alike.
"""
import faulthandler
from multiprocessing import connection
import signal
import sys

# First, before the heavy imports: SIGUSR1 prints this worker's stacks (and
# never kills it, as its default action would), and the worker dies with the
# process that started it. Once the package is imported, the handler is
# garage_promp._process's (the same dump, the rules of which are told there).
signal.signal(signal.SIGUSR1,
              lambda signum, frame: faulthandler.dump_traceback(all_threads=True))

from garage_promp._process import die_with_parent, dump_stacks_on_usr1  # noqa: E402
from garage_promp.sampler.backends import worker_main  # noqa: E402

if __name__ == '__main__':
    dump_stacks_on_usr1()
    die_with_parent(parent_pid=int(sys.argv[3]) if len(sys.argv) > 3 else None)
    worker_main(connection.Connection(int(sys.argv[1])), int(sys.argv[2]))
