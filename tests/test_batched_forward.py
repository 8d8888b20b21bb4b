"""BatchedGaussianMLP: the sampler's per-step forward equals the policy's own."""
from garage_promp._threads import worker_threads
from garage_promp.policies import (
    BatchedGaussianMLP,
    distribution_params,
    learn_log_std_per_dimension,
)
from garage_promp.sampler.rollout import RolloutWorker

from garage.torch.policies import GaussianMLPPolicy, TanhGaussianMLPPolicy
import pytest
import torch
from torch.func import vmap

from tests.helpers import ShortPointEnv, make_setup

POLICIES = {
    'default': dict(),
    'fixed std': dict(learn_std=False, init_std=0.5),
    'no clamp': dict(min_std=None),
    'both bounds': dict(min_std=0.3, max_std=0.6, init_std=2.0),
    'softplus relu': dict(std_parameterization='softplus', hidden_nonlinearity=torch.relu),
    'one hidden layer': dict(hidden_sizes=(5, )),
}


def _stacked(policy, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return {k: torch.stack([v.detach() + 0.5 * torch.randn(v.shape, generator=gen)
                            for _ in range(n)])
            for k, v in policy.named_parameters()}


@pytest.mark.parametrize('kwargs', POLICIES.values(), ids=POLICIES.keys())
@pytest.mark.parametrize('n_sets', [1, 3])
def test_equals_vmap_of_the_policy(kwargs, n_sets):
    env = ShortPointEnv()
    torch.manual_seed(1)
    policy = GaussianMLPPolicy(env.spec, **{'hidden_sizes': (8, 8), **kwargs})
    fast = BatchedGaussianMLP.of(policy)
    assert fast is not None
    params = _stacked(policy, n_sets)
    obs = torch.randn(n_sets, 7, env.spec.observation_space.flat_dim) * 3
    with torch.no_grad():
        expected = vmap(lambda p, o: distribution_params(policy, p, o))(params, obs)
        got = fast(params, obs)
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('kwargs', [{}, dict(min_std=0.8, max_std=1.5)], ids=['free', 'clamped'])
def test_equals_vmap_with_a_log_std_per_action_dimension(kwargs):
    env = ShortPointEnv()
    torch.manual_seed(1)
    policy = learn_log_std_per_dimension(GaussianMLPPolicy(env.spec, hidden_sizes=(8, ),
                                                           **kwargs))
    fast = BatchedGaussianMLP.of(policy)
    params = _stacked(policy, 3)  # each set's log-stds differ from entry to entry
    assert params['_module._init_std'].shape == (3, env.spec.action_space.flat_dim)
    obs = torch.randn(3, 7, env.spec.observation_space.flat_dim)
    with torch.no_grad():
        expected = vmap(lambda p, o: distribution_params(policy, p, o))(params, obs)
        got = fast(params, obs)
    assert not torch.equal(expected[1][..., 0], expected[1][..., 1])
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_only_a_gaussian_mlp_policy_with_a_learned_std_gets_one_per_dimension():
    env = ShortPointEnv()
    with pytest.raises(ValueError, match='fixed std'):
        learn_log_std_per_dimension(GaussianMLPPolicy(env.spec, learn_std=False))
    with pytest.raises(ValueError, match='needs a garage GaussianMLPPolicy, got '
                                         'TanhGaussianMLPPolicy'):
        learn_log_std_per_dimension(TanhGaussianMLPPolicy(env.spec))
    policy = learn_log_std_per_dimension(GaussianMLPPolicy(env.spec, init_std=0.5))
    parameter = policy._module._init_std
    assert learn_log_std_per_dimension(policy)._module._init_std is parameter  # once is enough
    torch.testing.assert_close(parameter.detach(), torch.full((2, ), 0.5).log())


def test_the_clamp_is_applied():
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ), init_std=5.0, max_std=2.0)
    obs = torch.zeros(1, 2, env.spec.observation_space.flat_dim)
    _, log_std = BatchedGaussianMLP.of(policy)(_stacked(policy, 1), obs)
    assert torch.all(log_std <= torch.log(torch.tensor(2.0)) + 1e-6)


