"""Logged statistics and evaluator rounds against values computed by hand (gaps a mutation
probe found: before these, only a machine's own recorded runs would notice)."""
import types

import garage_promp
from garage_promp.algos.epoch_loop import _log_step_returns

from dowel import tabular
from garage import StepType
from garage.envs import normalize
from garage.sampler.env_update import SetTaskUpdate
import numpy as np
import pytest
import torch

from tests.helpers import LongPointEnv, make_algo


def _episode(rewards, success):
    return types.SimpleNamespace(rewards=np.array(rewards, float),
                                 env_infos={'success': np.array(success)})


def test_step_returns_are_the_episodes_returns_discounted_from_their_start():
    # Two episodes: returns 3 and 2; discounted (0.9) 1 + 0.9 + 0.81 = 2.71 and 2; the
    # first succeeds at one step (success: any step), the second never.
    batch = types.SimpleNamespace(split=lambda: [_episode([1, 1, 1], [0, 1, 0]),
                                                 _episode([2, 0], [0, 0])])
    tabular.clear()
    _log_step_returns('Step_0-', batch, 0.9)
    logged = tabular.as_dict
    expected = {'AverageReturn': 2.5, 'AverageDiscountedReturn': 2.355, 'StdReturn': 0.5,
                'MaxReturn': 3., 'MinReturn': 2., 'NumEpisodes': 2, 'SuccessRate': 0.5}
    for key, value in expected.items():
        assert logged['Step_0-' + key] == pytest.approx(value, rel=1e-12), key
    tabular.clear()


def test_learned_step_sizes_are_logged_as_their_mean_min_and_max():
    # Step sizes are not kept positive (the sign is free, as in the reference): the logged
    # statistics are of the signed values.
    _, algo = make_algo('ProMP', trainable_inner_step_size=True)
    with torch.no_grad():
        for value in algo._inner_lr.values():
            value.copy_(torch.linspace(-0.3, 0.1, value.numel()).reshape(value.shape)
                        if value.numel() > 1 else torch.full_like(value, -0.1))
    tabular.clear()
    algo._log_inner_step_sizes()
    logged = tabular.as_dict
    name = next(n for n, v in algo._inner_lr.items() if v.numel() > 2)
    for stat, value in (('Mean', -0.1), ('Min', -0.3), ('Max', 0.1)):
        assert logged[f'InnerStepSize/{name}/{stat}'] == pytest.approx(value, rel=1e-6), stat
    tabular.clear()
    algo.sampler.shutdown_worker()


def test_a_training_epoch_logs_the_learned_step_sizes_it_ends_with():
    _, algo = make_algo('ProMP', trainable_inner_step_size=True)
    tabular.clear()
    algo._train_once(0, 0, algo.sample_meta_batch(0))
    logged = tabular.as_dict
    for name, value in algo._inner_lr.items():
        for stat in ('Mean', 'Min', 'Max'):
            key = f'{algo.policy.name}/InnerStepSize/{name}/{stat}'
            assert logged[key] == pytest.approx(float(getattr(value.detach(), stat.lower())()),
                                                rel=1e-6), key
    tabular.clear()
    algo.sampler.shutdown_worker()


def test_a_deterministic_meta_test_explores_stochastically_and_logs_its_discounted_return():
    # MetaEvaluator(deterministic=True) takes the mean action only after adaptation: the
    # exploration rounds sample (the mean action would collapse adaptation). Its logged
    # discounted return is the algorithm's discount applied to the returned episodes.
    _, algo = make_algo('LVCVPG', discount=0.5)
    evaluator = garage_promp.MetaEvaluator(test_task_sampler=algo._task_sampler,
                                           n_test_tasks=2, n_exploration_eps=2,
                                           n_test_episodes=2, deterministic=True)
    seen = {}
    real = algo.sampler.obtain_rounds

    def spy(*args, **kwargs):
        seen['deterministic'] = kwargs.get('deterministic')
        return real(*args, **kwargs)

    algo.sampler.obtain_rounds = spy
    tabular.clear()
    try:
        out = evaluator.evaluate(algo)
        assert seen['deterministic'] == [False, True]
        discounted = np.mean([sum(0.5**t * r for t, r in enumerate(episode.rewards))
                              for batch in out for episode in batch.split()])
        assert tabular.as_dict['MetaTest/Average/AverageDiscountedReturn'] == pytest.approx(
            discounted, rel=1e-6)
    finally:
        tabular.clear()
        algo.sampler.shutdown_worker()


