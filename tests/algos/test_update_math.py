"""Fast checks that pin the update's math (each fails on a plausible bug)."""
import collections
import contextlib

import garage_promp.algos.meta_objective as meta_objective_module
from garage_promp.baselines import LinearFeatureBaseline
from garage_promp.objectives import discount_cumsum
from garage_promp.optimizers import conjugate_gradient
from garage_promp.policies import expand_params, named_params

from dowel import tabular
import numpy as np
import pytest
import torch

from tests.helpers import make_algo, perturb


def test_conjugate_gradient_solves_a_small_spd_system():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    h = a @ a.T + 0.5 * torch.eye(6, dtype=torch.float64)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    x = conjugate_gradient(lambda v: h @ v, b, iters=6, residual_tol=1e-30)
    torch.testing.assert_close(x, torch.linalg.solve(h, b), rtol=1e-8,
                               atol=1e-8)


def test_conjugate_gradient_solves_a_small_system_to_its_default_tolerance():
    # A right-hand side of squared norm 1e-6 (a small meta-gradient): the default
    # tolerance (rᵀr < 1e-10, the reference's) still iterates to a relative residual
    # of 1e-2 or better; a looser default would return x = 0 before any iteration.
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    h = a @ a.T + 0.5 * torch.eye(6, dtype=torch.float64)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    b = b * (1e-3 / b.norm())
    x = conjugate_gradient(lambda v: h @ v, b, iters=6)
    assert float((h @ x - b).norm() / b.norm()) < 1e-2


def test_promp_objective_is_clipped_surrogate_minus_eta_times_inner_kl():
    _, algo = make_algo('ProMP', init_inner_kl_penalty=5.0, clip_eps=0.2)
    batches = algo.sample_meta_batch(0)
    algo._current_clip_eps = 0.2
    perturb(algo.policy)  # θ away from θ_old: the inner KL is positive
    meta = algo.meta_objective(batches, create_graph=False)
    kl = meta.stats['InnerKL_Step_0']
    assert kl > 1e-4
    expected = meta.stats['ClipObjective'] - 5.0 * kl
    assert float(meta.objective) == pytest.approx(expected, rel=1e-5,
                                                  abs=1e-7)


def test_inner_kl_is_the_kl_of_the_sampling_policy_to_the_current_one():
    # ProMP's inner KL (Eq. 13; the reference's diagonal_gaussian.py kl_sym) is
    # KL(π_θo ‖ π_θ) on the pre-update batch: per task, the mean over valid steps of the
    # KL summed over action dimensions; logged as the mean over tasks. Checked against
    # torch.distributions at a θ away from θ_o, where the direction of the KL matters.
    from garage_promp.policies import distribution_params
    _, algo = make_algo('ProMP')
    batches = algo.sample_meta_batch(0)
    perturb(algo.policy)
    meta = algo.meta_objective(batches, create_graph=False)
    pre = batches[0]
    with torch.no_grad():
        mean, log_std = distribution_params(
            algo.policy, None, pre.observations.reshape(-1, pre.observations.shape[-1]))
    mean, std = mean.reshape(pre.actions.shape).double(), log_std.reshape(
        pre.actions.shape).double().exp()
    old = torch.distributions.Normal(pre.old_mean.double(), pre.old_log_std.double().exp())
    mask = pre.mask.double()

    def task_mean(kl):
        return float(((kl.sum(-1) * mask).sum((1, 2)) / mask.sum((1, 2))).mean())

    expected = task_mean(torch.distributions.kl_divergence(old, torch.distributions.Normal(
        mean, std)))
    reverse = task_mean(torch.distributions.kl_divergence(torch.distributions.Normal(
        mean, std), old))
    assert abs(expected - reverse) > 1e-2 * expected  # the check tells the directions apart
    assert meta.stats['InnerKL_Step_0'] == pytest.approx(expected, rel=1e-5)


def test_every_accepted_trpo_step_is_inside_the_trust_region():
    delta = 1e-3
    _, algo = make_algo('TRPOMAML', max_kl_step=delta)
    accepted = 0
    for itr in range(4):
        batches = algo.sample_meta_batch(itr)
        before = float(algo.meta_objective(batches, create_graph=False).objective)
        theta = [p.detach().clone() for p in algo.policy.parameters()]
        algo.optimize(itr, batches)
        moved = any(not torch.equal(a, b.detach())
                    for a, b in zip(theta, algo.policy.parameters()))
        if moved:
            accepted += 1
            after = algo.meta_objective(batches, create_graph=False)
            assert float(after.kl) <= delta
            assert float(after.objective) > before
    assert accepted >= 1


