"""What one sampler worker does: step many episodes in lockstep, each keyed.

A :class:`RolloutWorker` lives in the main process (the ``'local'`` backend),
in a worker process of our own pool (``'multiprocessing'``) or in a Ray actor
(``'ray'``); the code is the same everywhere. It receives a :class:`Job` (the
episodes of some tasks it must sample, each task's policy parameters and the
task's ``EnvUpdate``), steps all of the job's episodes in lockstep with one
batched policy forward per step over the stacked per-task parameters (like
the original implementation's vectorised ``MetaSampler``), and returns an
:class:`EpisodeArrays`. The forward is :class:`~garage_promp.policies.BatchedGaussianMLP`
for garage's ``GaussianMLPPolicy`` (checked against the generic path when the
worker is made) and ``torch.func.vmap`` of ``functional_call`` otherwise.

Determinism by construction: every random draw of an episode comes from
:func:`episode_seed_sequence` of (experiment seed, sampling round, task slot,
episode index):

* the action noise ``noise[t]`` (drawn for the whole episode up front);
* the environment's reset noise: ``env.seed(s)`` is called before every
  ``reset()`` with ``s`` from the same key.

No draw depends on which worker runs the episode, on how the episodes are
batched, or on what the worker sampled before, so a seed gives the same
episodes with any backend and any worker count. This holds for every env
whose randomness goes through ``seed`` (garage_promp's envs, Meta-World, and
any gymnasium env through ``reset(seed=...)``); an env that draws from a
generator of its own that ``seed`` does not reach cannot be reproduced by
any sampler.
"""
import copy
import dataclasses
import math
from typing import Any, Dict, List, Sequence, Tuple
import warnings

from garage_promp._seeding import (
    assembled_entropy,
    column_words,
    generate_state,
    generator_for,
    int_words,
    pcg64_states,
    seed_sequence_pools,
)
from garage_promp.envs.base import spawned_child
from garage_promp.envs.gymnasium_env import finiteness_checked_by_caller, seeders
from garage_promp.policies import BatchedGaussianMLP, distribution_params
from garage_promp.sampler.lean import _TERMINAL, LeanStepper
from garage_promp.sampler.options import check_sampler_options

import numpy as np
import torch
from torch.func import vmap

NumpyParams = Dict[str, np.ndarray]

#: Rows per block of the sampler's batched policy forward (see
#: ``RolloutWorker._forward_plan``).
FORWARD_BLOCK = 4


def _stacked_params(params: List[Dict[str, torch.Tensor]], blocks: Sequence[int]
                    ) -> Dict[str, torch.Tensor]:
    """Each parameter of the shares, one copy per forward block (share ``i`` has
    ``blocks[i]`` blocks), stacked along a new first axis.

    Where every share's parameters are the same (bit for bit: a zero's sign too),
    one set broadcast over the blocks (``expand``, a zero stride: nothing is copied,
    and the forward reads the set once); otherwise each share's set repeated for its
    blocks.
    """
    def same_bits(a, b):
        return a is b or (a.shape == b.shape and a.dtype == b.dtype and torch.equal(
            a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))

    first = params[0]
    n_blocks = int(sum(blocks))
    if all(same_bits(p[k], first[k]) for p in params[1:] for k in first):
        return {k: value.unsqueeze(0).expand(n_blocks, *value.shape)
                for k, value in first.items()}
    repeats = torch.as_tensor(blocks)
    return {k: torch.stack([p[k] for p in params]).repeat_interleave(repeats, dim=0)
            for k in first}


def episode_seed_sequence(seed: int, key: Sequence[int], task: int,
                          episode: int) -> np.random.SeedSequence:
    """The seed material of one episode.

    Args:
        seed (int): The experiment seed.
        key (tuple[int, ...]): The sampling round (see ``MetaSampler``).
        task (int): The task's slot in the meta-batch.
        episode (int): The episode's index within its task.

    Returns:
        numpy.random.SeedSequence: Independent of the worker that runs it.

    """
    return np.random.SeedSequence(int(seed),
                                  spawn_key=(*map(int, key), int(task),
                                             int(episode)))


def episode_seed_sequences(seed: int, key: Sequence[int], task: int, episode: int
                           ) -> Tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """The seed material of an episode's env (reset noise) and of its action noise.

    The two children ``episode_seed_sequence(seed, key, task, episode).spawn(2)``
    gives, built directly: a child is its parent's entropy with its index appended to
    the spawn key, so hashing the parent (done at every episode) is not needed.

    Returns:
        tuple[numpy.random.SeedSequence, numpy.random.SeedSequence]: The env's and
            the action noise's.

    """
    spawn_key = (*map(int, key), int(task), int(episode))
    return tuple(spawned_child(int(seed), spawn_key, child) for child in (0, 1))