@pytest.mark.mujoco
def test_the_lean_path_clips_scaled_actions_to_the_action_space():
    # garage's normalize scales an action in [-1, 1] to the env's bounds and clips it: an
    # action of 15 at scale 10 is 1.0 per joint, a control cost of 0.05 x 6 = 0.3.
    from garage_promp.envs import HalfCheetahFwdBackEnv
    from garage_promp.sampler.lean import LeanStepper
    env = normalize(HalfCheetahFwdBackEnv(seed=0), expected_action_scale=10.)
    env.reset()
    stepper = LeanStepper.of([env])
    stepper.start([0])
    _, _, _, infos = stepper.step(np.array([0]), np.full((1, 6), 15., dtype=np.float32),
                                  np.array([1]))
    assert float(infos['ctrl_cost'][0]) == pytest.approx(0.3, rel=1e-6)
    env.close()


def _performance(episodes, discount):
    """garage's ``log_performance`` statistics of ``episodes``, by hand."""
    split = episodes.split()
    returns = np.array([episode.rewards.sum() for episode in split])
    return {'NumEpisodes': len(split),
            'AverageReturn': returns.mean(),
            'AverageDiscountedReturn': np.mean([
                sum(discount**t * r for t, r in enumerate(episode.rewards))
                for episode in split]),
            'StdReturn': returns.std(), 'MaxReturn': returns.max(), 'MinReturn': returns.min(),
            'TerminationRate': np.mean([episode.step_types[-1] == StepType.TERMINAL
                                        for episode in split]),
            'SuccessRate': np.mean([episode.env_infos['success'].any() for episode in split])}


@pytest.mark.filterwarnings('ignore::dowel.tabular_input.TabularInputWarning')
def test_average_statistics_are_the_last_post_update_rounds():
    """garage's ``Average/*`` keys and the epoch's return are the statistics of the last,
    post-update round D_K, as garage's own MAML logs ``task_paths[num_grad_updates]``
    (garage/torch/algos/maml.py ``_log_performance``): here K = 2, by hand from the
    episodes, and not those of the pre-update round D_0 (``Step_0-*``) nor of D_1."""
    _, algo = make_algo('ProMP', discount=0.9, num_inner_grad_steps=2, episodes_per_task=4,
                        setup_kwargs=dict(env_class=LongPointEnv))
    # Goals near the start, so that some episodes end early (terminate) and others not.
    tasks = [SetTaskUpdate(LongPointEnv, {'goal': np.array([0.2, g])}, None)
             for g in (0., 0.1, -0.2)]
    tabular.clear()
    try:
        batches = algo.sample_meta_batch(0, task_updates=tasks)
        last_return = algo._train_once(0, 0, batches)
        logged = dict(tabular.as_dict)
    finally:
        tabular.clear()
        algo.sampler.shutdown_worker()
    rounds = [_performance(batch.episodes, 0.9) for batch in batches]
    for key in ('AverageReturn', 'AverageDiscountedReturn', 'StdReturn', 'TerminationRate'):
        assert rounds[0][key] != rounds[2][key], key  # else D_0 in place of D_K passes
    assert rounds[1]['AverageReturn'] != rounds[2]['AverageReturn']
    for key, value in rounds[2].items():
        assert logged[f'Average/{key}'] == pytest.approx(value, rel=1e-9), key
    assert last_return == pytest.approx(rounds[2]['AverageReturn'], rel=1e-9)
    for k, stats in enumerate(rounds):
        assert logged[f'Step_{k}-AverageReturn'] == pytest.approx(stats['AverageReturn'],
                                                                  rel=1e-9)
