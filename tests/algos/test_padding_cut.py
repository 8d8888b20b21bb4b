"""The outer update cuts the padding after the longest episode, and that changes nothing.

Episodes that end before the horizon are padded to it; ``optimize`` first cuts
every round after the last step any episode reaches
(``_batch.without_trailing_padding``). The same episodes processed at a longer
horizon (all of them ending early) must give the update of the short horizon:
bit for bit through ``optimize`` (the cut batches are the short ones), and to
float rounding when the padding is kept (``_optimize`` on the padded batches),
which is what makes the cut an optimisation and not a change of the maths.
"""
from garage_promp.algos._batch import process_episodes, without_trailing_padding
from garage_promp.optimizers import flatten

import pytest
import torch

from tests.helpers import HORIZON, make_algo

CASES = [
    ('ProMP', {}),
    ('TRPOMAML', dict(inner_estimator='maml')),
    ('TRPOMAML', dict(inner_estimator='maml', exploration=True)),
    ('TRPOMAML', dict(inner_estimator='dice')),
    ('LVCVPG', {}),
    ('DiCEVPG', {}),
    ('EMAMLVPG', {}),
]
PADDED_HORIZON = 3 * HORIZON


def _params(algo):
    return flatten([p.detach() for p in algo.policy.parameters()])


def _twins(name, kwargs):
    """Two copies of one algorithm (same θ) and one meta-batch at two horizons."""
    _, short = make_algo(name, **kwargs)
    _, padded = make_algo(name, **kwargs)
    padded.policy.load_state_dict(short.policy.state_dict())
    batches = short.sample_meta_batch(0)
    processing = short._processing
    n_eps = short._episodes_per_task

    def at(horizon):
        return [process_episodes(b.episodes, b.n_tasks, n_eps, horizon, processing)
                for b in batches]
    return short, padded, at(HORIZON), at(PADDED_HORIZON)


def test_longest_episode_and_cut():
    _, _, _, padded = _twins('LVCVPG', {})
    lengths = [int(b.episodes.lengths.max()) for b in padded]
    assert [b.longest_episode for b in padded] == lengths
    cut = without_trailing_padding(padded)
    assert {tuple(b.mask.shape) for b in cut} == {(3, 2, max(lengths))}
    for full, part in zip(padded, cut):
        assert torch.equal(full.mask[:, :, max(lengths):], torch.zeros_like(
            full.mask[:, :, max(lengths):]))
        for field in ('observations', 'actions', 'mask', 'old_log_probs', 'advantages',
                      'rewards', 'old_mean', 'old_log_std'):
            assert torch.equal(getattr(full, field)[:, :, :max(lengths)], getattr(part, field))
        assert torch.equal(full.mean_std_reward, part.mean_std_reward)
        assert part.episodes is full.episodes


def test_nothing_is_cut_when_an_episode_reaches_the_horizon():
    _, _, short, _ = _twins('LVCVPG', {})
    assert max(b.longest_episode for b in short) == HORIZON
    assert all(a is b for a, b in zip(without_trailing_padding(short), short))


def test_one_step_episodes_keep_one_step():
    _, _, short, _ = _twins('LVCVPG', {})
    batch = short[0]
    one = batch._map(lambda v: v * 0 if v.dim() >= 3 else v)
    one.mask[0, 0, 0] = 1
    assert one.longest_episode == 1
    assert one.cut_time_axis(1).mask.shape[2] == 1


@pytest.mark.parametrize('name, kwargs', CASES)
def test_update_on_padded_rounds_equals_update_on_short_ones(name, kwargs):
    short, padded, short_batches, padded_batches = _twins(name, kwargs)
    assert max(b.longest_episode for b in padded_batches) <= HORIZON
    assert padded_batches[0].mask.shape[2] == PADDED_HORIZON
    before = _params(short)
    short.optimize(0, short_batches)
    padded.optimize(0, padded_batches)
    moved = _params(short)
    assert not torch.equal(moved, before)
    assert torch.equal(_params(padded), moved)  # bit for bit: the cut batches are the short ones


@pytest.mark.parametrize('name, kwargs', CASES)
def test_padding_is_inert_in_the_meta_objective(name, kwargs):
    """Kept (no cut), the padding changes the objective and gradients by rounding only."""
    short, padded, short_batches, padded_batches = _twins(name, kwargs)
    with torch.no_grad():  # off θ_old, so that every term is non-trivial
        for a, b in zip(short.policy.parameters(), padded.policy.parameters()):
            a.add_(0.05 * torch.randn_like(a))
            b.copy_(a)
    a, b = short.meta_objective(short_batches), padded.meta_objective(padded_batches)
    assert torch.allclose(a.objective, b.objective, rtol=1e-5, atol=1e-7)
    assert torch.allclose(a.kl, b.kl, rtol=1e-5, atol=1e-8)
    grads = [flatten(torch.autograd.grad(m.objective, list(algo.policy.parameters())))
             for m, algo in ((a, short), (b, padded))]
    assert grads[0].norm() > 0
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)
