"""Closed-form checks of advantage processing, the clipped surrogate and the HVP.

Each value is computed here independently (explicit loops or a hand calculation),
not through the code path under test:

* GAE (Schulman et al. 2016), as the original ProMP code's
  meta_policy_search/samplers/base.py computes it: δ_t = r_t + γ b_{t+1} − b_t with
  b_T = 0, A_t = Σ_l (γλ)^l δ_{t+l}, b a linear feature baseline fit on the
  discounted returns (meta_policy_search/baselines/linear_baseline.py).
* The advantage standardisation (A − mean) / (std + 1e-8) of
  meta_policy_search/utils/utils.py (normalize_advantages).
* PPO's clipped surrogate, ProMP's outer objective (Rothfuss et al. 2019, Eq. 13,
  first term): min(ρA, clip(ρ, 1 − ε, 1 + ε)A), its value and its gradient.
* E-MAML's per-task mean of the rewards standardised over the whole meta-batch
  (meta_policy_search/samplers/meta_sample_processor.py, exploration rewards).
* The damped finite-difference Hessian-vector product of
  meta_policy_search/optimizers/conjugate_gradient_optimizer.py
  (FiniteDifferenceHvp): Hv + damping·v.
"""
from garage_promp import objectives as obj
from garage_promp.algos._batch import _mean_std_reward
from garage_promp.baselines import LinearFeatureBaseline
from garage_promp.optimizers import finite_difference_hvp

import numpy as np
import torch

from tests.helpers import make_algo


def _returns_loop(rewards, length, gamma):
    out = [0.] * length
    running = 0.
    for t in reversed(range(length)):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def _gae_loop(rewards, values, length, gamma, lam):
    deltas = []
    for t in range(length):
        next_value = values[t + 1] if t + 1 < length else 0.
        deltas.append(rewards[t] + gamma * next_value - values[t])
    adv = []
    for t in range(length):
        adv.append(sum((gamma * lam) ** k * deltas[t + k] for k in range(length - t)))
    return adv


def test_processed_advantages_are_gae_with_the_configured_lambda():
    gamma, lam = 0.9, 0.5
    _, algo = make_algo('LVCVPG', normalize_adv=False, gae_lambda=lam,
                        discount=gamma, meta_batch_size=2)
    batch = algo.sample_meta_batch(0)[0]
    mask = batch.mask.numpy().astype(bool)
    n_checked = 0
    for i in range(batch.n_tasks):
        rewards = batch.rewards[i].numpy().astype(np.float64)
        obs = batch.observations[i].numpy().astype(np.float64)
        returns = np.zeros_like(rewards)
        for e in range(rewards.shape[0]):
            length = int(mask[i, e].sum())
            returns[e, :length] = _returns_loop(rewards[e], length, gamma)
        values = LinearFeatureBaseline().fit_predict(obs, returns, mask[i])
        for e in range(rewards.shape[0]):
            length = int(mask[i, e].sum())
            expected = _gae_loop(rewards[e], values[e], length, gamma, lam)
            got = batch.advantages[i, e, :length].numpy().astype(np.float64)
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
            # λ matters here: the λ = 1 advantage (return − baseline) differs.
            assert not np.allclose(got, (returns - values)[e, :length],
                                   rtol=1e-3, atol=1e-3)
            n_checked += length
    assert n_checked > 0


def test_clipped_objective_value_in_all_four_clip_cases():
    eps = 0.2
    ratios = [0.5, 1.5, 0.5, 1.5, 1.1, 0.9]
    advs = [-1., -1., 1., 2., -3., 1.]
    # min(ρA, clip(ρ, 0.8, 1.2)A) cell by cell, by hand:
    # ρ<1-ε, A<0: min(-0.5, -0.8) = -0.8      ρ>1+ε, A<0: min(-1.5, -1.2) = -1.5
    # ρ<1-ε, A>0: min(0.5, 0.8) = 0.5         ρ>1+ε, A>0: min(3.0, 2.4) = 2.4
    # inside the range: ρA                    -3.3, 0.9
    expected = [-0.8, -1.5, 0.5, 2.4, -3.3, 0.9]
    log_probs = torch.log(torch.tensor([ratios], dtype=torch.float64))
    old = torch.zeros(1, len(ratios), dtype=torch.float64)
    adv = torch.tensor([advs], dtype=torch.float64)
    mask = torch.ones(1, len(ratios), dtype=torch.float64)
    for j, want in enumerate(expected):  # each cell alone
        cell = obj.clipped_objective(log_probs[:, j:j + 1], old[:, j:j + 1],
                                     adv[:, j:j + 1], eps, mask[:, j:j + 1])
        assert abs(float(cell) - want) < 1e-12, (j, float(cell), want)
    value = obj.clipped_objective(log_probs, old, adv, eps, mask)
    assert abs(float(value) - sum(expected) / len(expected)) < 1e-12


