"""MetaSampler: identical episodes on every backend, errors that surface, no hang."""
import contextlib
import os
import pathlib
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
import types

import garage_promp
from garage_promp.envs import PointEnvCorner
from garage_promp.envs._tasks import CORNERS
from garage_promp.policies import AdaptedPolicy
from garage_promp.sampler import (
    InProcessBackend,
    MetaSampler,
    ProcessPoolBackend,
    RayBackend,
    RolloutWorker,
    SamplerWorkerError,
    backends,
    split_episodes,
)
from garage_promp.sampler.rollout import Job

from garage import EnvStep
from garage.experiment.task_sampler import SetTaskSampler
from garage.sampler.env_update import SetTaskUpdate
from garage.torch.policies import GaussianMLPPolicy
import numpy as np
import psutil
import pytest
import torch

from tests.helpers import HORIZON, LongPointEnv, ShortPointEnv, make_setup

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _children():
    return psutil.Process().children(recursive=True)


def _assert_no_children(timeout=10.):
    deadline = time.time() + timeout
    while _children() and time.time() < deadline:
        time.sleep(0.1)
    assert not _children(), [p.cmdline() for p in _children()]


def _early_ending_tasks():
    """Goals close to the start: some episodes end early, some do not."""
    return [SetTaskUpdate(LongPointEnv, {'goal': np.array([0.2, g])}, None)
            for g in (0., 0.1, -0.1, 0.2, 0.05)]


def _noisy_params(policy, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [{k: v.detach() + 0.3 * torch.randn(v.shape, generator=gen)
             for k, v in policy.named_parameters()} for _ in range(n)]


def _sample_early_ending(kind, n_workers, batched=True, envs_per_task=None,
                         rounds=2, max_envs_per_worker=None):
    env, policy, sampler, _ = make_setup(7, n_workers=n_workers, kind=kind,
                                         env_class=LongPointEnv,
                                         batched=batched,
                                         envs_per_task=envs_per_task,
                                         max_envs_per_worker=max_envs_per_worker)
    tasks = _early_ending_tasks()
    params = _noisy_params(policy, len(tasks))
    try:
        return [sampler.obtain_meta_batch(tasks, params, 3)
                for _ in range(rounds)]
    finally:
        sampler.shutdown_worker()


def _sample_reset_noise(kind, n_workers):
    """PointEnvCorner draws its start state from the env's reset noise."""
    env = PointEnvCorner()
    torch.manual_seed(0)
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    sampler = garage_promp.make_sampler(policy, env, kind=kind,
                                        n_workers=n_workers, seed=3,
                                        max_episode_length=6)
    tasks = [SetTaskUpdate(PointEnvCorner, goal, None) for goal in CORNERS[:3]]
    try:
        return [sampler.obtain_meta_batch(tasks, _noisy_params(policy, 3), 2)]
    finally:
        sampler.shutdown_worker()


def _assert_identical(first, second):
    for a, b in zip(first, second):
        for field in ('observations', 'actions', 'rewards', 'lengths',
                      'last_observations', 'step_types'):
            np.testing.assert_array_equal(getattr(a, field),
                                          getattr(b, field), err_msg=field)
        for key in ('mean', 'log_std', 'task_index'):
            np.testing.assert_array_equal(a.agent_infos[key],
                                          b.agent_infos[key], err_msg=key)
        assert a.env_infos.keys() == b.env_infos.keys()
        for key in a.env_infos:
            np.testing.assert_equal(list(a.env_infos[key]),
                                    list(b.env_infos[key]), err_msg=key)


def test_same_seed_same_episodes_in_process_and_with_1_2_3_workers():
    reference = _sample_early_ending('local', 1)
    assert len(set(reference[0].lengths)) > 1  # some episodes end early
    assert not np.array_equal(reference[0].actions, reference[1].actions)
    _assert_identical(reference, _sample_early_ending('local', 3))
    for n_workers in (1, 2, 3):
        _assert_identical(reference,
                          _sample_early_ending('multiprocessing', n_workers))


def _sample_point_1d(n_workers):
    """Three tasks of two episodes on PointEnv1D with a 100-unit policy: one worker holds
    every task's block, three workers one block each."""
    env = garage_promp.envs.PointEnv1D()
    torch.manual_seed(0)
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(100, 100))
    sampler = garage_promp.make_sampler(policy, env, kind='local', n_workers=n_workers,
                                        seed=5, max_episode_length=5)
    tasks = [SetTaskUpdate(garage_promp.envs.PointEnv1D, goal, None)
             for goal in (1., -1., 1.)]
    try:
        return [sampler.obtain_meta_batch(tasks, _noisy_params(policy, 3), 2)]
    finally:
        sampler.shutdown_worker()


def test_a_worker_with_a_single_forward_block_gives_the_same_episodes():
    """A worker whose wave is one forward block (its one task's few episodes) runs it as
    two: torch's product of a single block rounds otherwise for this policy (a one-unit
    output after 100 units), and the episodes would depend on the worker count."""
    reference = _sample_point_1d(1)
    assert not np.array_equal(reference[0].actions[:5], reference[0].actions[10:15])
    _assert_identical(reference, _sample_point_1d(3))


def test_in_process_jobs_run_on_one_torch_thread_as_pool_workers_do(monkeypatch):
    """A job of the in-process backend runs on WORKER_THREADS torch threads, then restores."""
    seen = []
    sample = backends._sample_or_report

    def watched(worker, worker_id, job):
        seen.append(torch.get_num_threads())
        return sample(worker, worker_id, job)

    monkeypatch.setattr(backends, '_sample_or_report', watched)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        _sample_early_ending('local', 2)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {garage_promp._threads.WORKER_THREADS} == {1}


def test_in_process_jobs_give_the_same_episodes_on_more_torch_threads(monkeypatch):
    reference = _sample_early_ending('local', 2)
    monkeypatch.setattr(backends, 'worker_threads', contextlib.nullcontext)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _assert_identical(reference, _sample_early_ending('local', 2))
    finally:
        torch.set_num_threads(before)


def test_reset_noise_is_keyed_per_episode():
    reference = _sample_reset_noise('local', 1)
    starts = reference[0].observations[::6]
    assert len(np.unique(starts, axis=0)) == len(starts)  # noisy resets
    _assert_identical(reference, _sample_reset_noise('local', 2))
    _assert_identical(reference, _sample_reset_noise('multiprocessing', 2))


@pytest.mark.ray
@pytest.mark.slow
def test_ray_gives_the_same_episodes():
    import ray
    garage_promp.sampler.init_ray(num_cpus=2)
    try:
        _assert_identical(_sample_early_ending('local', 1),
                          _sample_early_ending('ray', 2))
    finally:
        ray.shutdown()


def test_layout_and_seed():
    env, policy, sampler, task_sampler = make_setup(5)
    tasks = task_sampler.sample(4)
    params = [dict(policy.named_parameters())] * 4
    eps = sampler.obtain_meta_batch(tasks, params, 3)
    assert sampler.sampling_round == 1
    assert len(eps.lengths) == 12 and (eps.lengths == HORIZON).all()
    task_index = eps.agent_infos['task_index'].reshape(12, HORIZON)[:, 0]
    np.testing.assert_array_equal(task_index, np.repeat(np.arange(4), 3))
    goals = eps.env_infos['task']
    for i, task in enumerate(tasks):
        for e in range(3):
            np.testing.assert_array_equal(
                goals[(3 * i + e) * HORIZON]['goal'], task._task['goal'])
    other = make_setup(6)[2].obtain_meta_batch(tasks, params, 3)
    assert not np.array_equal(eps.actions, other.actions)


def test_per_task_parameters_are_used():
    env, policy, sampler, task_sampler = make_setup(2, n_workers=2)
    tasks = task_sampler.sample(2)
    theta = dict(policy.named_parameters())
    shifted = {k: v.detach() + (5. if 'output_layers.0.linear.bias' in k else 0.)
               for k, v in theta.items()}
    eps = sampler.obtain_meta_batch(tasks, [theta, shifted], 3)
    mean = eps.agent_infos['mean'].reshape(6, HORIZON, -1)
    assert np.all(mean[3:] - mean[:3] > 4.)


def test_batched_sequential_and_waves_give_the_same_episodes():
    reference = _sample_early_ending('local', 2)
    slow = _sample_early_ending('local', 2, batched=False)
    waves = _sample_early_ending('local', 1, envs_per_task=2)
    budget = _sample_early_ending('local', 1, max_envs_per_worker=6)
    for other in (slow, waves, budget):
        for a, b in zip(reference, other):
            np.testing.assert_array_equal(a.lengths, b.lengths)
            np.testing.assert_allclose(a.observations, b.observations,
                                       atol=1e-5)
            np.testing.assert_allclose(a.agent_infos['mean'],
                                       b.agent_infos['mean'], atol=1e-5)


