"""``python -m garage_promp.sampler._worker_entry FD WORKER_ID``: a pool worker.

A separate module so that the worker's classes are those of
:mod:`garage_promp.sampler.backends` (not ``__main__``'s copies), which the
main process can unpickle.
"""
from multiprocessing import connection
import sys

from garage_promp.sampler.backends import worker_main

if __name__ == '__main__':
    worker_main(connection.Connection(int(sys.argv[1])), int(sys.argv[2]))
