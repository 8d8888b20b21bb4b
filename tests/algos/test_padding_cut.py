"""The outer update cuts the padding after the longest episode, and that changes nothing.

Episodes that end before the horizon are padded to it; ``optimize`` first cuts
every round after the last step any episode reaches
(``_batch.without_trailing_padding``). Here one meta-batch of episodes of
different lengths (goals near the start end some early, a far goal none) is
processed at its horizon and at a longer one. Cut, the long batches are the
short ones (so ``optimize`` takes the same step, bit for bit); kept whole,
they give the same meta-objective, meta-gradient and Hessian-vector product
up to float rounding: the cut is an optimisation, not a change of the maths.
"""
from garage_promp.algos._batch import process_episodes, without_trailing_padding
from garage_promp.optimizers import flatten

from garage.sampler.env_update import SetTaskUpdate
import numpy as np
import pytest
import torch

from tests.helpers import LONG_HORIZON, LongPointEnv, make_algo

CASES = [
    ('ProMP', {}),
    ('ProMP', dict(num_minibatches=2, trainable_inner_step_size=True)),
    ('TRPOMAML', {}),
    ('TRPOMAML', dict(inner_estimator='maml')),
    ('TRPOMAML', dict(inner_estimator='maml', exploration=True)),
    ('TRPOMAML', dict(inner_estimator='dice', hvp_subsample=0.5)),
    ('LVCVPG', dict(vectorize_tasks=False)),
    ('DiCEVPG', {}),
    ('MAMLVPG', {}),
    ('EMAMLVPG', {}),
]
TRPO = {'TRPOMAML'}
PADDED_HORIZON = 3 * LONG_HORIZON
#: Two goals a few steps from the start (episodes that end early) and one out of reach.
GOALS = [(0.2, 0.), (0.1, -0.3), (30., 30.)]


def _twins(name, kwargs):
    """Two copies of one algorithm (same θ) and one meta-batch at two horizons."""
    algos = [make_algo(name, setup_kwargs=dict(env_class=LongPointEnv), **kwargs)[1]
             for _ in range(2)]
    algos[1].policy.load_state_dict(algos[0].policy.state_dict())
    tasks = [SetTaskUpdate(LongPointEnv, {'goal': np.array(goal)}, None) for goal in GOALS]
    batches = algos[0].sample_meta_batch(0, tasks)
    lengths = np.concatenate([b.episodes.lengths for b in batches])
    assert len(set(lengths)) > 2 and lengths.max() == LONG_HORIZON  # varied, one to the end

    def at(horizon):
        return [process_episodes(b.episodes, b.n_tasks, algos[0]._episodes_per_task, horizon,
                                 algos[0]._processing) for b in batches]
    return algos, at(LONG_HORIZON), at(PADDED_HORIZON)


def _params(algo):
    return flatten([p.detach() for p in algo.policy.parameters()])


def _move_off_theta_old(algos):
    """θ away from the sampling θ, so that every term (ratios, KLs) is non-trivial."""
    with torch.no_grad():
        for a, b in zip(algos[0].policy.parameters(), algos[1].policy.parameters()):
            a.add_(0.05 * torch.randn_like(a))
            b.copy_(a)


def test_the_cut_keeps_every_valid_cell_and_drops_only_padding():
    _, short, padded = _twins('LVCVPG', {})
    cut = without_trailing_padding(padded)
    assert {tuple(b.mask.shape) for b in cut} == {(3, 2, LONG_HORIZON)}
    for full, part, same in zip(padded, cut, short):
        assert full.longest_episode == int(full.episodes.lengths.max())
        assert torch.equal(part.mask.sum(), full.mask.sum())
        assert not full.mask[:, :, LONG_HORIZON:].any()
        for field in ('observations', 'actions', 'mask', 'old_mean', 'old_log_std',
                      'old_log_probs', 'rewards', 'advantages'):
            assert torch.equal(getattr(full, field)[:, :, :LONG_HORIZON], getattr(part, field))
            assert torch.equal(getattr(part, field), getattr(same, field)), field
        assert torch.equal(full.mean_std_reward, part.mean_std_reward)
        assert part.episodes is full.episodes


