"""A garage Worker that samples many tasks at once with per-task policy parameters.

garage's MAML samples one task at a time, a sampler call per task and per
inner step, with one policy forward per environment step. ``MetaBatchWorker``
instead holds one environment per (task, episode) slot, steps all of them in
lockstep and evaluates the policy for all slots in ONE batched forward, each
task at its own (adapted) parameters (``torch.func.vmap`` of
``functional_call`` over the stacked per-task parameters), like the
reference's vectorised ``MetaSampler``. It is a plain
:class:`garage.sampler.Worker`, so ``LocalSampler``,
``MultiprocessingSampler`` and ``RaySampler`` all run it; the algorithm
spreads the meta-batch over the workers through the samplers' per-worker
update lists (``obtain_exact_episodes(1, [agent updates], [env updates])``).

The action noise of slot s at step t is drawn up front (``noise[s, t]``), so
an episode does not depend on how the slots are batched: ``batched=False``
samples the same slots one episode at a time with one forward per step (the
straightforward way) and gives the same episodes up to float rounding.
"""
import copy
import dataclasses
from typing import Dict, List, Sequence

from garage_promp.policies import distribution_params, stack_params, task_distribution_params

from garage import EpisodeBatch, StepType
from garage.sampler import Worker
from garage.sampler.env_update import EnvUpdate
import numpy as np
import torch


@dataclasses.dataclass
class MetaBatchAgentUpdate:
    """Per-task policy parameters for one worker.

    Attributes:
        params (list[dict[str, torch.Tensor]]): One parameter dict per task
            handled by the worker (names as in ``policy.named_parameters()``).

    """
    params: List[Dict[str, torch.Tensor]]


@dataclasses.dataclass
class MetaBatchEnvUpdate:
    """The tasks one worker samples, and how many episodes each.

    Attributes:
        task_updates (list[EnvUpdate]): One garage EnvUpdate per task, e.g.
            the ``SetTaskUpdate`` objects of a ``SetTaskSampler``.
        task_indices (list[int]): Index of each task in the meta-batch; stored
            in the ``task_index`` agent info of every step.
        episodes_per_task (int): Episodes sampled per task, all in lockstep.

    """
    task_updates: List[EnvUpdate]
    task_indices: List[int]
    episodes_per_task: int


