"""Where :class:`~garage_promp.sampler.rollout.RolloutWorker`\\ s run.

A backend runs jobs (:class:`~garage_promp.sampler.rollout.Job`) on its workers,
one at a time per worker, and hands back one
:class:`~garage_promp.sampler.rollout.EpisodeArrays` per job: ``submit(worker,
job)`` starts a job on an idle worker, ``collect()`` waits for whichever
submitted job finishes first and returns ``(worker, result)``. ``run(jobs)``
(:class:`Backend`) runs one job per worker and returns the results in order.
Adding a backend is one :class:`Backend` subclass with ``submit``,
``collect`` and ``close``.

* :class:`InProcessBackend` (``'local'``): the workers are objects in the main
  process, run one after the other, watched by a thread (:class:`_InProcessWatch`).
* :class:`ProcessPoolBackend` (``'multiprocessing'``): persistent worker
  processes of our own, each a fresh interpreter (no state of the main
  process, e.g. torch's thread pools, is inherited). One socket pair per
  worker; per call the worker receives its job and sends back one message,
  read whole by a reader thread of the main process's (:class:`_Inbox`), so
  the main process never waits inside a half-sent message.
* :class:`RayBackend` (``'ray'``): one Ray actor per worker; the engine for
  more than one machine.

Errors: an exception in a worker is re-raised in the main process as a
:class:`SamplerWorkerError` that is also an instance of the original
exception's type when possible (``except ValueError`` still works); its
message names the worker, env, task, slot and step, and carries the worker's
traceback. A pool worker that dies (SIGKILL, segfault, out of memory) is
noticed within a second (its end of the socket closes), a Ray actor's death
when its call fails; a pool worker, Ray actor or in-process job that makes no
progress for ``worker_timeout`` seconds (a Ray actor from its creation: one
Ray cannot place ends the start-up) ends the run, naming it. Either way every
worker is stopped (Ray actors killed) before the error propagates. No pool
worker outlives the main process (pool workers ignore SIGINT so that Ctrl-C is
handled by the main process alone, exit when the main process's end of their
socket closes, and are stopped at interpreter exit); a Ray started by the
sampler ends with the main process (Ray's own fate sharing), a cluster's
actors are Ray's to clean up.
"""
import atexit
import builtins
import collections
import contextlib
import dataclasses
import inspect
import json
from multiprocessing import connection
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Sequence, Tuple
import warnings
import weakref

from garage_promp._console import phase
from garage_promp._threads import WORKER_THREADS, worker_threads
from garage_promp.sampler import _ray_reaper
from garage_promp.sampler._worker_entry import SYS_PATH_VARIABLE
from garage_promp.sampler.options import check_sampler_options
from garage_promp.sampler.rollout import Context, EpisodeArrays, Job, RolloutWorker
from garage_promp.validation import MAX_COUNT, MAX_WORKERS

import cloudpickle

#: Where a worker's error message gives way to its traceback.
_TRACEBACK_HEADER = '\n  worker traceback:\n'


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

    def __str__(self) -> str:
        # The message as written also for the subclasses made for built-in types, whose
        # own __str__ would come next (a KeyError's quotes its argument: the whole message
        # and traceback on one line, with every newline escaped).
        return self.full_message

    @property
    def full_message(self) -> str:
        """The message as written, traceback included."""
        return (self.args[0] if len(self.args) == 1 and isinstance(self.args[0], str)
                else super().__str__())

    @property
    def summary(self) -> str:
        """The message without the worker's traceback: what it raised, and where."""
        return self.full_message.split(_TRACEBACK_HEADER, 1)[0]

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
               f'  while sampling {report.context}'
               f'{_TRACEBACK_HEADER}{report.traceback}')
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


def check_backend_arguments(config: Any, n_workers: Any, worker_timeout: Any,
                            max_workers: int = MAX_WORKERS
                            ) -> Tuple[Dict[str, Any], int, float | None]:
    """A backend's arguments, checked before it makes or spawns a worker.

    ``config`` must be ``RolloutWorker``'s arguments by name (each option
    checked as ``RolloutWorker`` checks it, so a pool worker cannot be
    spawned only to fail), ``n_workers`` an int in [1, max_workers] and
    ``worker_timeout`` None or seconds > 0.

    Returns:
        tuple: ``(config, n_workers, worker_timeout)`` in canonical form.

    Raises:
        TypeError: If ``config`` is not a dict that fits ``RolloutWorker``
            (naming the missing or unknown argument).
        ValueError: Naming a bad option and its value.

    """
    if not isinstance(config, dict):
        raise TypeError(f'config must be a dict of RolloutWorker arguments, got {config!r}')
    try:
        inspect.signature(RolloutWorker).bind(**config)
    except TypeError as error:
        raise TypeError(f'config does not fit RolloutWorker: {error} (config keys: '
                        f'{sorted(map(str, config))})') from None
    options = {k: v for k, v in config.items() if k not in ('policy', 'env')}
    checked = check_sampler_options(max_workers=max_workers, n_workers=n_workers,
                                    worker_timeout=worker_timeout, **options)
    n_workers = checked.pop('n_workers')
    worker_timeout = checked.pop('worker_timeout')
    return dict(config, **checked), n_workers, worker_timeout


