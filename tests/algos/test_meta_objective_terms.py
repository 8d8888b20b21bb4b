"""Each term of the meta-objectives, checked against values computed by hand.

The outer objectives of ProMP (paper Eq. 13; the original ProMP code's
meta_policy_search/meta_algos/pro_mp.py), TRPO-MAML (meta_algos/trpo_maml.py),
the VPG family (meta_algos/vpg_maml.py, meta_algos/vpg_dice_maml.py) and their
inner steps (Eq. 9-12, ``_adapt_sym`` / ``_adapt_objective_sym`` of
meta_algos/base.py), with the E-MAML exploration term (paper §3). Every expected
value here is rebuilt from the policy's parameters with torch.distributions and
the closed forms of the estimators, per task, never through the algorithm's own
code path.
"""
import collections

from garage_promp.policies import distribution_params, expand_params, named_params

from dowel import tabular
import numpy as np
import pytest
import torch

from tests.helpers import make_algo, perturb


def _normal(policy, params, batch, i):
    """π at ``params`` (None: the policy's own) on task i's steps: a Normal, (R, T, A)."""
    obs = batch.observations[i]
    mean, log_std = distribution_params(policy, params, obs.reshape(-1, obs.shape[-1]))
    shape = batch.actions[i].shape
    return torch.distributions.Normal(mean.reshape(shape), log_std.reshape(shape).exp())


def _log_probs(policy, params, batch, i):
    """log π(a|s) summed over action dimensions, (R, T)."""
    return _normal(policy, params, batch, i).log_prob(batch.actions[i]).sum(-1)


def _mmean(values, mask):
    return (values * mask).sum() / mask.sum()


def _inner_objective(estimator, lp, batch, i):
    """J^in of task i by its closed form (Eq. 10 LVC, MAML's, DiCE's gradient-equivalent)."""
    mask = batch.mask[i]
    if estimator == 'lvc':
        return _mmean(torch.exp(lp - batch.old_log_probs[i]) * batch.advantages[i], mask)
    if estimator == 'maml':
        return _mmean(lp * batch.advantages[i], mask)
    # DiCE: the magic box equals 1 in value and its gradient is that of the cumulative
    # log-probability, so E[Σ_{t'≤t} log π · r̃_t] has DiCE's value-free gradient.
    cumulative = torch.cumsum(lp * mask, dim=-1)
    return _mmean(cumulative * batch.dice_rewards[i], mask)


def _adapted(algo, estimator, pre, i):
    """θ'_i = θ + α ⊙ ∇θ J^in_i(θ), differentiable in θ (one inner step)."""
    theta = named_params(algo.policy)
    objective = _inner_objective(estimator, _log_probs(algo.policy, None, pre, i), pre, i)
    grads = torch.autograd.grad(objective, list(theta.values()), create_graph=True)
    return collections.OrderedDict(
        (name, value + algo._inner_lr[name] * g)
        for (name, value), g in zip(theta.items(), grads))


def _flat_grad(value, params, **kwargs):
    return torch.cat([g.flatten() for g in torch.autograd.grad(value, params, **kwargs)])


def _post_mean_advantage(post):
    return float(torch.stack([_mmean(post.advantages[i].double(), post.mask[i].double())
                              for i in range(post.n_tasks)]).mean())


def _old_log_probs_differ(pre, post):
    both = (pre.mask * post.mask) > 0
    return float((pre.old_log_probs - post.old_log_probs).abs()[both].max())


# 1. the post-update ratio's denominator
def test_promp_clip_ratio_is_one_at_the_sampling_parameters():
    # At θ = θ_o the recomputed post-update policy is the one that sampled D_1, so the
    # ratio π_θ'/π_θ'o (Eq. 13) is 1 and J^CLIP is the mean post-update advantage; the
    # denominator is the post-update batch's log-probs, not the pre-update batch's.
    _, algo = make_algo('ProMP', normalize_adv=False, clip_eps=0.2)
    batches = algo.sample_meta_batch(0)
    algo._current_clip_eps = 0.2
    pre, post = batches
    assert _old_log_probs_differ(pre, post) > 1e-2
    expected = _post_mean_advantage(post)
    meta = algo.meta_objective(batches, create_graph=False)
    assert meta.stats['ClipObjective'] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    # The inner KL is 0 at θ_o: the objective is the clip term alone.
    assert float(meta.objective.detach()) == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_trpo_surrogate_ratio_is_one_at_the_sampling_parameters():
    # TRPO-MAML's surrogate E[π_θ'(θ)/π_θ'o Â] on D_1 (trpo_maml.py's likelihood ratio
    # against the post-update sampling policy) is the mean post-update advantage at θ_o.
    _, algo = make_algo('TRPOMAML', normalize_adv=False)
    batches = algo.sample_meta_batch(0)
    pre, post = batches
    assert _old_log_probs_differ(pre, post) > 1e-2
    expected = _post_mean_advantage(post)
    meta = algo.meta_objective(batches, create_graph=False)
    assert float(meta.objective.detach()) == pytest.approx(expected, rel=1e-4, abs=1e-5)