def test_split_is_balanced_by_episodes():
    plan = split_episodes([3, 3, 3, 3, 3], 2)
    assert [sum(c for _, _, c in pieces) for pieces in plan] == [8, 7]
    assert plan[0][-1] == (2, 0, 2) and plan[1][0] == (2, 2, 1)
    assert len(split_episodes([1, 1], 4)) == 2  # never an empty worker
    assert split_episodes([4], 2) == [[(0, 0, 2)], [(0, 2, 2)]]


def test_obtain_samples_with_an_adapted_policy_and_exact_episodes():
    env, policy, sampler, task_sampler = make_setup(1)
    task = task_sampler.sample(1)[0]
    params = {k: v.detach() + 1. for k, v in policy.named_parameters()}
    adapted = AdaptedPolicy(policy, params, 1)
    eps = sampler.obtain_samples(0, 2 * HORIZON + 1, adapted, task)
    assert len(eps.lengths) == 3 and eps.lengths.sum() >= 2 * HORIZON + 1
    mean = distribution_mean(adapted, eps.observations)
    np.testing.assert_allclose(eps.agent_infos['mean'], mean, atol=1e-5)
    assert len(sampler.obtain_exact_episodes(2, None).lengths) == 2


def distribution_mean(policy, observations):
    with torch.no_grad():
        dist, _ = policy(torch.as_tensor(observations))
    return dist.mean.numpy()


def test_pickled_sampler_keeps_its_round_and_starts_nothing():
    env, policy, sampler, task_sampler = make_setup(1, n_workers=2,
                                                    kind='multiprocessing')
    tasks = task_sampler.sample(2)
    params = [dict(policy.named_parameters())] * 2
    try:
        sampler.obtain_meta_batch(tasks, params, 1)
        assert len(_children()) == 2
        copy = pickle.loads(pickle.dumps(sampler))
    finally:
        sampler.shutdown_worker()
    _assert_no_children()
    assert isinstance(copy, MetaSampler) and copy.sampling_round == 1
    assert not _children()


def test_a_worker_stopped_while_idle_is_closed_with_the_rest():
    """A worker SIGSTOPped between jobs cannot read the stop message: closing the pool
    kills it rather than waiting on it, and no worker outlives the sampler."""
    _, _, sampler, _ = make_setup(1, n_workers=2, kind='multiprocessing')
    try:
        sampler.start_worker()
        os.kill(sampler.backend.pids[1], signal.SIGSTOP)
    finally:
        sampler.shutdown_worker()
    _assert_no_children()


def test_a_worker_that_died_while_idle_is_named_as_such():
    env, policy, sampler, _ = make_setup(1, n_workers=2, kind='multiprocessing',
                                         env_class=LongPointEnv)
    sampler.start_worker()
    pid = sampler.backend.pids[1]
    os.kill(pid, signal.SIGKILL)
    sampler.backend._procs[1].wait(timeout=30)  # (its Popen reaps it, keeping its status)
    with pytest.raises(SamplerWorkerError, match=f'sampler worker 1 \\(pid {pid}\\) died '
                                                 '\\(signal SIGKILL\\) while receiving its job'):
        sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 2)
    _assert_no_children()


def test_env_budget_bounds_the_copies_a_worker_keeps():
    env, policy, sampler, _ = make_setup(7, env_class=LongPointEnv,
                                         max_envs_per_worker=6)
    tasks = _early_ending_tasks()  # 5 tasks x 3 episodes: 1 copy per task
    sampler.obtain_meta_batch(tasks, _noisy_params(policy, 5), 3)
    assert len(sampler.backend._workers[0]._pool) == 5
    sampler.obtain_meta_batch(tasks[:2], _noisy_params(policy, 2), 3)
    assert len(sampler.backend._workers[0]._pool) == 6  # 2 tasks x 3 copies


class RaisingEnv(ShortPointEnv):
    """Raises at step 3 of every episode."""

    def step(self, action):
        if self._step_cnt == 2:
            raise RuntimeError('boom at step 3')
        return super().step(action)


class NaNRewardEnv(ShortPointEnv):
    """Returns a NaN reward at step 2."""

    def step(self, action):
        env_step = super().step(action)
        if self._step_cnt == 2:
            env_step = EnvStep(env_step.env_spec, env_step.action,
                               float('nan'), env_step.observation,
                               env_step.env_info, env_step.step_type)
        return env_step


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_env_error_in_a_worker_names_env_task_and_slot(kind):
    env, policy, sampler, _ = make_setup(1, n_workers=2, kind=kind,
                                         env_class=RaisingEnv)
    tasks = SetTaskSampler(RaisingEnv).sample(3)
    start = time.time()
    with pytest.raises(SamplerWorkerError) as info:
        sampler.obtain_meta_batch(tasks, [dict(policy.named_parameters())] * 3,
                                  2)
    assert time.time() - start < 60
    message = str(info.value)
    assert 'boom at step 3' in message and 'RaisingEnv' in message
    assert re.search(r'task slot \d, episode \d, step 3', message)
    assert 'goal' in message  # the task
    assert isinstance(info.value, RuntimeError)
    _assert_no_children()


class KeyErrorEnv(ShortPointEnv):
    """Raises a KeyError (whose own str() quotes its argument) at reset."""

    def reset(self):
        raise KeyError('reset failed')


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_a_worker_error_of_any_built_in_type_reads_as_written(kind):
    """str() of the error made for a worker's KeyError was KeyError's: the whole message
    and the worker's traceback quoted on one line, every newline escaped."""
    _, policy, sampler, task_sampler = make_setup(1, n_workers=2, kind=kind,
                                                  env_class=KeyErrorEnv)
    with pytest.raises(KeyError) as info:
        sampler.obtain_meta_batch(task_sampler.sample(2), [dict(policy.named_parameters())] * 2,
                                  1)
    message = str(info.value)
    assert isinstance(info.value, SamplerWorkerError)
    assert message.startswith('sampler worker ') and message == info.value.full_message
    assert "raised KeyError: 'reset failed'\n  while sampling env KeyErrorEnv" in message
    assert '\n  worker traceback:\nTraceback (most recent call last):\n' in message
    sampler.shutdown_worker()
    _assert_no_children()


def test_nan_reward_from_any_env_is_named():
    env, policy, sampler, _ = make_setup(1, n_workers=2,
                                         kind='multiprocessing',
                                         env_class=NaNRewardEnv)
    tasks = SetTaskSampler(NaNRewardEnv).sample(2)
    with pytest.raises(ValueError, match='non-finite reward.*NaNRewardEnv'
                       r'.*task slot \d, episode 0, step 2'):
        sampler.obtain_meta_batch(tasks, [dict(policy.named_parameters())] * 2,
                                  1)
    _assert_no_children()


class SlowEnv(ShortPointEnv):
    """Sleeps in every step, so a test can kill a worker mid-sampling."""

    def step(self, action):
        time.sleep(0.05)
        return super().step(action)


def test_a_killed_worker_is_reported_not_waited_for():
    env, policy, sampler, _ = make_setup(1, n_workers=2,
                                         kind='multiprocessing',
                                         env_class=SlowEnv)
    sampler.start_worker()
    victim = sampler.backend.pids[1]
    tasks = SetTaskSampler(SlowEnv).sample(2)
    timer = threading.Timer(1.0, os.kill, (victim, signal.SIGKILL))
    timer.start()
    start = time.time()
    with pytest.raises(SamplerWorkerError, match='died.*SIGKILL'):
        for _ in range(100):
            sampler.obtain_meta_batch(
                tasks, [dict(policy.named_parameters())] * 2, 4)
    timer.cancel()
    assert time.time() - start < 30
    _assert_no_children()


def test_arguments_are_checked_before_any_worker_starts():
    env, policy, _, _ = make_setup(1)
    for kwargs, name in ((dict(kind='threads'), 'kind'),
                         (dict(n_workers=0), 'n_workers'),
                         (dict(envs_per_task=0), 'envs_per_task'),
                         (dict(max_envs_per_worker=0), 'max_envs_per_worker'),
                         (dict(seed=-1), 'seed'),
                         (dict(batched='yes'), 'batched')):
        with pytest.raises(ValueError, match=name):
            garage_promp.make_sampler(policy, env, **kwargs)
    assert not _children()


def _worker_config(**changes):
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
    return dict(dict(policy=policy, env=env, seed=0, max_episode_length=HORIZON), **changes)


