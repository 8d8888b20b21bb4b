"""``MetaSampler``: garage's ``Sampler`` interface over our own worker engine.

The sampler contract (what an algorithm hands the sampler and gets back):

* **In:** :meth:`MetaSampler.obtain_meta_batch` takes the meta-batch's M
  ``EnvUpdate``\\ s (e.g. a task sampler's ``sample(M)``), one parameter dict
  per task (names as in ``policy.named_parameters()``; adapted parameters
  after an inner step) and R, the episodes per task. Only these go to the
  workers on each call; the policy's structure and the template env travel
  once, when the workers start.
* **Out:** one garage ``EpisodeBatch`` of exactly M × R episodes, task-major
  (task 0's R episodes first, in episode order), with agent infos ``mean``,
  ``log_std`` (the sampling distribution, per step) and ``task_index`` (the
  task's slot in the meta-batch, per step).
* **Randomness:** every call is one *sampling round*; the round counter is
  part of the sampler's pickled state (so of the algorithm's snapshot), and
  every draw of episode e of task slot i in round r comes from the stream
  (seed, r, i, e) (see :mod:`garage_promp.sampler.rollout`). The same seed
  gives the same episodes with every backend and worker count, and a
  restored run continues exactly.
* **Work split:** the M × R episodes are split into contiguous, equal-sized
  runs of episodes, one per worker (balanced by episodes, so by steps at a
  fixed horizon); a task may span two workers.
* **Rounds:** :meth:`MetaSampler.obtain_rounds` samples the K + 1 rounds of
  a meta-batch (or a meta-test's adaptation and evaluation rounds) in one
  call. It hands each task's episodes to the learner's ``on_task(round,
  task, episodes)`` as soon as they are all back, and ``on_task`` returns the
  task's parameters for the next round; a worker starts its next round as
  soon as every task of its next job has them. The episodes are those of
  K + 1 consecutive :meth:`obtain_meta_batch` calls with the same
  parameters.

garage's own entry points work unchanged: :meth:`obtain_samples` (whole
episodes of one env or task with a policy, until ``num_samples`` steps) and
:meth:`obtain_exact_episodes`, used by garage's ``Trainer`` and
``MetaEvaluator``; :meth:`shutdown_worker` stops the workers, which start
again on next use.

Pickling: the sampler pickles as its configuration and round counter. No
worker starts until the first call, so loading a snapshot starts nothing.
"""
import collections
import collections.abc
import contextlib
import copy
import math
import numbers
from typing import Any, Callable, Dict, List, Sequence

from garage_promp._garage_compat import RAY_MISSING_MESSAGE, ray_available
from garage_promp._threads import learner_cores_while_sampling
from garage_promp.policies import AdaptedPolicy, check_env_and_policy, check_params_of
from garage_promp.sampler.backends import BACKENDS, DEFAULT_WORKER_TIMEOUT
from garage_promp.sampler.options import check_sampler_options
from garage_promp.sampler.rollout import EpisodeArrays, Job, TaskShare, check_same_keys
from garage_promp.validation import (
    MAX_BATCH_STEPS,
    check_batch_steps,
    check_bool,
    check_choice,
    check_int,
)

from garage import EpisodeBatch, StepType
from garage.sampler import Sampler
from garage.sampler.env_update import EnvUpdate
import numpy as np
import torch


class _UseEnv(EnvUpdate):
    """EnvUpdate that replaces the env with a copy of a given env."""

    def __init__(self, env):
        self._env = env

    def __call__(self, old_env=None):
        if old_env is not None and old_env is not self._env:
            old_env.close()
        return copy.deepcopy(self._env)


class _KeepEnv(EnvUpdate):
    """EnvUpdate that keeps the env as it is."""

    def __call__(self, old_env=None):
        return old_env


