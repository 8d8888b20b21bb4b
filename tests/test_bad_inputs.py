"""Hostile inputs: every one is refused by name before any work starts.

Constructors: each case asserts ``ValueError``, that the message names the
argument, and that no sampler worker was started. Launcher: each case
asserts a non-zero exit, that the message names the option, and that no
log directory was created.
"""
import math
import pathlib

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

from tests.helpers import ALGOS, LongPointEnv, load_script, make_algo, make_setup

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
    ('device', 'gpu'), ('device', 'tpu'), ('device', None),
    ('learner_threads', 0), ('learner_threads', True), ('vectorize_tasks', 'true'),
]
ALGO_BAD = {
    'ProMP': [('learning_rate', INF), ('learning_rate', NAN), ('learning_rate', 0.),
              ('learning_rate', '1e-3'), ('clip_eps', -1.), ('clip_eps', 0.),
              ('clip_eps', INF), ('clip_eps', 'abc'), ('num_promp_steps', 0),
              ('num_promp_steps', True), ('num_minibatches', 0), ('num_minibatches', 4),
              ('adaptive_inner_kl_penalty', 'no'), ('init_inner_kl_penalty', INF),
              ('init_inner_kl_penalty', -1.), ('anneal_factor', 0.), ('anneal_factor', 1.5),
              ('target_inner_step', 0.), ('exploration', True), ('inner_estimator', 'lvc')],
    'TRPOMAML': [('max_kl_step', INF), ('max_kl_step', 0.), ('max_kl_step', NAN),
                 ('cg_iters', 0), ('backtrack_ratio', 1.), ('backtrack_ratio', 0.),
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
    (['--task', 'reach-v3'], 'Meta-World options'),
]


def _launcher():
    return load_script(LAUNCHER, 'train_launcher_bad')


@pytest.mark.parametrize('args, culprit', LAUNCHER_CASES,
                         ids=[' '.join(a) for a, _ in LAUNCHER_CASES])
def test_launcher_refuses_before_creating_anything(tmp_path, args, culprit):
    log_dir = tmp_path / 'log'
    result = CliRunner().invoke(_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--log-dir', str(log_dir), *args])
    assert result.exit_code != 0
    assert culprit in result.output, result.output
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
