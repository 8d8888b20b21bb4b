"""Closed-form checks of the surrogate objectives and advantage functions."""
import math

from garage_promp import objectives as obj

import numpy as np
import pytest
import torch


def _gaussian_batch(n=64, act_dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(n, act_dim, generator=g, dtype=torch.float64)
    log_std = 0.3 * torch.randn(act_dim, generator=g, dtype=torch.float64)
    actions = mean + torch.exp(log_std) * torch.randn(
        n, act_dim, generator=g, dtype=torch.float64)
    return mean, log_std, actions


def test_log_likelihood_matches_torch_normal():
    mean, log_std, actions = _gaussian_batch()
    expected = torch.distributions.Normal(mean, torch.exp(log_std)).log_prob(
        actions).sum(-1)
    assert torch.allclose(obj.gaussian_log_likelihood(actions, mean, log_std),
                          expected)


def test_gaussian_kl_matches_torch_and_is_zero_at_equal_arguments():
    mean, log_std, _ = _gaussian_batch()
    mean2 = mean + 0.5
    log_std2 = log_std - 0.2
    p = torch.distributions.Normal(mean, torch.exp(log_std))
    q = torch.distributions.Normal(mean2, torch.exp(log_std2))
    expected = torch.distributions.kl_divergence(p, q).sum(-1)
    assert torch.allclose(obj.gaussian_kl(mean, log_std, mean2, log_std2),
                          expected)
    assert torch.all(obj.gaussian_kl(mean, log_std, mean, log_std) == 0)
    # Narrow policies (σ ~ 1e-5, where the reference's 1e-8 in the denominator would
    # dominate 2σ²): still the exact KL, to float64's precision.
    narrow, narrow2 = log_std.double() - 11.5, log_std2.double() - 11.5
    p = torch.distributions.Normal(mean.double(), torch.exp(narrow))
    q = torch.distributions.Normal(mean.double() + 1e-5, torch.exp(narrow2))
    assert torch.allclose(obj.gaussian_kl(mean.double(), narrow, mean.double() + 1e-5, narrow2),
                          torch.distributions.kl_divergence(p, q).sum(-1), rtol=1e-9)


def test_magic_box_is_one_with_gradient_of_its_argument():
    x = torch.tensor([0.3, -2.0, 5.0], requires_grad=True)
    y = x**2
    box = obj.magic_box(y)
    assert torch.equal(box, torch.ones(3))
    (grad, ) = torch.autograd.grad(box.sum(), x)
    assert torch.allclose(grad, 2 * x.detach())


def test_lvc_at_theta_old_is_mean_advantage_and_policy_gradient():
    torch.manual_seed(0)
    mu = torch.tensor([0.4, -0.1], dtype=torch.float64, requires_grad=True)
    log_std = torch.zeros(2, dtype=torch.float64)
    actions = mu.detach() + torch.randn(3, 4, 2, dtype=torch.float64)
    adv = torch.randn(3, 4, dtype=torch.float64)
    mask = torch.ones(3, 4, dtype=torch.float64)
    mask[2, 3] = 0
    log_probs = obj.gaussian_log_likelihood(actions, mu, log_std)
    value = obj.lvc_objective(log_probs, log_probs.detach(), adv, mask)
    assert torch.allclose(value, (adv * mask).sum() / mask.sum())
    (lvc_grad, ) = torch.autograd.grad(value, mu)
    # Policy gradient by hand: mean over valid steps of ∇log π · A, with
    # ∇_μ log N(a; μ, 1) = a − μ.
    pg = ((actions - mu.detach()) * (adv * mask)[..., None]).sum(
        (0, 1)) / mask.sum()
    assert torch.allclose(lvc_grad, pg)


def test_cumulative_log_probs_matches_a_loop_and_ignores_padding():
    log_probs = torch.tensor([[1., 2., 3.], [10., 20., 99.]])
    mask = torch.tensor([[1., 1., 1.], [1., 1., 0.]])
    out = obj.cumulative_log_probs(log_probs, mask)
    expected = torch.zeros(2, 3)
    for e in range(2):
        total = 0.
        for t in range(3):
            total += float(log_probs[e, t] * mask[e, t])
            expected[e, t] = total
    assert torch.equal(out, expected)
    assert out[1, 1] == 30.


def test_dice_objective_value_and_gradient_by_hand():
    theta = torch.tensor(0.5, requires_grad=True)
    # log π_t = θ·x_t for one episode of 2 steps, rewards r.
    x = torch.tensor([[1., 2.]])
    r = torch.tensor([[3., 5.]])
    mask = torch.ones(1, 2)
    value = obj.dice_objective(theta * x, r, mask)
    assert torch.isclose(value, r.mean())
    (grad, ) = torch.autograd.grad(value, theta)
    # d/dθ mean_t[box(Σ_{t'≤t} θ x_t') r_t] = (x0·r0 + (x0 + x1)·r1) / 2.
    assert torch.isclose(grad, torch.tensor((1 * 3 + 3 * 5) / 2.))


def test_dice_mean_runs_over_valid_steps_only():
    log_probs = torch.zeros(2, 3)
    r = torch.tensor([[1., 1., 1.], [1., 0., 0.]])
    mask = torch.tensor([[1., 1., 1.], [1., 0., 0.]])
    assert obj.dice_objective(log_probs, r, mask) == 1.


def test_clipped_objective_clips_the_ratio():
    old = torch.zeros(1, 4)
    log_probs = torch.log(torch.tensor([[0.5, 1.0, 1.5, 2.0]]))
    adv = torch.tensor([[1., 1., 1., -1.]])
    mask = torch.ones(1, 4)
    value = obj.clipped_objective(log_probs, old, adv, 0.2, mask)
    # min(ρA, clip(ρ)A): 0.5, 1.0, 1.2, min(-2, -1.2) = -2.
    assert torch.isclose(value, torch.tensor((0.5 + 1.0 + 1.2 - 2.0) / 4))


def test_log_likelihood_and_emaml_objectives():
    log_probs = torch.tensor([[1., 2.], [3., 4.]])
    adv = torch.tensor([[1., -1.], [2., 0.]])
    mask = torch.tensor([[1., 1.], [1., 0.]])
    assert torch.isclose(obj.log_likelihood_objective(log_probs, adv, mask),
                         torch.tensor((1 - 2 + 6) / 3))
    assert torch.isclose(obj.emaml_objective(log_probs, mask, torch.tensor(2.)),
                         torch.tensor(2 * 6 / 3))


def test_discount_cumsum_matches_a_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7))
    out = obj.discount_cumsum(x, 0.9)
    for e in range(3):
        for t in range(7):
            assert math.isclose(out[e, t],
                                sum(0.9**k * x[e, t + k]
                                    for k in range(7 - t)))