def split_episodes(counts: Sequence[int], n_workers: int
                   ) -> List[List[tuple]]:
    """Split the episodes of tasks into equal contiguous runs, one per worker.

    Args:
        counts (list[int]): Episodes of each task.
        n_workers (int): Number of workers.

    Returns:
        list[list[tuple]]: For each worker that gets episodes, its
            ``(task, first, count)`` pieces, in task-major order.

    Raises:
        ValueError: If a count is negative or ``n_workers`` is not >= 1.

    """
    counts = [check_int(count, f'counts[{task}]', 0) for task, count in enumerate(counts)]
    n_workers = check_int(n_workers, 'n_workers', 1)
    total = sum(counts)
    bounds = np.linspace(0, total, min(n_workers, total) + 1).round()
    offsets = np.concatenate(([0], np.cumsum(counts)))
    plan = []
    for start, stop in zip(bounds[:-1].astype(int), bounds[1:].astype(int)):
        pieces = []
        for task, count in enumerate(counts):
            lo = max(start, offsets[task])
            hi = min(stop, offsets[task] + count)
            if lo < hi:
                pieces.append((task, int(lo - offsets[task]), int(hi - lo)))
        plan.append(pieces)
    return plan


class MetaSampler(Sampler):
    """Samples whole meta-batches with in-process, pool or Ray workers.

    See the module docstring for the contract.

    Args:
        policy (garage.torch.policies.Policy): The meta-policy (a Gaussian
            garage torch policy).
        env (garage.Environment): A template environment of the task family.
        kind (str): Backend: ``'local'`` (in-process), ``'multiprocessing'``
            (our persistent worker processes) or ``'ray'``.
        n_workers (int): Number of workers.
        seed (int): The experiment seed.
        max_episode_length (int or None): Defaults to the env's.
        envs_per_task (int or None): Env copies per task share in a worker;
            None keeps one per episode, k runs the episodes in waves of k.
        batched (bool): One batched policy forward per step (default), or
            one per episode and step (same episodes; for reference).
        max_envs_per_worker (int or None): Env copies per worker in all
            (split over its tasks); None: no budget.
        worker_timeout (float or None): Seconds a busy worker (process, Ray
            actor, or the in-process sampler) may make no progress (not one
            env step or reset, or env copy made) before the run ends with a
            ``SamplerWorkerError`` naming it, its env, task slot, episode and
            step (default 600; None: wait forever).
            After 30 s the console says which worker it waits for. In
            process (``'local'``), the stuck env call is interrupted in the
            main thread (``backends._InProcessWatch``).
        lean (bool): Step the package's own MuJoCo envs together, without
            the per-step wrapper layers (:mod:`garage_promp.sampler.lean`;
            same episodes, bit for bit); False keeps the wrapped path for
            every env (for reference and benchmarks).

    Raises:
        ValueError: Naming a bad option and its value
            (:func:`~garage_promp.sampler.options.check_sampler_options`);
            nothing is started.

    """

    def __init__(self, policy, env, *, kind: str = 'local',
                 n_workers: int = 1, seed: int = 0,
                 max_episode_length: int | None = None,
                 envs_per_task: int | None = None, batched: bool = True,
                 max_envs_per_worker: int | None = None, lean: bool = True,
                 worker_timeout: float | None = DEFAULT_WORKER_TIMEOUT):
        # pylint: disable=super-init-not-called
        # (garage's Sampler.__init__(algo, env) is deprecated.)
        kind = check_choice(kind, 'kind', BACKENDS)
        if kind == 'ray' and not ray_available():  # not after the envs are built
            raise ImportError(RAY_MISSING_MESSAGE.format(name="the sampler kind='ray'"))
        # Before any worker starts, naming which does not fit (the horizon is checked below:
        # the sampler's own may stand in for the env's).
        check_env_and_policy(env, policy, need_horizon=False)
        if max_episode_length is None:
            horizon = getattr(env.spec, 'max_episode_length', None)
            if horizon is None or (isinstance(horizon, numbers.Real)
                                   and not math.isfinite(horizon)):
                raise ValueError('max_episode_length must be finite: the env has '
                                 f'max_episode_length={horizon!r}; '
                                 'give the env (or the sampler) a horizon')
            max_episode_length = horizon
        options = check_sampler_options(
            max_workers=BACKENDS[kind].max_workers,
            n_workers=n_workers, seed=seed, max_episode_length=max_episode_length,
            envs_per_task=envs_per_task, max_envs_per_worker=max_envs_per_worker,
            batched=batched, lean=lean, worker_timeout=worker_timeout)
        self._max_episode_length = options['max_episode_length']
        self._n_workers = options['n_workers']
        self._seed = options['seed']
        self._lean = options['lean']
        self._worker_timeout = options['worker_timeout']
        self._kind = kind
        self._policy = policy
        self._env = env
        self._envs_per_task = options['envs_per_task']
        self._batched = options['batched']
        self._max_envs_per_worker = options['max_envs_per_worker']
        self._round = 0
        self._backend = None

    def executed_otherwise(self, *, kind: str, n_workers: int, envs_per_task: int | None,
                           worker_timeout: float | None) -> 'MetaSampler':
        """This sampler with other workers: the same episodes (seed, sampling round,
        horizon, batched forward, lean path, env budget), another backend, worker count,
        env copies per task or timeout (a run resumed on another machine). Its workers
        start on first use; this one's are stopped."""
        other = MetaSampler(self._policy, self._env, kind=kind, n_workers=n_workers,
                            seed=self._seed, max_episode_length=self._max_episode_length,
                            envs_per_task=envs_per_task, batched=self._batched,
                            max_envs_per_worker=self._max_envs_per_worker, lean=self._lean,
                            worker_timeout=worker_timeout)
        other._round = self._round  # pylint: disable=protected-access
        self.shutdown_worker()
        return other

    @classmethod
    def from_worker_factory(cls, worker_factory, agents, envs):
        """Build from a garage ``WorkerFactory`` (in-process backend)."""
        return cls(agents, envs, n_workers=worker_factory.n_workers,
                   seed=worker_factory._seed or 0,  # pylint: disable=protected-access
                   max_episode_length=worker_factory._max_episode_length)  # pylint: disable=protected-access

    # ------------------------------------------------------------ properties
    @property
    def n_workers(self) -> int:
        """int: Number of workers."""
        return self._n_workers

    @property
    def kind(self) -> str:
        """str: The backend, ``'local'``, ``'multiprocessing'`` or ``'ray'``."""
        return self._kind

    @property
    def seed(self) -> int:
        """int: The experiment seed the episode streams derive from."""
        return self._seed

    @property
    def sampling_round(self) -> int:
        """int: Number of sampler calls so far (the next call's round)."""
        return self._round

    @property
    def max_episode_length(self) -> int:
        """int: The horizon T."""
        return self._max_episode_length

    @property
    def backend(self):
        """The running backend (starting the workers if needed)."""
        if self._backend is None:
            config = dict(policy=self._policy, env=self._env, seed=self._seed,
                          max_episode_length=self._max_episode_length,
                          envs_per_task=self._envs_per_task,
                          batched=self._batched,
                          max_envs_per_worker=self._max_envs_per_worker,
                          # Snapshots from before the lean path have no _lean.
                          lean=getattr(self, '_lean', True))
            self._backend = BACKENDS[self._kind](
                config, self._n_workers,
                worker_timeout=getattr(self, '_worker_timeout', DEFAULT_WORKER_TIMEOUT))
        return self._backend

    # -------------------------------------------------------------- sampling
    def obtain_meta_batch(self, task_updates: Sequence[Any],
                          params: Sequence[Dict[str, torch.Tensor]],
                          episodes_per_task: int) -> EpisodeBatch:
        """Sample ``episodes_per_task`` episodes of every task, in one round.

        Args:
            task_updates (list[EnvUpdate]): One EnvUpdate per task.
            params (list[dict]): Policy parameters of each task.
            episodes_per_task (int): Episodes per task, R.

        Returns:
            EpisodeBatch: Task-major episodes (task 0's episodes first).

        Raises:
            ValueError: If the numbers of tasks and parameter sets differ.
            SamplerWorkerError: If a worker raises or dies.

        """
        _check_sequences(task_updates=task_updates, params=params)
        if len(task_updates) != len(params):
            raise ValueError(f'{len(params)} parameter sets for '
                             f'{len(task_updates)} tasks')
        if not task_updates:
            raise ValueError('obtain_meta_batch needs at least one task')
        episodes_per_task = check_int(episodes_per_task,
                                      'episodes_per_task', 1)
        check_batch_steps(self._max_episode_length, as_arguments=True,
                          tasks=len(task_updates), episodes_per_task=episodes_per_task)
        numpy_params = [self._checked_params(p, f'params[{task}]')
                        for task, p in enumerate(params)]
        return self._run(list(task_updates), numpy_params,
                         [episodes_per_task] * len(task_updates),
                         first=[0] * len(task_updates))

    def obtain_rounds(self, task_updates: Sequence[Any],
                      params: Sequence[Dict[str, torch.Tensor]],
                      episodes_per_round: Sequence[int],
                      on_task: Callable[[int, int, EpisodeBatch], Any] | None = None,
                      deterministic: Sequence[bool] | None = None
                      ) -> List[EpisodeBatch]:
        """Several sampling rounds of the same tasks, pipelined task by task.

        Round r samples ``episodes_per_round[r]`` episodes of every task. As
        soon as all of task i's episodes of round r are back,
        ``on_task(r, i, episodes)`` is called in the main process while the
        workers go on sampling; before the last round it returns task i's
        parameters for round r + 1 (an inner step, say). A worker starts its
        round r + 1 job as soon as every task in that job has its parameters,
        so no worker waits for the whole meta-batch, and the learner's
        per-task work (processing, inner step) overlaps the sampling of other
        tasks. Round r's episodes are keyed by round ``sampling_round + r``
        exactly as r + 1 consecutive :meth:`obtain_meta_batch` calls would
        be, and ``on_task`` sees one task at a time, so the episodes do not
        depend on the backend, the worker count or the order in which
        workers finish.

        Args:
            task_updates (list[EnvUpdate]): One EnvUpdate per task.
            params (list[dict]): Each task's policy parameters for round 0.
            episodes_per_round (list[int]): Episodes per task in each round.
            on_task (callable or None): ``(round, task, EpisodeBatch of that
                task) -> parameters for the next round`` (the return value
                of the last round is ignored). Required with more than one
                round.
            deterministic (list[bool] or None): Per round, whether the
                policy acts with its mean (no action noise; the recorded
                ``mean``/``log_std`` agent infos are the policy's as always).
                Default: every round samples.

        Returns:
            list[EpisodeBatch]: Each round's episodes, task-major.

        Raises:
            ValueError: If the arguments do not fit together.
            SamplerWorkerError: If a worker raises or dies. Any error, in a
                worker or in ``on_task``, stops every worker first.

        """
        _check_sequences(task_updates=task_updates, params=params)
        n_tasks = len(task_updates)
        if n_tasks != len(params):
            raise ValueError(f'{len(params)} parameter sets for {n_tasks} tasks')
        if not n_tasks:
            raise ValueError('obtain_rounds needs at least one task')
        rounds = [check_int(r, 'episodes per round', 1) for r in episodes_per_round]
        if not rounds:
            raise ValueError('obtain_rounds needs at least one round')
        # Every round's episodes are kept until the last one is back.
        check_batch_steps(self._max_episode_length, as_arguments=True,
                          tasks=n_tasks, sum_of_episodes_per_round=sum(rounds))
        first_params = [self._checked_params(p, f'params[{task}]')
                        for task, p in enumerate(params)]
        if len(rounds) > 1 and on_task is None:
            raise ValueError('more than one round needs on_task for the next parameters')
        deterministic = ([False] * len(rounds) if deterministic is None else
                         [check_bool(d, 'deterministic') for d in deterministic])
        if len(deterministic) != len(rounds):
            raise ValueError(f'deterministic has {len(deterministic)} entries for '
                             f'{len(rounds)} rounds')
        updates = list(task_updates)
        base = self._round
        self._round += len(rounds)
        plans = [split_episodes([r] * n_tasks, self._n_workers) for r in rounds]
        next_params = [dict() for _ in rounds]
        next_params[0] = dict(enumerate(first_params))
        missing = [collections.Counter(task for pieces in plan for task, _, _ in pieces)
                   for plan in plans]
        parts = [[{} for _ in range(n_tasks)] for _ in rounds]
        in_flight, next_round = {}, [0] * self._n_workers

        def submit_ready(backend):
            for worker in range(self._n_workers):
                if worker in in_flight:
                    continue
                r = next_round[worker]
                while r < len(rounds) and worker >= len(plans[r]):
                    r += 1  # no episodes for this worker in round r
                next_round[worker] = r
                if r == len(rounds) or any(task not in next_params[r]
                                           for task, _, _ in plans[r][worker]):
                    continue
                backend.submit(worker, Job((base + r, ), [
                    TaskShare(task, updates[task], next_params[r][task], first, count)
                    for task, first, count in plans[r][worker]], deterministic[r]))
                in_flight[worker] = r
                next_round[worker] = r + 1

        try:
            backend = self.backend
            submit_ready(backend)
            while in_flight:
                worker, result = backend.collect()
                r = in_flight.pop(worker)
                pieces = plans[r][worker]
                done = []
                for (task, first, _), arrays in zip(
                        pieces, result.split([count for _, _, count in pieces])):
                    parts[r][task][first] = arrays
                    missing[r][task] -= 1
                    if missing[r][task] == 0:
                        done.append(task)
                for task in done:
                    episodes = self._to_episode_batch(
                        [parts[r][task][f] for f in sorted(parts[r][task])])
                    with (learner_cores_while_sampling(self._n_workers)
                          if self._kind != 'local' else contextlib.nullcontext()):
                        new = None if on_task is None else on_task(r, task, episodes)
                    if r + 1 < len(rounds):
                        if new is None:
                            raise TypeError(f'on_task returned no parameters for task {task} '
                                            f'in round {r + 1}')
                        next_params[r + 1][task] = self._checked_params(
                            new, f'on_task\'s parameters for task {task} in round {r + 1}')
                submit_ready(backend)
        except BaseException:
            self.shutdown_worker()  # whatever failed, no worker keeps sampling
            raise
        return [self._to_episode_batch([arrays for task_parts in parts[r]
                                        for _, arrays in sorted(task_parts.items())])
                for r in range(len(rounds))]

    def _run(self, updates, params, counts, first) -> EpisodeBatch:
        key = (self._round, )
        self._round += 1
        jobs = [
            Job(key, [TaskShare(task, updates[task], params[task],
                                first[task] + start, count)
                      for task, start, count in pieces])
            for pieces in split_episodes(counts, self._n_workers)
        ]
        try:
            results = self.backend.run(jobs)
        except BaseException:
            self.shutdown_worker()  # whatever failed, no worker keeps sampling
            raise
        return self._to_episode_batch(results)

    def obtain_samples(self, itr, num_samples, agent_update,
                       env_update=None) -> EpisodeBatch:
        """Whole episodes of one env or task until ``num_samples`` steps.

        garage's ``Sampler`` entry point (used by garage's ``Trainer`` and
        ``MetaEvaluator``). Episodes are sampled in waves of
        ``ceil(remaining / T)``, spread over the workers.

        Args:
            itr (int): Ignored (deprecated in garage).
            num_samples (int): Minimum number of steps.
            agent_update (Policy or dict or None): A Gaussian policy of the
                sampler's policy's structure (e.g. an ``AdaptedPolicy``), a
                parameter dict, or None (the sampler's policy).
            env_update (EnvUpdate or Environment or None): The task to
                sample; None samples the template env.

        Returns:
            EpisodeBatch: The episodes.

        """
        del itr
        num_samples = check_int(num_samples, 'num_samples', 1, MAX_BATCH_STEPS)
        params = self._params_of(agent_update)
        update = self._update_of(env_update)
        batches, steps, done = [], 0, 0
        while steps < num_samples:
            n_eps = math.ceil((num_samples - steps) / self._max_episode_length)
            batch = self._run([update], [params], [n_eps], first=[done])
            batches.append(batch)
            steps += int(batch.lengths.sum())
            done += n_eps
        return EpisodeBatch.concatenate(*batches)

    def obtain_exact_episodes(self, n_eps_per_worker, agent_update,
                              env_update=None) -> EpisodeBatch:
        """``n_eps_per_worker × n_workers`` episodes of one env or task."""
        n_eps = check_int(n_eps_per_worker, 'n_eps_per_worker', 1)
        check_batch_steps(self._max_episode_length, as_arguments=True,
                          n_eps_per_worker=n_eps, n_workers=self._n_workers)
        return self._run([self._update_of(env_update)],
                         [self._params_of(agent_update)],
                         [n_eps * self._n_workers], first=[0])

    def _params_of(self, agent_update) -> Dict[str, np.ndarray]:
        if agent_update is None:
            agent_update = self._policy
        if isinstance(agent_update, AdaptedPolicy):
            agent_update = agent_update.adapted_params()
        elif isinstance(agent_update, torch.nn.Module):
            agent_update = collections.OrderedDict(
                agent_update.named_parameters())
        if not isinstance(agent_update, dict):
            raise TypeError('agent_update must be a policy, a parameter dict '
                            f'or None, got {type(agent_update).__name__} '
                            '(per-worker lists are not supported: use '
                            'obtain_meta_batch)')
        return self._checked_params(agent_update, 'agent_update parameters')

    def _checked_params(self, params, what: str) -> Dict[str, np.ndarray]:
        """``params`` as numpy arrays, refused (naming ``what``) unless they are a mapping
        holding every parameter of the sampler's policy by name, of its shape and dtype (other
        entries are not read): a worker would fail on them with a torch shape or dtype error,
        or a missing key, after the jobs started."""
        if not isinstance(params, collections.abc.Mapping):
            raise TypeError(f'{what} must be a dict of parameters by name, got '
                            f'{type(params).__name__}')
        arrays = _to_numpy(params)  # (a list becomes float64 here, as the worker would see it)
        # Other entries (a state_dict's buffers) are not read by the worker's forward.
        check_params_of(self._policy, arrays, f"{what} must be the sampler's policy's:",
                        others_ok=True)
        return arrays

    def _update_of(self, env_update):
        if env_update is None:
            return _KeepEnv()
        if isinstance(env_update, (list, tuple)):
            raise TypeError('per-worker env_update lists are not supported: '
                            'use obtain_meta_batch')
        if callable(env_update) and not hasattr(env_update, 'step'):
            return env_update
        return _UseEnv(env_update)

    def _to_episode_batch(self, results: List[EpisodeArrays]) -> EpisodeBatch:
        def cat(name):
            return np.concatenate([getattr(r, name) for r in results])

        def cat_dicts(name):
            dicts = [getattr(r, name) for r in results]
            check_same_keys(dicts)
            return {k: np.concatenate([d[k] for d in dicts])
                    for k in dicts[0]}

        return EpisodeBatch(
            env_spec=self._env.spec,
            episode_infos=cat_dicts('episode_infos'),
            observations=cat('observations'),
            last_observations=cat('last_observations'),
            actions=cat('actions'),
            rewards=cat('rewards'),
            env_infos=cat_dicts('env_infos'),
            agent_infos=dict(mean=cat('mean'), log_std=cat('log_std'),
                             task_index=cat('task_index')),
            step_types=np.asarray(cat('step_types'), dtype=StepType),
            lengths=cat('lengths'))

    # -------------------------------------------------------------- lifecycle
    def start_worker(self):
        """Start the workers now (they also start on first use)."""
        _ = self.backend

    def shutdown_worker(self):
        """Stop the workers; the next call starts new ones."""
        if self._backend is not None:
            backend, self._backend = self._backend, None
            backend.close()

    def __getstate__(self):
        state = dict(self.__dict__)
        state['_backend'] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __del__(self):
        # A second Ctrl-C while a stopped run closes its workers lands here: closed once
        # more, quietly (Python would print the interrupt as an ignored exception).
        for _ in range(2):
            try:
                self.shutdown_worker()
                return
            except (Exception, KeyboardInterrupt):  # pylint: disable=broad-except
                continue


def _to_numpy(params: Dict[str, Any]) -> Dict[str, np.ndarray]:
    return collections.OrderedDict(
        (k, v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor)
         else np.asarray(v)) for k, v in params.items())


def _check_sequences(**arguments):
    """Refuse, naming it, an argument whose items cannot be paired with the tasks: one
    without a length (a generator) or without an order (a set), or text.

    Raises:
        TypeError: As above.

    """
    for name, value in arguments.items():
        if not isinstance(value, collections.abc.Sized) or isinstance(
                value, (collections.abc.Set, str, bytes)):
            raise TypeError(f'{name} must be a list (one item per task), got '
                            f'{type(value).__name__}')
