"""The hand-written trust-region HVPs against double backpropagation."""
import copy
import dataclasses

import garage_promp
from garage_promp.algos import TRPOMAML
from garage_promp.curvature import TrustRegionCurvature
from garage_promp.objectives import gaussian_log_likelihood
from garage_promp.optimizers import exact_hvp
from garage_promp.policies import expand_params, learn_log_std_per_dimension, named_params

from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskSampler
from garage.torch.policies import GaussianMLPPolicy
import pytest
import torch

from tests.helpers import ShortPointEnv, make_algo
from tests.test_meta_gradients import _double

POLICIES = {
    'tanh, learned std': {},
    'relu, two layers': dict(hidden_sizes=(8, 8), hidden_nonlinearity=torch.relu),
    'fixed std': dict(learn_std=False),
    'softplus std': dict(std_parameterization='softplus'),
    'clamp inactive': dict(min_std=0.05, max_std=5.),
    'clamp active': dict(init_std=0.3, min_std=0.5),
    'tanh output': dict(output_nonlinearity=torch.tanh),
    'sigmoid (derivatives by autograd)': dict(hidden_nonlinearity=torch.sigmoid),
    'in-place ELU': dict(hidden_nonlinearity=torch.nn.ELU(inplace=True)),
    'wide layers': dict(hidden_sizes=(32, 24)),  # the GEMM layout of wide outputs
}


def _trpo(estimator='lvc', steps=1, exploration=False, policy_kwargs=None, log_std=None,
          **kwargs):
    set_seed(3)
    env = ShortPointEnv()
    policy_kwargs = dict(dict(hidden_sizes=(8, )), **(policy_kwargs or {}))
    policy = GaussianMLPPolicy(env.spec, **policy_kwargs)
    if log_std is not None:  # one log-std per action dimension, these values
        learn_log_std_per_dimension(policy)
        with torch.no_grad():
            policy._module._init_std.copy_(torch.tensor(log_std))
    if kwargs.get('inner_lr') == 'per parameter':  # a different α for each
        kwargs['inner_lr'] = {name: 0.05 * (1 + i)
                              for i, (name, _) in enumerate(policy.named_parameters())}
    elif kwargs.get('inner_lr') == 'per element':  # α shaped like each parameter
        generator = torch.Generator().manual_seed(2)
        kwargs['inner_lr'] = {name: 0.02 + 0.1 * torch.rand(p.shape, generator=generator)
                              for name, p in policy.named_parameters()}
    sampler = garage_promp.make_sampler(policy, env, kind='local', n_workers=1)
    kwargs = dict(dict(meta_batch_size=3, episodes_per_task=2), **kwargs)
    return TRPOMAML(env, policy, sampler, SetTaskSampler(ShortPointEnv),
                    inner_estimator=estimator, exploration=exploration,
                    num_inner_grad_steps=steps, **kwargs)


def _in_double(algo, batches):
    """The batches in float64, their sampling statistics recomputed in float64.

    So the post-update Gaussians at θ are the sampling ones to float64
    rounding, as they are to float32 rounding in a run.
    """
    algo.policy.double()
    algo._inner_lr = {k: v.double() for k, v in algo._inner_lr.items()}
    batches = _double(batches)
    theta = {k: v.detach() for k, v in named_params(algo.policy).items()}
    for k, batch in enumerate(batches):
        phi = expand_params(theta, batch.n_tasks)
        for previous in batches[:k]:
            phi = algo._inner_step(phi, previous, create_graph=False)
        mean, log_std = (t.detach() for t in algo._dist(phi, batch))
        batches[k] = dataclasses.replace(
            batch, old_mean=mean, old_log_std=log_std,
            old_log_probs=gaussian_log_likelihood(batch.actions, mean, log_std))
    return batches


def _directions(algo, n=3, seed=5):
    size = sum(p.numel() for p in algo.policy.parameters())
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(size, generator=generator, dtype=torch.float64) for _ in range(n)]


def _reference(algo, batches):
    return exact_hvp(algo.meta_objective(batches).kl, list(algo.policy.parameters()),
                     algo._cg_damping)


def _assert_products_equal(fast, reference, directions, rtol):
    for v in directions:
        expected = reference(v)
        assert expected.norm() > 1e-8
        gap = float((fast(v) - expected).norm() / expected.norm())
        assert gap < rtol, gap


@pytest.mark.parametrize('estimator', ['lvc', 'maml', 'dice'])
@pytest.mark.parametrize('steps', [1, 2])
def test_hand_written_hvps_equal_double_backprop_for_every_inner_estimator(estimator, steps):
    algo = _trpo(estimator, steps, cg_damping=0.1)
    batches = _in_double(algo, algo.sample_meta_batch(0))
    fast = algo._hand_written_curvature(batches)
    assert isinstance(fast, TrustRegionCurvature)
    assert fast.mismatch < 1e-10
    _assert_products_equal(fast, _reference(algo, batches), _directions(algo), 1e-9)


def test_hand_written_hvps_with_three_steps_and_elementwise_step_sizes():
    algo = _trpo('dice', 3, inner_lr='per element', policy_kwargs=dict(hidden_sizes=(20, )))
    batches = _in_double(algo, algo.sample_meta_batch(0))
    fast = algo._hand_written_curvature(batches)
    _assert_products_equal(fast, _reference(algo, batches), _directions(algo), 1e-9)


def test_a_check_with_large_damping_still_sees_a_wrong_hessian(monkeypatch):
    algo = _trpo('lvc', 1, cg_damping=1e4)
    batches = _in_double(algo, algo.sample_meta_batch(0))
    real = TrustRegionCurvature.__call__
    monkeypatch.setattr(TrustRegionCurvature, '__call__',
                        lambda self, v: real(self, v) + 0.5 * (real(self, v) - 1e4 * v))
    algo.hvp_function(batches)
    assert algo._curvature_checked[0] is False