#: (constructor, arguments, the argument the error must name); the value must be named too.
BAD_CONSTRUCTIONS = [
    (RolloutWorker, lambda: _worker_config(seed=-1), 'seed'),
    (RolloutWorker, lambda: _worker_config(seed=1.5), 'seed'),
    (RolloutWorker, lambda: _worker_config(max_episode_length=0), 'max_episode_length'),
    (RolloutWorker, lambda: _worker_config(max_episode_length=10 ** 9), 'max_episode_length'),
    (RolloutWorker, lambda: _worker_config(envs_per_task=0), 'envs_per_task'),
    (RolloutWorker, lambda: _worker_config(max_envs_per_worker=-2), 'max_envs_per_worker'),
    (RolloutWorker, lambda: _worker_config(batched='no'), 'batched'),
    (RolloutWorker, lambda: _worker_config(lean=None), 'lean'),
] + [
    (backend, args, name)
    for backend in (InProcessBackend, ProcessPoolBackend, RayBackend)
    for args, name in (
        (lambda: (_worker_config(), -1), 'n_workers'),
        (lambda: (_worker_config(), 0), 'n_workers'),
        (lambda: (_worker_config(), 2.), 'n_workers'),
        (lambda: (_worker_config(seed=-1), 2), 'seed'),
        (lambda: (_worker_config(max_episode_length=-5), 2), 'max_episode_length'),
        (lambda: (_worker_config(envs_per_task=0), 2), 'envs_per_task'),
        (lambda: (_worker_config(), 2, -1.), 'worker_timeout'),
        (lambda: (_worker_config(), 2, float('inf')), 'worker_timeout'),
        (lambda: ([1, 2], 2), 'config'),
    )
] + [
    (backend, args, name)  # refused in the main process, not by each spawned worker
    for backend in (ProcessPoolBackend, RayBackend)
    for args, name in ((lambda: ({}, 2), 'policy'),  # RolloutWorker's required arguments
                       (lambda: (_worker_config(bogus=1), 2), 'bogus'))
] + [
    (ProcessPoolBackend, lambda: (_worker_config(), 10 ** 6), 'n_workers'),
    (InProcessBackend, lambda: (_worker_config(), 10 ** 6), 'n_workers'),
]


def _call(constructor, args):
    args = args()
    if isinstance(args, dict):
        return constructor(**args)
    return constructor(*args)


@pytest.mark.parametrize('constructor,args,name', [
    pytest.param(c, a, n, id=f'{c.__name__}-{n}-{i}')
    for i, (c, a, n) in enumerate(BAD_CONSTRUCTIONS)])
def test_every_sampler_constructor_refuses_nonsense_before_spawning(constructor, args, name):
    import sys
    with pytest.raises((ValueError, TypeError), match=re.escape(name)) as error:
        _call(constructor, args)
    if name not in ('policy', 'bogus', 'config'):  # the argument and its value
        assert re.search(rf'{name} must be .*, got ', str(error.value)), error.value
    assert not _children()  # nothing spawned
    if 'ray' in sys.modules:  # not started either
        assert not sys.modules['ray'].is_initialized()


def test_make_sampler_and_split_episodes_refuse_nonsense_counts():
    env, policy, _, _ = make_setup(1)
    for kwargs, name in ((dict(max_episode_length=10 ** 9), 'max_episode_length'),
                         (dict(n_workers=10 ** 6, kind='multiprocessing'), 'n_workers'),
                         (dict(worker_timeout=1e300), 'worker_timeout'),
                         (dict(seed=2.5), 'seed')):
        with pytest.raises(ValueError, match=rf'{name} must be .*, got '):
            garage_promp.make_sampler(policy, env, **kwargs)
    for counts, n_workers, name in (([3, 2], 0, 'n_workers'), ([3, 2], -1, 'n_workers'),
                                    ([3, -2], 2, r'counts\[1\]')):
        with pytest.raises(ValueError, match=name):
            split_episodes(counts, n_workers)
    assert not _children()


# ------------------------------------------------------------ obtain_rounds
def _shifted(params, amount):
    return {k: torch.as_tensor(v) + amount for k, v in params.items()}


def _rounds(kind, n_workers, episodes=(3, 2, 1), env_class=LongPointEnv, log=None,
            n_tasks=5):
    """Pipelined rounds; task i's next parameters depend on its own episodes only."""
    env, policy, sampler, _ = make_setup(7, n_workers=n_workers, kind=kind,
                                         env_class=env_class)
    tasks = _early_ending_tasks()[:n_tasks]
    params = _noisy_params(policy, len(tasks))
    current = list(params)

    def on_task(r, task, eps):
        if log is not None:
            log.append((r, task))
        assert (eps.agent_infos['task_index'] == task).all()
        assert len(eps.lengths) == episodes[r]
        current[task] = _shifted(current[task], 0.01 * float(eps.rewards.mean()))
        return current[task]

    try:
        return sampler.obtain_rounds(tasks, params, list(episodes), on_task), sampler
    finally:
        sampler.shutdown_worker()


def test_rounds_give_the_same_episodes_for_every_backend_and_worker_count():
    reference, sampler = _rounds('local', 1)
    assert sampler.sampling_round == 3
    assert [len(r.lengths) for r in reference] == [15, 10, 5]
    assert len(set(reference[0].lengths)) > 1  # some episodes end early
    for kind, n_workers in (('local', 3), ('multiprocessing', 1), ('multiprocessing', 2),
                            ('multiprocessing', 3), ('multiprocessing', 4)):
        _assert_identical(reference, _rounds(kind, n_workers)[0])


def test_rounds_equal_consecutive_meta_batch_calls():
    """Round r is keyed as the r-th of consecutive obtain_meta_batch calls."""
    rounds, _ = _rounds('multiprocessing', 2)
    env, policy, sampler, _ = make_setup(7, n_workers=2, kind='multiprocessing',
                                         env_class=LongPointEnv)
    tasks = _early_ending_tasks()
    current = _noisy_params(policy, len(tasks))
    try:
        for r, count in enumerate((3, 2, 1)):
            eps = sampler.obtain_meta_batch(tasks, current, count)
            _assert_identical([rounds[r]], [eps])
            per_task = np.split(eps.rewards, np.cumsum(eps.lengths)[count - 1::count][:-1])
            current = [_shifted(p, 0.01 * float(np.mean(rw))) for p, rw in zip(current, per_task)]
    finally:
        sampler.shutdown_worker()


class _SlowGoalEnv(LongPointEnv):
    """Steps slowly (``DELAY`` s) for the goals of tasks 2 and 3 of ``_early_ending_tasks``."""

    DELAY = 0.02

    def step(self, action):
        if self._goal[1] in (-0.1, 0.2):
            time.sleep(self.DELAY)
        return super().step(action)


def test_a_worker_starts_its_next_round_before_the_others_finish():
    """Pipelining: the fast worker's tasks reach round 2 before the slow worker's leave round 0."""
    log = []
    _rounds('multiprocessing', 2, episodes=(2, 2, 2), env_class=_SlowGoalEnv, log=log,
            n_tasks=4)
    # Worker 0 has tasks 0 and 1 (fast), worker 1 tasks 2 and 3 (slow).
    assert log.index((2, 1)) < log.index((0, 2)), log


def test_an_error_in_on_task_stops_every_worker():
    env, policy, sampler, _ = make_setup(1, n_workers=2, kind='multiprocessing')
    tasks = SetTaskSampler(ShortPointEnv).sample(3)

    def on_task(r, task, eps):
        raise KeyError('learner side')

    with pytest.raises(KeyError, match='learner side'):
        sampler.obtain_rounds(tasks, [dict(policy.named_parameters())] * 3, [2, 2], on_task)
    _assert_no_children()
    # The sampler starts fresh workers on its next use.
    eps = sampler.obtain_meta_batch(tasks, [dict(policy.named_parameters())] * 3, 1)
    assert len(eps.lengths) == 3
    sampler.shutdown_worker()


