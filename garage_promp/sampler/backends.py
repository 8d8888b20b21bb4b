"""Where :class:`~garage_promp.sampler.rollout.RolloutWorker`\\ s run.

A backend runs one :class:`~garage_promp.sampler.rollout.Job` per worker and
returns one :class:`~garage_promp.sampler.rollout.EpisodeArrays` per job, in
order: ``run(jobs) -> results``. Adding a backend is one class with ``run``
and ``close``.

* :class:`InProcessBackend` (``'local'``): the workers are objects in the main
  process, run one after the other.
* :class:`ProcessPoolBackend` (``'multiprocessing'``): persistent worker
  processes of our own, each a fresh interpreter (no state of the main
  process, e.g. torch's thread pools, is inherited). One socket pair per
  worker; per call the worker receives its job and sends back one message.
* :class:`RayBackend` (``'ray'``): one Ray actor per worker; the engine for
  more than one machine.

Errors: an exception in a worker is re-raised in the main process as a
:class:`SamplerWorkerError` that is also an instance of the original
exception's type when possible (``except ValueError`` still works); its
message names the worker, env, task, slot and step, and carries the worker's
traceback. A worker that dies (SIGKILL, segfault, out of memory) is noticed
within a second (its end of the socket closes). Either way every worker is
stopped before the error propagates, and no worker outlives the main process
(workers ignore SIGINT so that Ctrl-C is handled by the main process alone,
exit when the main process's end of their socket closes, and are stopped at
interpreter exit).
"""
import atexit
import builtins
import dataclasses
from multiprocessing import connection
import os
import pickle
import signal
import socket
import subprocess
import sys
import traceback
from typing import Any, Dict, List, Sequence
import weakref

from garage_promp.sampler.rollout import Context, EpisodeArrays, Job, RolloutWorker

import cloudpickle


class SamplerWorkerError(RuntimeError):
    """A sampler worker raised or died.

    Attributes:
        worker (int): The worker's number.
        original_type (str): Qualified name of the worker's exception type.
        worker_traceback (str): The worker's formatted traceback.
        context (str): Env, task, slot and step the worker was at.

    """

    def __init__(self, message: str, worker: int = -1,
                 original_type: str = '', worker_traceback: str = '',
                 context: str = ''):
        super().__init__(message)
        self.worker = worker
        self.original_type = original_type
        self.worker_traceback = worker_traceback
        self.context = context

    def __reduce__(self):
        return (SamplerWorkerError, (str(self), self.worker,
                                     self.original_type,
                                     self.worker_traceback, self.context))


@dataclasses.dataclass
class FailureReport:
    """What a worker sends back instead of episodes when it raises."""
    worker: int
    type_module: str
    type_name: str
    message: str
    traceback: str
    context: str


_ERROR_CLASSES: Dict[type, type] = {}


def _report(worker_id: int, exc: BaseException,
            context: Context) -> FailureReport:
    return FailureReport(worker_id,
                         type(exc).__module__,
                         type(exc).__qualname__, str(exc),
                         ''.join(traceback.format_exception(exc)),
                         context.describe())


def worker_error(report: FailureReport) -> SamplerWorkerError:
    """The exception the main process raises for a worker's report.

    It is a :class:`SamplerWorkerError` and, for built-in exception types
    (``ValueError``, ``FloatingPointError``, ...), also of that type.
    """
    message = (f'sampler worker {report.worker} raised '
               f'{report.type_name}: {report.message}\n'
               f'  while sampling {report.context}\n'
               f'  worker traceback:\n{report.traceback}')
    cls = SamplerWorkerError
    original = getattr(builtins, report.type_name, None) \
        if report.type_module == 'builtins' else None
    if isinstance(original, type) and issubclass(original, Exception) and \
            original is not SamplerWorkerError:
        if original not in _ERROR_CLASSES:
            try:
                _ERROR_CLASSES[original] = type(
                    f'SamplerWorker{original.__name__}',
                    (SamplerWorkerError, original), {})
            except TypeError:  # incompatible layouts, e.g. OSError
                _ERROR_CLASSES[original] = SamplerWorkerError
        cls = _ERROR_CLASSES[original]
    return cls(message, report.worker,
               f'{report.type_module}.{report.type_name}', report.traceback,
               report.context)