@pytest.mark.parametrize('policy', sorted(POLICIES))
def test_hand_written_hvps_equal_double_backprop_for_every_policy_structure(policy):
    algo = _trpo('lvc', 2, policy_kwargs=POLICIES[policy],
                 inner_lr='per parameter')
    batches = _in_double(algo, algo.sample_meta_batch(0))
    fast = algo._hand_written_curvature(batches)
    assert fast is not None
    _assert_products_equal(fast, _reference(algo, batches), _directions(algo), 1e-9)


@pytest.mark.parametrize('policy', ['tanh, learned std', 'clamp active', 'softplus std'])
def test_hand_written_hvps_equal_double_backprop_with_a_log_std_per_dimension(policy):
    """The reference's policy structure: one learned log-std per action dimension, here
    unequal, adapted by the inner steps like the other parameters."""
    algo = _trpo('lvc', 2, policy_kwargs=POLICIES[policy], inner_lr='per element',
                 log_std=[-0.4, 0.3])
    assert algo.policy._module._init_std.shape == (2, )
    batches = _in_double(algo, algo.sample_meta_batch(0))
    fast = algo._hand_written_curvature(batches)
    assert fast is not None
    _assert_products_equal(fast, _reference(algo, batches), _directions(algo), 1e-9)


def test_hand_written_hvps_in_float32_match_to_float_rounding():
    _, algo = make_algo('TRPOMAML', inner_estimator='dice')
    batches = algo.sample_meta_batch(0)
    fast = algo._hand_written_curvature(batches)
    directions = [v.float() for v in _directions(algo)]
    _assert_products_equal(fast, _reference(algo, batches), directions, 1e-4)


def test_away_from_the_sampling_parameters_double_backprop_is_used():
    algo = _trpo('lvc', 1)
    batches = _in_double(algo, algo.sample_meta_batch(0))
    with torch.no_grad():
        for p in algo.policy.parameters():
            p.add_(0.05)
    # There the KL's gradient does not vanish and the Gauss-Newton form is not
    # the Hessian; the products must be the double-backprop ones.
    assert algo._hand_written_curvature(batches) is None
    hvp = algo.hvp_function(batches)
    _assert_products_equal(hvp, _reference(algo, batches), _directions(algo), 1e-12)


def test_a_failed_check_switches_the_run_to_double_backprop(monkeypatch):
    algo = _trpo('maml', 1)
    batches = _in_double(algo, algo.sample_meta_batch(0))
    monkeypatch.setattr(TrustRegionCurvature, '__call__',
                        lambda self, v: 1.01 * v)  # a wrong product
    hvp = algo.hvp_function(batches)
    assert algo._curvature_checked[0] is False
    assert algo._hand_written_curvature(batches) is None
    _assert_products_equal(hvp, _reference(algo, batches), _directions(algo), 1e-12)
    # A restored run checks again.
    assert '_curvature_checked' not in copy.copy(algo).__getstate__()


def test_a_passed_check_is_recorded_once_and_products_are_hand_written():
    algo = _trpo('lvc', 1)
    batches = _in_double(algo, algo.sample_meta_batch(0))
    assert isinstance(algo.hvp_function(batches), TrustRegionCurvature)
    ok, gap = algo._curvature_checked
    assert ok and gap < 1e-9


@pytest.mark.parametrize('variant', [('maml', False), ('maml', True), ('lvc', False),
                                     ('dice', False)])
def test_training_updates_use_the_hand_written_products(variant):
    # A hand-written product that failed its check would fall back to double
    # backpropagation without changing any result, only the speed: a training update in
    # float32, as runs are, must have passed the check for every TRPO label.
    algo = _trpo(*variant[:1], 1, variant[1])
    algo.optimize(0, algo.sample_meta_batch(0))
    ok, gap = algo._curvature_checked
    assert ok and gap < 1e-3, gap


@pytest.mark.parametrize('variant', [('maml', False), ('maml', True), ('lvc', False),
                                     ('dice', False)])
def test_the_trpo_step_is_the_double_backprop_step(variant):
    # Damped: the tiny policy's KL Hessian is singular (rank 33 of 51), and CG
    # on a singular system turns 1e-16 differences into percent ones.
    estimator, exploration = variant
    steps = {}
    for approach in ('exact', 'double_backprop'):
        algo = _trpo(estimator, 1, exploration, hvp_approach=approach, cg_damping=0.1)
        batches = _in_double(algo, algo.sample_meta_batch(0))
        theta = torch.cat([p.detach().flatten() for p in algo.policy.parameters()])
        algo.optimize(0, batches)
        steps[approach] = torch.cat(
            [p.detach().flatten() for p in algo.policy.parameters()]) - theta
    assert steps['double_backprop'].norm() > 0
    gap = (steps['exact'] - steps['double_backprop']).norm() / steps['double_backprop'].norm()
    # CG stops once rᵀr < 1e-10, so two solves equal to 1e-16 per product
    # may still stop an iteration apart: about 1e-6 apart here.
    assert gap < 1e-4, gap



def test_an_error_building_the_products_falls_back_to_double_backprop(monkeypatch):
    algo = _trpo('lvc', 1)
    batches = _in_double(algo, algo.sample_meta_batch(0))

    def fail(self, *args, **kwargs):
        raise RuntimeError('cannot differentiate this nonlinearity twice')

    monkeypatch.setattr(TrustRegionCurvature, '__init__', fail)
    hvp = algo.hvp_function(batches)
    assert algo._curvature_checked[0] is False
    _assert_products_equal(hvp, _reference(algo, batches), _directions(algo), 1e-12)