def test_clipped_objective_gradient_is_ratio_times_advantage_where_unclipped():
    eps = 0.2
    ratios = torch.tensor([[1.0, 1.0, 1.1, 0.9, 0.5, 1.5, 0.5, 1.5]], dtype=torch.float64)
    advs = torch.tensor([[2.0, -3.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0]], dtype=torch.float64)
    old = torch.full_like(ratios, -0.7)
    # ρ = 1 exactly where log π == log π_old (ρA and clip(ρ)A tie there).
    log_probs = (old + torch.log(ratios)).requires_grad_(True)
    mask = torch.ones_like(ratios)
    n = ratios.numel()
    obj.clipped_objective(log_probs, old, advs, eps, mask).backward()
    # d/dlogπ (ρA)/N = ρA/N where min picks ρA; 0 where it picks the binding clip
    # (cells 4, 5: ρ<0.8 with A<0, ρ>1.2 with A>0).
    expected = [1.0 * 2.0 / n, 1.0 * -3.0 / n, 1.1 * 1.0 / n, 0.9 * -1.0 / n,
                0., 0., 0.5 * 1.0 / n, 1.5 * -1.0 / n]
    # Cells 6 and 7 (ρ=0.5, A>0; ρ=1.5, A<0): min picks ρA, unclipped.
    np.testing.assert_allclose(log_probs.grad.numpy()[0], expected, rtol=1e-12, atol=1e-15)


def test_normalize_advantages_adds_1e_8_to_the_std():
    adv = np.array([[0., 2e-6]])
    out = obj.normalize_advantages(adv, np.ones_like(adv))
    # mean 1e-6, std (ddof 0) 1e-6: ±1e-6 / (1e-6 + 1e-8).
    want = 1e-6 / (1e-6 + 1e-8)
    np.testing.assert_allclose(out, [[-want, want]], rtol=1e-12)


def test_mean_std_reward_is_each_tasks_mean_of_globally_standardised_rewards():
    rewards = np.array([[[1., 2., 3.], [4., 0., 0.]],
                        [[-2., 5., 0.], [7., 1., 6.]]])
    mask = np.array([[[1., 1., 1.], [1., 0., 0.]],
                     [[1., 1., 0.], [1., 1., 1.]]])
    valid = [rewards[i, e, t] for i in range(2) for e in range(2) for t in range(3)
             if mask[i, e, t]]
    mean = sum(valid) / len(valid)
    std = (sum((v - mean) ** 2 for v in valid) / len(valid)) ** 0.5
    expected = []
    for i in range(2):
        cells = [(rewards[i, e, t] - mean) / (std + 1e-8)
                 for e in range(2) for t in range(3) if mask[i, e, t]]
        expected.append(sum(cells) / len(cells))
    got = _mean_std_reward(rewards, mask)
    assert got.shape == (2,)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    # The per-task means of the standardised valid rewards average (weighted by
    # their counts, 4 and 5) to 0: a second, independent check of the scale.
    assert abs(4 * got[0] + 5 * got[1]) < 1e-10


def test_finite_difference_hvp_adds_the_damping_term():
    h = torch.tensor([[3., 1., 0.], [1., 2., 0.5], [0., 0.5, 1.]], dtype=torch.float64)
    theta = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)
    v = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)

    def grad_at(x):  # ∇ ½xᵀHx = Hx
        return h @ x

    hvp = finite_difference_hvp(grad_at, theta, eps=1e-5, damping=0.1)
    expected = [sum(float(h[r, c]) * float(v[c]) for c in range(3)) + 0.1 * float(v[r])
                for r in range(3)]
    # The finite difference of a linear gradient is exact up to rounding (~1e-10);
    # 0.1·v is at least 0.05 per entry.
    np.testing.assert_allclose(hvp(v).numpy(), expected, rtol=0, atol=1e-7)