def test_pool_workers_import_what_the_main_process_can(monkeypatch, tmp_path):
    """A module beside the researcher's script (or put on sys.path by it) holds the env:
    the pool's workers get the main process's import path, as multiprocessing's spawn
    gives its children, so they unpickle the env class by its module's name."""
    (tmp_path / 'researchers_envs.py').write_text(
        'from tests.helpers import ShortPointEnv\n\n\n'
        'class BesideTheScriptEnv(ShortPointEnv):\n    pass\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)  # the worker starts elsewhere
    import researchers_envs  # pylint: disable=import-outside-toplevel,import-error
    try:
        _, policy, sampler, task_sampler = make_setup(
            1, n_workers=2, kind='multiprocessing', env_class=researchers_envs.BesideTheScriptEnv)
        eps = sampler.obtain_meta_batch(task_sampler.sample(2),
                                        [dict(policy.named_parameters())] * 2, 1)
        assert len(eps.lengths) == 2
        sampler.shutdown_worker()
    finally:
        sys.modules.pop('researchers_envs', None)
    _assert_no_children()


def test_rounds_arguments_are_checked():
    env, policy, sampler, _ = make_setup(1)
    tasks = SetTaskSampler(ShortPointEnv).sample(2)
    theta = dict(policy.named_parameters())
    with pytest.raises(ValueError, match='needs on_task'):
        sampler.obtain_rounds(tasks, [theta] * 2, [1, 1])
    with pytest.raises(ValueError, match='1 parameter sets for 2 tasks'):
        sampler.obtain_rounds(tasks, [theta], [1])
    with pytest.raises(TypeError, match='no parameters for task 0 in round 1'):
        sampler.obtain_rounds(tasks, [theta] * 2, [1, 1], lambda r, t, e: None)


class _VerySlowGoalEnv(_SlowGoalEnv):
    """Tasks 2 and 3 of ``_early_ending_tasks`` take seconds per episode."""

    DELAY = 0.2


class _SlowestGoalEnv(_SlowGoalEnv):
    """Tasks 2 and 3 of ``_early_ending_tasks`` take a second a step."""

    DELAY = 1.


def test_an_error_while_other_workers_sample_surfaces_at_once():
    """Busy workers are killed, not waited for, when the learner side fails. (The idle
    worker's exit is waited for: on a loaded machine that took 2 s; the busy worker's
    rounds, a second a step, would take far longer.)"""
    env, policy, sampler, _ = make_setup(7, n_workers=2, kind='multiprocessing',
                                         env_class=_SlowestGoalEnv)
    tasks = _early_ending_tasks()[:4]  # worker 0: fast tasks 0, 1; worker 1: slow 2, 3
    raised = []

    def on_task(r, task, eps):
        raised.append(time.monotonic())
        raise RuntimeError('learner side')

    sampler.start_worker()
    with pytest.raises(RuntimeError, match='learner side'):
        sampler.obtain_rounds(tasks, _noisy_params(policy, 4), [3, 3], on_task)
    assert time.monotonic() - raised[0] < 5.
    _assert_no_children()


class _HangingGoalEnv(_SlowGoalEnv):
    """Hangs in ``step`` (the GIL released, as a stuck simulator or socket would) for tasks 2, 3."""

    DELAY = 3600.


def _sampler_with_timeout(env_class, timeout, kind='multiprocessing'):
    env, policy, _, _ = make_setup(7, n_workers=2, kind=kind, env_class=env_class)
    sampler = garage_promp.make_sampler(policy, env, kind=kind, n_workers=2,
                                        worker_timeout=timeout, seed=7)
    return policy, sampler


def test_a_worker_idle_for_a_while_still_reports_its_progress():
    """A worker's reporter thread beats through idle time: a job longer than
    worker_timeout after an idle spell is still heard making progress, not named stuck."""
    policy, sampler = _sampler_with_timeout(_VerySlowGoalEnv, 1.)
    try:
        sampler.start_worker()
        time.sleep(1.5)  # idle beats
        batch = sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4),
                                          2)
        assert len(batch.lengths) == 8
    finally:
        sampler.shutdown_worker()
    _assert_no_children()


def test_a_hung_env_ends_the_run_naming_the_worker():
    policy, sampler = _sampler_with_timeout(_HangingGoalEnv, 2.)
    sampler.start_worker()
    start = time.monotonic()
    with pytest.raises(SamplerWorkerError) as error:
        sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 2)
    elapsed = time.monotonic() - start
    assert 2. < elapsed < 30.
    message = str(error.value)
    assert 'sampler worker 1' in message and 'made no progress' in message
    assert 'task slot 2' in message and 'step 1' in message and '_HangingGoalEnv' in message
    _assert_no_children()


def test_a_hung_env_in_process_is_interrupted_naming_the_worker():
    """The in-process sampler: the stuck step (here a sleep of an hour) is interrupted in
    the main thread, the run ends naming where, and the signal handler is restored."""
    policy, sampler = _sampler_with_timeout(_HangingGoalEnv, 2., kind='local')
    before = signal.getsignal(signal.SIGUSR2)
    start = time.monotonic()
    with pytest.raises(SamplerWorkerError) as error:
        sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 2)
    assert 2. < time.monotonic() - start < 30.
    message = str(error.value)
    # Tasks 2, 3 are worker 1's (of 2, run one after the other in this process).
    assert 'sampler worker 1 (in process, pid ' in message and 'made no progress' in message
    assert 'task slot 2' in message and 'step 1' in message and '_HangingGoalEnv' in message
    assert signal.getsignal(signal.SIGUSR2) is before
    assert not [t for t in threading.enumerate() if t.name == 'garage_promp-watchdog']


class _BusyLoopGoalEnv(_SlowGoalEnv):
    """Spins in Python (holding the GIL between bytecodes) in task 2's first step."""

    def step(self, action):
        if self._goal[1] == -0.1:
            end = time.monotonic() + 3600
            while time.monotonic() < end:
                pass
        return super().step(action)


def test_an_env_spinning_in_python_in_process_is_interrupted():
    policy, sampler = _sampler_with_timeout(_BusyLoopGoalEnv, 1., kind='local')
    with pytest.raises(SamplerWorkerError, match='sampler worker 1 .*made no progress'):
        sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 2)


class _SignallingGoalEnv(_SlowGoalEnv):
    """A slow env that sends this process SIGUSR2 (as a cluster's scheduler might) in the
    third step of task 3's episode, in the middle of the job."""

    def step(self, action):
        if self._goal[1] == 0.2 and self._step_cnt == 2:
            os.kill(os.getpid(), signal.SIGUSR2)
        return super().step(action)


def test_an_in_process_job_that_progresses_is_not_interrupted_and_other_signals_pass():
    """A slow env that keeps stepping is not stuck; SIGUSR2 from elsewhere during a job
    reaches the handler that was installed before."""
    policy, sampler = _sampler_with_timeout(_SignallingGoalEnv, 1., kind='local')
    received = []

    def handler(signum, frame):
        # Passed on by the watch's handler (installed for the job), not called directly.
        received.append((signum, signal.getsignal(signal.SIGUSR2) is not handler))

    before = signal.signal(signal.SIGUSR2, handler)
    try:
        batch = sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 1)
    finally:
        signal.signal(signal.SIGUSR2, before)
    assert len(batch.lengths) == 4 and received == [(signal.SIGUSR2, True)]


class _PausingGoalEnv(_SlowGoalEnv):
    """Task 3's episode pauses 2.5 s in its second step."""

    def step(self, action):
        if self._goal[1] == 0.2 and self._step_cnt == 1:
            time.sleep(2.5)
        return super().step(action)


def test_an_in_process_job_is_watched_every_beat_however_long_its_timeout(monkeypatch):
    """The in-process watch looks every HEARTBEAT_SECONDS (a quarter of the timeout only
    where that is shorter): a stall is noticed when it is, not a fraction of
    worker_timeout later."""
    said = []
    monkeypatch.setattr(backends, 'phase', said.append)
    monkeypatch.setattr(backends, 'STALL_NOTICE_SECONDS', 1.)
    policy, sampler = _sampler_with_timeout(_PausingGoalEnv, 40., kind='local')
    sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 1)
    assert any(re.match(r'waiting for sampler worker \d \(in process, pid \d+\), no progress '
                        r'for [1-3] s at env _PausingGoalEnv', line) for line in said), said


_OUTSIDE_SIGNAL = """
import numpy as np
import garage_promp
from garage.torch.policies import GaussianMLPPolicy
from tests.test_samplers import _SignallingGoalEnv, _early_ending_tasks, _noisy_params

env = _SignallingGoalEnv()
policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
sampler = garage_promp.make_sampler(policy, env, worker_timeout=60., seed=1)
sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 1)
print('sampled on', flush=True)
"""