class Backend:
    """What every backend provides; ``run`` is built on ``submit``/``collect``."""

    #: The most workers it takes: MAX_WORKERS, the most worth running on one machine.
    max_workers = MAX_WORKERS

    def submit(self, worker_id: int, job: Job):
        """Start ``job`` on worker ``worker_id``, which must be idle."""
        raise NotImplementedError

    def collect(self) -> Tuple[int, EpisodeArrays]:
        """Wait for the next submitted job to finish: ``(worker, result)``.

        Raises:
            SamplerWorkerError: If a worker raised or died (all workers are
                stopped first).

        """
        raise NotImplementedError

    def close(self):
        """Stop every worker."""
        raise NotImplementedError

    def run(self, jobs: Sequence[Job]) -> List[EpisodeArrays]:
        """Job i on worker i; the results in the jobs' order."""
        for worker_id, job in enumerate(jobs):
            self.submit(worker_id, job)
        results = {}
        while len(results) < len(jobs):
            worker_id, result = self.collect()
            results[worker_id] = result
        return [results[w] for w in range(len(jobs))]


class InProcessBackend(Backend):
    """Workers in the main process, run one after the other.

    ``submit`` queues a job; ``collect`` runs the oldest queued job, watched
    by :class:`_InProcessWatch` when called from the main thread.

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of workers.
        worker_timeout (float or None): Seconds a job may make no progress
            (no env step or reset) before it is interrupted and the run ends
            naming the worker, env, task slot, episode and step; None: wait
            forever.

    Raises:
        TypeError, ValueError: For bad arguments (:func:`check_backend_arguments`).

    """

    def __init__(self, config: Dict[str, Any], n_workers: int, worker_timeout=None):
        config, n_workers, worker_timeout = check_backend_arguments(
            config, n_workers, worker_timeout, self.max_workers)
        self._workers = [RolloutWorker(**config) for _ in range(n_workers)]
        self._queue = collections.deque()
        self._timeout = worker_timeout

    def submit(self, worker_id: int, job: Job):
        """Queue ``job`` for worker ``worker_id``."""
        self._queue.append((worker_id, job))

    def collect(self) -> Tuple[int, EpisodeArrays]:
        """Run the oldest queued job."""
        worker_id, job = self._queue.popleft()
        worker = self._workers[worker_id]
        try:
            # On one thread, as a pool worker's job (garage_promp._threads.WORKER_THREADS);
            # restored outside the watch, whose end may raise _Stuck.
            with worker_threads(), _InProcessWatch(worker, worker_id, self._timeout):
                result = _sample_or_report(worker, worker_id, job)
        except _Stuck as stuck:
            self.close()
            raise SamplerWorkerError(str(stuck), worker_id) from None
        if isinstance(result, FailureReport):
            self.close()
            raise worker_error(result)
        return worker_id, result

    def close(self):
        """Close the workers' envs."""
        for worker in self._workers:
            worker.close()
        self._workers = []
        self._queue.clear()


#: Seconds between a busy pool worker's progress reports.
HEARTBEAT_SECONDS = 0.5
#: After this many seconds without progress from a busy worker, the console says so.
STALL_NOTICE_SECONDS = 30.
#: Default ``worker_timeout``: generous for the slowest real env step (a
#: Meta-World or Humanoid step takes milliseconds; a reset under a second).
DEFAULT_WORKER_TIMEOUT = 600.


class _SuspensionClock:
    """Seconds this process was not running (stopped by SIGSTOP or Ctrl-Z, the machine
    suspended), for the watchdog to leave out of a worker's silence: it could not hear
    the worker meanwhile, and a stopped process group's workers stood still too.

    A daemon thread looks at the clock every TICK_SECONDS; a look that comes more than
    LATE_SECONDS after the previous one counts the delay as time the process was not
    running. :meth:`lost` looks too, so a stop that ended a moment ago counts before the
    thread wakes. Time the main thread spends working (a learner's step between two
    waits) is not lost: the thread runs beside it. (Deciding from the gap between two
    checks, as this once did, took every long wait without a check (fast jobs, each
    collected within a poll) for a stop, and so forgave a worker stopped afterwards for
    as long as the run had gone on.)
    """

    TICK_SECONDS = 0.25
    LATE_SECONDS = 2.

    def __init__(self):
        self._lock = threading.Lock()
        self._lost = 0.
        self._seen = time.monotonic()
        self._pid = None

    def _look(self) -> float:
        with self._lock:
            now = time.monotonic()
            late = now - self._seen - self.TICK_SECONDS
            if late > self.LATE_SECONDS:
                self._lost += late
            self._seen = now
            return self._lost

    def _tick(self):
        while True:
            time.sleep(self.TICK_SECONDS)
            self._look()

    @staticmethod
    def now() -> float:
        """The monotonic clock the watchdog measures silences with."""
        return time.monotonic()

    def lost(self) -> float:
        """Seconds lost so far (a running total: subtract an earlier reading)."""
        if self._pid != os.getpid():  # first use, or a forked child (no thread of ours)
            with self._lock:
                if self._pid != os.getpid():
                    self._pid, self._seen = os.getpid(), time.monotonic()
                    threading.Thread(target=self._tick, daemon=True,
                                     name='garage_promp-suspension-clock').start()
        return self._look()


#: This process's :class:`_SuspensionClock` (one thread, shared by every watchdog).
SUSPENSION_CLOCK = _SuspensionClock()


