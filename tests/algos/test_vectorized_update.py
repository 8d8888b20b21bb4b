"""The batched (vmap over tasks) update equals the task-by-task one."""
import garage_promp  # noqa: F401
from garage_promp.optimizers import flatten

import pytest
import torch

from tests.helpers import make_algo

CASES = [
    ('ProMP', dict(num_inner_grad_steps=2)),
    ('TRPOMAML', dict(inner_estimator='lvc')),
    ('TRPOMAML', dict(inner_estimator='dice', exploration=True)),
    ('LVCVPG', {}),
    ('DiCEVPG', {}),
    ('MAMLVPG', {}),
    ('EMAMLVPG', {}),
]


def _pair(name, kwargs):
    """The same algorithm and batches, vectorised and task by task."""
    _, fast = make_algo(name, setup_kwargs=dict(hidden_sizes=(16, 16)),
                        meta_batch_size=4, **kwargs)
    _, slow = make_algo(name, setup_kwargs=dict(hidden_sizes=(16, 16)),
                        meta_batch_size=4, vectorize_tasks=False, **kwargs)
    slow.policy.load_state_dict(fast.policy.state_dict())
    batches = fast.sample_meta_batch(0)
    # Move θ off θ_old so that every term (ratios, KLs) is non-trivial.
    with torch.no_grad():
        for p_fast, p_slow in zip(fast.policy.parameters(),
                                  slow.policy.parameters()):
            p_fast.add_(0.05 * torch.randn_like(p_fast))
            p_slow.copy_(p_fast)
    return fast, slow, batches


def _grad(algo, objective):
    return flatten(
        torch.autograd.grad(objective, list(algo.policy.parameters()),
                            retain_graph=True))


@pytest.mark.parametrize('name, kwargs', CASES)
def test_vectorized_meta_objective_equals_task_loop(name, kwargs):
    fast, slow, batches = _pair(name, kwargs)
    a, b = fast.meta_objective(batches), slow.meta_objective(batches)
    assert torch.allclose(a.objective, b.objective, rtol=1e-5, atol=1e-6)
    assert torch.allclose(a.kl, b.kl, rtol=1e-5, atol=1e-7)
    assert float(a.kl) > 0
    assert a.stats.keys() == b.stats.keys()
    for key in a.stats:
        assert a.stats[key] == pytest.approx(b.stats[key], rel=1e-5,
                                             abs=1e-7), key
    g_a, g_b = _grad(fast, a.objective), _grad(slow, b.objective)
    assert g_a.norm() > 0
    assert torch.allclose(g_a, g_b, rtol=1e-4, atol=1e-6)
    kl_a, kl_b = _grad(fast, a.kl), _grad(slow, b.kl)
    assert torch.allclose(kl_a, kl_b, rtol=1e-4, atol=1e-7)


def test_vectorized_hvp_equals_task_loop():
    fast, slow, batches = _pair('TRPOMAML', dict(inner_estimator='lvc'))
    hvp_fast = fast.hvp_function(batches)
    hvp_slow = slow.hvp_function(batches)
    n_params = sum(p.numel() for p in fast.policy.parameters())
    v = torch.randn(n_params, generator=torch.Generator().manual_seed(0))
    h_fast, h_slow = hvp_fast(v), hvp_slow(v)
    assert h_fast.norm() > 0
    assert torch.allclose(h_fast, h_slow, rtol=1e-4, atol=1e-6)


def test_vectorized_inner_steps_equal_per_task_steps():
    """The sampling-time inner steps of all tasks equal one task at a time."""
    fast, slow, batches = _pair('LVCVPG', {})
    theta = dict(fast.policy.named_parameters())
    chain = fast._adapt_chain(
        garage_promp.policies.expand_params(theta, 4), batches,
        create_graph=False)
    for task in range(4):
        single = slow._adapt_chain(
            garage_promp.policies.expand_params(theta, 1),
            [b.task(task) for b in batches], create_graph=False)
        for name in theta:
            assert torch.allclose(chain[1][name][task], single[1][name][0],
                                  rtol=1e-5, atol=1e-7)
            assert not torch.allclose(chain[1][name][task], theta[name])


def test_vectorized_training_matches_task_loop():
    """Two epochs end at the same parameters either way."""
    results = []
    for vectorize in (True, False):
        env, algo = make_algo('ProMP', meta_batch_size=3,
                              vectorize_tasks=vectorize)
        for itr in range(2):
            batches = algo.sample_meta_batch(itr)
            algo.optimize(itr, batches)
        results.append(flatten(list(algo.policy.parameters())).detach())
    assert torch.allclose(results[0], results[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('estimator', ['lvc', 'dice'])
def test_exploration_adds_the_emaml_term_to_any_inner_estimator(estimator):
    """TRPOMAML(inner_estimator=..., exploration=True) has no paper label but is accepted:
    its objective is the estimator's own plus the E-MAML term, on the same θ and batches."""
    from garage_promp.objectives import emaml_objective
    _, plain = make_algo('TRPOMAML', inner_estimator=estimator)
    _, explore = make_algo('TRPOMAML', inner_estimator=estimator, exploration=True)
    explore.policy.load_state_dict(plain.policy.state_dict())
    batches = explore.sample_meta_batch(0)
    pre = batches[0]
    term = torch.stack([emaml_objective(explore._log_probs(
        garage_promp.algos.meta_objective.expand_params(
            dict(explore.policy.named_parameters()), 1), pre.task(i)),
        pre.task(i).mask, batches[-1].task(i).mean_std_reward) for i in range(pre.n_tasks)])
    with_term = explore.meta_objective(batches).objective
    without = plain.meta_objective(batches).objective
    assert float(term.detach().abs().mean()) > 0
    torch.testing.assert_close(with_term, without + term.mean(), rtol=1e-5, atol=1e-6)
