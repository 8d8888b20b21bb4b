"""Torch intra-op threads for the learner's phases.

Sampler workers run single-threaded (one core each). While the learner
processes a batch, takes the inner steps between sampling rounds, or takes
the outer step, the workers wait, so the learner may use every core; it goes
back to its previous thread count before the workers sample again, so that
workers and learner never oversubscribe the cores.
"""
import contextlib
import os

import torch


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not ``nproc``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def learner_threads(n_threads: int):
    """Run the block with ``n_threads`` torch threads, then restore them."""
    previous = torch.get_num_threads()
    if n_threads == previous:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
