"""Torch intra-op threads for the learner's phases.

Sampler workers run single-threaded (one core each). While the learner
takes the outer step the workers wait, so the learner may use every core; it
goes back to its previous thread count before the workers sample again, so
that workers and learner never oversubscribe the cores. The per-task work
between sampling rounds (processing, inner steps) runs while other workers
sample (``MetaSampler.obtain_rounds``); there the learner is capped at the
cores the workers leave (:func:`learner_cores_while_sampling`).
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


_CAP = [None]  # the learner's thread cap while workers sample, or None

#: torch threads of an inner step (an adaptation), in training and at meta-test
#: alike. Inner steps run task by task while workers sample other tasks, so the
#: cores free then depend on the sampler, and torch's reductions round
#: differently with other thread counts: on a fixed count, an adapted policy
#: depends neither on the sampler nor on the machine, and meta-test adapts as
#: training does.
ADAPTATION_THREADS = 1

#: numpy's and SciPy's BLAS threads in the per-task processing (the linear
#: baselines' normal equations and least squares, original ProMP code's
#: meta_policy_search/baselines/linear_baseline.py). OpenBLAS splits a product
#: or a solve differently over different thread counts and the last bits of a
#: baseline's coefficients change with it: by default it takes every core, so
#: the baselines depended on the machine and on ``OMP_NUM_THREADS``; on one
#: thread they do not (as :data:`ADAPTATION_THREADS` for the inner steps).
#: One thread also keeps the learner off the cores of the workers it overlaps
#: with: the Gram product of a HalfCheetah task's 2,000 x 38 features took 27 ms
#: on two threads beside two busy processes, 0.14 ms on one.
PROCESSING_BLAS_THREADS = 1

#: torch threads of a sampler worker's job: a pool or Ray worker process runs on
#: one core, and the in-process backend runs its jobs on one thread too
#: (:func:`worker_threads`). The policy forward of a worker is small (one row per
#: episode of a wave): a second thread gains nothing there, and beside other busy
#: processes its OpenMP hand-offs made an in-process ML1 ``reach-v3`` meta-batch
#: three times slower (2-core development machine, two campaign runs beside it,
#: 2026-11-26: 1,283 µs an env step on two threads, 396 on one, profiled).
WORKER_THREADS = 1

_BLAS = []  # the threadpoolctl controller of the loaded BLAS libraries, made once


def _blas_controller():
    if not _BLAS:
        import scipy.linalg  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        from threadpoolctl import ThreadpoolController  # pylint: disable=import-outside-toplevel
        # SciPy's own OpenBLAS (the least squares' fallback) is loaded first, so that
        # the controller holds it beside numpy's.
        _BLAS.append(ThreadpoolController().select(user_api='blas'))
    return _BLAS[0]


@contextlib.contextmanager
def processing_blas_threads():
    """Run the block with :data:`PROCESSING_BLAS_THREADS` BLAS threads in numpy and SciPy."""
    with _blas_controller().limit(limits=PROCESSING_BLAS_THREADS):
        yield


@contextlib.contextmanager
def _torch_threads(n_threads: int):
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


def worker_threads():
    """Run the block (a sampler job) on :data:`WORKER_THREADS` torch threads, then restore them."""
    return _torch_threads(WORKER_THREADS)


@contextlib.contextmanager
def learner_cores_while_sampling(n_workers: int):
    """Cap :func:`learner_threads` at the cores ``n_workers`` workers leave (at least 1)."""
    previous = _CAP[0]
    _CAP[0] = max(1, available_cores() - n_workers)
    try:
        yield
    finally:
        _CAP[0] = previous


def learner_threads(n_threads: int):
    """Run the block with ``n_threads`` torch threads, then restore them.

    Inside :func:`learner_cores_while_sampling`, at most its cap.
    """
    if _CAP[0] is not None:
        n_threads = min(n_threads, _CAP[0])
    return _torch_threads(n_threads)
