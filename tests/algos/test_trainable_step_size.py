"""Learned inner step sizes (trainable_inner_step_size): exact meta-gradients, learning, state."""
import collections
import dataclasses

import cloudpickle
import pytest
import torch

from tests.helpers import load_script, make_algo


def _double(batches):
    return [dataclasses.replace(b, **{
        f.name: getattr(b, f.name).double() for f in dataclasses.fields(b)
        if isinstance(getattr(b, f.name), torch.Tensor)}) for b in batches]


def _objective_at(algo, batches, lrs):
    algo._inner_lr = collections.OrderedDict(lrs)
    return algo.meta_objective(batches).objective


@pytest.mark.parametrize('name,kwargs', [('LVCVPG', {}), ('DiCEVPG', {}), ('MAMLVPG', {}),
                                         ('ProMP', dict(num_inner_grad_steps=2)),
                                         ('TRPOMAML', dict(inner_estimator='maml'))])
def test_step_size_meta_gradient_equals_finite_differences(name, kwargs):
    _, algo = make_algo(name, trainable_inner_step_size=True, **kwargs)
    batches = _double(algo.sample_meta_batch(0))
    algo.policy.double()
    lrs = {k: v.detach().double().requires_grad_(True) for k, v in algo._inner_lr.items()}
    objective = _objective_at(algo, batches, lrs)
    grads = torch.autograd.grad(objective, list(lrs.values()))
    generator = torch.Generator().manual_seed(0)
    direction = {k: torch.randn(v.shape, generator=generator, dtype=v.dtype)
                 for k, v in lrs.items()}
    analytic = sum(float((g * direction[k]).sum()) for g, k in zip(grads, lrs))
    eps = 1e-6
    with torch.no_grad():
        plus = {k: v + eps * direction[k] for k, v in lrs.items()}
        minus = {k: v - eps * direction[k] for k, v in lrs.items()}
    numeric = (float(_objective_at(algo, batches, plus).detach())
               - float(_objective_at(algo, batches, minus).detach())) / (2 * eps)
    assert abs(analytic) > 1e-6
    assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize('name', ['ProMP', 'LVCVPG', 'EMAMLVPG', 'TRPOMAML'])
def test_step_sizes_learn_and_are_used_by_adaptation(name):
    _, algo = make_algo(name, trainable_inner_step_size=True, inner_lr=0.1)
    before = {k: v.detach().clone() for k, v in algo._inner_lr.items()}
    assert all(v.shape == p.shape for v, p in zip(before.values(), algo.policy.parameters()))
    algo.optimize(0, algo.sample_meta_batch(0))
    moved = [k for k, v in algo._inner_lr.items() if not torch.equal(v.detach(), before[k])]
    assert moved, 'the outer step left every step size where it was'
    # The learned step sizes are what adaptation uses.
    batch = algo.sample_meta_batch(1)[0]
    theta = collections.OrderedDict((k, v.detach()[None]) for k, v in
                                    dict(algo.policy.named_parameters()).items())
    adapted = algo._inner_step(theta, batch.select(torch.tensor([0])), False)
    algo._inner_lr = collections.OrderedDict((k, v.detach() * 0 + 0.1)
                                             for k, v in algo._inner_lr.items())
    fixed = algo._inner_step(theta, batch.select(torch.tensor([0])), False)
    assert any(not torch.equal(adapted[k], fixed[k]) for k in adapted)


def test_off_by_default_and_nothing_changes():
    _, algo = make_algo('ProMP')
    assert not any(v.requires_grad for v in algo._inner_lr.values())
    assert all(v.dim() == 0 for v in algo._inner_lr.values())
    assert algo.outer_parameters() == list(algo.policy.parameters())