class _Watchdog:
    """Busy workers' progress: the run ends when one stands still too long.

    A backend tells it when a worker starts a job (:meth:`started`) and each
    progress report it hears (:meth:`note`: the worker's step counter (env steps, resets
    and env copies made),
    ``RolloutWorker.progress``, and where it is), and calls :meth:`check`
    between waits. A busy worker whose counter has not moved for ``timeout``
    seconds (or that reports nothing: stopped, or stuck in native code) ends
    the run with a ``SamplerWorkerError`` naming it, its env, task slot,
    episode and step; after STALL_NOTICE_SECONDS the console says which
    worker the run waits for. Time this process itself was not running
    (:class:`_SuspensionClock`) is not counted against a worker.

    Args:
        timeout (float or None): ``worker_timeout``; None: wait forever.
        clock (_SuspensionClock): Where the time and the lost time are read (tests
            give their own).

    """

    def __init__(self, timeout: float | None, clock: '_SuspensionClock | None' = None):
        self.timeout = timeout
        self._clock = SUSPENSION_CLOCK if clock is None else clock
        # worker -> (its step counter, where, when it last moved, lost time then)
        self._progress = {}

    def started(self, worker_id: int, where: str = 'its job start'):
        """Worker ``worker_id`` has just been given a job (or started: ``where``)."""
        self._progress[worker_id] = (None, where, self._clock.now(), self._clock.lost())

    def note(self, worker_id: int, count: int, where: str):
        """A progress report: the worker's step counter and where it is."""
        last = self._progress.get(worker_id)
        if last is None or last[0] != count:
            self._progress[worker_id] = (count, where, self._clock.now(), self._clock.lost())
        else:
            self._progress[worker_id] = (count, where) + last[2:]

    def check(self, busy, describe, at_least: float = 0.):
        """Say which of the ``busy`` workers the run waits for; raise if one is stuck.

        Args:
            busy (iterable[int]): The workers with a job.
            describe (callable): ``worker -> str`` naming it, e.g.
                ``'sampler worker 1 (pid 123)'``.
            at_least (float): Seconds these workers get however short ``timeout``
                is (a worker's start-up, which reports no progress).

        Raises:
            SamplerWorkerError: If a busy worker has made no progress for
                ``timeout`` seconds.

        """
        lost = self._clock.lost()
        now = self._clock.now()
        for worker_id in sorted(busy):
            _, where, since, lost_then = self._progress.get(worker_id, (None, '?', now, lost))
            idle = now - since - (lost - lost_then)
            if idle >= STALL_NOTICE_SECONDS:
                phase(f'waiting for {describe(worker_id)}, no progress for {idle:.0f} s at '
                      f'{where}')
            if self.timeout is not None and idle > max(self.timeout, at_least):
                limit = f'worker_timeout={self.timeout:g}' + (
                    f', at least {at_least:g} s here' if at_least > self.timeout else '')
                raise SamplerWorkerError(
                    f'{describe(worker_id)} made no progress for {idle:.0f} s '
                    f'({limit}) at {where}: an env stuck (in its making, reset or '
                    'step), or a stopped worker (SIGSTOP); the run ends and closes every '
                    'worker', worker_id)


#: Seconds a pool worker or Ray actor may take to start (its imports and env
#: construction, which report no progress) however short ``worker_timeout`` is.
STARTUP_SECONDS = 120.
#: Where a starting worker is, in the watchdog's messages.
STARTUP_WHERE = 'its start-up (imports, env construction)'
#: Where a Ray actor not yet placed on a node is.
RAY_PLACEMENT_WHERE = ('its placement and process start (Ray waits for a free CPU of the '
                       'cluster)')


#: Seconds the in-process watchdog waits, after interrupting a stuck job, for
#: the interruption to take effect; a job stuck in native code that never
#: returns to Python then ends the process (exit status 70, EX_SOFTWARE).
INTERRUPT_GRACE_SECONDS = 10.
#: The signal that interrupts a stuck in-process job (sent to the main thread only).
INTERRUPT_SIGNAL = signal.SIGUSR2


class _Stuck(BaseException):
    """Raised in the main thread, inside a stuck env call, by :class:`_InProcessWatch`.

    A ``BaseException``, so that the sampler's and envs' ``except Exception``
    do not catch it on its way out.
    """