def test_an_outside_signal_during_an_in_process_job_does_what_it_would_have_done():
    """The watch's handler, installed for the job, passes on a SIGUSR2 that is not its
    own: with no handler before it, the signal's default action, which ends the process
    (as a scheduler that sends it expects), rather than being swallowed."""
    proc = subprocess.run([sys.executable, '-c', _OUTSIDE_SIGNAL], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == -signal.SIGUSR2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert 'sampled on' not in proc.stdout


_NATIVE_HANG = """
import signal, time
import numpy as np
import garage_promp
from garage_promp.sampler import backends
from garage.sampler.env_update import SetTaskUpdate
from garage.torch.policies import GaussianMLPPolicy
from tests.helpers import LongPointEnv

class NativeHang(LongPointEnv):
    def step(self, action):
        # As a call stuck in native code: the interrupting signal never reaches Python.
        signal.pthread_sigmask(signal.SIG_BLOCK, [backends.INTERRUPT_SIGNAL])
        time.sleep(3600)

backends.INTERRUPT_GRACE_SECONDS = 1.
env = NativeHang()
policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
sampler = garage_promp.make_sampler(policy, env, worker_timeout=1., seed=1)
task = SetTaskUpdate(LongPointEnv, {'goal': np.array([0.2, 0.1])}, None)
sampler.obtain_meta_batch([task], [dict(policy.named_parameters())], 1)
"""


def test_an_in_process_call_that_never_returns_to_python_ends_the_process():
    """The last resort: the interruption cannot take, so the watchdog says why, prints
    every thread's stack and ends the process with status 70, instead of hanging."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, '-c', _NATIVE_HANG], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 70, proc.stderr[-3000:]
    assert time.monotonic() - start < 60
    assert 'sampler worker 0 (in process, pid ' in proc.stderr
    assert 'made no progress' in proc.stderr and 'did not return to Python' in proc.stderr
    assert 'in step' in proc.stderr  # the stack dump shows where it hangs


_LATE_SIGNAL = """
import signal, time
import numpy as np
import garage_promp
from garage.sampler.env_update import SetTaskUpdate
from garage.torch.policies import GaussianMLPPolicy
from tests.helpers import LONG_HORIZON, LongPointEnv

class LateStall(LongPointEnv):
    def __init__(self, **kwargs):
        kwargs.setdefault('never_done', True)
        super().__init__(**kwargs)

    def step(self, action):
        if self._step_cnt == LONG_HORIZON - 1:
            time.sleep(0.8)  # past worker_timeout, in the job's last step
        return super().step(action)

real_pthread_kill = signal.pthread_kill

def late(thread, signum):  # as on a loaded machine: the signal lands after the job ended
    time.sleep(0.6)
    real_pthread_kill(thread, signum)

signal.pthread_kill = late
env = LateStall()
policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
sampler = garage_promp.make_sampler(policy, env, worker_timeout=0.5, seed=1)
task = SetTaskUpdate(LateStall, {'goal': np.array([0.2, 0.1])}, None)
batch = sampler.obtain_meta_batch([task], [dict(policy.named_parameters())], 1)
assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
print('sampled', len(batch.lengths), 'episode(s)')
"""


def test_the_watchs_signal_landing_after_the_job_ended_is_ignored():
    """The watch times out, but its signal reaches the main thread only after the job has
    ended: the run goes on (the signal must not reach SIGUSR2's default action, which
    would end the process)."""
    proc = subprocess.run([sys.executable, '-c', _LATE_SIGNAL], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert 'sampled 1 episode(s)' in proc.stdout


class _StallingGoalEnv(LongPointEnv):
    """Stalls ``DELAY`` s (the GIL released) in the first step of task 2's episodes.

    Long past a 2 s ``worker_timeout``; short enough that a sampler that does
    not watch its workers returns (with no error) instead of hanging the test.
    """

    DELAY = 15.

    def step(self, action):
        if self._goal[1] == -0.1 and self._step_cnt == 0:
            time.sleep(self.DELAY)
        return super().step(action)


def _gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.ray
@pytest.mark.slow
def test_a_hung_env_under_ray_ends_the_run_and_kills_its_actor():
    import ray
    garage_promp.sampler.init_ray(num_cpus=2)
    try:
        policy, sampler = _sampler_with_timeout(_StallingGoalEnv, 2., kind='ray')
        tasks, params = _early_ending_tasks()[:4], _noisy_params(policy, 4)
        sampler.start_worker()  # the actors up (over a minute on 2 busy cores)
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError) as error:
            sampler.obtain_meta_batch(tasks, params, 2)
        assert 2. < time.monotonic() - start < 60.
        message = str(error.value)
        assert 'sampler worker 1 (Ray actor, pid ' in message and 'made no progress' in message
        assert 'task slot 2' in message and 'step 1' in message and '_StallingGoalEnv' in message
        assert error.value.worker == 1
        pid = int(re.search(r'pid (\d+)', message).group(1))
        deadline = time.monotonic() + 20
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(pid)  # the stuck actor is killed, not left hanging in its env
    finally:
        ray.shutdown()


def test_a_stopped_worker_ends_the_run_naming_it():
    policy, sampler = _sampler_with_timeout(_VerySlowGoalEnv, 2.)
    sampler.start_worker()
    pids = sampler.backend.pids
    stopper = threading.Timer(1.0, os.kill, (pids[1], signal.SIGSTOP))
    stopper.start()
    try:
        with pytest.raises(SamplerWorkerError, match=f'sampler worker 1 \\(pid {pids[1]}\\) '
                                                     'made no progress'):
            sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 3)
    finally:
        stopper.cancel()
    _assert_no_children()


class _Clock:
    """A watchdog's clock whose time and lost time a test sets."""

    def __init__(self):
        self.time, self.lost_seconds = 100., 0.

    def now(self):
        return self.time

    def lost(self):
        return self.lost_seconds


def test_the_console_names_the_worker_waited_for_after_the_stall_notice(monkeypatch):
    said = []
    monkeypatch.setattr(backends, 'phase', said.append)
    clock = _Clock()
    watchdog = backends._Watchdog(600., clock=clock)  # pylint: disable=protected-access
    watchdog.started(0)
    clock.time += backends.STALL_NOTICE_SECONDS - 1
    watchdog.check([0], lambda w: f'sampler worker {w}')
    assert said == [] and backends.STALL_NOTICE_SECONDS == 30.
    clock.time += 2
    watchdog.check([0], lambda w: f'sampler worker {w}')
    assert said == ['waiting for sampler worker 0, no progress for 31 s at its job start']


def test_the_suspension_clock_adds_up_every_stop():
    """Each look that comes late by more than LATE_SECONDS adds its delay: two stops of
    5 and 4 s (less a tick each) are both counted."""
    clock = backends._SuspensionClock()  # pylint: disable=protected-access
    clock._seen -= 5  # pylint: disable=protected-access
    first = clock._look()  # pylint: disable=protected-access
    assert first == pytest.approx(5 - clock.TICK_SECONDS, abs=0.1)
    clock._seen -= 4  # pylint: disable=protected-access
    assert clock._look() == pytest.approx(first + 4 - clock.TICK_SECONDS, abs=0.1)
    assert clock._look() == pytest.approx(first + 4 - clock.TICK_SECONDS, abs=0.1)


def test_a_sampler_is_watched_by_default_also_when_restored_from_an_older_snapshot():
    """worker_timeout defaults to DEFAULT_WORKER_TIMEOUT (a hung worker ends the run), for
    MetaSampler, make_sampler, and a snapshot from before the option existed."""
    env, policy, made, _ = make_setup()  # made with garage_promp.make_sampler's defaults
    assert made._worker_timeout == backends.DEFAULT_WORKER_TIMEOUT
    sampler = MetaSampler(policy, env)
    assert sampler._worker_timeout == backends.DEFAULT_WORKER_TIMEOUT
    state = sampler.__getstate__()
    del state['_worker_timeout']
    old = MetaSampler.__new__(MetaSampler)
    old.__setstate__(state)
    assert old.backend._timeout == backends.DEFAULT_WORKER_TIMEOUT
    for s in (sampler, made, old):
        s.shutdown_worker()


def test_the_watchdog_counts_a_workers_silence_without_the_time_this_process_lost():
    clock = _Clock()
    watchdog = backends._Watchdog(2., clock=clock)  # pylint: disable=protected-access
    name = lambda w: f'sampler worker {w}'  # noqa: E731
    watchdog.started(0)
    watchdog.started(1)
    clock.time += 1.5
    watchdog.note(1, 7, 'task slot 1')  # worker 1 moves; worker 0 says nothing
    clock.lost_seconds = 1.5  # then this process is stopped for 1.5 s
    clock.time += 1.
    watchdog.check([0, 1], name)  # worker 0: 2.5 s of silence, 1.5 of them lost
    clock.time += 1.1
    with pytest.raises(SamplerWorkerError, match='sampler worker 0 made no progress for 2 s'):
        watchdog.check([0, 1], name)
    clock.time += 1.5
    watchdog.note(1, 7, 'task slot 1')  # the same count: no progress since the first note
    with pytest.raises(SamplerWorkerError, match='sampler worker 1 made no progress for 2 s'):
        watchdog.check([1], name)
    watchdog.check([1], name, at_least=3.)  # a start-up's allowance


def test_the_suspension_clock_counts_a_stop_of_this_process_and_not_its_work():
    """SIGSTOP for 3 s (sent by a child, which sends SIGCONT after) is lost time; 1.5 s of
    the main thread's work or sleep is not."""
    clock = backends._SuspensionClock()  # pylint: disable=protected-access
    before = clock.lost()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
    time.sleep(0.5)
    assert clock.lost() == before
    pid = os.getpid()
    stopper = subprocess.Popen(['sh', '-c', f'kill -STOP {pid}; sleep 3; kill -CONT {pid}'])
    stopper.wait(30)
    lost = clock.lost() - before
    assert 2.5 < lost < 3.5 + stopper.returncode, lost


def test_a_worker_stopped_late_in_a_run_of_fast_jobs_is_named_after_the_timeout():
    """Jobs each collected within a poll leave the watchdog unconsulted for long; a worker
    stopped after seconds of them is still named after worker_timeout (it was named after
    about the run's age, the wait since the last check taken for a stop of this process)."""
    policy, sampler = _sampler_with_timeout(LongPointEnv, 1.)
    sampler.start_worker()
    pids = sampler.backend.pids
    tasks, params = _early_ending_tasks()[:4], _noisy_params(policy, 4)
    end = time.monotonic() + 6.
    while time.monotonic() < end:
        sampler.obtain_meta_batch(tasks, params, 1)
    os.kill(pids[1], signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(SamplerWorkerError, match=f'sampler worker 1 \\(pid {pids[1]}\\) '
                                                 'made no progress for 1 s'):
        sampler.obtain_meta_batch(tasks, params, 1)
    assert time.monotonic() - start < 4.
    _assert_no_children()


def test_a_stop_of_the_run_ends_nothing():
    """The main process and its workers stopped together for 3 s (SIGSTOP, then SIGCONT, as
    Ctrl-Z and ``fg`` do) while they sample: the time lost is nobody's silence, whatever
    worker_timeout is (here 1 s)."""
    policy, sampler = _sampler_with_timeout(_VerySlowGoalEnv, 1.)  # its job: seconds
    sampler.start_worker()
    pids = ' '.join(map(str, [os.getpid(), *sampler.backend.pids]))
    stopper = subprocess.Popen(['sh', '-c', f'sleep 0.5; kill -STOP {pids}; sleep 3; '
                                            f'kill -CONT {pids}'])
    try:
        start = time.monotonic()
        batch = sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4),
                                          2)
        assert time.monotonic() - start > 3.
        assert len(batch.lengths) == 8
    finally:
        stopper.wait(30)
        sampler.shutdown_worker()