@pytest.mark.parametrize('estimator', ['lvc', 'maml', 'dice'])
def test_inner_step_ascends_every_tasks_inner_objective(estimator):
    _, algo = make_algo('TRPOMAML', inner_estimator=estimator, inner_lr=1e-3,
                        meta_batch_size=4)
    batch = algo.sample_meta_batch(0)[0]
    theta = collections.OrderedDict(
        (k, v.detach()) for k, v in named_params(algo.policy).items())
    params = collections.OrderedDict(
        (k, v.clone().requires_grad_(True))
        for k, v in expand_params(theta, batch.n_tasks).items())
    before = algo._inner_objective(params, batch)
    grads = torch.autograd.grad(before.sum(), list(params.values()))
    stepped = algo._inner_step(params, batch, create_graph=False)
    # The step points along each task's own gradient (ascent, not descent).
    for i in range(batch.n_tasks):
        along = sum(float(((stepped[k][i] - params[k][i]) * g[i]).sum())
                    for k, g in zip(params, grads))
        assert along > 0, (i, along)
    if estimator != 'dice':  # DiCE's magic box has the value 1 everywhere
        with torch.no_grad():
            after = algo._inner_objective(stepped, batch)
        assert (after > before.detach()).all(), (before, after)


def test_advantages_are_returns_minus_a_baseline_fit_on_the_returns():
    _, algo = make_algo('LVCVPG', normalize_adv=False, gae_lambda=1.,
                        discount=0.9, meta_batch_size=2)
    batch = algo.sample_meta_batch(0)[0]
    mask = batch.mask.numpy().astype(bool)
    for i in range(batch.n_tasks):
        rewards = batch.rewards[i].numpy().astype(np.float64)
        returns = discount_cumsum(rewards, 0.9)
        obs = batch.observations[i].numpy().astype(np.float64)
        values = LinearFeatureBaseline().fit_predict(obs, returns, mask[i])
        np.testing.assert_allclose(batch.advantages[i].numpy()[mask[i]],
                                   (returns - values)[mask[i]], rtol=1e-4,
                                   atol=1e-4)


def _trpo_step(hvp_subsample, itr=0):
    """θ_new - θ_old of one TRPO step on the same batches (same seed, same θ)."""
    _, algo = make_algo('TRPOMAML', meta_batch_size=8, episodes_per_task=20,
                        hvp_subsample=hvp_subsample)
    batches = algo.sample_meta_batch(itr)
    theta = torch.cat([p.detach().flatten().clone() for p in algo.policy.parameters()])
    algo.optimize(itr, batches)
    after = algo.meta_objective(batches, create_graph=False)
    new = torch.cat([p.detach().flatten() for p in algo.policy.parameters()])
    return new - theta, float(after.kl), algo._max_kl_step


def test_hvp_subsample_is_an_approximation_close_to_the_exact_step():
    exact, kl_exact, delta = _trpo_step(1.)
    again, _, _ = _trpo_step(1.)
    assert torch.equal(exact, again)  # the default is exact and deterministic
    # The stated tolerance (docs/algorithms.md): at 8 tasks x 20 episodes, cosine similarity of the
    # step to the exact one above 0.9 with 3/4 of the tasks, above 0.7 with half.
    for fraction, tolerance in ((0.5, 0.7), (0.75, 0.9)):
        approx, kl, _ = _trpo_step(fraction)
        assert not torch.equal(approx, exact)  # a different (approximate) direction ...
        cosine = float(approx.dot(exact) / (approx.norm() * exact.norm()))
        assert cosine > tolerance, (fraction, cosine)  # ... close to the exact one
        assert kl <= delta and kl_exact <= delta  # the full-batch trust region holds


@pytest.mark.parametrize('hvp_subsample', [1., 0.5])
def test_trpo_first_trial_step_fills_the_trust_region_of_the_full_batch(hvp_subsample):
    # The reference's step length (conjugate_gradient_optimizer.py): s = sqrt(2δ / dᵀHd) d,
    # so that the quadratic model of the KL, ½ sᵀHs, equals δ at the line search's first
    # trial, with H the full batch's KL Hessian also when the direction came from a
    # subsample's curvature.
    from garage_promp.optimizers import exact_hvp, flatten
    _, algo = make_algo('TRPOMAML', meta_batch_size=8, episodes_per_task=20,
                        hvp_subsample=hvp_subsample)
    batches = algo.sample_meta_batch(0)
    params = algo.outer_parameters()
    theta = flatten([p.detach() for p in params]).clone()
    trials = []
    real_set = algo._set_flat_params
    algo._set_flat_params = lambda flat: (trials.append(flat.clone()), real_set(flat))
    algo.optimize(0, batches)
    real_set(theta)
    step = trials[0] - theta
    full_hvp = exact_hvp(algo.meta_objective(batches).kl, params)
    delta = algo._max_kl_step
    assert 0.5 * float(step.dot(full_hvp(step))) == pytest.approx(delta, rel=2e-2)
    if hvp_subsample < 1:  # the subsample's curvature would have given another length
        sub = algo._curvature_batches(0, batches)
        sub_hvp = exact_hvp(algo.meta_objective(sub).kl, params)
        assert abs(0.5 * float(step.dot(sub_hvp(step))) / delta - 1) > 0.1


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML', 'LVCVPG', 'DiCEVPG', 'MAMLVPG',
                                  'EMAMLVPG'])