class _ShiftedPolicy(GaussianMLPPolicy):
    def forward(self, observations):
        return super().forward(observations + 1.)


@pytest.mark.parametrize('make', [
    lambda spec: TanhGaussianMLPPolicy(spec, hidden_sizes=(4, )),
    lambda spec: _ShiftedPolicy(spec, hidden_sizes=(4, )),
    lambda spec: GaussianMLPPolicy(spec, hidden_sizes=(4, ), layer_normalization=True),
], ids=['tanh-gaussian', 'own forward', 'layer norm'])
def test_other_structures_keep_the_generic_path(make):
    policy = make(ShortPointEnv().spec)
    assert BatchedGaussianMLP.of(policy) is None
    worker = RolloutWorker(policy, ShortPointEnv(), seed=0, max_episode_length=3)
    assert worker._fast is None


def test_the_worker_uses_it_for_gaussian_mlp_policies():
    env, policy, _, _ = make_setup(1)
    assert RolloutWorker(policy, env, seed=0, max_episode_length=3)._fast is not None
    # The sequential reference path never uses it.
    assert RolloutWorker(policy, env, seed=0, max_episode_length=3, batched=False)._fast is None


class _Layout:
    """What RolloutWorker._forward_plan reads of the worker."""

    _batched = True


@pytest.mark.parametrize('obs_dim, hidden, act_dim', [
    (39, (8, ), 4), (39, (32, 32), 4), (1, (100, 100), 1), (3, (128, 128), 1)])
def test_a_rows_output_is_the_same_in_any_wave_layout(obs_dim, hidden, act_dim):
    """An episode's mean and log-std do not depend on which of its task's episodes share its
    wave (a worker's part of a task, a budget's waves): each episode keeps the block position
    its index gives. 39 inputs and 8 units is a layer whose GEMM rounds a row differently by
    its position in the block with some BLAS builds (this machine's among them). A wave of
    a single block (a worker's one task of up to four episodes) runs as two: torch's
    batched product of one matrix takes another kernel, which for a one-column output
    layer of 100 or more units rounds otherwise (1-D point env, one thread)."""
    import akro  # pylint: disable=import-outside-toplevel
    from garage import EnvSpec  # pylint: disable=import-outside-toplevel
    spec = EnvSpec(observation_space=akro.Box(-1., 1., (obs_dim, )),
                   action_space=akro.Box(-1., 1., (act_dim, )))
    torch.manual_seed(3)
    policy = GaussianMLPPolicy(spec, hidden_sizes=hidden)
    fast = BatchedGaussianMLP.of(policy)
    params = {k: v.detach() for k, v in policy.named_parameters()}
    episodes = torch.randn(12, obs_dim) * 2  # one observation per episode of a task
    layouts = [(0, 12), (5, 1), (4, 3), (1, 6), (3, 9), (7, 2), (8, 4)]  # (first episode, count)
    results = {}
    for first, count in layouts:
        plan = RolloutWorker._forward_plan(_Layout(), [count], [params], [first])
        with worker_threads():  # as a sampler worker runs it
            mean, log_std = RolloutWorker._blocked_forward(
                _Layout(), episodes[first:first + count], plan, fast)
        for n in range(count):
            results.setdefault(first + n, []).append((mean[n], log_std[n]))
    for episode, outputs in results.items():
        for mean, log_std in outputs[1:]:
            assert torch.equal(mean, outputs[0][0]), episode
            assert torch.equal(log_std, outputs[0][1]), episode


@pytest.mark.parametrize('obs_dim, hidden, act_dim', [
    (20, (64, 64), 6), (11, (64, 64), 3), (17, (64, 64), 6), (27, (64, 64), 8),
    (376, (128, 128), 17), (39, (256, 256), 4), (2, (64, 64), 2), (3, (8, ), 1)])