def test_a_worker_stopped_while_idle_ends_the_run_when_its_job_is_larger_than_a_pipe():
    """A job larger than the socket's buffer (a wide policy's parameters for each task)
    sent to a worker stopped between jobs would block its sender for ever; it is sent from
    a thread, and the wait for the result names the worker that makes no progress."""
    env = LongPointEnv()
    torch.manual_seed(0)
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(512, 512))
    sampler = garage_promp.make_sampler(policy, env, kind='multiprocessing', n_workers=2,
                                        worker_timeout=2., seed=7)
    sampler.start_worker()
    pids = sampler.backend.pids
    os.kill(pids[1], signal.SIGSTOP)
    start = time.monotonic()
    try:
        with pytest.raises(SamplerWorkerError, match=f'sampler worker 1 \\(pid {pids[1]}\\) '
                                                     'made no progress'):
            sampler.obtain_meta_batch(_early_ending_tasks()[:4], _noisy_params(policy, 4), 1)
    finally:
        try:
            os.kill(pids[1], signal.SIGCONT)
        except OSError:
            pass
    assert time.monotonic() - start < 60
    _assert_no_children()


def _arrive_hanging(creator: int, env):
    """Unpickles as ``env``, except in another process, where it hangs (GIL released)
    for 90 s: a sampler that does not watch start-ups returns then, with no error."""
    if os.getpid() != creator:
        time.sleep(90)
    return env


class _HangsInTheWorker(LongPointEnv):
    """A pool worker's copy hangs while the worker starts (unpickling its config)."""

    def __reduce__(self):
        return _arrive_hanging, (os.getpid(), LongPointEnv())


def test_a_worker_hung_in_its_start_up_ends_the_run_naming_it(monkeypatch):
    """A start-up reports no progress; it gets STARTUP_SECONDS (here 3) however short
    worker_timeout is, and then ends the run like a hung job does."""
    monkeypatch.setattr(backends, 'STARTUP_SECONDS', 3.)
    _, sampler = _sampler_with_timeout(_HangsInTheWorker, 1.)
    start = time.monotonic()
    with pytest.raises(SamplerWorkerError) as error:
        sampler.start_worker()
    assert 3. < time.monotonic() - start < 60.
    message = str(error.value)
    assert re.search(r'sampler worker \d \(pid \d+\) made no progress', message), message
    assert 'its start-up' in message and 'at least 3 s' in message
    _assert_no_children()


def _in_a_thread(call):
    """``call()`` started in a (daemon) thread: the thread, and the list that collects the
    SamplerWorkerError it raises."""
    raised = []

    def run():
        try:
            call()
        except SamplerWorkerError as error:
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


#: A pool worker that starts, takes its job, writes the first kilobyte of a 10 MB
#: result and stops itself (SIGSTOP) there: the main process has a message's start
#: and will never get the rest (argv as for _worker_entry.py).
#: A scripted pool worker's start: it takes its configuration and says it is ready, as
#: ``backends.worker_main`` does; each script goes on from there.
_STARTED_WORKER = """
import os, pickle, signal, struct, sys, time
from multiprocessing import connection
fd = int(sys.argv[1])
conn = connection.Connection(fd)
conn.recv_bytes()
conn.send_bytes(pickle.dumps(('ok', None)))
"""

_HALF_SENDING_WORKER = _STARTED_WORKER + """
conn.recv_bytes()
os.write(fd, struct.pack('!i', 10_000_000) + bytes(1000))
os.kill(os.getpid(), signal.SIGSTOP)
"""


def _pool_of_scripted_workers(monkeypatch, tmp_path, script, timeout):
    """A one-worker ProcessPoolBackend whose worker process runs ``script``."""
    entry = tmp_path / 'worker.py'
    entry.write_text(script)
    monkeypatch.setattr(backends, 'WORKER_ENTRY', str(entry))
    env, policy, _, _ = make_setup(7)
    return ProcessPoolBackend(dict(policy=policy, env=env, seed=7, max_episode_length=HORIZON),
                              1, worker_timeout=timeout)


def test_a_worker_stopped_halfway_through_its_result_ends_the_run_naming_it(
        monkeypatch, tmp_path):
    """The main process never waits inside a message: a worker stopped after its result's
    first bytes (a SIGSTOP, or a hang, while it sends) is named by the watchdog like any
    stopped worker, rather than hanging the run in the read of the rest."""
    pool = _pool_of_scripted_workers(monkeypatch, tmp_path, _HALF_SENDING_WORKER, 1.)
    pid = pool.pids[0]
    pool.submit(0, Job((0, ), []))
    start = time.monotonic()
    waiter, raised = _in_a_thread(pool.collect)
    waiter.join(60.)
    try:
        assert not waiter.is_alive(), 'collect() waited in the half-sent message'
        assert 1. < time.monotonic() - start < 30.
        assert len(raised) == 1 and f'sampler worker 0 (pid {pid}) made no progress' in str(
            raised[0]), raised
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == 'zombie'
    finally:
        if waiter.is_alive():
            os.kill(pid, signal.SIGKILL)  # (the old read then sees the socket's end)
            waiter.join(10.)
        pool.close()
    assert not [t for t in threading.enumerate() if t.name.startswith('garage_promp-reader')]


_STEADY_WORKER = _STARTED_WORKER + """
while len(conn.recv_bytes()) > 8:  # a job (the stop message is a pickled None)
    for _ in range(3):  # the same step count each job: only its start says it moved
        time.sleep(0.2)
        conn.send_bytes(pickle.dumps(('progress', (5, 'x'))))
    conn.send_bytes(pickle.dumps(('ok', 'done')))
"""


def test_each_job_is_timed_from_its_start_not_from_the_last_report_of_the_one_before(
        monkeypatch, tmp_path):
    """A worker's silence is counted from when its job was sent: after a pause longer than
    worker_timeout between two jobs (a learner's step), the next job is not named stuck
    for the time the worker was idle."""
    pool = _pool_of_scripted_workers(monkeypatch, tmp_path, _STEADY_WORKER, 2.)
    try:
        for pause in (0., 3.):
            time.sleep(pause)
            pool.submit(0, Job((0, ), []))
            assert pool.collect() == (0, 'done')
    finally:
        pool.close()


_FORKING_WORKER = _STARTED_WORKER + """
conn.recv_bytes()
child = os.fork()
if child == 0:  # keeps the worker's socket open after the worker's death
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
os._exit(3)
"""


def test_a_dead_worker_is_named_while_a_child_of_it_keeps_its_socket_open(
        monkeypatch, tmp_path, capfd):
    """Without a watchdog (worker_timeout=None) the run does not hang on a dead worker
    whose socket a process it forked keeps open: its process's end is enough; and the
    pool's reader threads end with it."""
    pool = _pool_of_scripted_workers(monkeypatch, tmp_path, _FORKING_WORKER, None)
    pool.submit(0, Job((0, ), []))
    waiter, raised = _in_a_thread(pool.collect)
    waiter.join(30.)
    grandchild = None
    try:
        grandchild = int(capfd.readouterr().out.split()[0])
        assert not waiter.is_alive(), 'collect() waited on a dead worker'
        assert len(raised) == 1 and 'died (exit code 3)' in str(raised[0]), raised
    finally:
        if grandchild is not None:
            os.kill(grandchild, signal.SIGKILL)
        pool.close()
        waiter.join(10.)
    assert not [t for t in threading.enumerate() if t.name.startswith('garage_promp-reader')]


