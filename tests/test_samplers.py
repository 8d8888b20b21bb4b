"""MetaBatchWorker under garage's Local, Multiprocessing and Ray samplers."""
import math

from garage_promp.sampler import obtain_meta_batch
from garage_promp.sampler.meta_batch_worker import split_meta_batch

from garage.sampler.env_update import SetTaskUpdate
import numpy as np
import pytest
import torch

from tests.helpers import HORIZON, LongPointEnv, make_algo, make_setup


def _sample(seed, n_workers=1, kind='local'):
    env, policy, sampler, task_sampler = make_setup(seed, n_workers=n_workers, kind=kind)
    tasks = task_sampler.sample(4)
    params = [dict(policy.named_parameters())] * 4
    try:
        return obtain_meta_batch(sampler, tasks, params, 3), tasks
    finally:
        sampler.shutdown_worker()


def test_meta_batch_layout_and_seeded_determinism():
    eps, tasks = _sample(5)
    again, _ = _sample(5)
    other, _ = _sample(6)
    assert len(eps.lengths) == 12 and (eps.lengths == HORIZON).all()
    task_index = eps.agent_infos['task_index'].reshape(12, HORIZON)[:, 0]
    np.testing.assert_array_equal(task_index, np.repeat(np.arange(4), 3))
    # garage's PointEnv reports its goal: episodes are grouped by task.
    goals = eps.env_infos['task']
    for i, task in enumerate(tasks):
        goal = task._task['goal']
        for e in range(3):
            step = (3 * i + e) * HORIZON
            np.testing.assert_array_equal(goals[step]['goal'], goal)
    np.testing.assert_array_equal(eps.actions, again.actions)
    assert not np.array_equal(eps.actions, other.actions)


def test_per_task_parameters_are_used():
    env, policy, sampler, task_sampler = make_setup(2)
    tasks = task_sampler.sample(2)
    theta = dict(policy.named_parameters())
    shifted = {k: v.detach() + (5. if 'output_layers.0.linear.bias' in k else 0.)
               for k, v in theta.items()}
    eps = obtain_meta_batch(sampler, tasks, [theta, shifted], 2)
    mean = eps.agent_infos['mean'].reshape(4, HORIZON, -1)
    assert np.all(mean[2:] - mean[:2] > 4.)


def _sample_point_goals(n_workers, batched, envs_per_task=None):
    env, policy, sampler, _ = make_setup(7, n_workers=n_workers, env_class=LongPointEnv,
                                         batched=batched, envs_per_task=envs_per_task)
    # Goals close to the start: some episodes end early, some do not.
    tasks = [SetTaskUpdate(LongPointEnv, {'goal': np.array([0.2, g])}, None)
             for g in (0., 0.1, -0.1, 0.2)]
    gen = torch.Generator().manual_seed(0)
    params = [{k: v.detach() + 0.3 * torch.randn(v.shape, generator=gen)
               for k, v in policy.named_parameters()} for _ in tasks]
    try:
        eps = obtain_meta_batch(sampler, tasks, params, 3)
        n_envs = (len(sampler._workers[0]._envs)
                  if hasattr(sampler, '_workers') else None)
        return eps, n_envs
    finally:
        sampler.shutdown_worker()


def _assert_same_episodes(fast, slow):
    np.testing.assert_array_equal(fast.lengths, slow.lengths)
    np.testing.assert_array_equal(fast.agent_infos['task_index'],
                                  slow.agent_infos['task_index'])
    for field in ('observations', 'actions', 'rewards'):
        np.testing.assert_allclose(getattr(fast, field), getattr(slow, field),
                                   rtol=1e-5, atol=1e-5, err_msg=field)
    for key in ('mean', 'log_std'):
        np.testing.assert_allclose(fast.agent_infos[key],
                                   slow.agent_infos[key], rtol=1e-5,
                                   atol=1e-6, err_msg=key)


@pytest.mark.parametrize('n_workers', [1, 2])
def test_batched_and_sequential_sampling_give_the_same_episodes(n_workers):
    """One batched forward for all slots = one episode at a time."""
    fast, _ = _sample_point_goals(n_workers, batched=True)
    slow, _ = _sample_point_goals(n_workers, batched=False)
    # Some episodes end early (goal reached), so slots go inactive mid-batch.
    assert len(set(fast.lengths)) > 1
    _assert_same_episodes(fast, slow)


def test_fewer_envs_per_task_run_the_same_episodes_in_waves():
    """envs_per_task=2 with R=3: two waves on 2 env copies per task."""
    full, n_full = _sample_point_goals(1, batched=True)
    waves, n_waves = _sample_point_goals(1, batched=True, envs_per_task=2)
    slow, _ = _sample_point_goals(1, batched=False, envs_per_task=2)
    assert (n_full, n_waves) == (4 * 3, 4 * 2)
    _assert_same_episodes(full, waves)
    _assert_same_episodes(waves, slow)


def test_envs_per_task_is_checked():
    with pytest.raises(ValueError, match='envs_per_task'):
        make_setup(1, envs_per_task=0)


def test_split_meta_batch():
    assert split_meta_batch(list(range(6)), 2) == [[0, 1, 2], [3, 4, 5]]
    assert split_meta_batch(list(range(4)), 4) == [[0], [1], [2], [3]]


def test_multiprocessing_sampler_trains_one_step():
    _, algo = make_algo('LVCVPG', meta_batch_size=2,
                        setup_kwargs=dict(n_workers=2, kind='multiprocessing'))
    try:
        batches = algo._sample_meta_batch(0)
        algo._optimize(0, batches)
    finally:
        algo._sampler.shutdown_worker()
    assert batches[0].n_tasks == 2
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())


@pytest.mark.ray
@pytest.mark.slow
def test_ray_sampler_trains_one_epoch(tmp_path):
    from garage_promp.sampler import init_ray

    import ray
    init_ray(num_cpus=2)
    try:
        from tests.algos.test_algos import _train
        env, algo = make_algo('ProMP', meta_batch_size=2,
                              setup_kwargs=dict(n_workers=2, kind='ray'))
        _, last_return = _train(tmp_path, algo, env, 1)
        assert math.isfinite(last_return)
    finally:
        ray.shutdown()