def _sample_or_report(worker: RolloutWorker, worker_id: int, job: Job):
    try:
        return worker.sample(job)
    except Exception as exc:  # pylint: disable=broad-except
        return _report(worker_id, exc, worker.context)


class InProcessBackend:
    """Workers in the main process, run one after the other.

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of workers.

    """

    def __init__(self, config: Dict[str, Any], n_workers: int):
        self._workers = [RolloutWorker(**config) for _ in range(n_workers)]

    def run(self, jobs: Sequence[Job]) -> List[EpisodeArrays]:
        """Sample each job on its worker."""
        results = []
        for worker_id, job in enumerate(jobs):
            result = _sample_or_report(self._workers[worker_id], worker_id,
                                       job)
            if isinstance(result, FailureReport):
                raise worker_error(result)
            results.append(result)
        return results

    def close(self):
        """Close the workers' envs."""
        for worker in self._workers:
            worker.close()
        self._workers = []


def worker_main(conn, worker_id: int):
    """Body of a pool worker process: start, then sample jobs until told."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch
    torch.set_num_threads(1)
    try:
        worker = RolloutWorker(**cloudpickle.loads(conn.recv_bytes()))
        conn.send_bytes(pickle.dumps(('ok', None)))
    except (EOFError, OSError):
        return
    except Exception as exc:  # pylint: disable=broad-except
        conn.send_bytes(pickle.dumps(('error',
                                      _report(worker_id, exc, Context()))))
        return
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):  # the main process is gone
            break
        job = cloudpickle.loads(message)
        if job is None:
            break
        result = _sample_or_report(worker, worker_id, job)
        status = 'error' if isinstance(result, FailureReport) else 'ok'
        try:
            conn.send_bytes(pickle.dumps((status, result), protocol=5))
        except (EOFError, OSError):
            break
    worker.close()


_LIVE_POOLS = weakref.WeakSet()


@atexit.register
def _stop_live_pools():
    for pool in list(_LIVE_POOLS):
        pool.close()


class ProcessPoolBackend:
    """Persistent worker processes of our own.

    Each worker is a fresh Python interpreter (``python -m
    garage_promp.sampler._worker_entry``, so nothing of the main process, neither
    its threads nor its ``__main__`` module, is inherited: a script without
    an ``if __name__ == '__main__'`` guard works) connected by a socket pair.
    The configuration and jobs are cloudpickled, so lambdas in env wrappers
    are fine.

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of processes.

    """

    POLL_SECONDS = 0.5

    def __init__(self, config: Dict[str, Any], n_workers: int):
        config_bytes = cloudpickle.dumps(config)
        self._procs, self._conns = [], []
        _LIVE_POOLS.add(self)
        env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
                   OPENBLAS_NUM_THREADS='1')
        try:
            for worker_id in range(n_workers):
                parent, child = socket.socketpair()
                proc = subprocess.Popen(  # pylint: disable=consider-using-with
                    [sys.executable, '-m', 'garage_promp.sampler._worker_entry',
                     str(child.fileno()), str(worker_id)],
                    pass_fds=(child.fileno(), ), env=env,
                    stdin=subprocess.DEVNULL, start_new_session=False)
                child.close()
                self._procs.append(proc)
                self._conns.append(connection.Connection(parent.detach()))
            for conn in self._conns:
                conn.send_bytes(config_bytes)
            self._gather(list(range(n_workers)), 'starting')
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> List[int]:
        """list[int]: The worker processes' ids."""
        return [proc.pid for proc in self._procs]

    def run(self, jobs: Sequence[Job]) -> List[EpisodeArrays]:
        """Send each worker its job; wait for all; raise on any failure."""
        try:
            for worker_id, job in enumerate(jobs):
                self._conns[worker_id].send_bytes(
                    cloudpickle.dumps(job, protocol=5))
            return self._gather(list(range(len(jobs))), 'sampling')
        except BaseException:
            self.close()
            raise

    def _gather(self, worker_ids: List[int], doing: str) -> list:
        """Wait for one message from each worker; a closed pipe is a death."""
        results = {}
        pending = set(worker_ids)
        while pending:
            waitables = {self._conns[w]: w for w in pending}
            ready = connection.wait(list(waitables),
                                    timeout=self.POLL_SECONDS)
            for conn in ready:
                worker_id = waitables[conn]
                try:
                    status, payload = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    raise self._death(worker_id, doing) from None
                if status == 'error':
                    raise worker_error(payload)
                results[worker_id] = payload
                pending.discard(worker_id)
            for worker_id in list(pending):
                if self._procs[worker_id].poll() is not None and \
                        not self._conns[worker_id].poll():
                    raise self._death(worker_id, doing)
        return [results[w] for w in worker_ids]

    def _death(self, worker_id: int, doing: str) -> SamplerWorkerError:
        proc = self._procs[worker_id]
        try:
            code = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        how = f'exit code {code}'
        if code is not None and code < 0:
            try:
                how = f'signal {signal.Signals(-code).name}'
            except ValueError:
                how = f'signal {-code}'
        return SamplerWorkerError(
            f'sampler worker {worker_id} (pid {proc.pid}) died ({how}) while '
            f'{doing}; if it was killed for memory, lower n_workers or '
            'envs_per_task', worker_id)

    def close(self):
        """Stop every worker (politely, then by force) and join them."""
        _LIVE_POOLS.discard(self)
        for conn in self._conns:
            try:
                conn.send_bytes(cloudpickle.dumps(None))
            except (OSError, ValueError):
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []


#: Ray workers import garage before anything of ours; this hook applies the
#: compat layer first in every Ray worker process (see _garage_compat).
RAY_RUNTIME_ENV = {
    'worker_process_setup_hook': 'garage_promp._garage_compat.apply'
}


def init_ray(**kwargs):
    """``ray.init`` with garage_promp's worker setup hook, if Ray is not running.

    If you start Ray yourself, pass ``runtime_env=RAY_RUNTIME_ENV``; to join a
    running cluster, ``init_ray(address='auto')`` (or the head's address).
    """
    import ray
    if not ray.is_initialized():
        kwargs.setdefault('runtime_env', RAY_RUNTIME_ENV)
        kwargs.setdefault('log_to_driver', False)
        kwargs.setdefault('include_dashboard', False)
        ray.init(**kwargs)


class _RayWorker:
    """The body of a Ray actor: a RolloutWorker that reports failures."""

    def __init__(self, worker_id: int, config_bytes: bytes):
        import torch
        torch.set_num_threads(1)
        self._worker_id = worker_id
        self._worker = RolloutWorker(**cloudpickle.loads(config_bytes))

    def sample(self, job_bytes: bytes):
        return _sample_or_report(self._worker, self._worker_id,
                                 cloudpickle.loads(job_bytes))

    def pid(self) -> int:
        return os.getpid()


class RayBackend:
    """One Ray actor per worker (starts Ray if it is not running).

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of actors.

    """

    def __init__(self, config: Dict[str, Any], n_workers: int):
        import ray
        init_ray()
        actor = ray.remote(num_cpus=1)(_RayWorker)
        config_bytes = cloudpickle.dumps(config)
        self._actors = [actor.remote(w, config_bytes) for w in range(n_workers)]

    def run(self, jobs: Sequence[Job]) -> List[EpisodeArrays]:
        """Sample each job on its actor; raise on any failure."""
        import ray
        try:
            refs = [self._actors[w].sample.remote(cloudpickle.dumps(job))
                    for w, job in enumerate(jobs)]
            try:
                results = ray.get(refs)
            except ray.exceptions.RayActorError as exc:
                raise SamplerWorkerError(
                    f'a Ray sampler actor died while sampling: {exc}') from exc
            for result in results:
                if isinstance(result, FailureReport):
                    raise worker_error(result)
            return results
        except BaseException:
            self.close()
            raise

    def close(self):
        """Kill the actors."""
        import ray
        if ray.is_initialized():
            for actor in self._actors:
                ray.kill(actor)
        self._actors = []


BACKENDS = {
    'local': InProcessBackend,
    'multiprocessing': ProcessPoolBackend,
    'ray': RayBackend,
}