def test_a_pool_reads_every_message_a_dead_worker_sent_before_naming_its_death(
        monkeypatch, tmp_path):
    """A worker that sent its result and then died: the result is collected, and only the
    next wait names the death."""
    script = _HALF_SENDING_WORKER.replace(
        "os.write(fd, struct.pack('!i', 10_000_000) + bytes(1000))\n"
        "os.kill(os.getpid(), signal.SIGSTOP)",
        "conn.send_bytes(pickle.dumps(('ok', 'the result')))\nos._exit(3)")
    assert 'the result' in script
    pool = _pool_of_scripted_workers(monkeypatch, tmp_path, script, 30.)
    try:
        pool.submit(0, Job((0, ), []))
        assert pool._procs[0].wait(30) == 3  # pylint: disable=protected-access
        assert pool.collect() == (0, 'the result')
        pool._busy.add(0)  # pylint: disable=protected-access  (as if given a new job)
        with pytest.raises(SamplerWorkerError, match=r'sampler worker 0 \(pid \d+\) died '
                                                     r'\(exit code 3\) while sampling'):
            pool.collect()
    finally:
        pool.close()


def test_kill_usr1_reaches_a_worker_that_is_still_starting(monkeypatch, capfd):
    """A worker is a pool worker from its spawn on: ``kill -USR1`` sent at once (before
    its interpreter has set the handler, where SIGUSR1's default action would end it)
    waits, blocked, and is delivered as a dump of its stacks, here while its start-up
    hangs."""
    monkeypatch.setattr(backends, 'STARTUP_SECONDS', 8.)
    _, sampler = _sampler_with_timeout(_HangsInTheWorker, 1.)
    thread, errors = _in_a_thread(sampler.start_worker)
    signalled = set()
    deadline = time.monotonic() + 30
    while len(signalled) < 2 and time.monotonic() < deadline:
        for pid in set(backends.live_worker_pids()) - signalled:
            os.kill(pid, signal.SIGUSR1)  # at once: the worker is exec'ing Python
            signalled.add(pid)
    time.sleep(3)
    alive = [pid for pid in signalled if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    first = capfd.readouterr().err  # each dump at its handler's unblocking
    for pid in alive:  # and again, later in their start-up
        os.kill(pid, signal.SIGUSR1)
    thread.join(60)
    assert len(signalled) == 2 and sorted(alive) == sorted(signalled), (signalled, alive)
    assert errors and 'its start-up' in str(errors[0])  # then ended by the watch, as before
    assert all(f'kill -USR1: the stacks of process {pid}' in first for pid in signalled), first
    assert first.count('_worker_entry.py') >= 2, first
    later = capfd.readouterr().err  # (importing, or hanging in _arrive_hanging)
    assert all(f'kill -USR1: the stacks of process {pid}' in later for pid in signalled), later
    _assert_no_children()


def _arrive_broken(creator: int, env):
    """Unpickles as ``env``, except in another process, where it raises."""
    if os.getpid() != creator:
        raise ValueError('this env cannot be built here')
    return env


class _BreaksInTheWorker(LongPointEnv):
    """A worker's copy raises while the worker starts."""

    def __reduce__(self):
        return _arrive_broken, (os.getpid(), LongPointEnv())


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_actor_hung_or_failing_in_its_start_up_ends_the_run_naming_it(monkeypatch):
    """A Ray actor's start-up (its env construction) is watched as a pool worker's is,
    from the actor's first answer; one that raises is reported like a pool worker."""
    import ray
    # Long enough for an actor's process to start and import torch on a busy 2-core
    # machine (an actor not up by then is reported as not up, without a pid).
    monkeypatch.setattr(backends, 'STARTUP_SECONDS', 10.)
    garage_promp.sampler.init_ray(num_cpus=2)
    try:
        _, sampler = _sampler_with_timeout(_HangsInTheWorker, 1., kind='ray')
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError) as error:
            sampler.start_worker()
        # (Unwatched, the start-up would end after the hang's 90 s, with no error.)
        assert time.monotonic() - start > 10.
        message = str(error.value)
        assert re.search(r'sampler worker \d \(Ray actor, pid \d+\) made no progress',
                         message), message
        assert 'its start-up' in message and 'at least 10 s' in message
        pid = int(re.search(r'pid (\d+)', message).group(1))
        deadline = time.monotonic() + 20
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(pid)  # killed, not left hanging
        _, sampler = _sampler_with_timeout(_BreaksInTheWorker, 1., kind='ray')
        with pytest.raises(SamplerWorkerError, match='raised ValueError: this env cannot be '
                                                     'built here'):
            sampler.start_worker()
    finally:
        ray.shutdown()


class _UpdateBrokenInTheWorker(SetTaskUpdate):
    """A task that unpickles as itself here and raises in any other process."""

    def __reduce__(self):
        return _arrive_broken, (os.getpid(), SetTaskUpdate(*self._args()))

    def _args(self):
        return self._env_type, self._task, self._wrapper_cons


def _ray_sampler(n_workers, timeout, env_class=LongPointEnv):
    env, policy, _, _ = make_setup(7, n_workers=n_workers, kind='ray', env_class=env_class)
    return policy, garage_promp.make_sampler(policy, env, kind='ray', n_workers=n_workers,
                                             worker_timeout=timeout, seed=7)


@pytest.mark.ray
@pytest.mark.slow
def test_ray_actors_beyond_the_clusters_cpus_end_the_start_up_and_a_ray_of_its_own_runs_them(
        monkeypatch):
    """Three actors of one CPU each on a Ray of 2 CPUs: the third is never placed, and
    the start-up ends after its timeout naming the cluster's CPUs (it used to wait for
    ever, untimed). A Ray the sampler starts itself gets a CPU for each worker: the
    same three sample (as three pool workers on two cores do)."""
    import ray
    monkeypatch.setattr(backends, 'STARTUP_SECONDS', 3.)
    garage_promp.sampler.init_ray(num_cpus=2)
    try:
        _, sampler = _ray_sampler(3, 1.)
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError) as error:
            sampler.start_worker()
        assert 3. < time.monotonic() - start < 120.
        message = str(error.value)
        assert ('(Ray actor, not up yet: 3 actors of one CPU each, the Ray cluster has 2 '
                'CPUs) made no progress') in message, message
        assert backends.RAY_PLACEMENT_WHERE in message
    finally:
        ray.shutdown()
    try:
        policy, sampler = _ray_sampler(3, 60.)
        sampler.start_worker()
        assert ray.cluster_resources()['CPU'] == max(os.cpu_count(), 3)
        batch = sampler.obtain_meta_batch(_early_ending_tasks()[:3], _noisy_params(policy, 3), 2)
        assert len(batch.lengths) == 3 * 2
        sampler.shutdown_worker()
    finally:
        ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_actor_stopped_before_its_first_job_or_given_one_it_cannot_load_ends_the_run():
    """An actor stopped between its start-up and its first job ends the run after
    worker_timeout, named (its clock used to start only once a progress call had been
    answered, which a fast start-up never gave); a job whose task cannot be unpickled on
    the actor is reported as a worker's error (it escaped as Ray's own RayTaskError)."""
    import ray
    garage_promp.sampler.init_ray(num_cpus=2)
    pid = None
    try:
        policy, sampler = _ray_sampler(2, 2.)
        sampler.start_worker()
        tasks = _early_ending_tasks()[:4]
        broken = _UpdateBrokenInTheWorker(LongPointEnv, {'goal': np.array([0.2, 0.])}, None)
        with pytest.raises(SamplerWorkerError, match=r'sampler worker \d raised '
                                                     r'.*ValueError: this env cannot be built'):
            sampler.obtain_meta_batch([broken] + tasks[1:], _noisy_params(policy, 4), 2)
        policy, sampler = _ray_sampler(2, 2.)
        sampler.start_worker()
        pid = sampler.backend._pids[1]  # pylint: disable=protected-access
        os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(SamplerWorkerError, match=f'sampler worker 1 \\(Ray actor, pid {pid}\\) '
                                                     'made no progress'):
            sampler.obtain_meta_batch(tasks, _noisy_params(policy, 4), 2)
        assert time.monotonic() - start < 60.
    finally:
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)
        ray.shutdown()