def wave_seeds(seed: int, key: Sequence[int], episodes: Sequence[Tuple[int, int]]
               ) -> Tuple[List[int], List[Any]]:
    """Each ``(task, episode)``'s env seed and its action-noise seed material.

    The env seed is ``generate_state(1)[0]`` of the episode's env child
    (:func:`episode_seed_sequences`), and the noise material the state of
    ``PCG64`` on its noise child (a dict, :func:`garage_promp._seeding.pcg64_state`):
    numpy's arithmetic computed for all of a wave's episodes at once. Where a
    word of the seed material is not one 32-bit word (a key element of 2**32 or
    more), the noise material is the child ``SeedSequence`` itself, built one by one.
    """
    spawn = [(*map(int, key), int(task), int(episode)) for task, episode in episodes]
    columns = [column_words(column) for column in zip(*spawn)] if spawn else []
    if not spawn or any(column is None for column in columns):
        children = [episode_seed_sequences(seed, key, task, episode)
                    for task, episode in episodes]
        return ([int(env_seq.generate_state(1)[0]) for env_seq, _ in children],
                [noise_seq for _, noise_seq in children])
    n = len(spawn)
    words = int_words(int(seed))
    entropy = np.broadcast_to(words, (n, len(words)))
    base = np.stack(columns, axis=1)
    env_seq, noise_seq = (
        assembled_entropy(entropy, np.concatenate([base, np.full((n, 1), child, np.uint32)],
                                                  axis=1)) for child in (0, 1))
    env_seeds = generate_state(seed_sequence_pools(env_seq), 1)[:, 0].tolist()
    return env_seeds, pcg64_states(noise_seq)


@dataclasses.dataclass
class TaskShare:
    """Episodes ``first .. first + count - 1`` of one task, for one worker.

    Attributes:
        task (int): The task's slot in the meta-batch (``task_index``).
        update (callable): The task's ``EnvUpdate`` (``update(old_env)``
            returns the env set to the task).
        params (dict[str, numpy.ndarray]): Policy parameters of the task.
        first (int): Index of the first episode.
        count (int): Number of episodes.

    """
    task: int
    update: Any
    params: NumpyParams
    first: int
    count: int


@dataclasses.dataclass
class Job:
    """One worker's part of one sampler call.

    Attributes:
        key (tuple[int, ...]): The sampling round (see ``MetaSampler``).
        shares (list[TaskShare]): Task-major, episode-ordered.
        deterministic (bool): Act with the policy's mean (no action noise),
            as evaluation protocols that report the deterministic policy do.

    """
    key: Tuple[int, ...]
    shares: List[TaskShare]
    deterministic: bool = False

    @property
    def n_episodes(self) -> int:
        """int: Episodes in the job."""
        return sum(share.count for share in self.shares)


@dataclasses.dataclass
class EpisodeArrays:
    """A worker's episodes, in the order of its job, as flat arrays.

    The fields are those of garage's ``EpisodeBatch``, without the env spec;
    ``task_index`` is per step.
    """
    lengths: np.ndarray
    observations: np.ndarray
    last_observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    step_types: np.ndarray
    env_infos: Dict[str, np.ndarray]
    episode_infos: Dict[str, np.ndarray]
    mean: np.ndarray
    log_std: np.ndarray
    task_index: np.ndarray

    def split(self, counts: Sequence[int]) -> List['EpisodeArrays']:
        """Consecutive runs of ``counts[j]`` episodes each (e.g. a job's shares)."""
        ends = np.cumsum(counts)
        if len(ends) == 0 or ends[-1] != len(self.lengths):
            raise ValueError(f'{sum(counts)} episodes asked for, {len(self.lengths)} held')
        step_ends = np.concatenate(([0], np.cumsum(self.lengths)))
        parts, first = [], 0
        for end in ends:
            steps = slice(step_ends[first], step_ends[end])
            episodes = slice(first, end)
            parts.append(EpisodeArrays(
                lengths=self.lengths[episodes],
                observations=self.observations[steps],
                last_observations=self.last_observations[episodes],
                actions=self.actions[steps],
                rewards=self.rewards[steps],
                step_types=self.step_types[steps],
                env_infos={k: v[steps] for k, v in self.env_infos.items()},
                episode_infos={k: v[episodes] for k, v in self.episode_infos.items()},
                mean=self.mean[steps],
                log_std=self.log_std[steps],
                task_index=self.task_index[steps]))
            first = end
        return parts


@dataclasses.dataclass
class Context:
    """Where a worker is: reported with any exception it raises."""
    env: str = '?'
    task: Any = None
    task_index: int | None = None
    episode: int | None = None
    step: int | None = None
    making: int | None = None  # the env copy being made (its index in the worker's pool)

    def describe(self) -> str:
        """One line naming the env, task, slot and step (or the env copy being made)."""
        if self.making is not None:
            return f'making its env copy {self.making + 1} (env {self.env})'
        where = f'env {self.env}, task {self.task!r}'
        if self.task_index is not None:
            where += f', task slot {self.task_index}'
        if self.episode is not None:
            where += f', episode {self.episode}'
        if self.step is not None:
            where += f', step {self.step}'
        return where


