"""Hostile inputs: every one is refused by name before any work starts.

Constructors: each case asserts ``ValueError``, that the message names the
argument, and that no sampler worker was started. Launcher: each case
asserts a non-zero exit, that the message names the option, and that no
log directory was created.
"""
import math
import pathlib
import re

import garage_promp
from garage_promp.algos.options import supported_options

import akro
from click.testing import CliRunner
from garage import EnvSpec
from garage.torch.policies import GaussianMLPPolicy
import numpy as np
import psutil
import pytest
import torch

from tests.helpers import ALGOS, LongPointEnv, load_script, make_algo, make_setup, with_options

INF, NAN = math.inf, math.nan

COMMON_BAD = [
    ('meta_batch_size', 0), ('meta_batch_size', -1), ('meta_batch_size', 2.5),
    ('meta_batch_size', True), ('meta_batch_size', '4'), ('meta_batch_size', None),
    ('episodes_per_task', 0), ('episodes_per_task', None), ('episodes_per_task', 2.0),
    ('num_inner_grad_steps', 0), ('num_inner_grad_steps', 1.0),
    ('inner_lr', 0.), ('inner_lr', -0.1), ('inner_lr', INF), ('inner_lr', NAN),
    ('inner_lr', '0.1'), ('inner_lr', True), ('inner_lr', None),
    ('discount', 0.), ('discount', 1.5), ('discount', '0.99'), ('discount', NAN),
    ('discount', None),
    ('gae_lambda', -0.1), ('gae_lambda', 1.1), ('gae_lambda', None), ('gae_lambda', INF),
    ('normalize_adv', 'no'), ('normalize_adv', 'false'), ('normalize_adv', 1),
    ('positive_adv', 'yes'), ('positive_adv', None),
    ('evaluate_every_n_epochs', 0), ('evaluate_every_n_epochs', 1.5),
    ('baseline', 'linear'), ('dice_baseline', 'time'), ('meta_evaluator', 'x'),
    ('device', 'gpu'), ('device', 'tpu'), ('device', None), ('device', 'cpu:1'),
    ('learner_threads', 0), ('learner_threads', True), ('learner_threads', 10 ** 6),
    ('vectorize_tasks', 'true'),
    # Fine as a Python float, not as the float32 it is stored as (inf, 0).
    ('inner_lr', 1e300), ('inner_lr', 1e-50),
]
ALGO_BAD = {
    'ProMP': [('learning_rate', INF), ('learning_rate', NAN), ('learning_rate', 0.),
              ('learning_rate', '1e-3'), ('clip_eps', -1.), ('clip_eps', 0.), ('clip_eps', 1.5),
              ('clip_eps', INF), ('clip_eps', 'abc'), ('clip_eps', 1e-50), ('num_promp_steps', 0),
              ('num_promp_steps', True), ('num_minibatches', 0), ('num_minibatches', 4),
              ('adaptive_inner_kl_penalty', 'no'), ('init_inner_kl_penalty', INF),
              ('init_inner_kl_penalty', -1.), ('anneal_factor', 0.), ('anneal_factor', 1.5),
              ('target_inner_step', 0.), ('exploration', True), ('inner_estimator', 'lvc')],
    'TRPOMAML': [('max_kl_step', INF), ('max_kl_step', 0.), ('max_kl_step', NAN),
                 ('cg_iters', 0), ('backtrack_ratio', 1.), ('backtrack_ratio', 0.),
                 ('backtrack_ratio', 1e-300),
                 ('max_backtracks', 0), ('hvp_approach', 'guess'), ('fd_eps', 0.),
                 ('cg_damping', -1.), ('hvp_subsample', 0.), ('hvp_subsample', 1.5),
                 ('hvp_subsample', NAN), ('exploration', 'no'), ('inner_estimator', 'magic'),
                 ('inner_estimator', None)],
    'LVCVPG': [('learning_rate', INF), ('learning_rate', -1.), ('inner_estimator', 'dice'),
               ('exploration', False)],
    'DiCEVPG': [('inner_estimator', 'lvc'), ('learning_rate', NAN)],
    'MAMLVPG': [('exploration', True), ('inner_estimator', 'maml')],
    'EMAMLVPG': [('exploration', False), ('learning_rate', 'fast')],
}
CASES = ([(algo, arg, value) for algo in sorted(ALGOS) for arg, value in COMMON_BAD] +
         [(algo, arg, value) for algo, bad in ALGO_BAD.items() for arg, value in bad])