def test_the_cut_is_to_the_longest_episode_of_all_rounds():
    _, _, padded = _twins('LVCVPG', {})
    layout = padded[0].mask.shape
    # Round 0 with its episodes ended by step 7; round 1's longest runs to the horizon.
    early = padded[0]._map(lambda v: v.clone() if v.shape[:3] == layout else v)
    early.mask[:, :, 7:] = 0
    assert early.longest_episode == 7 < padded[1].longest_episode == LONG_HORIZON
    for rounds in ([early, padded[1]], [padded[1], early]):
        assert [b.mask.shape[2] for b in without_trailing_padding(rounds)] == [LONG_HORIZON] * 2


def test_nothing_is_cut_when_an_episode_reaches_the_horizon():
    _, short, _ = _twins('LVCVPG', {})
    assert all(a is b for a, b in zip(without_trailing_padding(short), short))
    cut_twice = without_trailing_padding(without_trailing_padding(short))
    assert all(a is b for a, b in zip(cut_twice, short))


def test_the_longest_episode_is_counted_in_steps_not_tasks_or_episodes():
    """Every episode one step long, in a batch of several tasks and episodes: 1 (not the
    number of episodes or of rows)."""
    _, short, _ = _twins('LVCVPG', {})
    layout = short[0].mask.shape
    assert layout[1] > 1
    single = short[0]._map(lambda v: v.clone() if v.shape[:3] == layout else v)
    single.mask[:, :, 1:] = 0
    assert single.longest_episode == 1
    single.mask[-1, -1, :4] = 1  # the last task's last episode: 4 steps
    assert single.longest_episode == 4


def test_an_empty_mask_keeps_one_step():
    _, short, _ = _twins('LVCVPG', {})
    empty = short[0]._map(lambda v: v * 0 if v.shape[:3] == short[0].mask.shape else v)
    assert empty.longest_episode == 1
    assert empty.cut_time_axis(1).mask.shape[2] == 1


@pytest.mark.parametrize('name, kwargs', CASES)
def test_update_on_padded_rounds_equals_update_on_short_ones(name, kwargs):
    algos, short, padded = _twins(name, kwargs)
    before = _params(algos[0])
    algos[0].optimize(0, short)
    algos[1].optimize(0, padded)
    moved = _params(algos[0])
    assert not torch.equal(moved, before)
    assert torch.equal(_params(algos[1]), moved)  # bit for bit: the cut batches are the short ones


@pytest.mark.parametrize('name, kwargs', CASES)
def test_padding_is_inert_in_the_meta_objective(name, kwargs):
    """Kept whole, the padded rounds give the cut ones' objective, gradients and HVPs."""
    algos, _, padded = _twins(name, kwargs)
    _move_off_theta_old(algos)
    cut = without_trailing_padding(padded)
    assert cut[0].mask.shape[2] < padded[0].mask.shape[2]
    a, b = algos[0].meta_objective(cut), algos[1].meta_objective(padded)
    assert torch.allclose(a.objective, b.objective, rtol=1e-5, atol=1e-7)
    assert torch.allclose(a.kl, b.kl, rtol=1e-5, atol=1e-8)
    params = [list(algo.outer_parameters()) for algo in algos]
    grads = [flatten(torch.autograd.grad(m.objective, p, allow_unused=True))
             for m, p in ((a, params[0]), (b, params[1]))]
    assert grads[0].norm() > 0
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    if name in TRPO:
        v = torch.randn(sum(p.numel() for p in algos[0].policy.parameters()),
                        generator=torch.Generator().manual_seed(0))
        products = [algo.hvp_function(batches)(v)
                    for algo, batches in ((algos[0], cut), (algos[1], padded))]
        assert products[0].norm() > 0
        assert torch.allclose(products[0], products[1], rtol=1e-4, atol=1e-6)