def test_step_sizes_are_in_the_snapshot_with_the_optimiser_state():
    _, algo = make_algo('LVCVPG', trainable_inner_step_size=True)
    algo.optimize(0, algo.sample_meta_batch(0))
    restored = cloudpickle.loads(cloudpickle.dumps(algo))
    for k, v in algo._inner_lr.items():
        assert torch.equal(restored._inner_lr[k], v)
    held = restored._optimizer.param_groups[0]['params']
    assert any(p is restored._inner_lr[k] for p in held for k in restored._inner_lr)
    assert restored._optimizer.state[held[-1]]  # Adam's moments came along
    # The restored algorithm still learns them: they are among its outer parameters.
    assert restored._trainable_inner_step_size is True
    outer = restored.outer_parameters()
    assert all(any(p is v for p in outer) for v in restored._inner_lr.values())
    before = {k: v.detach().clone() for k, v in restored._inner_lr.items()}
    restored.optimize(1, restored.sample_meta_batch(1))
    assert any(not torch.equal(v.detach(), before[k]) for k, v in restored._inner_lr.items())


def test_an_undone_outer_step_puts_the_step_sizes_back_too():
    """An outer step that leaves a parameter non-finite is undone and counted as skipped:
    θ and the learned step sizes both return to their values before it."""
    _, algo = make_algo('LVCVPG', trainable_inner_step_size=True)
    batches = algo.sample_meta_batch(0)
    theta = [p.detach().clone() for p in algo.policy.parameters()]
    lrs = {k: v.detach().clone() for k, v in algo._inner_lr.items()}
    step = algo._optimizer.step

    def overflowing_step(*args, **kwargs):
        result = step(*args, **kwargs)
        with torch.no_grad():  # the step sizes' update overflows (θ's stays finite)
            next(iter(algo._inner_lr.values())).view(-1)[0] = float('inf')
        return result

    algo._optimizer.step = overflowing_step
    algo.optimize(0, batches)
    assert algo._nan_steps_this_epoch == 1
    assert all(torch.equal(p, old) for p, old in zip(algo.policy.parameters(), theta))
    for k, v in algo._inner_lr.items():
        assert torch.equal(v.detach(), lrs[k]), k


def test_trpo_trust_region_covers_the_step_sizes():
    """The step sizes are in the vector CG, the KL constraint and the line search act on:
    the HVP is the KL's Hessian over (θ, α), and an accepted step keeps the KL in bounds."""
    _, algo = make_algo('TRPOMAML', trainable_inner_step_size=True)
    batches = algo.sample_meta_batch(0)
    params = algo.outer_parameters()
    assert len(params) == 2 * len(list(algo.policy.parameters()))
    hvp = algo.hvp_function(batches)
    meta = algo.meta_objective(batches)
    from garage_promp.optimizers import exact_hvp  # the double-backprop reference
    v = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(1))
    product = hvp(v)
    assert torch.allclose(product, exact_hvp(meta.kl, params)(v), rtol=1e-4, atol=1e-7)
    n_theta = sum(p.numel() for p in algo.policy.parameters())
    assert product[n_theta:].abs().max() > 0  # the KL's curvature in α is in the product


def test_launcher_reads_true_and_false():
    import pathlib
    launcher = load_script(pathlib.Path(__file__).parents[2] / 'launchers' / 'train.py',
                           'train_launcher_flags')
    assert launcher._parse_overrides(['trainable_inner_step_size=true']) == {
        'trainable_inner_step_size': True}
    assert launcher._parse_overrides(['normalize_adv=False']) == {'normalize_adv': False}


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML'])
def test_snapshot_from_before_an_attribute_existed_resumes_as_without_it(name):
    """A snapshot pickled before an attribute was added (here the one a run from an
    older release lacks) loads with the value that reproduces that run, and trains."""
    algo_cls = make_algo(name)[1].__class__
    assert algo_cls._SNAPSHOT_DEFAULTS
    for attribute, default in algo_cls._SNAPSHOT_DEFAULTS.items():
        _, algo = make_algo(name)
        state = algo.__getstate__()
        assert state.pop(attribute) == default
        old = algo_cls.__new__(algo_cls)
        old.__setstate__(state)
        assert getattr(old, attribute) == default
        before = [p.detach().clone() for p in old.policy.parameters()]
        old.optimize(0, old.sample_meta_batch(0))
        assert any(not torch.equal(a, p) for a, p in zip(before, old.policy.parameters()))