def test_one_parameter_set_for_every_share_is_broadcast_with_the_same_numbers(
        obs_dim, hidden, act_dim):
    """Where every share has the same parameters (the first round: every task at θ), the
    blocks share one broadcast set (zero batch stride, nothing copied), and the forward of
    every row equals the one with the set copied block by block, bit for bit, for the
    package's policy sizes (the paper envs', Meta-World's, and a layer small enough for
    torch's own loop); different sets are copied per share."""
    import akro  # pylint: disable=import-outside-toplevel
    from garage import EnvSpec  # pylint: disable=import-outside-toplevel
    spec = EnvSpec(observation_space=akro.Box(-1., 1., (obs_dim, )),
                   action_space=akro.Box(-1., 1., (act_dim, )))
    torch.manual_seed(obs_dim)
    policy = GaussianMLPPolicy(spec, hidden_sizes=hidden)
    fast = BatchedGaussianMLP.of(policy)
    theta = {k: v.detach() for k, v in policy.named_parameters()}
    counts, firsts = [10, 3, 7, 10, 1], [0, 2, 5, 0, 9]
    shares = [theta, {k: v.clone() for k, v in theta.items()}, theta, theta, theta]
    plan = RolloutWorker._forward_plan(_Layout(), counts, shares, firsts)
    assert all(v.stride(0) == 0 for v in plan['stacked'].values())
    obs = torch.randn(sum(counts), obs_dim) * 2
    mean, log_std = RolloutWorker._blocked_forward(_Layout(), obs, plan, fast)
    copied = dict(plan, stacked={k: v.contiguous() for k, v in plan['stacked'].items()})
    assert all(v.stride(0) != 0 for v in copied['stacked'].values())
    mean_copied, log_std_copied = RolloutWorker._blocked_forward(_Layout(), obs, copied, fast)
    assert torch.equal(mean, mean_copied) and torch.equal(log_std, log_std_copied)
    signed = {k: v.clone() for k, v in theta.items()}
    name = next(iter(signed))
    signed[name].view(-1)[0] = 0.
    zeroed = {k: v.clone() for k, v in signed.items()}
    zeroed[name].view(-1)[0] = -0.  # equal as numbers, not as bits
    plan = RolloutWorker._forward_plan(_Layout(), [1, 1], [signed, zeroed], [0, 0])
    assert all(v.stride(0) != 0 for v in plan['stacked'].values())
    other = {k: v + 0.01 for k, v in theta.items()}
    plan = RolloutWorker._forward_plan(_Layout(), counts, shares[:4] + [other], firsts)
    assert all(v.stride(0) != 0 for v in plan['stacked'].values())
    assert torch.equal(plan['stacked'][next(iter(theta))][-1], other[next(iter(theta))])


def test_policies_are_evaluated_without_torchs_distribution_checks_which_come_back():
    """Within distribution_params torch's distribution argument checks are off (the package
    checks finiteness itself and names the culprit); afterwards the default is what it
    was, also when the forward raises."""
    from garage_promp.policies import distribution_params

    import akro
    from garage import EnvSpec
    from garage.torch.policies import GaussianMLPPolicy
    spec = EnvSpec(akro.Box(-1., 1., (3, )), akro.Box(-1., 1., (2, )))
    policy = GaussianMLPPolicy(spec, hidden_sizes=(4, ))
    before = torch.distributions.Distribution._validate_args
    with torch.no_grad():
        for p in policy.parameters():
            p.fill_(float('nan'))
    mean, log_std = distribution_params(policy, None, torch.zeros(5, 3))
    assert torch.isnan(mean).all()  # no ValueError about the NaN scale
    assert torch.distributions.Distribution._validate_args == before
    with pytest.raises(RuntimeError):
        distribution_params(policy, None, torch.zeros(5, 4))  # wrong width: the forward fails
    assert torch.distributions.Distribution._validate_args == before
