"""build_experiment: the one way launchers and benchmarks build an algorithm."""
from garage_promp.experiment import build_experiment, make_algo

import pytest
import torch

TINY = dict(meta_batch_size=2, episodes_per_task=2, max_episode_length=5, hidden_sizes=(4, ))


def _params(experiment):
    return torch.cat([p.detach().flatten() for p in experiment.algo.policy.parameters()])


def test_same_seed_same_experiment_other_seed_other_weights():
    a = build_experiment('ProMP', 'PointEnvCorner', 3, **TINY)
    b = build_experiment('ProMP', 'PointEnvCorner', 3, **TINY)
    c = build_experiment('ProMP', 'PointEnvCorner', 4, **TINY)
    assert torch.equal(_params(a), _params(b))
    assert not torch.equal(_params(a), _params(c))
    assert a.env.spec.max_episode_length == 5


def test_overrides_reach_the_constructor_and_unknown_keys_are_named():
    experiment = build_experiment('LVC-VPG', 'PointEnvCorner', 1, n_test_tasks=None,
                                  overrides={'discount': 0.9, 'reward_type': 'dense'}, **TINY)
    assert experiment.algo.discount == 0.9
    assert experiment.algo._meta_evaluator is None  # n_test_tasks=None: no meta-test
    with pytest.raises(ValueError, match="'clip_eps' is not an option of LVC-VPG"):
        build_experiment('LVC-VPG', 'PointEnvCorner', 1, overrides={'clip_eps': 0.3}, **TINY)
    with pytest.raises(ValueError, match="'meta_evaluator' is not an option"):
        build_experiment('ProMP', 'PointEnvCorner', 1, overrides={'meta_evaluator': None},
                         **TINY)


def _parts():
    from tests.helpers import make_setup
    return make_setup()


@pytest.mark.parametrize('label', ['ProMP', 'MAML-TRPO', 'E-MAML-TRPO', 'LVC-TRPO', 'DiCE-TRPO',
                                   'MAML-VPG', 'E-MAML-VPG', 'LVC-VPG', 'DiCE-VPG'])
def test_every_paper_label_is_reachable(label):
    from garage_promp.experiment.paper_config import ALGOS
    algo = make_algo(label, *_parts(), meta_batch_size=2)
    cls, defaults = ALGOS[label]
    assert type(algo) is cls
    if 'inner_estimator' in defaults:
        assert algo._inner_estimator == defaults['inner_estimator']
    assert algo._exploration == defaults.get('exploration', label.startswith('E-MAML'))


@pytest.mark.parametrize('label, option, hint', [
    ('MAML-TRPO', dict(inner_estimator='lvc'), 'that is LVC-TRPO'),
    ('MAML-TRPO', dict(exploration=True), 'that is E-MAML-TRPO'),
    ('E-MAML-TRPO', dict(exploration=False), 'that is MAML-TRPO'),
    ('DiCE-TRPO', dict(inner_estimator='maml'), 'that is MAML-TRPO'),
])
def test_a_label_refuses_options_that_make_it_another_variant(label, option, hint):
    with pytest.raises(ValueError, match=f'{label} is TRPOMAML with .*; {hint}'):
        make_algo(label, *_parts(), **option)


def test_unknown_label_lists_the_labels():
    with pytest.raises(ValueError, match=r"unknown algorithm 'PPO'; choose from \['DiCE-TRPO'"):
        make_algo('PPO', *_parts())


@pytest.mark.parametrize('label', ['ProMP', 'MAML-TRPO'])
def test_a_log_std_per_action_dimension_is_learned_entry_by_entry(label):
    """log_std='per-dimension': the reference's one log-std per action dimension, each
    adapted by the inner step and moved by the outer update on its own."""
    from garage_promp.policies import expand_params  # pylint: disable=import-outside-toplevel
    dense = dict(n_test_tasks=None, overrides={'reward_type': 'dense'}, **TINY)
    shared = build_experiment(label, 'PointEnvCorner', 2, **dense)
    per_dim = build_experiment(label, 'PointEnvCorner', 2, log_std='per-dimension', **dense)
    name = '_module._init_std'
    action_dim = per_dim.env.spec.action_space.flat_dim
    assert action_dim > 1
    assert dict(shared.algo.policy.named_parameters())[name].shape == (1, )
    log_std = dict(per_dim.algo.policy.named_parameters())[name]
    assert log_std.shape == (action_dim, )
    # The same policy until it learns: the same weights, the shared value in every entry.
    others = [[p.detach() for n, p in e.algo.policy.named_parameters() if n != name]
              for e in (shared, per_dim)]
    assert all(torch.equal(a, b) for a, b in zip(*others))
    assert torch.equal(log_std.detach(),
                       dict(shared.algo.policy.named_parameters())[name].detach().expand(
                           action_dim))
    batches = per_dim.algo.sample_meta_batch(0)
    theta = {k: v.detach() for k, v in per_dim.algo.policy.named_parameters()}
    adapted = per_dim.algo._inner_step(expand_params(theta, batches[0].n_tasks), batches[0],
                                       create_graph=False)[name]
    assert adapted.shape == (batches[0].n_tasks, action_dim)
    assert torch.all(adapted[:, 0] != adapted[:, 1])
    before = log_std.detach().clone()
    per_dim.algo.optimize(0, batches)
    moved = log_std.detach() - before
    assert torch.all(moved != 0) and moved[0] != moved[1]


def test_a_log_std_kind_other_than_the_two_is_refused_naming_it():
    with pytest.raises(ValueError, match="log_std must be one of 'shared', 'per-dimension', "
                                         "got 'per_dim'"):
        build_experiment('ProMP', 'PointEnvCorner', 1, log_std='per_dim', **TINY)