class MetaBatchWorker(Worker):
    """Samples ``episodes_per_task`` episodes of several tasks in lockstep.

    Args:
        seed (int): Base seed: action noise comes from a torch Generator
            seeded with ``seed + worker_number``, and environments that have
            a ``seed`` method are seeded per slot from it.
        max_episode_length (int): Maximum episode length.
        worker_number (int): Number of this worker.
        batched (bool): Step all slots in lockstep with one batched policy
            forward per step (default); False samples slot after slot, one
            forward per step, for reference and benchmarks.
        envs_per_task (int or None): Environment copies per task. None (the
            default) keeps one per episode, so all R episodes of a task run
            at once; k < R runs them in ceil(R / k) waves of k per task, which
            bounds memory for heavy environments (a Meta-World env holds
            ~40 MB). Episode (i, e) always runs on copy (i, e mod k).

    """

    def __init__(self, *, seed, max_episode_length, worker_number,
                 batched=True, envs_per_task=None):
        super().__init__(seed=seed,
                         max_episode_length=max_episode_length,
                         worker_number=worker_number)
        if envs_per_task is not None and not (
                isinstance(envs_per_task, int) and envs_per_task >= 1):
            raise ValueError('envs_per_task must be None or an int >= 1, '
                             f'got {envs_per_task!r}')
        self._batched = bool(batched)
        self._envs_per_task = envs_per_task
        self._episodes_per_task = 1
        self._base_seed = 0 if seed is None else int(seed) + worker_number
        self._generator = torch.Generator().manual_seed(self._base_seed)
        self._policy = None
        self._params = None
        self._base_env = None
        self._envs = []
        self._task_indices = []
        self._n_seeded = 0

    def update_agent(self, agent_update):
        """Take a policy, or per-task parameters for the current policy.

        Args:
            agent_update (Policy or MetaBatchAgentUpdate or dict or None): A
                garage torch policy replaces the policy (all tasks use its
                parameters); a ``MetaBatchAgentUpdate`` sets per-task
                parameters; a state dict is loaded into the policy.

        Raises:
            TypeError: For any other type.

        """
        if agent_update is None:
            return
        if isinstance(agent_update, MetaBatchAgentUpdate):
            self._params = stack_params([{
                k: torch.as_tensor(v)
                for k, v in p.items()
            } for p in agent_update.params])
        elif isinstance(agent_update, dict):
            self._policy.load_state_dict(agent_update)
            self._params = None
        elif isinstance(agent_update, torch.nn.Module):
            self._policy = agent_update
            self._params = None
        else:
            raise TypeError('MetaBatchWorker cannot use an agent update of '
                            f'type {type(agent_update).__name__}')

    def update_env(self, env_update):
        """Set the tasks to sample (``MetaBatchEnvUpdate``) or a base env.

        Args:
            env_update (MetaBatchEnvUpdate or Environment or None): The tasks
                of this worker, or an environment used as the template for a
                single-task batch.

        """
        if env_update is None:
            return
        if isinstance(env_update, MetaBatchEnvUpdate):
            self._build_slots(env_update)
        elif isinstance(env_update, EnvUpdate):
            self._base_env = env_update(self._base_env)
        else:
            self._base_env = env_update

    def _build_slots(self, update: MetaBatchEnvUpdate):
        """One env copy per (task, j), j < k (k = envs_per_task or R)."""
        n_eps = update.episodes_per_task
        k = min(n_eps, self._envs_per_task or n_eps)
        n_envs = len(update.task_updates) * k
        while len(self._envs) < n_envs:
            template = self._envs[0] if self._envs else self._base_env
            self._envs.append(copy.deepcopy(template))
            self._seed_env(self._envs[-1])
        for index in range(n_envs):
            self._envs[index] = update.task_updates[index // k](
                self._envs[index])
        del self._envs[n_envs:]
        self._episodes_per_task = n_eps
        self._task_indices = list(update.task_indices)

    def _seed_env(self, env):
        seed_fn = getattr(env, 'seed', None)
        if callable(seed_fn):
            seed_fn(self._base_seed * 100_003 + self._n_seeded)
        self._n_seeded += 1

    def _distribution(self, observations: np.ndarray, task: int | None):
        """Mean and log-std (numpy, float32) of a forward pass.

        ``task=None``: the rows are task-major blocks of equal size covering
        every task, evaluated in one batched forward; else all rows belong to
        ``task``.
        """
        obs = torch.as_tensor(observations, dtype=torch.float32)
        with torch.no_grad():
            if self._params is None:
                mean, log_std = distribution_params(self._policy, None, obs)
            elif task is None:
                n_tasks = len(self._task_indices)
                mean, log_std = task_distribution_params(
                    self._policy, self._params,
                    obs.reshape(n_tasks, -1, obs.shape[-1]))
                mean = mean.reshape(len(obs), -1)
                log_std = log_std.reshape(len(obs), -1)
            else:
                mean, log_std = distribution_params(
                    self._policy, {k: v[task]
                                   for k, v in self._params.items()}, obs)
        return mean.numpy(), log_std.numpy()

    def rollout(self) -> EpisodeBatch:
        """Sample ``episodes_per_task`` episodes of every task.

        Returns:
            EpisodeBatch: Episodes in task-major order (task 0's episodes
                first), with agent infos ``mean``, ``log_std`` and
                ``task_index``.

        """
        if not self._envs:
            if self._base_env is None:
                raise ValueError('MetaBatchWorker has no environment')
            self._build_slots(
                MetaBatchEnvUpdate([_Identity()], [0], 1))
        n_tasks = len(self._task_indices)
        if self._params is not None and \
                len(next(iter(self._params.values()))) != n_tasks:
            raise ValueError(
                f'{len(next(iter(self._params.values())))} parameter sets '
                f'for {n_tasks} tasks')
        n_eps = self._episodes_per_task
        k = len(self._envs) // n_tasks
        action_dim = int(np.prod(self._envs[0].spec.action_space.shape))
        # noise[i * R + e, t]: drawn up front so that an episode does not
        # depend on how the episodes are batched.
        noise = torch.randn(
            (n_tasks * n_eps, self._max_episode_length, action_dim),
            generator=self._generator).numpy()
        recorders = [_EpisodeRecorder() for _ in range(n_tasks * n_eps)]
        if self._batched:
            for first in range(0, n_eps, k):
                episodes = [(i, e) for i in range(n_tasks)
                            for e in range(first, min(n_eps, first + k))]
                self._rollout_lockstep(
                    [i * k + e % k for i, e in episodes],
                    [recorders[i * n_eps + e] for i, e in episodes],
                    noise[[i * n_eps + e for i, e in episodes]])
        else:
            for i in range(n_tasks):
                for e in range(n_eps):
                    self._rollout_one(i * k + e % k, i,
                                      recorders[i * n_eps + e],
                                      noise[i * n_eps + e])
        return self._to_episode_batch(recorders)

    def _rollout_lockstep(self, env_ids, recorders, noise):
        """One episode on each env, in lockstep, one forward per step."""
        first = []
        for env_id, rec in zip(env_ids, recorders):
            first_obs, rec.episode_info = self._envs[env_id].reset()
            first.append(first_obs)
        obs = np.stack(first)
        active = np.ones(len(env_ids), dtype=bool)
        for t in range(self._max_episode_length):
            if not active.any():
                break
            mean, log_std = self._distribution(obs, None)
            actions = mean + np.exp(log_std) * noise[:, t]
            for row in np.flatnonzero(active):
                rec = recorders[row]
                if self._step(env_ids[row], rec, obs[row].copy(),
                              actions[row], mean[row], log_std[row]):
                    active[row] = False
                obs[row] = rec.next_observation

    def _rollout_one(self, env_id, task, recorder, noise):
        """One episode of ``task`` alone, one policy forward per step."""
        obs, recorder.episode_info = self._envs[env_id].reset()
        for t in range(self._max_episode_length):
            mean, log_std = self._distribution(obs[None], task)
            action = mean[0] + np.exp(log_std[0]) * noise[t]
            if self._step(env_id, recorder, obs, action, mean[0], log_std[0]):
                break
            obs = recorder.next_observation

    def _step(self, env_id, recorder, obs, action, mean, log_std) -> bool:
        """Step one env; True when its episode is over."""
        env_step = self._envs[env_id].step(action)
        recorder.add(obs, env_step, mean, log_std)
        recorder.next_observation = env_step.observation
        if env_step.terminal or len(
                recorder.rewards) >= self._max_episode_length:
            recorder.last_observation = env_step.observation
            return True
        return False

    def _to_episode_batch(self, steps: Sequence['_EpisodeRecorder']):
        lengths = np.asarray([len(r.rewards) for r in steps], dtype=np.int64)
        task_index = np.concatenate([
            np.full(n, self._task_indices[s // self._episodes_per_task],
                    dtype=np.int64) for s, n in enumerate(lengths)
        ])
        return EpisodeBatch(
            env_spec=self._envs[0].spec,
            episode_infos=_stack_dicts([r.episode_info for r in steps]),
            observations=np.concatenate([r.observations for r in steps]),
            last_observations=np.stack([r.last_observation for r in steps]),
            actions=np.concatenate([r.actions for r in steps]),
            rewards=np.concatenate([r.rewards for r in steps]),
            env_infos=_stack_dicts([i for r in steps for i in r.env_infos]),
            agent_infos=dict(mean=np.concatenate([r.means for r in steps]),
                             log_std=np.concatenate(
                                 [r.log_stds for r in steps]),
                             task_index=task_index),
            step_types=np.asarray(
                [t for r in steps for t in r.step_types], dtype=StepType),
            lengths=lengths)

    def shutdown(self):
        """Close every environment."""
        for env in self._envs:
            env.close()
        if self._base_env is not None:
            self._base_env.close()


class _Identity(EnvUpdate):
    """EnvUpdate that keeps the environment as it is."""

    def __call__(self, old_env=None):
        return old_env


class _EpisodeRecorder:
    """Per-slot lists of one episode's steps."""

    def __init__(self):
        self.observations, self.actions, self.rewards = [], [], []
        self.env_infos, self.means, self.log_stds = [], [], []
        self.step_types = []
        self.episode_info = {}
        self.last_observation = None
        self.next_observation = None

    def add(self, observation, env_step, mean, log_std):
        self.observations.append(observation)
        self.actions.append(env_step.action)
        self.rewards.append(env_step.reward)
        self.env_infos.append(env_step.env_info)
        self.means.append(mean)
        self.log_stds.append(log_std)
        self.step_types.append(env_step.step_type)


def _stack_dicts(dicts: List[dict]) -> Dict[str, np.ndarray]:
    """Stack a list of same-keyed dicts into a dict of arrays."""
    if not dicts:
        return {}
    keys = dicts[0].keys()
    for d in dicts:
        if d.keys() != keys:
            raise ValueError('environment infos must have the same keys at '
                             f'every step, got {sorted(keys)} and '
                             f'{sorted(d.keys())}')
    return {k: np.asarray([d[k] for d in dicts]) for k in keys}


def split_meta_batch(items: Sequence, n_workers: int) -> List[list]:
    """Split a meta-batch's tasks into ``n_workers`` contiguous chunks."""
    bounds = np.linspace(0, len(items), n_workers + 1).round().astype(int)
    return [list(items[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def sampler_num_workers(sampler) -> int:
    """Number of workers of a garage sampler (Local, Multiprocessing, Ray)."""
    factory = getattr(sampler, '_factory', None) or getattr(
        sampler, '_worker_factory', None)
    if factory is None:
        raise TypeError(f'cannot tell the worker count of {sampler!r}')
    return factory.n_workers


def obtain_meta_batch(sampler, task_updates: Sequence[EnvUpdate],
                      params: Sequence[Dict[str, torch.Tensor]],
                      episodes_per_task: int) -> EpisodeBatch:
    """Sample ``episodes_per_task`` episodes of every task in one sampler call.

    Args:
        sampler (garage.sampler.Sampler): A sampler whose workers are
            :class:`MetaBatchWorker`.
        task_updates (list[EnvUpdate]): One EnvUpdate per task.
        params (list[dict]): Policy parameters for each task.
        episodes_per_task (int): Episodes per task.

    Returns:
        EpisodeBatch: Task-major episodes (task 0's episodes first).

    """
    n_workers = sampler_num_workers(sampler)
    if len(task_updates) < n_workers:
        raise ValueError(
            f'meta_batch_size ({len(task_updates)}) must be >= the number of '
            f'sampler workers ({n_workers})')
    indices = split_meta_batch(list(range(len(task_updates))), n_workers)
    detached = [{k: v.detach().clone() for k, v in p.items()} for p in params]
    agent_updates = [
        MetaBatchAgentUpdate([detached[i] for i in idx]) for idx in indices
    ]
    env_updates = [
        MetaBatchEnvUpdate([task_updates[i] for i in idx], idx,
                           episodes_per_task) for idx in indices
    ]
    return sampler.obtain_exact_episodes(1, agent_updates, env_updates)