# 2. ProMP's inner KL penalty gradient
def test_promp_inner_kl_penalty_contributes_its_gradient():
    # Eq. 13's penalty -η KL(π_θo ‖ π_θ) on D_0 is part of the objective that Adam
    # differentiates (pro_mp.py's surr_obj includes it): ∇J_η - ∇J_0 = -η ∇ KL.
    eta = 5.0
    _, algo = make_algo('ProMP', clip_eps=0.2)
    batches = algo.sample_meta_batch(0)
    algo._current_clip_eps = 0.2
    perturb(algo.policy)
    params = list(algo.policy.parameters())
    algo.inner_kl_coeff = np.array([0.])
    g0 = _flat_grad(algo.meta_objective(batches).objective, params)
    algo.inner_kl_coeff = np.array([eta])
    g1 = _flat_grad(algo.meta_objective(batches).objective, params)
    pre = batches[0]
    kls = []
    for i in range(pre.n_tasks):
        old = torch.distributions.Normal(pre.old_mean[i], pre.old_log_std[i].exp())
        kl = torch.distributions.kl_divergence(old, _normal(algo.policy, None, pre, i)).sum(-1)
        kls.append(_mmean(kl, pre.mask[i]))
    g_kl = _flat_grad(torch.stack(kls).mean(), params)
    assert float(g_kl.norm()) > 1e-3
    torch.testing.assert_close(g1 - g0, -eta * g_kl, rtol=1e-3, atol=1e-5)


# 3. the trust-region KL's direction
@pytest.mark.parametrize('name', ['TRPOMAML', 'ProMP'])
def test_post_update_kl_is_from_the_sampling_policy_to_the_adapted_one(name):
    # The trust region (trpo_maml.py, diagonal_gaussian.py kl_sym(old, new)) and the logged
    # KL are KL(π_θ'o ‖ π_θ'(θ)) on D_1: per task the mean over valid steps, then over tasks.
    _, algo = make_algo(name)
    batches = algo.sample_meta_batch(0)
    perturb(algo.policy)
    pre, post = batches
    meta = algo.meta_objective(batches, create_graph=False)
    forward, reverse = [], []
    for i in range(post.n_tasks):
        phi = _adapted(algo, 'lvc', pre, i)
        with torch.no_grad():
            new = _normal(algo.policy, phi, post, i)
            old = torch.distributions.Normal(post.old_mean[i], post.old_log_std[i].exp())
            forward.append(float(_mmean(torch.distributions.kl_divergence(old, new).sum(-1),
                                        post.mask[i])))
            reverse.append(float(_mmean(torch.distributions.kl_divergence(new, old).sum(-1),
                                        post.mask[i])))
    expected, wrong = np.mean(forward), np.mean(reverse)
    assert abs(expected - wrong) > 1e-2 * expected
    assert float(meta.kl.detach()) == pytest.approx(expected, rel=1e-4)


# 4. the E-MAML term
@pytest.mark.parametrize('explore_name, plain_name, kwargs', [
    ('TRPOMAML', 'TRPOMAML', dict(inner_estimator='maml')),
    ('EMAMLVPG', 'MAMLVPG', {}),
])
def test_emaml_term_differentiates_the_pre_update_log_likelihood_at_theta(
        explore_name, plain_name, kwargs):
    # E-MAML (paper §3; trpo_maml.py / vpg_maml.py with exploration=True): r̄ · E_{D_0}
    # [log π_θ(a|s)] at the meta-parameters θ (the policy that sampled D_0), differentiable.
    explore_kwargs = dict(kwargs, exploration=True) if explore_name == 'TRPOMAML' else kwargs
    _, explore = make_algo(explore_name, **explore_kwargs)
    _, plain = make_algo(plain_name, **kwargs)
    batches = explore.sample_meta_batch(0)
    perturb(explore.policy)
    plain.policy.load_state_dict(explore.policy.state_dict())
    pre, post = batches
    g_explore = _flat_grad(explore.meta_objective(batches).objective,
                           list(explore.policy.parameters()))
    g_plain = _flat_grad(plain.meta_objective(batches).objective,
                         list(plain.policy.parameters()))
    params = list(explore.policy.parameters())
    term = torch.stack([
        post.mean_std_reward[i] * _mmean(_log_probs(explore.policy, None, pre, i), pre.mask[i])
        for i in range(pre.n_tasks)]).mean()
    g_term = _flat_grad(term, params)
    assert float(g_term.norm()) > 1e-3
    torch.testing.assert_close(g_explore - g_plain, g_term, rtol=1e-3, atol=1e-5)