class _InProcessWatch:
    """The stuck-worker watchdog for a job that runs in the main thread.

    A thread reads the worker's step counter (``RolloutWorker.progress``) every
    ``HEARTBEAT_SECONDS`` into a :class:`_Watchdog`, so the rules are the pool's: after
    STALL_NOTICE_SECONDS without progress the console says so, and after
    ``timeout`` seconds the thread sends ``INTERRUPT_SIGNAL`` to the main
    thread, whose handler (installed for the job only) raises :class:`_Stuck`
    in the stuck call: an env looping in Python or blocked in a system call
    (sleep, a socket) is interrupted there, and the backend raises a
    ``SamplerWorkerError`` naming the worker, env, task slot, episode and step.
    A call stuck in native code that never returns to Python cannot be
    interrupted: after INTERRUPT_GRACE_SECONDS more, the thread prints the same
    message and every thread's stack, and ends the process (exit status 70);
    snapshots are written between epochs, never while sampling, so none is
    lost. A signal of the same number from elsewhere goes to the handler that
    was there before.

    Off (a no-op) with no timeout, or outside the main thread (Python runs
    signal handlers there only).
    """

    def __init__(self, worker: RolloutWorker, worker_id: int, timeout: float | None):
        self._worker = worker
        self._worker_id = worker_id
        self._timeout = timeout
        self._done = None
        self._thread = None
        self._message = None
        self._previous = None
        self._sent = False  # the watch's signal is on its way to the handler
        self._delivered = False  # ... and has raised _Stuck in the main thread

    def __enter__(self):
        if self._timeout is None or threading.current_thread() is not threading.main_thread():
            return self
        self._done = threading.Event()
        self._previous = signal.signal(INTERRUPT_SIGNAL, self._interrupt)
        self._thread = threading.Thread(target=self._watch, args=(threading.get_ident(), ),
                                        name='garage_promp-watchdog', daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if self._done is None:
            return False
        try:
            self._done.set()
            self._thread.join()
            # A signal the watch sent just as the job ended: let it arrive (a sleep is a
            # system call, after which Python runs pending handlers) while the handler
            # that ignores it for a finished job is still installed.
            deadline = time.monotonic() + 1.
            while self._sent and time.monotonic() < deadline:
                time.sleep(0.001)
        finally:
            self._done.set()
            signal.signal(INTERRUPT_SIGNAL, self._previous)
        return False

    def _interrupt(self, signum, frame):
        if self._sent:  # the watch's own signal
            self._sent = False
            if not self._done.is_set():
                self._delivered = True
                raise _Stuck(self._message)
            return  # the job ended meanwhile: nothing to interrupt
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:  # what the signal would have done: end the process
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _watch(self, main_thread: int):
        poll = min(HEARTBEAT_SECONDS, self._timeout / 4)
        watchdog = _Watchdog(self._timeout)  # the pool's rules, notice and message
        watchdog.started(self._worker_id)
        name = f'sampler worker {self._worker_id} (in process, pid {os.getpid()})'
        while not self._done.wait(poll):
            watchdog.note(self._worker_id, self._worker.progress, _where(self._worker))
            try:
                watchdog.check([self._worker_id], lambda _: name)
            except SamplerWorkerError as stuck:
                self._message = f'{stuck}; the job was interrupted'
                self._sent = True
                signal.pthread_kill(main_thread, INTERRUPT_SIGNAL)
                if not self._done.wait(INTERRUPT_GRACE_SECONDS):
                    self._give_up()
                return

    def _give_up(self):
        """The stuck call did not return to Python: say why, show the stacks, end."""
        import faulthandler  # pylint: disable=import-outside-toplevel
        why = ('the interruption was raised but the job did not end (caught inside the env?)'
               if self._delivered else 'it did not return to Python (native code)')
        try:
            sys.stderr.write(f'\nError: {self._message}; {why} within '
                             f'{INTERRUPT_GRACE_SECONDS:g} s, so the process '
                             'ends. Every thread\'s stack:\n')
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        finally:
            os._exit(70)  # pylint: disable=protected-access


def _where(worker: RolloutWorker) -> str:
    """Where ``worker`` is, for a progress report; read from another thread."""
    try:
        return worker.context.describe()
    except Exception:  # pylint: disable=broad-except  (a user env's odd task)
        return '?'


def _heartbeat(conn, lock, state):
    """A pool worker's reporter thread: while a job runs, its progress every beat.

    It reports the worker's step counter (``RolloutWorker.progress``) and where
    the worker is, so the main process can tell a worker that is stuck (the
    counter stands still: an env hung in ``step``) from one that is slow, and
    hears nothing at all from a worker that is stopped or holds the GIL.
    """
    while True:
        time.sleep(HEARTBEAT_SECONDS)
        with lock:
            worker = state.get('busy')
            if worker is None:
                continue
            try:
                conn.send_bytes(pickle.dumps(('progress', (worker.progress, _where(worker)))))
            except (EOFError, OSError, ValueError):
                return


def worker_main(conn, worker_id: int):
    """Body of a pool worker process: start, then sample jobs until told."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch
    torch.set_num_threads(WORKER_THREADS)
    try:
        worker = RolloutWorker(**cloudpickle.loads(conn.recv_bytes()))
        conn.send_bytes(pickle.dumps(('ok', None)))
    except (EOFError, OSError):
        return
    except Exception as exc:  # pylint: disable=broad-except
        conn.send_bytes(pickle.dumps(('error',
                                      _report(worker_id, exc, Context()))))
        return
    lock, state = threading.Lock(), {}
    threading.Thread(target=_heartbeat, args=(conn, lock, state), daemon=True).start()
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):  # the main process is gone
            break
        job = cloudpickle.loads(message)
        if job is None:
            break
        with lock:
            state['busy'] = worker
        result = _sample_or_report(worker, worker_id, job)
        status = 'error' if isinstance(result, FailureReport) else 'ok'
        with lock:  # no progress report after the result
            state['busy'] = None
            try:
                conn.send_bytes(pickle.dumps((status, result), protocol=5))
            except (EOFError, OSError):
                break
    worker.close()


class _Inbox:
    """Every pool worker's messages, each read whole by a thread of its worker's own.

    The main process waits on this queue, never inside a message: a worker stopped
    (SIGSTOP) or stuck halfway through sending its result leaves only its reader
    thread waiting for the rest, and the main process's wait still ends at its poll
    interval, where the watchdog names the worker. (A ``recv_bytes`` in the main
    thread, once ``connection.wait`` had seen a message's first bytes, waited for the
    rest for ever.) The readers also keep every socket drained while the main process
    works between waits, so no worker blocks on a full socket buffer meanwhile.

    A reader ends at its socket's end (the worker's death, or :meth:`close`) and then
    queues ``None`` for its worker, after every message it read.
    """

    def __init__(self):
        self._queue = queue.Queue()
        self._held = collections.defaultdict(collections.deque)  # not yet asked for
        self._readers = {}

    def watch(self, worker_id: int, conn: connection.Connection):
        """Start reading worker ``worker_id``'s messages from ``conn``."""
        reader = threading.Thread(target=self._read, args=(worker_id, conn), daemon=True,
                                  name=f'garage_promp-reader-{worker_id}')
        reader.start()
        self._readers[worker_id] = reader

    def _read(self, worker_id: int, conn: connection.Connection):
        try:
            while True:
                self._queue.put((worker_id, conn.recv_bytes()))
        except Exception:  # pylint: disable=broad-except  (EOF, a closed or broken socket)
            self._queue.put((worker_id, None))

    def get(self, pending, timeout: float):
        """The next message of one of the ``pending`` workers, within ``timeout`` seconds.

        Returns:
            tuple or None: ``(worker, message bytes)``, ``(worker, None)`` at the end
            of that worker's socket, or None if none came in time. Messages of other
            workers are kept, in order, for when they are asked for.

        """
        for worker_id in sorted(pending):
            if self._held[worker_id]:
                return worker_id, self._held[worker_id].popleft()
        deadline = time.monotonic() + timeout
        while True:
            try:
                worker_id, message = self._queue.get(
                    timeout=max(0., deadline - time.monotonic()))
            except queue.Empty:
                return None
            if worker_id in pending:
                return worker_id, message
            self._held[worker_id].append(message)

    def ended(self, worker_id: int, timeout: float) -> bool:
        """Whether worker ``worker_id``'s reader has reached its socket's end (waiting up
        to ``timeout`` seconds): then everything it sent is queued, and its end."""
        reader = self._readers.get(worker_id)
        if reader is None:
            return True
        reader.join(timeout)
        return not reader.is_alive()

    def close(self, conns, timeout: float = 2.):
        """End every reader (their sockets shut down) and close the sockets.

        A socket is shut down before it is closed: a reader blocked in it then sees its
        end at once, rather than reading from a descriptor number closed under it (and
        perhaps reused).
        """
        for conn in conns:
            try:
                with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout
        for reader in self._readers.values():
            reader.join(max(0., deadline - time.monotonic()))
        for conn in conns:
            conn.close()
        self._readers.clear()