def _no_workers():
    return not psutil.Process().children(recursive=True)


@pytest.mark.parametrize('algo, arg, value', CASES,
                         ids=[f'{a}-{n}={v!r}' for a, n, v in CASES])
def test_constructor_refuses_by_name(algo, arg, value):
    with pytest.raises(ValueError, match=arg):
        make_algo(algo, setup_kwargs=dict(kind='multiprocessing', n_workers=2),
                  **{arg: value})
    assert _no_workers()


def test_case_count_is_at_least_150():
    assert len(CASES) + len(LAUNCHER_CASES) >= 150


def test_numpy_scalars_are_accepted():
    _, algo = make_algo('ProMP', meta_batch_size=np.int64(3), discount=np.float32(0.9),
                        normalize_adv=np.bool_(True), clip_eps=np.float64(0.2),
                        num_promp_steps=np.int32(2))
    assert algo._meta_batch_size == 3 and isinstance(algo._meta_batch_size, int)


@pytest.mark.parametrize('algo', sorted(ALGOS))
def test_fixed_options_list_the_valid_ones(algo):
    cls = ALGOS[algo]
    fixed = getattr(cls, 'FIXED_OPTIONS', ())
    options = supported_options(cls)
    assert 'meta_batch_size' in options and not set(fixed) & set(options)
    for name in fixed:
        with pytest.raises(ValueError, match=f"does not take '{name}'.*meta_batch_size"):
            make_algo(algo, **{name: 'lvc' if name == 'inner_estimator' else False})


def test_policy_for_another_env_is_refused():
    env, _, sampler, task_sampler = make_setup()
    spec = EnvSpec(akro.Box(-1, 1, (5, ), dtype=np.float32), env.spec.action_space, 5)
    other = GaussianMLPPolicy(spec, hidden_sizes=(4, ))
    with pytest.raises(ValueError, match="policy does not take the env's observations of size 3"):
        garage_promp.LVCVPG(env, other, sampler, task_sampler)


def test_policy_with_another_action_size_is_refused():
    env, _, sampler, task_sampler = make_setup()
    spec = EnvSpec(env.spec.observation_space, akro.Box(-1, 1, (4, ), dtype=np.float32), 5)
    other = GaussianMLPPolicy(spec, hidden_sizes=(4, ))
    with pytest.raises(ValueError, match='policy outputs actions of size 4 but the env has 2'):
        garage_promp.LVCVPG(env, other, sampler, task_sampler)


def test_sampler_for_another_horizon_is_refused():
    env, policy, _, task_sampler = make_setup()
    sampler = garage_promp.make_sampler(policy, env, max_episode_length=7)
    with pytest.raises(ValueError, match='sampler has max_episode_length=7'):
        garage_promp.LVCVPG(env, policy, sampler, task_sampler)


def test_task_sampler_of_another_env_family_is_refused():
    from garage_promp.experiment.env_setup import make_env_setup
    env, policy, sampler, _ = make_setup()
    cheetah = make_env_setup('HalfCheetahFwdBack', seed=1).train_tasks
    with pytest.raises(ValueError, match=r"task sampler's env HalfCheetahFwdBackEnv has "
                                         r'observation space shape \(17,\), but the algorithm'):
        garage_promp.LVCVPG(env, policy, sampler, cheetah)


class _NoTemplate:
    """A task sampler that does not expose its env (no ``_env``)."""

    def __init__(self, inner):
        self._inner = inner

    def sample(self, n_tasks, with_replacement=False):
        return self._inner.sample(n_tasks, with_replacement)


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_task_of_another_env_family_is_named_at_the_first_sampling(kind):
    from garage_promp.experiment.env_setup import make_env_setup
    env, policy, _, _ = make_setup()
    sampler = garage_promp.make_sampler(policy, env, kind=kind, n_workers=1)
    cheetah = _NoTemplate(make_env_setup('HalfCheetahFwdBack', seed=1).train_tasks)
    algo = garage_promp.LVCVPG(env, policy, sampler, cheetah, meta_batch_size=2,
                               episodes_per_task=1)
    try:
        with pytest.raises(ValueError, match="task sampler's env HalfCheetahFwdBackEnv has "
                                             'observation space shape'):
            algo.sample_meta_batch(0, cheetah.sample(2))
    finally:
        sampler.shutdown_worker()


