"""Meta-gradients checked against closed forms and against each other.

The Gaussian bandit: one-step episodes, a ~ N(μ, 1), reward r(a) = a, one
inner step μ' = μ + α ĝ(D_0) on N pre-update samples, then the VPG outer
objective on N post-update samples. The exact meta-objective is
E_{D_0}[E_{a~π_μ'}[a]] = μ + α E[ĝ] = μ + α, so the exact expected
meta-gradient is 1. Per sample, meta-grad = ĝ'_out · dμ'/dμ with E[ĝ'_out | μ']
= 1, and
  LVC / DiCE: dμ'/dμ = 1 + α·mean((−1 + (a−μ)²)·a),  E = 1 + α(−μ + μ) = 1;
  MAML:       dμ'/dμ = 1 + α·mean(−a),               E = 1 − αμ.
"""
import dataclasses

from garage_promp import objectives as obj
from garage_promp.policies import expand_params

import numpy as np
import pytest
import torch

from tests.helpers import make_algo

MU, ALPHA, N_PRE, N_POST = 1.0, 0.5, 10, 10


def _bandit_meta_gradients(estimator, n_rep=20000, seed=0):
    """n_rep independent meta-gradient samples, one task each (vectorised)."""
    g = torch.Generator().manual_seed(seed)
    mu = torch.full((n_rep, ), MU, dtype=torch.float64, requires_grad=True)
    log_std = torch.zeros((), dtype=torch.float64)
    # (tasks, episodes R, steps T=1)
    a0 = (mu.detach()[:, None] +
          torch.randn(n_rep, N_PRE, generator=g, dtype=torch.float64))[..., None]
    mask0 = torch.ones_like(a0)
    logp0 = obj.gaussian_log_likelihood(a0[..., None], mu[:, None, None, None],
                                        log_std)
    if estimator == 'lvc':
        inner = obj.lvc_objective(logp0, logp0.detach(), a0, mask0)
    elif estimator == 'dice':
        inner = obj.dice_objective(logp0, a0, mask0)
    else:
        inner = obj.log_likelihood_objective(logp0, a0, mask0)
    # The objectives average over all tasks' cells; scale back to per task.
    (inner_grad, ) = torch.autograd.grad(inner * n_rep, mu, create_graph=True)
    mu_post = mu + ALPHA * inner_grad
    a1 = (mu_post.detach()[:, None] +
          torch.randn(n_rep, N_POST, generator=g, dtype=torch.float64))[..., None]
    logp1 = obj.gaussian_log_likelihood(a1[..., None],
                                        mu_post[:, None, None, None], log_std)
    outer = obj.log_likelihood_objective(logp1, a1, torch.ones_like(a1))
    (meta_grad, ) = torch.autograd.grad(outer * n_rep, mu)
    return meta_grad


@pytest.mark.parametrize('estimator', ['lvc', 'dice'])
def test_lvc_and_dice_meta_gradients_are_unbiased_on_a_bandit(estimator):
    grads = _bandit_meta_gradients(estimator)
    stderr = grads.std() / np.sqrt(len(grads))
    assert stderr < 0.02
    assert abs(float(grads.mean()) - 1.0) < 4 * stderr


def test_maml_meta_gradient_misses_the_pre_update_term():
    grads = _bandit_meta_gradients('maml')
    stderr = grads.std() / np.sqrt(len(grads))
    assert abs(float(grads.mean()) - (1 - ALPHA * MU)) < 4 * stderr
    assert abs(float(grads.mean()) - 1.0) > 10 * stderr


def _double(batches):
    return [
        dataclasses.replace(
            b, **{
                f.name: getattr(b, f.name).double()
                for f in dataclasses.fields(b)
                if isinstance(getattr(b, f.name), torch.Tensor)
            }) for b in batches
    ]


@pytest.fixture(name='trpo_batches')
def fixture_trpo_batches():
    _, algo = make_algo('TRPOMAML', num_inner_grad_steps=2)
    batches = algo.sample_meta_batch(0)
    algo.policy.double()
    algo._inner_lr = {k: v.double() for k, v in algo._inner_lr.items()}
    return algo, _double(batches)