_LIVE_POOLS = weakref.WeakSet()


def _send_quietly(conn, payload: bytes):
    """Send ``payload``; a worker that died meanwhile is the pool's to name (its wait
    sees the process end), not this thread's."""
    try:
        conn.send_bytes(payload)
    except (OSError, ValueError):
        pass


#: The pool worker's script, run as a file (not ``-m``, which would import the whole
#: package before the script's first line: see the script).
WORKER_ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_worker_entry.py')


def live_worker_pids() -> List[int]:
    """The pids of every live pool worker of this process (for ``kill -USR1`` dumps),
    those still starting included (they are spawned with SIGUSR1 blocked:
    :func:`_usr1_blocked`)."""
    return [pid for pool in list(_LIVE_POOLS) for pid in pool.pids]


def _import_path() -> str:
    """This process's ``sys.path`` for a worker, as JSON: relative entries made absolute
    (the worker starts in this directory; ``''`` is it), so that a module beside the
    researcher's script, or put on the path by it, imports in the worker as here (as
    multiprocessing's spawn passes ``sys.path`` to its children)."""
    return json.dumps([os.path.abspath(entry) for entry in sys.path if isinstance(entry, str)])


@contextlib.contextmanager
def _usr1_blocked():
    """SIGUSR1 blocked in this thread while a worker is spawned.

    The worker inherits the signal mask through ``exec``: a ``kill -USR1`` that reaches
    it before its handler is set (the interpreter's first tens of milliseconds) stays
    pending instead of ending it (the signal's default action), and is delivered, as a
    dump of its stacks, once ``_worker_entry.py`` has set the handler and unblocked it
    (:func:`garage_promp._process.dump_stacks_on_usr1`). A signal that reaches this
    process meanwhile is delivered when the block ends.
    """
    if not hasattr(signal, 'pthread_sigmask'):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@atexit.register
def _stop_live_pools():
    for pool in list(_LIVE_POOLS):
        pool.close()