class _ImageEnv(LongPointEnv):
    @property
    def spec(self):
        return EnvSpec(akro.Box(0, 1, (3, 4, 4), dtype=np.float32),
                       super().spec.action_space, 20)


def test_image_observations_are_refused():
    env, policy, sampler, task_sampler = make_setup(env_class=LongPointEnv)
    with pytest.raises(ValueError, match='env must have a flat'):
        garage_promp.LVCVPG(_ImageEnv(), policy, sampler, task_sampler)


# ------------------------------------------------------------------ launcher
LAUNCHER = pathlib.Path(__file__).parents[1] / 'launchers' / 'train.py'
LAUNCHER_CASES = [
    (['--device', 'gpu'], 'device'),
    *([(['--device', 'cuda'], 'needs a CUDA GPU')] if not torch.cuda.is_available() else []),
    (['--algo', 'MAML-TRPO', '--set', 'inner_estimator=lvc'], 'that is LVC-TRPO'),
    (['--algo', 'MAML-TRPO', '--set', 'exploration=True'], 'that is E-MAML-TRPO'),
    (['--meta-batch-size', '0'], '--meta-batch-size'),
    (['--meta-batch-size', '-3'], '--meta-batch-size'),
    (['--episodes-per-task', '0'], '--episodes-per-task'),
    (['--max-episode-length', '0'], '--max-episode-length'),
    (['--envs-per-task', '0'], '--envs-per-task'),
    (['--epochs', '-1'], '--epochs'),
    (['--epochs', '0'], '--epochs'),
    (['--n-test-tasks', '0'], '--n-test-tasks'),
    (['--n-workers', '0'], '--n-workers'),
    (['--evaluate-every', '0'], '--evaluate-every'),
    (['--seed', '-1'], '--seed'),
    (['--snapshot-mode', 'bogus'], '--snapshot-mode'),
    (['--hidden-sizes', '0'], '--hidden-sizes'),
    (['--hidden-sizes', '64,abc'], '--hidden-sizes'),
    (['--hidden-sizes', ''], '--hidden-sizes'),
    (['--set', 'bogus=1'], 'bogus'),
    (['--set', 'noequals'], '--set'),
    (['--set', 'clip_eps=abc'], 'clip_eps'),
    (['--set', 'clip_eps=-1'], 'clip_eps'),
    (['--set', 'learning_rate=nan'], 'learning_rate'),
    (['--set', 'learning_rate=inf'], 'learning_rate'),
    (['--set', 'inner_lr=1e999'], 'inner_lr'),
    (['--set', 'normalize_adv=no'], 'normalize_adv'),
    (['--set', 'discount="0.99"'], 'discount'),
    (['--set', 'exploration=True'], 'exploration'),
    (['--set', 'meta_evaluator=None'], 'meta_evaluator'),
    (['--algo', 'LVC-VPG', '--set', 'inner_estimator=dice'], 'inner_estimator'),
    (['--algo', 'MAML-VPG', '--set', 'exploration=True'], 'exploration'),
    (['--algo', 'MAML-TRPO', '--set', 'max_kl_step=inf'], 'max_kl_step'),
    (['--algo', 'MAML-TRPO', '--set', 'exploration="no"'], 'exploration'),
    (['--set', 'reward_type="nope"'], 'reward_type'),
    # A count with no upper bound of its own: at most MAX_COUNT (the run would never end).
    (['--set', 'num_promp_steps=1000000001'], 'num_promp_steps'),
    (['--algo', 'MAML-TRPO', '--set', 'cg_iters=100000000000000000000'], 'cg_iters'),
    (['--task', 'reach-v3'], 'Meta-World options'),
]


def _launcher():
    return load_script(LAUNCHER, 'train_launcher_bad')


def test_a_huge_value_is_named_not_printed_whole(tmp_path):
    """A 100 kB --set value is refused naming its key, and the message shows its start and
    its length, not the whole value on one line."""
    result = CliRunner().invoke(_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--log-dir', str(tmp_path / 'log'),
        '--set', 'inner_lr=' + '[' * 100000])
    assert result.exit_code != 0 and 'inner_lr' in result.output, result.output[:500]
    assert '(100,002 characters)' in result.output and len(result.output) < 2000
    assert not (tmp_path / 'log').exists()