def test_the_update_is_the_same_with_one_or_more_learner_threads(name):
    """Learner threads change how fast the update runs, not what it computes."""
    from garage_promp._threads import learner_threads
    thetas = []
    for threads in (1, 2):
        _, algo = make_algo(name, learner_threads=threads)
        batches = algo.sample_meta_batch(0)
        with learner_threads(algo._learner_thread_count()):
            algo.optimize(0, batches)
        thetas.append(torch.cat([p.detach().flatten() for p in algo.policy.parameters()]))
    torch.testing.assert_close(thetas[0], thetas[1], rtol=1e-5, atol=1e-6)


def test_shared_forwards_give_the_same_meta_objective_with_fewer_passes(monkeypatch):
    """ProMP's inner KL reuses inner step k's forward of π_φk on D_k (same values and gradient)."""
    _, algo = make_algo('ProMP', num_inner_grad_steps=2)
    batches = algo.sample_meta_batch(0)
    params = list(algo.policy.parameters())
    forwards = []
    real = meta_objective_module.task_distribution_params

    def counting(*args, **kwargs):
        forwards.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(meta_objective_module, 'task_distribution_params', counting)
    shared = algo.meta_objective(batches)
    shared_grad = torch.autograd.grad(shared.objective, params)
    n_shared = len(forwards)
    forwards.clear()
    monkeypatch.setattr(type(algo), '_shared_forwards', lambda self: contextlib.nullcontext())
    separate = algo.meta_objective(batches)
    separate_grad = torch.autograd.grad(separate.objective, params)
    # K inner steps + the post-update forward, against K more for the inner KLs.
    assert (n_shared, len(forwards)) == (3, 5)
    assert float(shared.objective) == float(separate.objective)
    for a, b in zip(shared_grad, separate_grad):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_promp_objective_averages_the_kl_penalties_over_inner_steps():
    # Eq. 13 with K = 2, each step with its own η: the penalty is the mean over steps of
    # η_k KL_k (the original pro_mp.py's tf.reduce_mean over steps), not their sum.
    _, algo = make_algo('ProMP', num_inner_grad_steps=2, clip_eps=0.2)
    algo.inner_kl_coeff = np.array([3.0, 7.0])
    batches = algo.sample_meta_batch(0)
    perturb(algo.policy)
    meta = algo.meta_objective(batches, create_graph=False)
    kl0, kl1 = float(meta.stats['InnerKL_Step_0']), float(meta.stats['InnerKL_Step_1'])
    assert kl0 > 1e-4 and kl1 > 1e-4
    expected = float(meta.stats['ClipObjective']) - (3.0 * kl0 + 7.0 * kl1) / 2
    assert float(meta.objective) == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_promp_anneals_the_clip_range_once_per_epoch():
    # ε_itr = clip_eps · anneal_factor^itr: ε_0 = clip_eps, then one factor per epoch.
    _, algo = make_algo('ProMP', clip_eps=0.2, anneal_factor=0.5, num_promp_steps=1)
    for itr, expected in enumerate([0.2, 0.1, 0.05]):
        batches = algo.sample_meta_batch(itr)
        algo.optimize(itr, batches)
        assert algo._current_clip_eps == pytest.approx(expected, rel=1e-12)


