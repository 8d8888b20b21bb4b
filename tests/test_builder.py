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