class _BallastPointEnv(LongPointEnv):
    """Carries 2 MB: its worker's configuration outgrows a socket's buffer, so sending it
    waits until the worker reads it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ballast = np.zeros(250_000)


def test_a_worker_stopped_before_it_reads_its_configuration_ends_the_start_up(monkeypatch):
    monkeypatch.setattr(backends, 'STARTUP_SECONDS', 3.)
    _, sampler = _sampler_with_timeout(_BallastPointEnv, 1.)
    stopped, done = [], threading.Event()

    def stop_the_first_worker():
        me = psutil.Process()
        while not stopped and not done.is_set():
            for child in me.children():
                try:
                    if '_worker_entry' in ' '.join(child.cmdline()):
                        child.suspend()
                        stopped.append(child)
                        break
                except psutil.Error:
                    pass
            time.sleep(0.002)
        # A sampler stuck sending would be freed by this kill (and fail the test below).
        if not done.wait(30):
            for child in stopped:
                child.kill()

    thread = threading.Thread(target=stop_the_first_worker, daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        with pytest.raises(SamplerWorkerError, match='its start-up'):
            sampler.start_worker()
        assert time.monotonic() - start < 25
        assert stopped
    finally:
        done.set()
        thread.join()
    _assert_no_children()


def test_worker_timeout_is_checked():
    env, policy, _, _ = make_setup(7)
    for bad in (0, -1., float('nan'), 'soon'):
        with pytest.raises(ValueError, match='worker_timeout'):
            garage_promp.make_sampler(policy, env, kind='multiprocessing', worker_timeout=bad)


class _BadOutputEnv(LongPointEnv):
    """From its 3rd step on, returns what ``BAD`` says instead of a proper step."""

    BAD = 'short_obs'

    def reset(self):
        self._n = 0
        return super().reset()

    def step(self, action):
        step = super().step(action)
        self._n += 1
        if self._n < 3:
            return step
        fields = dict(action=step.action, observation=step.observation, reward=step.reward,
                      env_info=dict(step.env_info), step_type=step.step_type,
                      terminal=step.terminal)
        if self.BAD == 'short_obs':
            fields['observation'] = step.observation[:1]
        elif self.BAD == 'float_obs':
            fields['observation'] = float(step.observation[0])
        elif self.BAD == 'array_reward':
            fields['reward'] = np.array([step.reward, step.reward])
        elif self.BAD == 'new_info_key':
            fields['env_info']['surprise'] = 1.
        return types.SimpleNamespace(**fields)


@pytest.mark.parametrize('bad,message', [
    ('short_obs', r'observation of shape \(1,\) where its observation space has \(3,\)'),
    ('float_obs', r'observation of shape \(\) where its observation space has \(3,\)'),
    ('array_reward', r'reward of shape \(2,\), not a number'),
    ('new_info_key', r"same keys at every step, got .* and .*'surprise'"),
])
@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_env_output_that_does_not_fit_is_refused_at_its_step(monkeypatch, kind, bad, message):
    monkeypatch.setattr(_BadOutputEnv, 'BAD', bad)
    env, policy, sampler, _ = make_setup(7, kind=kind, env_class=_BadOutputEnv,
                                         n_workers=2 if kind == 'multiprocessing' else 1)
    if kind == 'multiprocessing':  # workers get the class by value: patch it there too
        sampler = garage_promp.make_sampler(
            policy, _bad_env(bad), kind=kind, n_workers=2, seed=7)
    tasks = [SetTaskUpdate(_BadOutputEnv, {'goal': np.array([3., 3.])}, _patched(bad))
             for _ in range(2)]
    try:
        with pytest.raises(ValueError, match=message) as error:
            sampler.obtain_meta_batch(tasks, _noisy_params(policy, 2), 2)
        assert 'step 3' in str(error.value)
    finally:
        sampler.shutdown_worker()
    _assert_no_children()


def _bad_env(bad):
    env = _BadOutputEnv()
    env.BAD = bad
    return env


def _patched(bad):
    def wrapper(env, task):
        del task
        env.BAD = bad
        return env
    return wrapper


@pytest.mark.parametrize('kind,n_workers', [('local', 1), ('multiprocessing', 2)])
def test_deterministic_rounds_act_with_the_mean(kind, n_workers):
    """obtain_rounds(deterministic=...): the mean action in the rounds asked for, sampled
    actions (the same as without the option) in the others."""
    env, policy, sampler, task_sampler = make_setup(3, kind=kind, n_workers=n_workers)
    tasks = task_sampler.sample(2)
    theta = _noisy_params(policy, len(tasks))
    try:
        plain = sampler.obtain_rounds(tasks, theta, [2, 2], lambda r, t, e: theta[t])
        sampler._round -= 2  # replay the same rounds  pylint: disable=protected-access
        mixed = sampler.obtain_rounds(tasks, theta, [2, 2], lambda r, t, e: theta[t],
                                      deterministic=[False, True])
        with pytest.raises(ValueError, match='deterministic has 1 entries for 2 rounds'):
            sampler.obtain_rounds(tasks, theta, [2, 2], lambda r, t, e: theta[t],
                                  deterministic=[True])
    finally:
        sampler.shutdown_worker()
    _assert_identical([plain[0]], [mixed[0]])
    np.testing.assert_allclose(mixed[1].actions, mixed[1].agent_infos['mean'], atol=1e-6)
    assert not np.allclose(plain[1].actions, plain[1].agent_infos['mean'], atol=1e-3)


def test_episode_seed_sequences_are_the_spawned_children():
    """The sampler builds an episode's two seed sequences directly; they are the
    children ``spawn(2)`` of its seed sequence gives, so every stream is unchanged."""
    from garage_promp.sampler.rollout import episode_seed_sequence, episode_seed_sequences
    for seed, key, task, episode in ((1, (0, 1), 3, 7), (2**31 - 1, (5, 0, 2), 0, 0),
                                     (0, (), 19, 9)):
        direct = episode_seed_sequences(seed, key, task, episode)
        spawned = episode_seed_sequence(seed, key, task, episode).spawn(2)
        for a, b in zip(direct, spawned):
            assert a.spawn_key == b.spawn_key and a.entropy == b.entropy
            np.testing.assert_array_equal(a.generate_state(8), b.generate_state(8))
        assert direct[0].spawn_key != direct[1].spawn_key


def test_actions_are_the_mean_plus_std_times_the_noise_childs_normal_draws():
    """Each episode's action noise is its own stream: standard normals (float32, the
    horizon x action size drawn up front) from child 1 of the episode's seed sequence
    (seed, round, task slot, episode) (child 0 seeds the env's reset noise), so the
    action at step t is mean + exp(log_std) * noise[t]. Two rounds, two workers, episodes
    that end early."""
    env, policy, sampler, _ = make_setup(7, n_workers=2, env_class=LongPointEnv)
    tasks = _early_ending_tasks()[:3]
    params = _noisy_params(policy, len(tasks))
    try:
        batches = [sampler.obtain_meta_batch(tasks, params, 2) for _ in range(2)]
    finally:
        sampler.shutdown_worker()
    horizon, action_dim = sampler.max_episode_length, env.spec.action_space.shape[0]
    for r, batch in enumerate(batches):
        assert batch.lengths.min() < horizon  # some episodes end early
        for n, episode in enumerate(batch.split()):
            task, index = divmod(n, 2)
            parent = np.random.SeedSequence(sampler.seed, spawn_key=(r, task, index))
            noise = np.random.default_rng(parent.spawn(2)[1]).standard_normal(
                (horizon, action_dim), dtype=np.float32)[:len(episode.actions)]
            expected = (episode.agent_infos['mean']
                        + np.exp(episode.agent_infos['log_std']) * noise)
            np.testing.assert_allclose(episode.actions, expected, rtol=1e-6, atol=1e-6)


_SLOW_COPIES = """
import copy, sys, time
import numpy as np
import garage_promp
from garage.envs.normalized_env import NormalizedEnv
from garage.sampler.env_update import SetTaskUpdate
from garage.torch.policies import GaussianMLPPolicy
from garage_promp.sampler.backends import SamplerWorkerError
from tests.helpers import LongPointEnv

class SlowCopies(NormalizedEnv):
    # Each copy takes DELAY s, the copy half made meanwhile (no wrapped env yet); the
    # copy numbered HANG hangs.
    DELAY, HANG, made = 0.3, None, 0

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        SlowCopies.made += 1
        time.sleep(3600 if SlowCopies.made == self.HANG else self.DELAY)
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

env = SlowCopies(LongPointEnv())
policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
task = SetTaskUpdate(LongPointEnv, {'goal': np.array([0.2, 0.1])}, None)
params = [dict(policy.named_parameters())]
sampler = garage_promp.make_sampler(policy, env, worker_timeout=1., seed=1)
batch = sampler.obtain_meta_batch([task], params, 8)  # 8 copies, 2.4 s: never 1 s still
print('sampled', len(batch.lengths))
SlowCopies.made, SlowCopies.HANG = 0, 2
sampler = garage_promp.make_sampler(policy, env, worker_timeout=1., seed=1)
try:
    sampler.obtain_meta_batch([task], params, 3)
except SamplerWorkerError as error:
    print(error)
    sys.exit(3)
"""


def test_a_worker_making_its_env_copies_is_not_stuck_and_one_hanging_in_a_copy_is_named():
    """Making env copies is progress (a worker copying hundreds of heavy envs past
    ``worker_timeout`` was ended as "stuck in step or reset"); a copy that hangs is named
    as such, and the half-made copy left behind is collected without a traceback."""
    proc = subprocess.run([sys.executable, '-c', _SLOW_COPIES], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert 'sampled 8' in proc.stdout
    assert 'made no progress' in proc.stdout and 'making its env copy 2' in proc.stdout
    assert 'Exception ignored' not in proc.stderr and 'Traceback' not in proc.stderr, proc.stderr