def test_a_rejected_trpo_step_puts_theta_back(monkeypatch):
    # When no trial of the line search improves the surrogate, θ is the θ the step
    # started from, not the last (smallest) trial.
    _, algo = make_algo('TRPOMAML', max_backtracks=3)
    batches = algo.sample_meta_batch(0)
    theta = [p.detach().clone() for p in algo.policy.parameters()]
    real, trials = algo.meta_objective, []

    def nothing_improves(*args, create_graph=True, **kwargs):
        meta = real(*args, create_graph=create_graph, **kwargs)
        if create_graph:
            return meta
        trials.append([p.detach().clone() for p in algo.policy.parameters()])
        return meta._replace(objective=meta.objective - 1e6)

    monkeypatch.setattr(algo, 'meta_objective', nothing_improves)
    algo.optimize(0, batches)
    assert any(not torch.equal(a, b) for a, b in zip(theta, trials[0]))  # a trial moved θ
    for before, after in zip(theta, algo.policy.parameters()):
        assert torch.equal(before, after.detach())


@pytest.mark.parametrize('gain, kl_over_delta, accepted', [
    (0., 0., False),   # the surrogate unchanged: no improvement (strictly greater needed)
    (1e-3, 1., True),  # KL exactly δ: inside the trust region (the reference's loop test)
    (1e-3, 1.0001, False),
])
def test_the_line_search_accepts_a_strict_improvement_within_kl_at_most_delta(
        monkeypatch, gain, kl_over_delta, accepted):
    """The acceptance rule at its two boundaries (the reference's ``loss < loss_before and
    constraint_val <= max_constraint_val``, without its post-check that rejected KL == δ;
    docs/algorithms.md): every trial reports the surrogate ``gain`` above its value at θ
    and a KL of ``kl_over_delta`` δ exactly."""
    _, algo = make_algo('TRPOMAML', max_backtracks=3)
    batches = algo.sample_meta_batch(0)
    real, before = algo.meta_objective, []

    def boundary(*args, create_graph=True, **kwargs):
        meta = real(*args, create_graph=create_graph, **kwargs)
        if create_graph:
            before.append(float(meta.objective.detach()))
            return meta
        return meta._replace(
            objective=torch.tensor(before[0] + gain, dtype=torch.float64),
            kl=torch.tensor(kl_over_delta * algo._max_kl_step,  # pylint: disable=protected-access
                            dtype=torch.float64))

    monkeypatch.setattr(algo, 'meta_objective', boundary)
    with tabular.prefix('t/'):
        algo.optimize(0, batches)
        logged = dict(tabular.as_dict)
    assert logged['t/StepAccepted'] == float(accepted)
    assert logged['t/LineSearchBacktracks'] == (0 if accepted else 2)


def test_the_line_search_ends_at_a_trial_that_is_theta_itself(monkeypatch):
    """A zero gradient (a sparse reward no episode reached) gives a zero step: the first
    trial is θ, and so would every later one be; the reference's loop evaluated all
    ``max_backtracks`` of them (5000: minutes of an update). The search ends there, the
    step is rejected, θ stays; a step that shrinks below θ's last digit ends the same way."""
    _, algo = make_algo('TRPOMAML', max_backtracks=10**6)
    batches = algo.sample_meta_batch(0)
    theta = [p.detach().clone() for p in algo.policy.parameters()]
    real, trials = algo.meta_objective, []

    def zero_gradient(*args, create_graph=True, **kwargs):
        meta = real(*args, create_graph=create_graph, **kwargs)
        if not create_graph:
            trials.append(1)
        return meta._replace(objective=0 * meta.objective)  # a constant: its gradient is 0

    monkeypatch.setattr(algo, 'meta_objective', zero_gradient)
    with tabular.prefix('t/'):
        algo.optimize(0, batches)
        logged = dict(tabular.as_dict)
    assert len(trials) == 1  # the after-values only: no trial evaluated
    assert logged['t/LineSearchBacktracks'] == 0 and logged['t/StepAccepted'] == 0.
    for before, after in zip(theta, algo.policy.parameters()):
        assert torch.equal(before, after.detach())
    # A step that shrinks to nothing: 0.5^n of a tiny step is θ after a few dozen trials.
    trials.clear()
    monkeypatch.setattr(algo, 'meta_objective', real)
    algo._backtrack_ratio = 0.5  # pylint: disable=protected-access

    def nothing_improves(*args, create_graph=True, **kwargs):
        meta = real(*args, create_graph=create_graph, **kwargs)
        if create_graph:
            return meta
        trials.append(1)
        return meta._replace(objective=meta.objective - 1e6)

    monkeypatch.setattr(algo, 'meta_objective', nothing_improves)
    algo.optimize(0, batches)
    assert 20 < len(trials) < 400  # float32 θ: the step underflows its last digit