# 5. the VPG outer objective
def test_vpg_outer_objective_uses_the_post_update_advantages():
    # vpg_maml.py's outer loss: E_{D_1}[log π_θ'(θ)(a|s) Â_1], with D_1's own advantages.
    _, algo = make_algo('LVCVPG', normalize_adv=False)
    batches = algo.sample_meta_batch(0)
    perturb(algo.policy)
    pre, post = batches
    assert float((pre.advantages - post.advantages).abs().max()) > 1e-2
    meta = algo.meta_objective(batches, create_graph=False)
    expected = []
    for i in range(post.n_tasks):
        phi = _adapted(algo, 'lvc', pre, i)
        with torch.no_grad():
            lp = _log_probs(algo.policy, phi, post, i)
            expected.append(float(_mmean(lp * post.advantages[i], post.mask[i])))
    assert float(meta.objective.detach()) == pytest.approx(np.mean(expected), rel=1e-4, abs=1e-5)


# 6. DiCE's inner step
def test_dice_inner_step_follows_the_dice_rewards():
    # vpg_dice_maml.py / dice_maml.py: the inner objective is DiCE's on the time-baselined
    # rewards γ^t r_t - b(t), whose gradient is E[Σ_t ∇(Σ_{t'≤t} log π) r̃_t].
    _, algo = make_algo('DiCEVPG')
    batches = algo.sample_meta_batch(0)
    pre = batches[0]
    assert pre.mask.sum(-1).max() > 1  # multi-step episodes: the cumulative sums matter
    assert float((pre.dice_rewards - pre.advantages).abs().max()) > 1e-2
    theta = collections.OrderedDict(
        (k, v.detach()) for k, v in named_params(algo.policy).items())
    chain = algo._adapt_chain(expand_params(theta, pre.n_tasks), batches, create_graph=False)
    for i in range(pre.n_tasks):
        phi = _adapted(algo, 'dice', pre, i)
        moved = 0.
        for name in theta:
            torch.testing.assert_close(chain[1][name][i], phi[name].detach(), rtol=1e-4,
                                       atol=1e-6)
            moved += float((phi[name] - theta[name]).detach().abs().sum())
        assert moved > 1e-4


# 7. optimizer and logging
@pytest.mark.parametrize('name', ['ProMP', 'LVCVPG', 'EMAMLVPG'])
def test_adam_epsilon_is_the_references(name):
    # tf.train.AdamOptimizer's default ε = 1e-8 (the reference's MAMLFirstOrderOptimizer).
    _, algo = make_algo(name)
    assert algo._optimizer.defaults['eps'] == 1e-8


@pytest.mark.parametrize('name', ['ProMP', 'LVCVPG'])
def test_logged_loss_before_is_minus_the_objective_before_the_step(name):
    _, algo = make_algo(name, normalize_adv=False)
    batches = algo.sample_meta_batch(0)
    perturb(algo.policy, scale=0.5)
    if name == 'ProMP':
        algo._current_clip_eps = algo._clip_eps
    before = float(algo.meta_objective(batches, create_graph=False).objective.detach())
    assert abs(before) > 1e-4
    with tabular.prefix('lb/'):
        algo.optimize(0, batches)
        logged = dict(tabular.as_dict)
    assert logged['lb/LossBefore'] == pytest.approx(-before, rel=1e-4, abs=1e-6)
    after = float(algo.meta_objective(batches, create_graph=False).objective.detach())
    assert after != pytest.approx(before, rel=1e-3)  # the step moved the objective
    assert logged['lb/LossAfter'] == pytest.approx(-after, rel=1e-4, abs=1e-6)
    # dLoss: what the step took off the loss (LossBefore - LossAfter, the reference's sign)
    assert logged['lb/dLoss'] == pytest.approx(logged['lb/LossBefore'] - logged['lb/LossAfter'],
                                               rel=1e-4, abs=1e-7)