class ProcessPoolBackend(Backend):
    """Persistent worker processes of our own.

    Each worker is a fresh Python interpreter (``python
    garage_promp/sampler/_worker_entry.py``, so nothing of the main process, neither
    its threads nor its ``__main__`` module, is inherited: a script without
    an ``if __name__ == '__main__'`` guard works) connected by a socket pair.
    The configuration and jobs are cloudpickled, so lambdas in env wrappers
    are fine.

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of processes.
        worker_timeout (float or None): Seconds a busy worker may make no
            progress before the run ends naming it; None: wait forever.

    Raises:
        TypeError, ValueError: For bad arguments (:func:`check_backend_arguments`),
            before any process is spawned.

    """

    POLL_SECONDS = 0.5

    def __init__(self, config: Dict[str, Any], n_workers: int,
                 worker_timeout: float | None = None):
        config, n_workers, worker_timeout = check_backend_arguments(
            config, n_workers, worker_timeout, self.max_workers)
        config_bytes = cloudpickle.dumps(config)
        self._procs, self._conns = [], []
        self._busy = set()
        self._starting = set()  # spawned, not reported in: watched with STARTUP_SECONDS
        self._watchdog = _Watchdog(worker_timeout)
        self._inbox = _Inbox()
        _LIVE_POOLS.add(self)
        env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
                   OPENBLAS_NUM_THREADS='1', **{SYS_PATH_VARIABLE: _import_path()})
        try:
            for worker_id in range(n_workers):
                parent, child = socket.socketpair()
                with _usr1_blocked():
                    proc = subprocess.Popen(  # pylint: disable=consider-using-with
                        [sys.executable, WORKER_ENTRY,
                         str(child.fileno()), str(worker_id), str(os.getpid())],
                        pass_fds=(child.fileno(), ), env=env,
                        stdin=subprocess.DEVNULL, start_new_session=False)
                child.close()
                self._procs.append(proc)
                self._conns.append(connection.Connection(parent.detach()))
                self._inbox.watch(worker_id, self._conns[-1])
                self._starting.add(worker_id)
                self._watchdog.started(worker_id, STARTUP_WHERE)
            # Each worker's configuration from a thread of its own: a configuration larger
            # than the socket's buffer (a Meta-World policy) blocks its sender until the
            # worker reads it, after its imports; the wait below watches the start-up.
            for conn in self._conns:
                threading.Thread(target=_send_quietly, args=(conn, config_bytes), daemon=True,
                                 name='garage_promp-config').start()
            self._gather(list(range(n_workers)), 'starting')
            self._starting.clear()
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> List[int]:
        """list[int]: The worker processes' ids."""
        return [proc.pid for proc in self._procs]

    def submit(self, worker_id: int, job: Job):
        """Send worker ``worker_id`` its job.

        From a thread of its own, as the configuration: a job larger than the socket's
        buffer (a policy's parameters for many tasks) blocks its sender until the worker
        reads it, and a worker stopped while idle never does; the worker is busy from
        here on, so the wait for its result watches it (no progress past
        ``worker_timeout`` ends the run naming it; a death is seen as its process ends).
        """
        try:
            if self._procs[worker_id].poll() is not None:  # it died while idle
                raise self._death(worker_id, 'receiving its job')
            threading.Thread(target=_send_quietly,
                             args=(self._conns[worker_id], cloudpickle.dumps(job, protocol=5)),
                             daemon=True, name='garage_promp-job').start()
            self._busy.add(worker_id)
            self._watchdog.started(worker_id)
        except BaseException:
            self.close()
            raise

    def collect(self) -> Tuple[int, EpisodeArrays]:
        """The first busy worker's result; raise on any failure."""
        try:
            worker_id, result = self._receive(self._busy, 'sampling')
            self._busy.discard(worker_id)
            return worker_id, result
        except BaseException:
            self.close()
            raise

    def _gather(self, worker_ids: List[int], doing: str) -> list:
        """Wait for one message from each worker; a closed pipe is a death."""
        results = {}
        pending = set(worker_ids)
        while pending:
            worker_id, results[worker_id] = self._receive(pending, doing)
            pending.discard(worker_id)
        return [results[w] for w in worker_ids]

    def _receive(self, pending, doing: str):
        """One message from one of the ``pending`` workers: (worker, payload).

        Waits on the pool's :class:`_Inbox` (whole messages only), and at least every
        POLL_SECONDS asks the watchdog about the pending workers and looks for one whose
        process has ended.
        """
        if not pending:
            raise RuntimeError('collect() without a submitted job')
        checked = time.monotonic()
        while True:
            due = checked + self.POLL_SECONDS - time.monotonic()
            # Until the check is due, wait for a message; then take what has come (every
            # progress report heard before the watchdog judges the silence).
            got = self._inbox.get(pending, max(0., due))
            if got is not None:
                worker_id, message = got
                if message is None:
                    raise self._death(worker_id, doing)
                status, payload = pickle.loads(message)
                if status == 'error':
                    raise worker_error(payload)
                if status != 'progress':
                    return worker_id, payload
                self._watchdog.note(worker_id, *payload)
                continue
            checked = time.monotonic()
            self._watchdog.check(pending & self._busy, self._describe)
            self._watchdog.check(pending & self._starting, self._describe, STARTUP_SECONDS)
            for worker_id in sorted(pending):
                # An ended process whose reader has read all it sent: its messages and
                # then its end come next; one whose socket stays open (a child of the
                # worker holding it) is dead all the same.
                if self._procs[worker_id].poll() is not None and \
                        not self._inbox.ended(worker_id, 2.):
                    raise self._death(worker_id, doing)

    def _describe(self, worker_id: int) -> str:
        return f'sampler worker {worker_id} (pid {self._procs[worker_id].pid})'

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
        """Stop every worker (politely, then by force) and join them.

        An idle worker exits on the stop message. A worker still sampling
        (after an error elsewhere, its job is abandoned) is killed at once
        rather than waited for. The idle ones share one 2-second grace
        period, so closing takes at most a few seconds however many workers
        there are.
        """
        _LIVE_POOLS.discard(self)
        for worker_id, conn in enumerate(self._conns):
            if worker_id in self._busy or worker_id in self._starting:
                self._procs[worker_id].kill()
                continue
            try:
                conn.send_bytes(cloudpickle.dumps(None))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 2
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0., deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._inbox.close(self._conns)
        self._procs, self._conns = [], []
        self._busy, self._starting = set(), set()


#: Ray workers import garage before anything of ours; this hook applies the
#: compat layer first in every Ray worker process (see _garage_compat).
RAY_RUNTIME_ENV = {
    'worker_process_setup_hook': 'garage_promp._garage_compat.apply'
}