def test_positive_advantages_are_shifted_after_normalising():
    # The original samplers' order: normalise, then shift to positive (min 1e-8), on the
    # same episodes processed with and without the shift.
    import dataclasses

    from garage_promp.algos._batch import process_episodes
    from garage_promp.objectives.advantages import shift_advantages_to_positive
    _, algo = make_algo('ProMP', normalize_adv=True, positive_adv=False)
    batch = algo.sample_meta_batch(0)[0]
    config = algo._processing
    shape = tuple(batch.mask.shape)
    plain, shifted = (process_episodes(batch.episodes, shape[0], shape[1], shape[2],
                                       dataclasses.replace(config, positive_adv=flag))
                      for flag in (False, True))
    for adv, mask, got in zip(plain.advantages.double().numpy(),
                              plain.mask.double().numpy(), shifted.advantages.double().numpy()):
        np.testing.assert_allclose(got, shift_advantages_to_positive(adv, mask),
                                   rtol=1e-6, atol=1e-6)
        assert got[mask > 0].min() == pytest.approx(0., abs=1e-6)


def test_dice_rewards_are_discounted_rewards_less_a_time_baseline_fit_on_them():
    # DiCE's rewards (the reference's dice_sample_processor.py, §2.3): γ^t r_t less a
    # linear baseline in time features fit on γ^t r_t, then normalised; by hand here.
    from garage_promp.baselines import LinearTimeBaseline
    from garage_promp.objectives.advantages import normalize_advantages
    _, algo = make_algo('DiCEVPG', episodes_per_task=4)
    batch = algo.sample_meta_batch(0)[0]
    discount = algo._processing.discount
    assert algo._processing.normalize_adv
    for i in range(batch.n_tasks):
        rewards, mask = batch.rewards[i].double().numpy(), batch.mask[i].double().numpy()
        disc = rewards * discount**np.arange(rewards.shape[-1]) * mask
        t = np.broadcast_to(np.arange(rewards.shape[-1]) / 100., rewards.shape)[mask > 0]
        features = np.stack([t, t**2, t**3, np.ones_like(t)], axis=-1)
        # The time baseline's fit, with the reference's 1e-5 ridge (LinearTimeBaseline).
        coeffs = np.linalg.solve(features.T @ features + 1e-5 * np.eye(4),
                                 features.T @ disc[mask > 0])
        fitted = np.zeros_like(disc)
        fitted[mask > 0] = features @ coeffs
        expected = normalize_advantages(disc - fitted, mask)
        np.testing.assert_allclose(batch.dice_rewards[i].double().numpy(), expected,
                                   rtol=1e-4, atol=1e-5)
    assert isinstance(algo._processing.dice_baseline, LinearTimeBaseline)


def test_class_defaults_are_the_papers_runs():
    # ProMP(...) and TRPOMAML(...) built with their defaults are the algorithms of the
    # paper's runs (the original code's ppo_run_all.py and maml_run_mujoco.py), not the
    # original pro_mp.py constructor's own defaults (clip 0.2, eta 1e-2).
    import inspect

    from garage_promp.algos.base import MetaPolicySearch
    from garage_promp.algos.promp import ProMP
    from garage_promp.algos.trpo_maml import TRPOMAML

    def defaults(cls):
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}

    assert {k: defaults(ProMP)[k] for k in ('learning_rate', 'num_promp_steps', 'clip_eps',
                                            'init_inner_kl_penalty', 'target_inner_step',
                                            'adaptive_inner_kl_penalty', 'anneal_factor')} == {
        'learning_rate': 1e-3, 'num_promp_steps': 5, 'clip_eps': 0.3,
        'init_inner_kl_penalty': 5e-4, 'target_inner_step': 0.01,
        'adaptive_inner_kl_penalty': False, 'anneal_factor': 1.}
    # The reference's TRPO (conjugate_gradient_optimizer.py): 10 CG iterations stopped
    # at rᵀr < 1e-10, backtracking by 0.8 at most 15 times.
    assert {k: defaults(TRPOMAML)[k] for k in ('max_kl_step', 'cg_iters', 'backtrack_ratio',
                                               'max_backtracks', 'cg_damping')} == {
        'max_kl_step': 0.01, 'cg_iters': 10, 'backtrack_ratio': 0.8, 'max_backtracks': 15,
        'cg_damping': 0.}
    assert inspect.signature(conjugate_gradient).parameters['residual_tol'].default == 1e-10
    assert {k: defaults(MetaPolicySearch)[k] for k in ('inner_lr', 'num_inner_grad_steps',
                                                       'discount', 'gae_lambda',
                                                       'normalize_adv', 'positive_adv')} == {
        'inner_lr': 0.1, 'num_inner_grad_steps': 1, 'discount': 0.99, 'gae_lambda': 1.,
        'normalize_adv': True, 'positive_adv': False}