def test_finite_difference_and_exact_hvps_agree(trpo_batches):
    algo, batches = trpo_batches
    n_params = sum(p.numel() for p in algo.policy.parameters())
    g = torch.Generator().manual_seed(3)
    vs = [torch.randn(n_params, generator=g, dtype=torch.float64) for _ in range(3)]
    exact = algo.hvp_function(batches)
    exact_products = [exact(v) for v in vs]
    # Finite differences move the parameters in place, so they come last.
    algo._hvp_approach = 'finite_difference'
    finite_difference = algo.hvp_function(batches)
    for v, hv_exact in zip(vs, exact_products):
        hv_fd = finite_difference(v)
        assert hv_exact.abs().max() > 1e-6
        rel = (hv_exact - hv_fd).norm() / hv_exact.norm()
        assert rel < 1e-3, rel


def test_exact_hvp_is_symmetric_and_positive_semidefinite(trpo_batches):
    algo, batches = trpo_batches
    hvp = algo.hvp_function(batches)
    n_params = sum(p.numel() for p in algo.policy.parameters())
    g = torch.Generator().manual_seed(4)
    u, v = (torch.randn(n_params, generator=g, dtype=torch.float64)
            for _ in range(2))
    assert torch.isclose(u.dot(hvp(v)), v.dot(hvp(u)), rtol=1e-6)
    assert u.dot(hvp(u)) >= -1e-10


def _meta_grad(algo, batches):
    objective = algo.meta_objective(batches).objective
    return torch.cat([
        g.reshape(-1) for g in torch.autograd.grad(
            objective, list(algo.policy.parameters()))
    ])


def test_lvc_and_maml_adapt_alike_but_meta_gradients_differ():
    _, lvc = make_algo('LVCVPG')
    _, maml = make_algo('MAMLVPG')
    maml.policy.load_state_dict(lvc.policy.state_dict())
    batches = lvc.sample_meta_batch(0)
    theta = expand_params(dict(lvc.policy.named_parameters()),
                          batches[0].n_tasks)
    a = lvc._inner_step(theta, batches[0], create_graph=False)
    b = maml._inner_step(theta, batches[0], create_graph=False)
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6)
        assert not torch.allclose(a[name], theta[name])
    g_lvc, g_maml = _meta_grad(lvc, batches), _meta_grad(maml, batches)
    assert (g_lvc - g_maml).norm() > 1e-3 * g_lvc.norm()


def test_meta_gradient_has_second_order_terms():
    """Detaching the inner gradient (first-order MAML) changes the meta-gradient."""
    _, algo = make_algo('LVCVPG')
    batches = algo.sample_meta_batch(0)
    full = _meta_grad(algo, batches)
    step = algo._inner_step

    def first_order_step(params, batch, create_graph):
        new = step(params, batch, create_graph)
        return {k: params[k] + (v - params[k]).detach() for k, v in new.items()}

    algo._inner_step = first_order_step
    first_order = _meta_grad(algo, batches)
    assert (full - first_order).norm() > 1e-4 * full.norm()


def test_likelihood_ratio_is_one_on_pre_update_samples():
    """Reference test_integration: π_θ/π_old ≈ 1 on freshly sampled data."""
    _, algo = make_algo('ProMP', num_inner_grad_steps=2)
    batches = algo.sample_meta_batch(0)
    theta = expand_params(dict(algo.policy.named_parameters()),
                          batches[0].n_tasks)
    chain = algo._adapt_chain(theta, batches, create_graph=False)
    for k, batch in enumerate(batches):
        log_probs = algo._log_probs(chain[k], batch)
        ratio = obj.likelihood_ratio(log_probs, batch.old_log_probs)
        valid = batch.mask > 0
        assert torch.allclose(ratio[valid], torch.ones_like(ratio[valid]),
                              atol=1e-4)


def test_promp_inner_kl_is_zero_at_theta_old():
    _, algo = make_algo('ProMP')
    batches = algo.sample_meta_batch(0)
    meta = algo.meta_objective(batches)
    assert meta.stats['InnerKL_Step_0'] < 1e-10
    assert float(meta.kl) < 1e-8