def test_gae_with_lambda_one_is_return_minus_baseline():
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(2, 6))
    mask = np.ones((2, 6))
    mask[1, 4:] = 0
    rewards *= mask
    baselines = rng.normal(size=(2, 6))  # values on the padding too: they must not count
    adv = obj.gae_advantages(rewards, baselines, mask, 0.97, 1.)
    expected = (obj.discount_cumsum(rewards, 0.97) - baselines) * mask
    np.testing.assert_allclose(adv, expected, atol=1e-12)


def test_gae_with_lambda_zero_is_one_step_td():
    rewards = np.array([[1., 2., 3.]])
    baselines = np.array([[0.5, 0.25, 2.]])
    adv = obj.gae_advantages(rewards, baselines, np.ones((1, 3)), 0.5, 0.)
    np.testing.assert_allclose(
        adv, [[1 + 0.5 * 0.25 - 0.5, 2 + 0.5 * 2 - 0.25, 3 + 0 - 2]])


def test_normalize_advantages_uses_std_over_valid_cells():
    adv = np.array([[1., 2., 3., 0.], [4., 5., 0., 0.]])
    mask = np.array([[1., 1., 1., 0.], [1., 1., 0., 0.]])
    out = obj.normalize_advantages(adv, mask)
    valid = out[mask > 0]
    assert abs(valid.mean()) < 1e-12
    assert abs(valid.std() - 1.) < 1e-6
    assert np.all(out[mask == 0] == 0)
    with pytest.raises(ValueError, match='normalize_adv'):
        obj.normalize_advantages(np.ones((1, 2)), np.array([[1., 0.]]))


def test_shift_to_positive_and_discounted_rewards():
    adv = np.array([[-2., 1., 7.]])
    mask = np.array([[1., 1., 0.]])
    out = obj.shift_advantages_to_positive(adv, mask)
    assert out[0, 0] == pytest.approx(1e-8) and out[0, 2] == 0
    # The minimum is over the valid cells: a padding value below them (-5), or the
    # padding's 0 below all-positive advantages, does not shift them.
    np.testing.assert_allclose(
        obj.shift_advantages_to_positive(np.array([[2., 3., -5.]]), mask), [[1e-8, 1 + 1e-8, 0]])
    np.testing.assert_allclose(
        obj.shift_advantages_to_positive(np.array([[2., 3., 0.]]), mask), [[1e-8, 1 + 1e-8, 0]])
    np.testing.assert_allclose(obj.discounted_rewards(np.ones((1, 3)), 0.5),
                               [[1., 0.5, 0.25]])


def test_the_sampling_policy_and_the_emaml_reward_are_constants_of_the_objectives():
    # π_old (LVC, the clipped surrogate) and E-MAML's post-update reward are constants
    # (Eq. 9-10, 13; formulation II): a caller's tensor that carries a gradient gets none
    # through them.
    from garage_promp.objectives.surrogates import clipped_objective, emaml_objective, lvc_objective
    gen = torch.Generator().manual_seed(0)
    log_probs = torch.randn(3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    old = torch.randn(3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    adv = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    mask = torch.ones(3, 5, dtype=torch.float64)
    reward = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    for objective in (lvc_objective(log_probs, old, adv, mask),
                      clipped_objective(log_probs, old, adv, 0.2, mask),
                      emaml_objective(log_probs, mask, reward)):
        grads = torch.autograd.grad(objective, [log_probs, old, reward], allow_unused=True)
        assert grads[0] is not None and grads[0].abs().sum() > 0
        assert grads[1] is None and grads[2] is None
