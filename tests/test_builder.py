"""build_experiment: the one way launchers and benchmarks build an algorithm."""
from garage_promp.experiment import build_experiment

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