def test_a_log_std_per_dimension_with_worker_processes_learned_steps_and_meta_testing():
    """The places a policy goes: pickled to worker processes, learned inner step sizes
    shaped like each parameter, and garage's meta-test adaptation."""
    from garage import EpisodeBatch  # pylint: disable=import-outside-toplevel
    experiment = build_experiment(
        'ProMP', 'PointEnvCorner', 2, n_test_tasks=None, log_std='per-dimension',
        sampler='multiprocessing', n_workers=2,
        overrides={'reward_type': 'dense', 'trainable_inner_step_size': True}, **TINY)
    algo = experiment.algo
    name = '_module._init_std'
    try:
        batches = algo.sample_meta_batch(0)
        step = algo._inner_lr[name]
        assert step.shape == (2, )
        before = step.detach().clone()
        algo.optimize(0, batches)
        assert torch.all(algo._inner_lr[name].detach() != before)
        explorer = algo.get_exploration_policy()
        episodes = EpisodeBatch.concatenate(*batches[0].episodes.split()[:2])
        adapted = dict(algo.adapt_policy(explorer, episodes).adapted_params())[name]
        assert adapted.shape == (2, ) and adapted[0] != adapted[1]
    finally:
        algo.sampler.shutdown_worker()


def test_a_policy_log_std_of_another_shape_or_kind_is_refused_and_frozen_stays_frozen():
    from garage_promp.policies import learn_log_std_per_dimension  # pylint: disable=import-outside-toplevel

    from garage.torch.policies import GaussianMLPPolicy  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from tests.helpers import ShortPointEnv  # pylint: disable=import-outside-toplevel
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec)
    policy._module._init_std = torch.nn.Parameter(torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r'log-std has shape \(1, 2\), neither'):
        learn_log_std_per_dimension(policy)
    frozen = GaussianMLPPolicy(env.spec)
    frozen._module._init_std.requires_grad_(False)
    assert not learn_log_std_per_dimension(frozen)._module._init_std.requires_grad
    for kind in (np.array(['per-dimension']), None, ['shared']):
        with pytest.raises(ValueError, match='log_std must be one of'):
            build_experiment('ProMP', 'PointEnvCorner', 1, log_std=kind, **TINY)


@pytest.mark.parametrize('overrides, kwargs, match', [
    ({'episodes_per_task': 1.5}, {}, 'episodes_per_task must be an int >= 1, got 1.5'),
    ({'episodes_per_task': 0}, {}, 'episodes_per_task must be an int >= 1, got 0'),
    ({'meta_batch_size': 3}, {'meta_batch_size': 2},
     r"meta_batch_size is given twice, 2 and overrides\['meta_batch_size'\] = 3"),
    ({'episodes_per_task': 4}, {'episodes_per_task': 2}, 'episodes_per_task is given twice')])
def test_batch_sizes_are_checked_under_their_own_names_and_given_once(overrides, kwargs, match):
    # (episodes_per_task also sets the meta-evaluator's n_exploration_eps: named as itself.)
    with pytest.raises(ValueError, match=match):
        build_experiment('ProMP', 'PointEnvCorner', 1, overrides=overrides, **kwargs)
    # The same value twice is one value.
    build_experiment('ProMP', 'PointEnvCorner', 1, meta_batch_size=2, episodes_per_task=2,
                     overrides={'meta_batch_size': 2})


@pytest.mark.parametrize('label, dice', [('ProMP', False), ('DiCE-VPG', True),
                                         ('DiCE-TRPO', True), ('MAML-TRPO', False)])
def test_the_baseline_solver_reaches_the_algorithms_linear_baselines(label, dice):
    """``baseline_solver='cholesky'`` builds the value baseline (and DiCE's time-only reward
    baseline for a DiCE variant) with it; the default leaves the algorithm's own defaults,
    the original code's ``lstsq``; an unknown solver, or a baseline given twice, is refused
    naming it."""
    from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline
    fast = build_experiment(label, 'PointEnvCorner', 1, n_test_tasks=None,
                            baseline_solver='cholesky', **TINY).algo._processing
    usual = build_experiment(label, 'PointEnvCorner', 1, n_test_tasks=None,
                             **TINY).algo._processing
    assert type(fast.baseline) is LinearFeatureBaseline and fast.baseline.solver == 'cholesky'
    assert usual.baseline.solver == 'lstsq'
    if dice:
        assert type(fast.dice_baseline) is LinearTimeBaseline
        assert fast.dice_baseline.solver == 'cholesky' and usual.dice_baseline.solver == 'lstsq'
    else:
        assert fast.dice_baseline is None and usual.dice_baseline is None
    with pytest.raises(ValueError, match=r"baseline_solver must be one of \('lstsq', "
                                         r"'cholesky'\), got 'svd'"):
        build_experiment(label, 'PointEnvCorner', 1, baseline_solver='svd', **TINY)
    with pytest.raises(ValueError, match="baseline_solver='cholesky' makes the linear "
                                         "baselines, and overrides give baseline="):
        build_experiment(label, 'PointEnvCorner', 1, baseline_solver='cholesky',
                         overrides={'baseline': LinearFeatureBaseline()}, **TINY)
    with pytest.raises(ValueError, match="baseline_solver='cholesky' makes the linear "
                                         "baselines, and overrides give dice_baseline="):
        build_experiment(label, 'PointEnvCorner', 1, baseline_solver='cholesky',
                         overrides={'dice_baseline': LinearTimeBaseline()}, **TINY)
