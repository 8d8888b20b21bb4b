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
# never kills it), and the worker dies with the process that started it.
faulthandler.register(signal.SIGUSR1, all_threads=True)

from garage_promp._process import die_with_parent  # noqa: E402
from garage_promp.sampler.backends import worker_main  # noqa: E402

if __name__ == '__main__':
    die_with_parent(parent_pid=int(sys.argv[3]) if len(sys.argv) > 3 else None)
    worker_main(connection.Connection(int(sys.argv[1])), int(sys.argv[2]))
