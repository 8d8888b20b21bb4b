"""Logged statistics and evaluator rounds against values computed by hand (gaps a mutation
probe found: before these, only a machine's own recorded runs would notice)."""
import types

import garage_promp
from garage_promp.algos.epoch_loop import _log_step_returns

from dowel import tabular
from garage.envs import normalize
import numpy as np
import pytest
import torch

from tests.helpers import make_algo


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
    _, algo = make_algo('ProMP', trainable_inner_step_size=True)
    with torch.no_grad():
        for value in algo._inner_lr.values():
            value.copy_(torch.linspace(0.1, 0.3, value.numel()).reshape(value.shape)
                        if value.numel() > 1 else torch.full_like(value, 0.2))
    tabular.clear()
    algo._log_inner_step_sizes()
    logged = tabular.as_dict
    name = next(n for n, v in algo._inner_lr.items() if v.numel() > 2)
    for stat, value in (('Mean', 0.2), ('Min', 0.1), ('Max', 0.3)):
        assert logged[f'InnerStepSize/{name}/{stat}'] == pytest.approx(value, rel=1e-6), stat
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