class RolloutWorker:
    """Samples jobs: many episodes in lockstep, each at its task's parameters.

    Args:
        policy (torch.nn.Module): The policy (a garage torch Gaussian policy);
            only its structure is used, parameters come with every job.
        env (garage.Environment): A template env, copied to make new envs.
        seed (int): The experiment seed.
        max_episode_length (int): Maximum episode length T.
        envs_per_task (int or None): Env copies per task share; None keeps
            one per episode (all episodes of a share at once); k runs them in
            waves of k, which bounds memory for heavy envs.
        batched (bool): One batched forward per step for all episodes
            (default) or one forward per episode and step (same episodes;
            for reference and benchmarks).
        max_envs_per_worker (int or None): A budget of env copies for the
            worker's whole job: each of its S task shares gets at most
            ``max(1, budget // S)`` copies (and at most ``envs_per_task``).
            Bounds memory for heavy envs while keeping many episodes per
            policy forward when a worker holds few tasks.
        lean (bool): Step envs that allow it together, without the per-step
            wrapper layers (:mod:`garage_promp.sampler.lean`; same episodes).

    Raises:
        ValueError: If an option is out of range, naming it
            (:func:`~garage_promp.sampler.options.check_sampler_options`).

    """

    def __init__(self, policy, env, seed: int, max_episode_length: int,
                 envs_per_task: int | None = None, batched: bool = True,
                 max_envs_per_worker: int | None = None, lean: bool = True):
        options = check_sampler_options(
            seed=seed, max_episode_length=max_episode_length, envs_per_task=envs_per_task,
            batched=batched, max_envs_per_worker=max_envs_per_worker, lean=lean)
        self._policy = policy
        self._lean = options['lean']
        #: Env steps, resets and env copies made so far (read by a pool worker's progress
        #: reports and the in-process watchdog: a worker making many copies is not stuck).
        self.progress = 0
        self._template = env
        self._seed = options['seed']
        self._max_episode_length = options['max_episode_length']
        self._envs_per_task = options['envs_per_task']
        self._batched = options['batched']
        self._max_envs_per_worker = options['max_envs_per_worker']
        self._pool: List[Any] = []
        self._where = None
        self._making = None  # the pool position of the env copy being made
        self._noise_rng = None  # the action noise's generator, re-seeded every episode
        self._fast = self._checked_fast_forward() if self._batched else None

    def _checked_fast_forward(self):
        """The policy's :class:`BatchedGaussianMLP`, if it agrees with vmap.

        Checked once, on fixed inputs (so every worker decides alike), at
        perturbed parameters; a policy it does not reproduce keeps vmap.
        """
        fast = BatchedGaussianMLP.of(self._policy)
        if fast is None:
            return None
        generator = torch.Generator().manual_seed(0)
        params = {name: torch.stack([value.detach() + 0.1 * torch.randn(
            value.shape, generator=generator) for _ in range(2)])
            for name, value in self._policy.named_parameters()}
        obs_dim = int(np.prod(self._template.spec.observation_space.shape))
        obs = torch.randn((2, 3, obs_dim), generator=generator)
        with torch.no_grad():
            expected = vmap(lambda p, o: distribution_params(self._policy, p, o))(params, obs)
            got = fast(params, obs)
        if all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, expected)):
            return fast
        return None

    # ---------------------------------------------------------------- envs
    def _env(self, position: int, update) -> Any:
        """The pool's env at ``position`` (made if missing), set by ``update``."""
        try:
            while len(self._pool) <= position:
                self._making = len(self._pool)
                source = self._pool[0] if self._pool else self._template
                self._pool.append(copy.deepcopy(source))
                self.progress += 1
        finally:
            self._making = None
        old = self._pool[position]
        new = update(old)
        if not all(callable(getattr(new, m, None)) for m in ('reset', 'step', 'close')):
            # Kept out of the pool: the worker's clean-up closes every env there.
            raise ValueError(f"the task's env update {update!r} returned {new!r}, not an "
                             'environment (an EnvUpdate returns the env to sample)')
        self._pool[position] = new
        if new is not old:
            check_env_family(new, self._template, 'the sampler')
        return self._pool[position]

    def _build_envs(self, job: Job) -> List[List[Any]]:
        envs, position = [], 0
        for share in job.shares:
            k = min(share.count, self._envs_per_task or share.count)
            if self._max_envs_per_worker:
                k = min(k, max(1, self._max_envs_per_worker // len(job.shares)))
            self._where = (self._template, share, 0, None)
            envs.append([self._env(position + j, share.update)
                         for j in range(k)])
            position += k
        return envs

    # -------------------------------------------------------------- policy
    def _forward_plan(self, rows_per_share: List[int],
                      params: List[Dict[str, torch.Tensor]],
                      first_episodes: Sequence[int]) -> dict:
        """What every step of a wave reuses: block layout and stacked parameters.

        The batched forward runs over blocks of :data:`FORWARD_BLOCK` rows,
        each block one share's rows (zero-padded) at that share's parameters,
        and each episode's row at the block position its index in the task
        gives (``episode mod FORWARD_BLOCK``; ``first_episodes`` holds each
        share's first episode in the wave, consecutive ones follow). A row's
        result then depends neither on how many rows its share has in this
        worker and wave nor on which other episodes share its block: a GEMM's
        rounding depends on its shape, and every block has the same shape,
        and for some shapes on the row's position in the block (measured with
        this machine's BLAS for 39 inputs and 8 outputs: a row at position 0
        and the same row at position 1 differ in the last bit; other rows'
        values do not matter). That is what makes a seed give the same
        episodes bit for bit with any worker count and any budget of env
        copies (a worker holds a part of a task's episodes, and a budget
        splits them into waves).

        Where every share's parameters are equal (the first sampling round,
        every task at θ), the blocks' parameters are one set broadcast over the
        blocks (a zero batch stride) rather than copied block by block: the
        batched matrix products run the same products on the same numbers
        (each block's GEMM has the same shape and strides, and its weights the
        same alignment), reading the weights once rather than once a block
        (:func:`_stacked_params`).

        A wave of a single block (one share alone in a wave whose episodes fall in one
        aligned block: a worker's one task of a few episodes, a small budget's waves)
        runs as two, the second all padding: torch's batched product of a single matrix
        takes another kernel than that of several, which rounds otherwise for some
        shapes (a one-unit output layer after 100 or more hidden units, one thread: the
        1-D point env with wider layers), so the same episode among other tasks' blocks
        in another worker layout would differ in its last bits.
        """
        offsets = [first % FORWARD_BLOCK for first in first_episodes]
        blocks = [-(-(offset + count) // FORWARD_BLOCK)
                  for offset, count in zip(offsets, rows_per_share)]
        starts = np.concatenate(([0], np.cumsum(blocks)[:-1])) * FORWARD_BLOCK
        keep = torch.as_tensor([int(start) + offset + j for start, offset, count
                                in zip(starts, offsets, rows_per_share) for j in range(count)])
        if sum(blocks) == 1:  # one share's one block: a second, of zeros, after it
            blocks = [2]
        stacked = _stacked_params(params, blocks) if self._batched else None
        return dict(rows_per_share=rows_per_share, params=params, n_blocks=int(sum(blocks)),
                    keep=keep, stacked=stacked)

    def _distribution(self, obs: np.ndarray, plan: dict):
        """Mean and log-std (numpy float32) of every row, each at its share's params."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32)
        params = plan['params']
        with torch.no_grad():
            if not self._batched:
                outs, row = [], 0
                for count, p in zip(plan['rows_per_share'], params):
                    for _ in range(count):
                        outs.append(distribution_params(self._policy, p,
                                                        obs_t[row:row + 1]))
                        row += 1
                mean = torch.cat([m for m, _ in outs])
                log_std = torch.cat([s for _, s in outs])
            else:
                mean, log_std = self._blocked_forward(obs_t, plan, self._fast)
        return mean.numpy(), log_std.numpy()

    def _blocked_forward(self, obs, plan, forward=None):
        """One forward over every share's rows, in blocks of :data:`FORWARD_BLOCK`.

        ``forward(stacked_params, obs)`` maps ``(B, FORWARD_BLOCK, O)``
        observations to ``(B, FORWARD_BLOCK, A)`` means and log-stds; by
        default vmap of the policy.
        """
        n_rows = plan['n_blocks'] * FORWARD_BLOCK
        # The padded rows are zeros and stay so: one buffer a wave, its kept rows rewritten.
        padded = plan.get('padded')
        if padded is None:
            padded = plan['padded'] = obs.new_zeros((n_rows, obs.shape[-1]))
        padded[plan['keep']] = obs
        blocks = padded.reshape(plan['n_blocks'], FORWARD_BLOCK, -1)
        if forward is None:
            forward = vmap(lambda p, o: distribution_params(self._policy, p, o))
        elif isinstance(forward, BatchedGaussianMLP):
            # A wave's parameters stay, so its log-stds are the first step's (computed as
            # every step would compute them; the callers only read them).
            mean = forward.means(plan['stacked'], blocks)
            if 'log_std' not in plan:
                plan['log_std'] = forward.log_stds(plan['stacked'], mean).reshape(
                    n_rows, -1)[plan['keep']]
            return mean.reshape(n_rows, -1)[plan['keep']], plan['log_std']
        mean, log_std = forward(plan['stacked'], blocks)
        return (mean.reshape(n_rows, -1)[plan['keep']],
                log_std.reshape(n_rows, -1)[plan['keep']])

    # ------------------------------------------------------------- sampling
    def sample(self, job: Job) -> EpisodeArrays:
        """Sample every episode of ``job``.

        Returns:
            EpisodeArrays: The episodes in the job's order (share by share,
                episode index ascending).

        """
        self._where = None
        envs = self._build_envs(job)
        params = [{k: torch.as_tensor(v) for k, v in share.params.items()}
                  for share in job.shares]
        recorders = [[_EpisodeRecorder() for _ in range(share.count)]
                     for share in job.shares]
        n_waves = max(math.ceil(share.count / len(env_list))
                      for share, env_list in zip(job.shares, envs))
        for wave in range(n_waves):
            rows = []  # (share, episode offset, env)
            for s, (share, env_list) in enumerate(zip(job.shares, envs)):
                k = len(env_list)
                for j in range(wave * k, min(share.count, (wave + 1) * k)):
                    rows.append((s, j, env_list[j % k]))
            self._run_wave(job, rows, params, recorders)
        flat = [rec for share_recs in recorders for rec in share_recs]
        tasks = [share.task for share in job.shares for _ in range(share.count)]
        try:
            arrays = _to_arrays(flat, tasks)
            if 'success' in arrays.env_infos:
                self._check_success(arrays)
        except _InfoError as error:
            self._where = self._place(job, envs, [len(r.rewards) for r in flat], error.step)
            raise ValueError(f'{error} ({self.context.describe()})') from None
        return arrays

    @staticmethod
    def _place(job: Job, envs, lengths: Sequence[int], step: int):
        """``_where`` (env, share, episode offset, step number) of the ``step``-th of a job's
        steps (its episodes' steps one after another, in the job's order)."""
        ends = np.cumsum(lengths)
        episode = int(np.searchsorted(ends, step, side='right'))
        counts = np.cumsum([share.count for share in job.shares])
        s = int(np.searchsorted(counts, episode, side='right'))
        j = episode - int(counts[s] - job.shares[s].count)
        return (envs[s][j % len(envs[s])], job.shares[s], j,
                step - int(ends[episode] - lengths[episode]) + 1)

    @staticmethod
    def _check_success(arrays: EpisodeArrays) -> None:
        """Refuse a ``success`` env info other than 0 or 1 (False or True), naming where.

        It becomes ``SuccessRate`` (an episode succeeds where any step's ``success`` is
        true, in garage's ``log_performance`` too), where a NaN or a 2.0 would count as a
        success without a word.
        """
        values = np.asarray(arrays.env_infos['success'])
        if values.dtype == np.bool_:
            return
        rows = values.reshape(len(values), -1)
        if values.dtype.kind in 'iuf':
            good = (rows == 0) | (rows == 1)
        else:  # objects, or text (numpy makes numbers beside a text into text)
            good = np.vectorize(_is_flag, otypes=[bool])(rows)
        bad = np.flatnonzero(~good.all(axis=1))
        if len(bad):
            raise _InfoError(
                "the environment's info 'success' must be 0 or 1 (False or True) at every "
                f'step, got {values[bad[0]]!r}: it is counted into SuccessRate, where NaN or '
                'any other non-zero value would count as a success', int(bad[0]))

    def _run_wave(self, job: Job, rows, params, recorders):
        """Run one episode on each row's env in lockstep."""
        shares = job.shares
        rows_per_share = [sum(1 for r in rows if r[0] == s)
                          for s in range(len(shares))]
        used = [s for s, count in enumerate(rows_per_share) if count]
        # Each share's rows are consecutive episodes; the first one's index in the task.
        first = {}
        for s, j, _ in rows:
            first.setdefault(s, shares[s].first + j)
        plan = self._forward_plan([rows_per_share[s] for s in used],
                                  [params[s] for s in used], [first[s] for s in used])
        first_obs, noise, recs = [], [], []
        env_seeds, noise_seeds = wave_seeds(
            self._seed, job.key, [(shares[s].task, shares[s].first + j) for s, j, _ in rows])
        seed_calls = seeders([env for _, _, env in rows], env_seeds)
        for (s, j, env), seed_env, noise_seed in zip(rows, seed_calls, noise_seeds):
            share = shares[s]
            self._where = (env, share, j, 0)
            if seed_env is not None:
                seed_env()
            obs, info = self._reset(env)
            self.progress += 1
            rec = recorders[s][j]
            rec.episode_info = info
            if not np.isfinite(obs).all():
                _check_finite('observation', obs, self.context)
            first_obs.append(np.asarray(obs, dtype=np.float32))
            action_dim = math.prod(env.spec.action_space.shape)
            # A PCG64 state re-seeds one generator; a SeedSequence makes its own.
            self._noise_rng = generator_for(noise_seed, getattr(self, '_noise_rng', None))
            noise.append(self._noise_rng.standard_normal(
                (self._max_episode_length, action_dim), dtype=np.float32))
            recs.append(rec)
        obs = np.stack(first_obs)
        noise = np.stack(noise)
        if job.deterministic:  # the mean action; the noise streams stay as they are
            noise = np.zeros_like(noise)
        stepper = LeanStepper.of([env for _, _, env in rows]) if self._lean else None
        if stepper is not None:
            stepper.start(range(len(rows)))
            self._run_lean(rows, shares, plan, obs, noise, stepper, recs)
        else:
            # This loop checks every action, reward and observation itself (before
            # stepping, and _check_wave_finite after), so GymnasiumEnv layers skip theirs.
            with finiteness_checked_by_caller([env for _, _, env in rows]):
                self._step_wave(rows, shares, plan, obs, noise, recs)
        self._check_simulations(rows, shares, recs)

    def _check_simulations(self, rows, shares, recs):
        """Refuse a wave in which the simulator reset an env's simulation in the middle of
        an episode (MuJoCo does so, with a printed warning, at a NaN, inf or huge state,
        and steps on, often with finite numbers): asked of every env that can tell
        (``GymnasiumEnv.unstable_simulation``: MuJoCo's gymnasium envs, the package's among
        them), once a wave."""
        for (s, j, env), rec in zip(rows, recs):
            report = getattr(env, 'unstable_simulation', None)
            found = report() if callable(report) else None
            if found is not None:
                self._where = (env, shares[s], j, len(rec.rewards))
                raise FloatingPointError(
                    f'the simulation became unstable by the end of the episode '
                    f'({self.context.describe()}): {found}, so its later steps come from a '
                    "state the task never reached; the task's physical parameters (or the "
                    'actions) are the likely cause')

    def _step_wave(self, rows, shares, plan, obs, noise, recs):
        """The wave's steps on the wrapped path: each env's ``step`` in turn."""
        active = np.ones(len(rows), dtype=bool)
        info_keys = None
        for t in range(self._max_episode_length):
            if not active.any():
                break
            mean, log_std = self._distribution(obs, plan)
            actions = mean + np.exp(log_std) * noise[:, t]
            stepped = np.flatnonzero(active)
            if not np.isfinite(actions[stepped]).all():
                self._raise_policy_not_finite(rows, shares, stepped, actions, t + 1)
            rewards = np.empty(len(stepped))
            for n, row in enumerate(stepped):
                s, j, env = rows[row]
                # Cheap to keep; turned into a Context only on an error.
                self._where = (env, shares[s], j, t + 1)
                rec = recs[row]
                env_step = env.step(actions[row])
                self.progress += 1
                if info_keys is None:
                    info_keys = env_step.env_info.keys()
                self._check_step(env_step, obs.shape[1:], info_keys)
                rec.add(obs[row].copy(), env_step, mean[row], log_std[row])
                rewards[n] = env_step.reward
                obs[row] = env_step.observation
                if env_step.terminal or len(
                        rec.rewards) >= self._max_episode_length:
                    rec.last_observation = env_step.observation
                    active[row] = False
            self._check_wave_finite(shares, rows, stepped, rewards, obs, t + 1)

    def _raise_policy_not_finite(self, rows, shares, stepped, actions, t):
        """Blame the policy (its parameters for this task), not the env, for NaN/inf actions."""
        row = next(r for r in stepped if not np.isfinite(actions[r]).all())
        s, j, env = rows[row]
        self._where = (env, shares[s], j, t)
        raise FloatingPointError(
            f'the policy gave a non-finite action ({self.context.describe()}): '
            f'action={actions[row]!r}. Its parameters for this task are NaN/inf or so large '
            'that the mean overflows; after an inner step, the inner step size (inner_lr) '
            'is the likely cause')

    def _reset(self, env):
        """``env.reset()``, refused (naming the env and episode) unless it returns garage's
        ``(observation, episode_info)`` with an observation of the observation space's shape:
        else a torch shape error in the policy forward, or an unpacking error."""
        out = env.reset()
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(f'env.reset() must return (observation, episode_info) as garage\'s '
                             f'Environment.reset does ({self.context.describe()}), got '
                             f'{type(out).__name__}')
        obs_shape = tuple(env.spec.observation_space.shape)
        if np.shape(out[0]) != obs_shape:
            raise ValueError(f'env.reset() returned an observation of shape {np.shape(out[0])} '
                             f'where its observation space has {obs_shape} '
                             f'({self.context.describe()}): observation={out[0]!r}')
        return out

    def _check_step(self, env_step, obs_shape, info_keys):
        """Refuse, at the step it happens, output that does not fit what the env declared.

        The observation must have the observation space's shape (a ``(1,)``
        or a bare float from a ``Box((2,))`` env would be broadcast into the
        batch), the reward must be one number, and the env infos must have
        the keys of the wave's first step.
        """
        if np.shape(env_step.observation) != obs_shape:
            raise ValueError(
                f'the environment returned an observation of shape '
                f'{np.shape(env_step.observation)} where its observation space has {obs_shape} '
                f'({self.context.describe()}): observation={env_step.observation!r}')
        reward = env_step.reward
        if type(reward) is not float and np.ndim(reward) != 0:  # a float: skip numpy's call
            raise ValueError(
                f'the environment returned a reward of shape {np.shape(env_step.reward)}, '
                f'not a number ({self.context.describe()}): reward={env_step.reward!r}')
        if env_step.env_info.keys() != info_keys:
            raise ValueError(
                'environment infos must have the same keys at every step, got '
                f'{sorted(info_keys)} and {sorted(env_step.env_info.keys())} '
                f'({self.context.describe()})')

    def _run_lean(self, rows, shares, plan, obs, noise, stepper, recs):
        """The wave's steps on the lean path: all envs stepped in one call per step.

        Each step's fields are kept as arrays over the envs it stepped and
        handed to the recorders at the end, each episode's steps in order.
        """
        horizon = self._max_episode_length
        active = np.ones(len(rows), dtype=bool)
        log = []
        for t in range(horizon):
            stepped = np.flatnonzero(active)
            if not len(stepped):
                break
            mean, log_std = self._distribution(obs, plan)
            actions = mean + np.exp(log_std) * noise[:, t]
            if not np.isfinite(actions[stepped]).all():
                self._raise_policy_not_finite(rows, shares, stepped, actions, t + 1)
            s, j, env = rows[stepped[0]]
            self._where = (env, shares[s], j, t + 1)
            # Episodes of a wave start together: every active one is at step t + 1.
            counts = np.full(len(stepped), t + 1)
            try:
                next_obs, rewards, types, infos = stepper.step(stepped, actions[stepped], counts)
            except Exception as error:
                row = getattr(error, 'lean_row', None)
                if row is not None:  # the error is about this env: the context names it
                    s, j, env = rows[row]
                    self._where = (env, shares[s], j, t + 1)
                raise
            self.progress += len(stepped)
            log.append((stepped, obs[stepped], actions[stepped], rewards, types, infos,
                        mean[stepped], log_std[stepped]))
            obs[stepped] = next_obs  # (the log holds copies: fancy indexing)
            # Also with the env's own checks off, as the wrapped path.
            self._check_wave_finite(shares, rows, stepped, rewards, obs, t + 1, next_obs)
            ended = (types == _TERMINAL) | (t + 1 >= horizon)
            for n in np.flatnonzero(ended):
                recs[stepped[n]].last_observation = next_obs[n]
            active[stepped[ended]] = False
        order_rows = np.concatenate([entry[0] for entry in log])
        order = np.argsort(order_rows, kind='stable')  # by env, each in step order
        bounds = np.concatenate(([0], np.cumsum(np.bincount(order_rows, minlength=len(rows)))))
        fields = [np.concatenate([entry[i] for entry in log])[order] for i in (1, 2, 3, 4, 6, 7)]
        info_keys = log[0][5].keys()
        for entry in log:
            if entry[5].keys() != info_keys:
                check_same_keys([log[0][5], entry[5]])
        infos = {k: np.concatenate([entry[5][k] for entry in log])[order] for k in info_keys}
        for row, rec in enumerate(recs):
            part = slice(bounds[row], bounds[row + 1])
            (rec.observations, rec.actions, rec.rewards, rec.step_types, rec.means,
             rec.log_stds) = (f[part] for f in fields)
            rec.env_infos = {k: v[part] for k, v in infos.items()}

    @property
    def context(self) -> Context:
        """Where the worker is (env, task, slot, episode, step)."""
        making = self._making  # (read once: the worker's thread resets it)
        if making is not None:
            return Context(_name(self._template), making=making)
        if self._where is None:
            return Context()
        env, share, j, t = self._where
        return Context(_name(env), _task_of(share.update), share.task,
                       None if t is None else share.first + j, t)

    def _check_wave_finite(self, shares, rows, stepped, rewards, obs, t, new_obs=None):
        """One vectorised check per step for every env of the wave: the rewards and the
        new observations (``new_obs``, else ``obs[stepped]``) of the envs ``stepped``."""
        if not (np.isfinite(rewards).all()
                and np.isfinite(obs[stepped] if new_obs is None else new_obs).all()):
            self._raise_not_finite(shares, rows, stepped, rewards, obs, t)

    def _raise_not_finite(self, shares, rows, stepped, rewards, obs, t):
        for n, row in enumerate(stepped):
            s, j, env = rows[row]
            for field, value in (('reward', rewards[n]),
                                 ('observation', obs[row])):
                if not np.isfinite(value).all():
                    self._where = (env, shares[s], j, t)
                    _check_finite(field, value, self.context)

    def close(self):
        """Close every env of the pool."""
        for env in self._pool:
            env.close()
        self._pool = []


def check_env_family(env, reference, what: str, task_sampler: str = 'the task sampler',
                     horizon: int | None = None) -> None:
    """Raise if ``env``'s observation or action shape differs from ``reference``'s; warn
    (given ``horizon``) if its declared episode length differs from the episodes sampled.

    A task sampler of another env family than the training env would
    otherwise fail later, inside the policy, with a bare shape error (for a
    meta-evaluator's, after a whole training epoch). Envs that declare
    another ``max_episode_length`` are sampled at the sampler's horizon, or
    end at their own limit first: a warning says so (a task sampler built
    with a default horizon is common and harmless; one that differs from
    the training env by mistake is not). ``task_sampler`` names the task
    sampler in the message.
    """
    for name in ('observation_space', 'action_space'):
        got = getattr(getattr(env, 'spec', None), name, None)
        want = getattr(getattr(reference, 'spec', None), name, None)
        if got is not None and want is not None and got.shape != want.shape:
            space = name.replace('_', ' ')
            raise ValueError(
                f"{task_sampler}'s env {_name(env)} has {space} shape {got.shape}, but "
                f'{what} was built for {_name(reference)} with {want.shape}: {task_sampler} '
                "must build envs of the training env's family")
    declared = getattr(getattr(env, 'spec', None), 'max_episode_length', None)
    if horizon is not None and isinstance(declared, int) and declared != horizon:
        warnings.warn(
            f"{task_sampler}'s env {_name(env)} has max_episode_length={declared}, but {what} "
            f'samples episodes of {horizon} steps: its episodes end at the shorter of the two',
            stacklevel=3)


def _name(env) -> str:
    inner = getattr(env, 'unwrapped', env)
    return type(inner).__name__


def _task_of(update) -> Any:
    """The task an EnvUpdate sets, for error messages."""
    for attr in ('_task', 'task'):
        if hasattr(update, attr):
            return getattr(update, attr)
    return type(update).__name__


def _check_finite(field: str, value, context: Context):
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f'the environment returned a non-finite {field} '
            f'({context.describe()}): {field}={value!r}')


class _EpisodeRecorder:
    """One episode's steps, as lists."""

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


def stack_dicts(dicts: List[dict]) -> Dict[str, np.ndarray]:
    """Stack same-keyed dicts into a dict of arrays.

    Raises:
        ValueError: If the dicts do not all have the same keys.

    """
    if not dicts:
        return {}
    check_same_keys(dicts)
    return {k: np.asarray([d[k] for d in dicts]) for k in dicts[0]}


def check_same_keys(dicts: Sequence[dict]):
    """Raise ValueError unless every dict has the keys of the first."""
    keys = dicts[0].keys()
    for d in dicts:
        if d.keys() != keys:
            raise ValueError('environment infos must have the same keys at '
                             f'every step, got {sorted(keys)} and '
                             f'{sorted(d.keys())}')


def _stack_env_infos(recorders: Sequence[_EpisodeRecorder]) -> Dict[str, np.ndarray]:
    """Every step's env infos as arrays: from per-step dicts, or the lean path's arrays."""
    if recorders and all(isinstance(r.env_infos, dict) for r in recorders):
        check_same_keys([r.env_infos for r in recorders])
        return {k: np.concatenate([r.env_infos[k] for r in recorders])
                for k in recorders[0].env_infos}
    steps = []
    for r in recorders:  # lean and wrapped episodes mixed: back to per-step dicts
        if isinstance(r.env_infos, dict):
            steps += [{k: v[t] for k, v in r.env_infos.items()} for t in range(len(r.rewards))]
        else:
            steps += r.env_infos
    try:
        return stack_dicts(steps)
    except (ValueError, TypeError) as error:  # name the info that does not stack
        for key in steps[0] if steps else ():
            shapes = [_shape_of(step.get(key)) for step in steps]
            if len(set(shapes)) > 1:
                at = next(i for i, shape in enumerate(shapes) if shape != shapes[0])
                raise _InfoError(f'environment info {key!r} must have one shape at every step, '
                                 f'got shapes {sorted(set(shapes), key=str)[:4]}; '
                                 f'{shapes[0]} at the first step', at) from error
        raise


class _InfoError(ValueError):
    """An env info that does not fit, found at ``step`` of a job's steps (all its episodes'
    steps one after another); :meth:`RolloutWorker.sample` names the place."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


def _is_flag(value) -> bool:
    """Whether an env info value is 0 or 1 (a number, a bool or the text of a number)."""
    if isinstance(value, (str, np.str_)):
        try:
            value = float(value)
        except ValueError:
            return False
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return value in (0, 1)
    return False


def _shape_of(value) -> Any:
    """``np.shape`` of an env info, or what it is where it has none (a ragged list)."""
    try:
        return np.shape(value)
    except ValueError:
        return 'ragged'


def _to_arrays(recorders: Sequence[_EpisodeRecorder],
               tasks: Sequence[int]) -> EpisodeArrays:
    lengths = np.asarray([len(r.rewards) for r in recorders], dtype=np.int64)
    return EpisodeArrays(
        lengths=lengths,
        observations=np.concatenate([r.observations for r in recorders]),
        last_observations=np.stack([r.last_observation for r in recorders]),
        actions=np.concatenate([r.actions for r in recorders]),
        rewards=np.concatenate([r.rewards for r in recorders]),
        step_types=np.concatenate([r.step_types for r in recorders]),
        env_infos=_stack_env_infos(recorders),
        episode_infos=stack_dicts([r.episode_info for r in recorders]),
        mean=np.concatenate([r.means for r in recorders]),
        log_std=np.concatenate([r.log_stds for r in recorders]),
        task_index=np.repeat(np.asarray(tasks, dtype=np.int64), lengths))
