"""benchmarks/fig6.py (paper Fig. 6) and its two-parameter policy."""
import json
import math
import pathlib
import warnings

from garage_promp.envs import PointEnv1D
from garage_promp.objectives import gaussian_log_likelihood
from garage_promp.policies import distribution_params, stack_params, task_distribution_params
from garage_promp.policies_two_param import QuadraticMeanPolicy

from click.testing import CliRunner
from dowel import tabular
import numpy as np
import pytest
import torch

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The algorithms log to dowel's tabular, which no output reads here.
pytestmark = [pytest.mark.filterwarnings('ignore::dowel.tabular_input.TabularInputWarning'),
              pytest.mark.filterwarnings('ignore:Converting a tensor with requires_grad')]


@pytest.fixture(scope='module')
def fig6():
    return load_script(ROOT / 'benchmarks' / 'fig6.py', 'fig6_bench')


def _closed_form(theta, s, a):
    mean = theta[0] * s**2 + theta[1]
    return mean, -0.5 * (a - mean)**2 - 0.5 * math.log(2 * math.pi)


def test_policy_has_exactly_two_parameters():
    policy = QuadraticMeanPolicy(PointEnv1D(seed=0).spec)
    params = dict(policy.named_parameters())
    assert list(params) == ['theta']
    assert sum(p.numel() for p in policy.parameters()) == 2
    assert params['theta'].tolist() == pytest.approx([0.09, 0.05])
    assert 'log_std' in dict(policy.named_buffers())  # fixed, not learned


def test_policy_mean_and_log_prob_are_the_closed_form():
    policy = QuadraticMeanPolicy(PointEnv1D(seed=0).spec, init_theta=(0.3, -0.2))
    s = torch.tensor([[-2.], [-0.5], [0.], [1.3]])
    a = torch.tensor([[0.1], [-1.], [2.5], [0.]])
    mean, log_prob = _closed_form((0.3, -0.2), s, a)
    dist, info = policy(s)
    assert torch.allclose(dist.mean, mean) and torch.allclose(info['mean'], mean)
    assert torch.allclose(info['log_std'], torch.zeros(4, 1))
    assert torch.allclose(dist.log_prob(a), log_prob[:, 0])
    got_mean, got_log_std = distribution_params(policy, None, s)
    assert torch.allclose(gaussian_log_likelihood(a, got_mean, got_log_std), log_prob[:, 0])
    # Functionally at other parameters, one set per task (the algorithms' path).
    thetas = [torch.tensor([1., 2.]), torch.tensor([-0.5, 0.25])]
    means, log_stds = task_distribution_params(
        policy, stack_params([{'theta': t} for t in thetas]), torch.stack([s, s]))
    for i, theta in enumerate(thetas):
        assert torch.allclose(means[i], _closed_form(theta, s, a)[0])
    assert torch.allclose(log_stds, torch.zeros(2, 4, 1))
    action, _ = policy.get_action(np.array([0.5], dtype=np.float32))
    assert action.shape == (1, )


def test_policy_refuses_other_spaces():
    from garage.envs import PointEnv
    with pytest.raises(ValueError, match='1-D observations and actions of size 1'):
        QuadraticMeanPolicy(PointEnv().spec)
    with pytest.raises(ValueError, match='two finite numbers'):
        QuadraticMeanPolicy(PointEnv1D(seed=0).spec, init_theta=(1., 2., 3.))


def test_task_sampler_alternates_goals(fig6):
    updates = fig6.AlternatingGoals().sample(4)
    assert [u(None).task for u in updates] == [-1., 1., -1., 1.]


@pytest.mark.parametrize('label', ['DiCE-VPG', 'E-MAML-VPG'])
def test_landscape_inner_step_is_the_algorithms(fig6, label):
    """The numpy inner step of the landscape is the one the algorithms take."""
    algo, policy = fig6.build_algo(label, lr=1e-3, inner_lr=0.1, tasks_per_goal=1, episodes=4,
                                   seed=3)
    pre, post = algo.sample_meta_batch(0)
    theta = policy.theta.detach().numpy().astype(float)[None].repeat(2, 0)
    expected = theta + 0.1 * fig6.HORIZON * fig6.inner_gradient(
        theta, *(x.numpy().astype(float).reshape(2, 4, fig6.HORIZON)
                 for x in (pre.observations, pre.actions, pre.rewards)))
    for i in range(2):  # θ' of task i from the post-update sampling means
        s2 = post.observations[i].reshape(-1).double()**2
        design = torch.stack([s2, torch.ones_like(s2)], -1)
        adapted = torch.linalg.lstsq(design, post.old_mean[i].reshape(-1, 1).double()).solution
        assert adapted[:, 0].numpy() == pytest.approx(expected[i], abs=1e-5)
    algo.optimize(0, [pre, post])  # one meta-step moves θ
    with warnings.catch_warnings():  # what optimize logged: no output reads it
        warnings.simplefilter('ignore')
        tabular.clear()
    assert not np.allclose(policy.theta.detach().numpy(), fig6.INIT_THETA)


def test_quick_run_writes_png_and_json(fig6, tmp_path):
    result = CliRunner().invoke(fig6.main, ['--out', str(tmp_path), '--quick', '--iters', '2'])
    assert result.exit_code == 0, result.output
    png = tmp_path / 'fig6.png'
    assert png.stat().st_size > 0 and png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    record = json.loads((tmp_path / 'fig6.json').read_text())
    assert record['settings']['iters'] == 2 and record['settings']['quick']
    assert record['settings']['outer_optimizer'] == 'Adam'
    (panel, ) = record['panels']
    assert [r['label'] for r in panel['runs']] == ['DiCE-VPG', 'E-MAML-VPG']
    for run in panel['runs']:
        assert run['theta'][0] == pytest.approx([0.09, 0.05], abs=1e-7)
        assert len(run['theta']) == 3 and run['theta'][-1] != run['theta'][0]
        assert len(run['pre_update_return']) == len(run['post_update_return']) == 2
        assert all(0 < r <= 5 for r in run['pre_update_return'] + run['post_update_return'])
    post = np.asarray(panel['post_update_return'])
    assert post.shape == (len(panel['theta1']), len(panel['theta0'])) and np.isfinite(post).all()
