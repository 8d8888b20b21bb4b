"""MetaEvaluator's two paths: task by task (garage's LocalSampler) and batched.

``MetaEvaluator.evaluate`` samples every test task through a garage_promp
``MetaSampler`` when it has one (its ``sampler`` argument or ``algo.sampler``)
and otherwise task by task in-process, as garage does: for an algorithm
that offers only ``get_exploration_policy``/``adapt_policy`` (garage's own
MAML, a third-party one). Both must explore and adapt K times per task
(``algo.num_inner_grad_steps``), each time with fresh episodes of the latest
adapted policy, then evaluate the K-times adapted policy.
"""
import copy

import garage_promp
from garage_promp.policies import AdaptedPolicy

from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskSampler
from garage.sampler import LocalSampler
from garage.torch.policies import GaussianMLPPolicy
import numpy as np
import pytest
import torch

from tests.helpers import HORIZON, ShortPointEnv, make_algo

N_TASKS = 2
N_EXPLORE = 2
N_TEST = 2


class _OnlyAdaptPolicy:
    """A meta-RL algorithm seen only through garage's MetaRLAlgorithm API.

    No ``sampler`` and no ``adapt_many``: the evaluator must take its
    task-by-task path.
    """

    def __init__(self, algo):
        self._algo = algo
        self.policy = algo.policy
        self.num_inner_grad_steps = algo.num_inner_grad_steps
        self.discount = algo.discount
        self.calls = []  # (inner steps already taken, episodes given)

    def get_exploration_policy(self):
        return self._algo.get_exploration_policy()

    def adapt_policy(self, policy, episodes):
        self.calls.append((policy.num_steps, len(episodes.lengths)))
        return self._algo.adapt_policy(policy, episodes)


def _evaluator(task_sampler, **kwargs):
    return garage_promp.MetaEvaluator(test_task_sampler=task_sampler,
                                      n_test_tasks=N_TASKS,
                                      n_exploration_eps=N_EXPLORE,
                                      n_test_episodes=N_TEST, **kwargs)


@pytest.mark.parametrize('k', [1, 2])
def test_task_by_task_path_adapts_k_times_per_task(k):
    _, real = make_algo('LVCVPG', num_inner_grad_steps=k)
    algo = _OnlyAdaptPolicy(real)
    evaluator = _evaluator(real._task_sampler)
    episodes = evaluator.evaluate(algo)
    # the task-by-task path ran (garage's LocalSampler), not the MetaSampler
    assert isinstance(evaluator._test_sampler, LocalSampler)
    # task after task, K inner steps each, on N_EXPLORE fresh episodes
    assert algo.calls == [(step, N_EXPLORE) for _ in range(N_TASKS)
                          for step in range(k)]
    assert len(episodes) == N_TASKS
    assert all(len(eps.lengths) == N_TEST for eps in episodes)


# ---------------------------------------------- task by task against batched
STEP = 0.04  # the stub's inner step on the mean's output bias
STD = 1e-5  # near-deterministic actions: both paths' returns then agree


class _ShiftAlgo:
    """A deterministic stand-in for a meta-RL algorithm (no ``sampler``).

    Its inner step moves the policy's mean (output bias) by an amount that
    depends on the episodes it is given (their mean |reward|), so a step
    taken on other episodes, or a step too few, changes the final policy.
    It checks that every episode it adapts on was sampled by the policy it
    adapts (fresh episodes of the latest adapted policy).
    """

    BIAS = '_module._mean_module._output_layers.0.linear.bias'

    def __init__(self, policy, k):
        self.policy = policy
        self.num_inner_grad_steps = k
        self.calls = []

    def get_exploration_policy(self):  # as garage's MAML: a copy
        return copy.deepcopy(self.policy)

    def adapt_policy(self, policy, episodes):
        steps = policy.num_steps if isinstance(policy, AdaptedPolicy) else 0
        obs = torch.as_tensor(episodes.observations, dtype=torch.float32)
        with torch.no_grad():
            mean = policy(obs)[0].mean.numpy()
        gap = np.abs(episodes.actions - mean).max()
        self.calls.append(steps)
        assert gap < 20 * STD, ('episodes not sampled by the adapted policy',
                                steps, gap)
        if isinstance(policy, AdaptedPolicy):
            params = dict(policy.adapted_params())
        else:  # the exploration policy (a copy of the meta-policy)
            params = {name: value.detach().clone()
                      for name, value in policy.named_parameters()}
        shift = STEP * (1. + np.abs(episodes.rewards).mean())
        params[self.BIAS] = params[self.BIAS] + torch.tensor(
            [shift, -0.5 * shift], dtype=params[self.BIAS].dtype)
        return AdaptedPolicy(self.policy, params, steps + 1)


def _shift_setup(k, seed):
    set_seed(seed)
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ), init_std=STD)
    return env, _ShiftAlgo(policy, k), SetTaskSampler(ShortPointEnv)


def _evaluate(k, seed, batched):
    env, algo, task_sampler = _shift_setup(k, seed)
    sampler = (garage_promp.make_sampler(algo.policy, env, kind='local')
               if batched else None)
    evaluator = _evaluator(task_sampler, sampler=sampler)
    set_seed(seed)  # the same test tasks for both paths
    episodes = evaluator.evaluate(algo)
    assert (evaluator._test_sampler is None) == batched
    return episodes, algo.calls


@pytest.mark.parametrize('k', [1, 2])
def test_task_by_task_path_matches_batched_path(k):
    seed = 3
    by_task, by_task_calls = _evaluate(k, seed, batched=False)
    batched, batched_calls = _evaluate(k, seed, batched=True)
    assert len(by_task) == len(batched) == N_TASKS
    for task, (one, other) in enumerate(zip(by_task, batched)):
        np.testing.assert_array_equal(one.lengths, [HORIZON] * N_TEST)
        np.testing.assert_array_equal(other.lengths, [HORIZON] * N_TEST)
        # same test task, same K-times adapted policy: same episodes up to
        # the tiny action noise, which the two samplers draw differently
        np.testing.assert_allclose(one.observations, other.observations,
                                   atol=1e-3, err_msg=f'task {task}')
        returns = [r.sum() for r in np.split(one.rewards, N_TEST)]
        other_returns = [r.sum() for r in np.split(other.rewards, N_TEST)]
        np.testing.assert_allclose(returns, other_returns, atol=1e-3,
                                   err_msg=f'task {task}')
    expected = sorted(list(range(k)) * N_TASKS)
    assert sorted(by_task_calls) == sorted(batched_calls) == expected


def test_one_inner_step_changes_the_returns():
    """The comparison above can tell K from K - 1 inner steps."""
    seed = 3
    one, _ = _evaluate(1, seed, batched=True)
    two, _ = _evaluate(2, seed, batched=True)
    for a, b in zip(one, two):
        assert np.abs(a.rewards.sum() - b.rewards.sum()) > 0.05