@pytest.mark.parametrize('args, culprit', LAUNCHER_CASES,
                         ids=[' '.join(a) for a, _ in LAUNCHER_CASES])
def test_launcher_refuses_before_creating_anything(tmp_path, args, culprit):
    log_dir = tmp_path / 'log'
    # The case's own value replaces the base's (an option given twice is refused as such).
    result = CliRunner().invoke(_launcher().main, with_options([
        '--env', 'PointEnvCorner', '--epochs', '1', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--log-dir', str(log_dir)], args))
    assert result.exit_code != 0
    assert culprit in result.output, result.output
    assert 'given twice' not in result.output, result.output
    assert not log_dir.exists()
    assert _no_workers()


def test_launcher_refuses_a_log_dir_that_is_a_file(tmp_path):
    path = tmp_path / 'taken'
    path.write_text('keep me')
    result = CliRunner().invoke(_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--log-dir', str(path)])
    assert result.exit_code != 0 and '--log-dir' in result.output
    assert path.read_text() == 'keep me'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['taken']


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML', 'LVCVPG'])
def test_optimize_refuses_what_is_not_one_meta_batch_and_leaves_theta(name):
    """A round missing or doubled, rounds of other task sets, or a bad itr: refused naming
    the argument, θ untouched; the right batches are still taken afterwards."""
    _, algo = make_algo(name)
    batches = algo.sample_meta_batch(0)
    other = algo.sample_meta_batch(1, task_updates=algo._task_sampler.sample(2))
    theta = [p.detach().clone() for p in algo.policy.parameters()]
    cases = [((0, batches[:1]), r'batches must be 2 \(one per sampling round: K = 1 inner '
                                r'steps, then the post-update round\), got 1'),
             ((0, batches + batches), 'batches must be 2 .* got 4'),
             ((0, [batches[0], other[1]]), r'rounds of one meta-batch .*\(3, 2, 5\), \(2, 2, 5\)'),
             ((0, 'batches'), 'list of MetaBatch .* got str'),
             ((-1, batches), 'itr must be an int >= 0'), (('0', batches), 'itr must be')]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            algo.optimize(*args)
        assert all(torch.equal(a, b) for a, b in zip(theta, algo.policy.parameters()))
    with pytest.raises(ValueError, match='itr must be an int >= 0'):
        algo.sample_meta_batch(-5)
    algo.optimize(0, batches)


def test_a_dict_of_step_sizes_refuses_a_bool_and_a_task_sampler_must_be_one():
    env, policy, sampler, task_sampler = make_setup()
    for true in (True, np.True_, torch.tensor(True)):
        lrs = {name: true for name, _ in policy.named_parameters()}
        with pytest.raises(ValueError, match='inner_lr must be a real scalar or a real tensor'):
            garage_promp.ProMP(env, policy, sampler, task_sampler, inner_lr=lrs)
    with pytest.raises(ValueError, match='task_sampler must be a garage TaskSampler'):
        garage_promp.ProMP(env, policy, sampler, type(task_sampler))  # the class itself


def test_build_experiment_refuses_its_arguments_by_name():
    """As the launcher's options are: a misspelt keyword is not left to its default."""
    from garage_promp.experiment.builder import build_experiment  # pylint: disable=import-outside-toplevel
    base = dict(algo='ProMP', env='PointEnvCorner', seed=1, meta_batch_size=2,
                episodes_per_task=2, n_test_tasks=1)
    cases = [(dict(max_episode_length=0), 'max_episode_length must be an int in'),
             (dict(max_episode_length=False), 'max_episode_length must be'),
             (dict(n_test_task=5), "unexpected keyword arguments: 'n_test_task' "
                                   r"\(did you mean 'n_test_tasks'\?\)"),
             (dict(hidden_sizes=(0, )), r"hidden_sizes \(each layer's size\) must be"),
             (dict(hidden_sizes='64'), 'hidden_sizes must be a list or tuple'),
             (dict(hidden_sizes=()), 'hidden_sizes must be a list or tuple of 1 to'),
             (dict(hidden_sizes=(10 ** 5, 10 ** 5)), r'hidden_sizes \(each'),
             (dict(overrides='x'), 'overrides must be a dict'),
             (dict(n_test_tasks=0), 'n_test_tasks must be an int >= 1'),
             (dict(seed=-1), 'seed must be an int in'), (dict(seed=True), 'seed must be'),
             (dict(seed=2 ** 40), 'seed must be'), (dict(seed=1.5), 'seed must be')]
    for change, message in cases:
        with pytest.raises((ValueError, TypeError), match=message):
            build_experiment(**{**base, **change})
    built = build_experiment(**{**base, 'seed': np.int64(1), 'epochs': 3, 'full_table': False,
                                'max_env_steps': None, 'hidden_sizes': [4]})
    params = dict(built.algo.policy.named_parameters())
    first = params['_module._mean_module._layers.0.linear.weight']
    assert first.shape == (4, 2)


def test_the_meta_evaluator_checks_its_counts_when_made():
    """Not at its first evaluation, a whole training epoch later."""
    _, _, _, task_sampler = make_setup()
    for kwargs, message in [(dict(n_test_tasks=0), 'n_test_tasks must be an int >= 1'),
                            (dict(n_test_tasks=2.5), 'n_test_tasks must be'),
                            (dict(n_test_tasks=None), "n_test_tasks \\(None: the test task "
                                                      "sampler's n_tasks\\) must be"),
                            (dict(n_test_tasks=2, n_exploration_eps=0), 'n_exploration_eps'),
                            (dict(n_test_tasks=2, n_test_episodes=0), 'n_test_episodes')]:
        with pytest.raises(ValueError, match=message):
            garage_promp.MetaEvaluator(test_task_sampler=task_sampler, **kwargs)
    for kwargs in (dict(n_test_tasks=2), {}):
        with pytest.raises(ValueError, match='test_task_sampler must be a task sampler'):
            garage_promp.MetaEvaluator(test_task_sampler=None, **kwargs)


def test_make_sampler_checks_policy_and_env_before_any_worker():
    env, policy, _, _ = make_setup()
    before = psutil.Process().children(recursive=True)
    with pytest.raises(ValueError, match='policy must be a garage torch policy'):
        garage_promp.make_sampler(None, env, kind='multiprocessing')
    with pytest.raises(ValueError, match='env must be a garage Environment'):
        garage_promp.make_sampler(policy, None, kind='multiprocessing')
    one_d = GaussianMLPPolicy(EnvSpec(akro.Box(-1., 1., (1, )), akro.Box(-1., 1., (2, ))),
                              hidden_sizes=(4, ))
    with pytest.raises(ValueError, match="policy does not take the env's observations"):
        garage_promp.make_sampler(one_d, env, kind='multiprocessing')
    assert psutil.Process().children(recursive=True) == before


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_a_task_update_that_returns_no_env_is_named(kind):
    env, policy, _, _ = make_setup()
    sampler = garage_promp.make_sampler(policy, env, kind=kind)

    def no_env(old=None):
        del old

    try:
        with pytest.raises(ValueError, match="the task's env update .* returned None, not an "
                                             'environment'):
            sampler.obtain_meta_batch([no_env], [dict(policy.named_parameters())], 1)
    finally:
        sampler.shutdown_worker()


def test_env_and_baseline_settings_are_checked():
    from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline  # pylint: disable=import-outside-toplevel
    from garage_promp.envs import PointEnvCorner  # pylint: disable=import-outside-toplevel
    cases = [(lambda: PointEnvCorner(check_finite='no'), 'check_finite must be True or False'),
             (lambda: PointEnvCorner(sparse_reward_radius=INF), 'sparse_reward_radius'),
             (lambda: PointEnvCorner(sparse_reward_radius=True), 'sparse_reward_radius'),
             (lambda: PointEnvCorner(max_episode_length=10 ** 12), 'max_episode_length'),
             (lambda: LinearFeatureBaseline(reg_coeff=INF), 'reg_coeff'),
             (lambda: LinearFeatureBaseline(reg_coeff=0.), 'reg_coeff'),  # (no damping)
             (lambda: LinearTimeBaseline(reg_coeff=-1e-5), 'reg_coeff'),
             (lambda: LinearTimeBaseline(reg_coeff=True), 'reg_coeff'),
             (lambda: LinearTimeBaseline(reg_coeff='1e-5'), 'reg_coeff')]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()
    PointEnvCorner(sparse_reward_radius=np.float32(0.5))  # numpy scalars are numbers



def test_adaptation_refuses_episodes_and_policies_it_cannot_adapt_from():
    """NaN in the sampling Gaussians would adapt to NaN parameters; the rest would fail
    inside the inner step with a bare shape or key error. θ stays as it was."""
    import copy  # pylint: disable=import-outside-toplevel

    from garage import EpisodeBatch  # pylint: disable=import-outside-toplevel
    _, algo = make_algo('ProMP')
    policy = algo.get_exploration_policy()
    episodes = EpisodeBatch.concatenate(*algo.sample_meta_batch(0)[0].episodes.split()[:2])
    theta = [p.detach().clone() for p in algo.policy.parameters()]
    nan_mean = copy.deepcopy(episodes)
    nan_mean.agent_infos['mean'][0, 0] = NAN
    no_log_std = copy.deepcopy(episodes)
    del no_log_std.agent_infos['log_std']
    params = dict(policy.adapted_params())
    cases = [(lambda: algo.adapt_policy(policy, nan_mean), r"agent_infos\['mean'\] hold NaN"),
             (lambda: algo.adapt_policy(policy, no_log_std), r"agent infos \['log_std'\]"),
             (lambda: algo.adapt_policy(policy, None), 'exploration_episodes must be'),
             (lambda: algo.adapt_policy(None, episodes), 'exploration_policy must be'),
             (lambda: algo.adapt_policy(GaussianMLPPolicy(algo._env_spec,
                                                          hidden_sizes=(3, )), episodes),
              "exploration_policy must have the meta-policy's parameters"),
             (lambda: algo.adapt_many([{}], episodes, 2), r"params\[0\] must hold"),
             (lambda: algo.adapt_many([params], episodes, 3), 'must be 3 per task'),
             (lambda: algo.adapt_many([params], episodes, 0), 'episodes_per_task must be')]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert all(torch.equal(a, b) for a, b in zip(theta, algo.policy.parameters()))
    assert algo.adapt_policy(policy, episodes).num_steps == 1


def test_an_adapted_policy_takes_only_the_policys_parameters():
    _, policy, _, _ = make_setup()
    params = {k: v.detach() for k, v in policy.named_parameters()}
    with pytest.raises(ValueError, match='num_steps must be an int >= 0'):
        garage_promp.AdaptedPolicy(policy, params, -1)
    missing = dict(list(params.items())[1:])
    with pytest.raises(ValueError, match="params must hold the policy's parameters"):
        garage_promp.AdaptedPolicy(policy, missing, 0)
    wrong = {k: torch.zeros(7) for k in params}
    with pytest.raises(ValueError, match="params must hold the policy's parameters"):
        garage_promp.AdaptedPolicy(policy, wrong, 0)
    assert garage_promp.AdaptedPolicy(policy, params, 1).num_steps == 1
    first = next(iter(params))
    for value, message in ((params[first].to(torch.complex64) + 5j, 'got complex64'),
                           (params[first] > 0, 'got bool'),
                           (params[first] * np.nan, 'holds NaN or inf'),
                           (params[first].double() + 1e39, r'holds NaN or inf \(in the policy')):
        with pytest.raises(ValueError, match=rf"params\['{re.escape(first)}'\] .*{message}"):
            garage_promp.AdaptedPolicy(policy, dict(params, **{first: value}), 0)
    as_numpy = {k: v.numpy() * 2 for k, v in params.items()}  # numpy arrays: taken, cast
    adapted = garage_promp.AdaptedPolicy(policy, as_numpy, 0).adapted_params()
    assert all(torch.equal(adapted[k], v * 2) for k, v in params.items())
    # A state_dict holds buffers beside the parameters: they are not read.
    assert garage_promp.AdaptedPolicy(policy, policy.state_dict(), 0).num_steps == 0


def test_a_policy_that_is_not_gaussian_is_refused_naming_it():
    from garage.torch.policies import DeterministicMLPPolicy, TanhGaussianMLPPolicy  # pylint: disable=import-outside-toplevel
    env, _, sampler, task_sampler = make_setup()
    for policy, returned in ((DeterministicMLPPolicy(env.spec, hidden_sizes=(4, )), 'Tensor'),
                             (TanhGaussianMLPPolicy(env.spec, hidden_sizes=(4, )), 'TanhNormal')):
        with pytest.raises(ValueError, match=f'policy must be a garage torch Gaussian policy: '
                                             f'.*{type(policy).__name__} returned {returned}'):
            garage_promp.ProMP(env, policy, sampler, task_sampler)
        with pytest.raises(ValueError, match='Gaussian policy'):
            garage_promp.make_sampler(policy, env)