def init_ray(**kwargs):
    """``ray.init`` with garage_promp's worker setup hook, if Ray is not running.

    If you start Ray yourself, pass ``runtime_env=RAY_RUNTIME_ENV``; to join a
    running cluster, ``init_ray(address='auto')`` (or the head's address).

    ``ray.init`` makes SIGTERM a ``sys.exit(15)`` in the main thread; the handler
    the process had before is put back, so that a run stopped by SIGTERM ends as
    one (killed by the signal, as with the other backends; a campaign runner tells
    a stopped run from a failed one by that), not as an error exit.

    A Ray started here (no address, none running) ends with this process, whatever it
    dies of: a watcher (``garage_promp/sampler/_ray_reaper.py``) ends the raylet's agents,
    which would otherwise outlive it by a minute or more.
    """
    import ray
    if not ray.is_initialized():
        kwargs.setdefault('runtime_env', RAY_RUNTIME_ENV)
        kwargs.setdefault('log_to_driver', False)
        kwargs.setdefault('include_dashboard', False)
        main = threading.current_thread() is threading.main_thread()
        before = signal.getsignal(signal.SIGTERM) if main else None  # (None: set outside
        try:                                                          # Python, left to Ray)
            ray.init(**kwargs)
        finally:
            if before is not None:
                signal.signal(signal.SIGTERM, before)
        try:
            _ray_reaper.watch(_ray_reaper.local_ray_pids())
        except OSError as error:  # (no process to spare): Ray runs, unwatched
            warnings.warn(f'the watcher that ends a Ray started here with the run did not '
                          f'start ({error}): if the run is killed, the raylet\'s agents may '
                          'outlive it by a minute or more')


def _ray_cpus() -> str:
    """The Ray cluster's CPUs, in words, for a message about an actor not yet placed."""
    import ray
    try:
        return f'{ray.cluster_resources().get("CPU", 0):g} CPUs'
    except Exception:  # pylint: disable=broad-except
        return 'CPUs unknown'


class _RayWorker:
    """The body of a Ray actor: a RolloutWorker that reports failures and progress.

    The actor runs two calls at once (``max_concurrency=2``): ``progress``
    answers while ``sample`` runs, as a pool worker's reporter thread does.
    """

    def __init__(self, worker_id: int, config_bytes: bytes):
        self._worker_id = worker_id
        self._config_bytes = config_bytes
        self._worker = None

    def setup(self) -> 'int | FailureReport':
        """Build the RolloutWorker (imports, env construction): the actor's start-up.

        A call of its own rather than the constructor's work, so that ``progress``
        answers while it runs and the start-up is watched as a pool worker's is; a
        failure comes back as a :class:`FailureReport`, as a pool worker's does.
        Returns the actor's pid (the main process knows every actor's from then on,
        whether or not a progress call was answered).
        """
        import torch
        torch.set_num_threads(WORKER_THREADS)
        try:
            self._worker = RolloutWorker(**cloudpickle.loads(self._config_bytes))
        except Exception as exc:  # pylint: disable=broad-except
            return _report(self._worker_id, exc, Context())
        self._config_bytes = None
        return os.getpid()

    def sample(self, job_bytes: bytes):
        try:  # a job that cannot be rebuilt here (a class missing on this node) is reported
            job = cloudpickle.loads(job_bytes)
        except Exception as exc:  # pylint: disable=broad-except
            return _report(self._worker_id, exc, Context())
        return _sample_or_report(self._worker, self._worker_id, job)

    def progress(self) -> Tuple[int, str, int]:
        """The worker's step counter, where it is, and the actor's pid."""
        if self._worker is None:
            return 0, STARTUP_WHERE, os.getpid()
        return self._worker.progress, _where(self._worker), os.getpid()

    def pid(self) -> int:
        return os.getpid()