def test_trpo_logs_the_loss_after_an_accepted_step_and_what_it_took_off():
    _, algo = make_algo('TRPOMAML', normalize_adv=False)
    batches = algo.sample_meta_batch(0)
    with tabular.prefix('lb/'):
        algo.optimize(0, batches)
        logged = dict(tabular.as_dict)
    assert logged['lb/StepAccepted'] == 1.
    after = float(algo.meta_objective(batches, create_graph=False).objective.detach())
    assert logged['lb/LossAfter'] == pytest.approx(-after, rel=1e-4, abs=1e-7)
    assert logged['lb/dLoss'] > 0 and logged['lb/dLoss'] == pytest.approx(
        logged['lb/LossBefore'] - logged['lb/LossAfter'], rel=1e-4, abs=1e-8)


def test_hand_written_curvature_is_refused_beyond_its_tolerance():
    # The Gauss-Newton form of the trust-region KL's Hessian (conjugate_gradient_optimizer.py's
    # products, written out by hand) is exact only where the recomputed post-update Gaussians are
    # the sampling ones; a gap of a few 1e-4 σ (above CURVATURE_TOLERANCE = 1e-4) falls back to
    # double backpropagation, while a gap well below it keeps the hand-written products.
    from garage_promp.curvature import TrustRegionCurvature, structure_of
    _, algo = make_algo('TRPOMAML')
    batches = algo.sample_meta_batch(0)
    theta0 = [p.detach().clone() for p in algo.policy.parameters()]
    gen = torch.Generator().manual_seed(3)
    direction = [torch.randn(p.shape, generator=gen) for p in theta0]

    def mismatch_at(scale):
        with torch.no_grad():
            for p, p0, d in zip(algo.policy.parameters(), theta0, direction):
                p.copy_(p0 + scale * d)
        theta = collections.OrderedDict(
            (k, v.detach()) for k, v in named_params(algo.policy).items())
        return TrustRegionCurvature(structure_of(algo.policy), theta, batches, algo._inner_lr,
                                    algo._inner_objective_of).mismatch

    probe = mismatch_at(1e-4)
    assert probe > 0
    low = mismatch_at(1e-4 * 2e-5 / probe)  # ~2e-5: accepted
    assert 5e-6 < low < 6e-5
    assert algo._hand_written_curvature(batches) is not None
    high = mismatch_at(1e-4 * 5e-4 / probe)  # ~5e-4: refused
    assert 2e-4 < high < 9e-4
    assert algo._hand_written_curvature(batches) is None


def test_the_curvature_check_leaves_the_damping_out_of_the_comparison():
    # The hand-written products include cg_damping·v; double backpropagation's reference does
    # not: with a damping of 0.1 the first update's check still accepts correct products.
    _, algo = make_algo('TRPOMAML', cg_damping=0.1)
    algo.optimize(0, algo.sample_meta_batch(0))
    ok, gap = algo._curvature_checked
    assert ok and gap < 1e-4


def test_within_shared_forwards_each_pair_of_parameters_and_batch_is_one_forward():
    """Inside ``_shared_forwards`` the policy at the same (stacked) parameters on the same
    batch is one forward, its tensors returned again (ProMP's inner KL and inner step
    share it); outside, and for other parameters, each call is its own forward."""
    _, algo = make_algo('ProMP')
    batch = algo.sample_meta_batch(0)[0]
    phi = expand_params(named_params(algo.policy), batch.n_tasks)
    other = expand_params(named_params(algo.policy), batch.n_tasks)
    with algo._shared_forwards():
        first, again, apart = (algo._dist(phi, batch), algo._dist(phi, batch),
                               algo._dist(other, batch))
        assert first[0] is again[0] and first[1] is again[1]
        assert apart[0] is not first[0] and torch.equal(apart[0], first[0])
    outside = algo._dist(phi, batch)
    assert outside[0] is not first[0] and torch.equal(outside[0], first[0])
    assert algo.__dict__.get('_forward_cache') is None  # dropped at the block's end


@pytest.mark.parametrize('steps, minibatches', [(1, 1), (2, 3), (5, 1)])
def test_promp_takes_one_adam_step_per_minibatch_of_each_promp_step(steps, minibatches):
    """Each of the ``num_promp_steps`` passes over the meta-batch takes one Adam step per
    task minibatch (``num_minibatches``): the optimiser counts their product."""
    _, algo = make_algo('ProMP', num_promp_steps=steps, num_minibatches=minibatches)
    algo.optimize(0, algo.sample_meta_batch(0))
    counts = {int(state['step']) for state in algo._optimizer.state.values()}
    assert counts == {steps * minibatches}