class RayBackend(Backend):
    """One Ray actor per worker (starts Ray if it is not running).

    Stuck actors are watched as pool workers are: while an actor samples, the
    main process asks it for its progress every ``POLL_SECONDS``; an actor
    whose step counter has not moved for ``worker_timeout`` seconds, or that
    does not answer (stopped, or stuck in native code holding the GIL), ends
    the run with a ``SamplerWorkerError`` naming it, and every actor is killed.
    An actor's start-up is timed from its creation: waiting for Ray to place it
    (a node with a free CPU) and start its process, then its imports and env
    construction (:meth:`_RayWorker.setup`), each get ``worker_timeout`` but at
    least STARTUP_SECONDS (an actor Ray cannot place, more actors than the
    cluster's CPUs, ends the start-up naming the cluster's CPUs; with
    ``worker_timeout=None`` nothing is timed and the console says which actor the
    start-up waits for). A Ray started here, on this
    machine, gets a CPU for each worker (at least the machine's cores), so that
    more workers than cores run as the pool's do.

    Args:
        config (dict): ``RolloutWorker`` arguments.
        n_workers (int): Number of actors (they may be spread over a cluster).
        worker_timeout (float or None): Seconds a busy actor may make no
            progress before the run ends naming it; None: wait forever.

    Raises:
        TypeError, ValueError: For bad arguments (:func:`check_backend_arguments`),
            before Ray is started or an actor made.

    """

    POLL_SECONDS = 0.5
    #: Actors may be spread over a cluster.
    max_workers = MAX_COUNT

    def __init__(self, config: Dict[str, Any], n_workers: int, worker_timeout=None):
        config, n_workers, worker_timeout = check_backend_arguments(
            config, n_workers, worker_timeout, max_workers=self.max_workers)
        import ray
        if ray.is_initialized() or os.environ.get('RAY_ADDRESS'):
            init_ray()  # a cluster's own CPUs
        else:  # a Ray of this machine's: a CPU for each worker, as many as the pool's
            check_sampler_options(max_workers=MAX_WORKERS, n_workers=n_workers)  # the pool's bound
            try:  # (the cores this process may use, as Ray counts them)
                init_ray(num_cpus=max(len(os.sched_getaffinity(0)), n_workers))
            except ValueError as error:  # a Ray started here already (`ray start --head`),
                if 'existing cluster' not in str(error):  # which ray.init joins: its CPUs
                    raise
                init_ray()
        actor = ray.remote(num_cpus=1, max_concurrency=2)(_RayWorker)
        config_bytes = cloudpickle.dumps(config)
        self._actors = [actor.remote(w, config_bytes) for w in range(n_workers)]
        self._pending = {}  # object ref of a job's result -> worker
        self._probes = {}  # worker -> object ref of its outstanding progress call
        self._pids = {}  # worker -> its actor's pid, once it has answered (it is up)
        self._watchdog = _Watchdog(worker_timeout)
        try:
            self._start_up()
        except BaseException:
            self.close()
            raise

    def _start_up(self):
        """Every actor's :meth:`_RayWorker.setup`, watched from its creation on: its
        placement until it first answers, then its setup."""
        import ray
        setups = {actor.setup.remote(): w for w, actor in enumerate(self._actors)}
        for worker_id in setups.values():
            self._watchdog.started(worker_id, RAY_PLACEMENT_WHERE)
        while setups:
            ready, _ = ray.wait(list(setups), num_returns=len(setups),
                                timeout=self.POLL_SECONDS)
            for ref in ready:
                worker_id = setups.pop(ref)
                self._pids[worker_id] = self._result(ref, worker_id, 'in its start-up')
            starting = set(setups.values())
            if starting:
                self._probe(starting)
                self._watchdog.check(starting, self._describe, at_least=STARTUP_SECONDS)
        self._probes = {}  # (answers to start-up probes carry nothing for the jobs)

    def submit(self, worker_id: int, job: Job):
        """Start ``job`` on actor ``worker_id``."""
        try:
            self._pending[self._actors[worker_id].sample.remote(cloudpickle.dumps(job))] = \
                worker_id
            self._watchdog.started(worker_id)  # (every actor is up: its setup returned)
        except BaseException:
            self.close()
            raise

    def collect(self) -> Tuple[int, EpisodeArrays]:
        """The first finished actor's result; raise on any failure."""
        import ray
        try:
            if not self._pending:
                raise RuntimeError('collect() without a submitted job')
            while True:
                ready, _ = ray.wait(list(self._pending), num_returns=1,
                                    timeout=self.POLL_SECONDS)
                if ready:
                    break
                self._probe()
                self._watchdog.check(set(self._pending.values()), self._describe)
            ref = ready[0]
            worker_id = self._pending.pop(ref)
            return worker_id, self._result(ref, worker_id, 'while sampling')
        except BaseException:
            self.close()
            raise

    def _result(self, ref, worker_id: int, doing: str):
        """What actor ``worker_id``'s finished call ``ref`` returned; its death (``died
        <doing>``) or its :class:`FailureReport` raised as a :class:`SamplerWorkerError`."""
        import ray
        try:
            result = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            raise SamplerWorkerError(f'{self._describe(worker_id)} died {doing}: {exc}',
                                     worker_id) from exc
        except ray.exceptions.RayError as exc:  # Ray's own failure around the call
            raise SamplerWorkerError(f'{self._describe(worker_id)} failed {doing}: '
                                     f'{type(exc).__name__}: {exc}', worker_id) from exc
        if isinstance(result, FailureReport):
            raise worker_error(result)
        return result

    def _probe(self, busy=None):
        """Hear the progress calls that have answered; ask every ``busy`` actor (those
        with a job, by default) again."""
        import ray
        busy = set(self._pending.values()) if busy is None else busy
        if self._probes:
            answered, _ = ray.wait(list(self._probes.values()), num_returns=len(self._probes),
                                   timeout=0)
            answered = set(answered)
            for worker_id, ref in list(self._probes.items()):
                if ref not in answered:
                    continue  # no answer yet: the watchdog counts the silence
                del self._probes[worker_id]
                try:
                    count, where, pid = ray.get(ref)
                except ray.exceptions.RayError:
                    continue  # a dead actor: its job's result says so
                if worker_id not in self._pids:  # placed: its setup's clock starts
                    self._pids[worker_id] = pid
                    self._watchdog.started(worker_id, STARTUP_WHERE)
                if worker_id in busy:
                    self._watchdog.note(worker_id, count, where)
        for worker_id in busy:
            if worker_id not in self._probes:
                self._probes[worker_id] = self._actors[worker_id].progress.remote()

    def _describe(self, worker_id: int) -> str:
        pid = self._pids.get(worker_id)
        if pid is None:
            return (f'sampler worker {worker_id} (Ray actor, not up yet: {len(self._actors)} '
                    f'actors of one CPU each, the Ray cluster has {_ray_cpus()})')
        return f'sampler worker {worker_id} (Ray actor, pid {pid})'

    def close(self):
        """Kill the actors (also one stuck in an env)."""
        import ray
        if ray.is_initialized():
            for actor in self._actors:
                ray.kill(actor)
        self._actors = []
        self._pending = {}
        self._probes = {}


BACKENDS = {
    'local': InProcessBackend,
    'multiprocessing': ProcessPoolBackend,
    'ray': RayBackend,
}
