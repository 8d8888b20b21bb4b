"""launchers/train.py on Meta-World ML1, and launchers/meta_test.py on its snapshot."""
import csv
import json
import math
import pathlib

from garage_promp.experiment.paper_config import METAWORLD, algo_kwargs

from click.testing import CliRunner
from metaworld.env_dict import ML1_V3, ML10_V3, ML45_V3
import pytest

from tests.helpers import load_script

LAUNCHERS = pathlib.Path(__file__).parents[2] / 'launchers'
ML10_TEST = ['drawer-open-v3', 'door-close-v3', 'shelf-place-v3', 'sweep-into-v3',
             'lever-pull-v3']


def _load(name):
    return load_script(LAUNCHERS / f'{name}.py', f'{name}_launcher')


def _invoke(name, *args):
    return CliRunner().invoke(_load(name).main, [str(a) for a in args], catch_exceptions=False)


def _read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope='module')
def ml1_run(tmp_path_factory):
    """One ProMP epoch on ML1 reach-v3 with a tiny batch; returns the log dir."""
    log_dir = tmp_path_factory.mktemp('ml1') / 'log'
    result = _invoke('train', '--env', 'ML1', '--task', 'reach-v3', '--algo', 'ProMP',
                     '--epochs', 1, '--meta-batch-size', 2, '--episodes-per-task', 2,
                     '--max-episode-length', 10, '--n-test-tasks', 2, '--hidden-sizes', 8,
                     '--log-dir', log_dir)
    assert result.exit_code == 0, result.output
    return log_dir


@pytest.mark.metaworld
def test_ml1_trains_and_meta_tests_on_its_test_goals(ml1_run):
    rows = _read_csv(ml1_run / 'progress.csv')
    assert len(rows) == 1
    row = rows[0]
    for key in ('Step_0-SuccessRate', 'Step_1-SuccessRate', 'MetaTest/reach-v3/SuccessRate',
                'MetaTest/Average/SuccessRate'):
        assert 0. <= float(row[key]) <= 1., key
    assert math.isfinite(float(row['GaussianMLPPolicy/LossAfter']))
    assert int(row['MetaTest/reach-v3/NumEpisodes']) == 2 * 3  # 2 goals x 3 eval episodes
    assert int(row['TotalEnvSteps']) == 2 * 2 * 10 * 2  # M x R x H x (K + 1)
    with open(ml1_run / 'variant.json') as f:
        assert json.load(f)['reward_function_version'] == 'v2'
    assert 'reward_function_version=v2' in (ml1_run / 'debug.log').read_text()
    # Envs pickle as their recipe, not as MuJoCo model and data (about 40 MB each).
    assert (ml1_run / 'params.pkl').stat().st_size < 1_000_000
    assert (ml1_run / 'experiment.json').stat().st_size < 1_000_000


@pytest.mark.metaworld
def test_meta_test_writes_one_row_per_test_task(ml1_run, tmp_path):
    out = tmp_path / 'ml1.csv'
    result = _invoke('meta_test', ml1_run, '--n-test-tasks', 3, '--csv', out)
    assert result.exit_code == 0, result.output
    rows = _read_csv(out)
    assert [r['task'] for r in rows] == ['reach-v3', 'Average']
    assert int(rows[0]['goals']) == 3 and int(rows[0]['episodes']) == 3 * 3
    assert 0. <= float(rows[0]['success_rate']) <= 1.
    assert float(rows[1]['average_return']) == pytest.approx(float(rows[0]['average_return']))
    assert 'reach-v3' in result.output and 'Average' in result.output


@pytest.mark.metaworld
def test_meta_test_on_the_ml10_test_split(ml1_run, tmp_path):
    # Every Meta-World env has the same spaces, so the ML1 policy can face ML10's test classes.
    out = tmp_path / 'ml10.csv'
    result = _invoke('meta_test', ml1_run, '--env', 'ML10', '--n-test-tasks', 5,
                     '--n-exploration-eps', 1, '--n-test-episodes', 1, '--csv', out)
    assert result.exit_code == 0, result.output
    rows = _read_csv(out)
    assert [r['task'] for r in rows] == ML10_TEST + ['Average']
    assert all(int(r['episodes']) == 1 for r in rows[:-1])
    assert float(rows[-1]['success_rate']) == pytest.approx(
        sum(float(r['success_rate']) for r in rows[:-1]) / 5)


def test_meta_world_options_are_refused_elsewhere(tmp_path):
    result = CliRunner().invoke(_load('train').main, [
        '--env', 'PointEnvCorner', '--task', 'reach-v3', '--log-dir', str(tmp_path)])
    assert result.exit_code == 2 and 'Meta-World options' in result.output
    result = _invoke('train', '--env', 'ML1', '--epochs', 1, '--log-dir', tmp_path / 'ml1')
    assert result.exit_code == 2 and 'ML1 needs a task' in result.output
    assert not (tmp_path / 'ml1').exists()  # refused before the log directory exists


def test_meta_world_table_follows_the_protocol():
    n_train_classes = {'ML1': 1, 'ML10': len(ML10_V3['train']), 'ML45': len(ML45_V3['train'])}
    assert len(ML1_V3['train']) == 50 and n_train_classes['ML45'] == 45
    for name, n_classes in n_train_classes.items():
        kwargs = algo_kwargs('ProMP', name)
        assert kwargs['meta_batch_size'] % n_classes == 0, name
        assert (kwargs['clip_eps'], kwargs['num_promp_steps'], kwargs['inner_lr'],
                kwargs['episodes_per_task']) == (0.3, 5, 0.1, 10)
        assert METAWORLD[name]['H'] == 500


@pytest.mark.metaworld
def test_meta_test_with_the_metaworld_algorithms_protocol(ml1_run, tmp_path):
    """The preset's knobs reach the evaluation: goals per class, before/after adaptation,
    deterministic episodes that end at success, the protocol written next to the numbers."""
    out = tmp_path / 'protocol.csv'
    result = _invoke('meta_test', ml1_run, '--protocol', 'metaworld-algorithms',
                     '--goals-per-class', 2, '--n-exploration-eps', 1, '--csv', out)
    assert result.exit_code == 0, result.output
    rows = _read_csv(out)
    reach = rows[0]
    assert int(reach['goals']) == 2 and int(reach['episodes']) == 2 * 3
    for key in ('success_before', 'success_rate', 'metaworld_evaluator_success'):
        assert 0. <= float(reach[key]) <= 1., key
    assert math.isfinite(float(reach['return_before']))
    assert 'protocol metaworld-algorithms' in reach['protocol']
    assert 'mean action, ending at success' in reach['protocol']
    # Without a protocol nothing is evaluated before adaptation.
    plain = tmp_path / 'plain.csv'
    assert _invoke('meta_test', ml1_run, '--n-test-tasks', 1, '--n-exploration-eps', 1,
                   '--csv', plain).exit_code == 0
    assert math.isnan(float(_read_csv(plain)[0]['success_before']))


@pytest.mark.metaworld
def test_protocol_options_are_checked(ml1_run, tmp_path):
    both = _invoke('meta_test', ml1_run, '--goals-per-class', 1, '--n-test-tasks', 1,
                   '--csv', tmp_path / 'x.csv')
    assert both.exit_code != 0 and 'not both' in both.output
    assert not (tmp_path / 'x.csv').exists()
    zero = _invoke('meta_test', ml1_run, '--goals-per-class', 0)
    assert zero.exit_code != 0 and '--goals-per-class' in zero.output
    # ML1 has 50 test goals: 51 would count one twice, as if distinct.
    many = _invoke('meta_test', ml1_run, '--goals-per-class', 51, '--csv', tmp_path / 'x.csv')
    assert many.exit_code == 2 and ('--goals-per-class: 51 goals of each test class, but '
                                    'ML1 has 50 goals a class') in many.output, many.output
    many = _invoke('meta_test', ml1_run, '--n-test-tasks', 51, '--csv', tmp_path / 'x.csv')
    assert many.exit_code == 2 and 'n_test_tasks=51 asks 51 goals' in many.output, many.output
    assert not (tmp_path / 'x.csv').exists()


@pytest.mark.metaworld
def test_terminate_on_success_ends_the_episode_at_the_first_success(monkeypatch):
    from garage_promp.envs import MetaWorldTaskSampler, make_benchmark  # pylint: disable=import-outside-toplevel

    from garage import StepType  # pylint: disable=import-outside-toplevel
    benchmark = make_benchmark('ML1', 'reach-v3', seed=1)
    for terminate in (True, False):
        tasks = MetaWorldTaskSampler(benchmark, 'test', max_episode_length=10, seed=1,
                                     terminate_on_success=terminate)
        env = tasks.sample(1)[0]()
        assert env.terminate_on_success is terminate
        inner = env._env  # pylint: disable=protected-access
        real_step = inner.step
        calls = []

        def step(action, real_step=real_step, calls=calls):
            obs, reward, terminated, truncated, info = real_step(action)
            calls.append(1)
            return obs, reward, terminated, truncated, dict(info, success=float(len(calls) == 3))

        monkeypatch.setattr(inner, 'step', step)
        env.reset()
        types = [env.step(env.action_space.sample()).step_type for _ in range(3)]
        assert types[-1] == (StepType.TERMINAL if terminate else StepType.MID)
        if terminate:
            with pytest.raises(RuntimeError):  # an ended episode must be reset first
                env.step(env.action_space.sample())
        # A pickled copy keeps the setting.
        import pickle  # pylint: disable=import-outside-toplevel
        assert pickle.loads(pickle.dumps(env)).terminate_on_success is terminate


@pytest.mark.metaworld
@pytest.mark.slow
def test_ml45_trains_and_meta_tests_with_a_tiny_budget(tmp_path):
    """ML45 through the same tooling: one epoch over all 45 training classes (one task
    each), a budget of env steps, the meta-test on one goal of each of the 5 held-out
    classes, and the protocol evaluation of the snapshot."""
    log_dir = tmp_path / 'ml45'
    result = _invoke('train', '--env', 'ML45', '--algo', 'ProMP', '--max-env-steps', 450,
                     '--meta-batch-size', 45, '--episodes-per-task', 1,
                     '--max-episode-length', 5, '--n-test-tasks', 5, '--hidden-sizes', 8,
                     '--log-dir', log_dir)
    assert result.exit_code == 0, result.output
    rows = _read_csv(log_dir / 'progress.csv')
    assert len(rows) == 1 and int(rows[0]['TotalEnvSteps']) == 45 * 1 * 5 * 2
    held_out = sorted(ML45_V3['test'])
    assert len(held_out) == 5
    for name in held_out:
        assert 0. <= float(rows[0][f'MetaTest/{name}/SuccessRate']) <= 1., name
    out = tmp_path / 'ml45.csv'
    result = _invoke('meta_test', log_dir, '--protocol', 'metaworld-algorithms',
                     '--goals-per-class', 1, '--n-exploration-eps', 1, '--csv', out)
    assert result.exit_code == 0, result.output
    assert sorted(r['task'] for r in _read_csv(out)[:-1]) == held_out


@pytest.mark.metaworld
def test_meta_test_keeps_the_env_copy_budget(ml1_run, tmp_path, monkeypatch):
    """meta_test's sampler builds at most the experiment's env copies per worker (40 on
    Meta-World), however many goals and episodes a round has, and its numbers do not
    depend on it."""
    from garage_promp.envs.metaworld import MetaWorldEnv  # pylint: disable=import-outside-toplevel
    built = []
    original = MetaWorldEnv.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(MetaWorldEnv, '__init__', counting)
    out = tmp_path / 'budget.csv'
    # 25 goals x 2 episodes a round: 50 episodes, more than the budget of 40.
    result = _invoke('meta_test', ml1_run, '--goals-per-class', 25, '--n-exploration-eps', 2,
                     '--n-test-episodes', 1, '--max-episode-length', 5, '--csv', out)
    assert result.exit_code == 0, result.output
    assert 0 < len(built) <= METAWORLD['ML1']['max_envs_per_worker'] + 2  # (+ the setup's own)
    monkeypatch.setattr(MetaWorldEnv, '__init__', original)
    import garage_promp  # pylint: disable=import-outside-toplevel
    make = garage_promp.make_sampler

    def unlimited(*args, **kwargs):
        kwargs['max_envs_per_worker'] = None
        return make(*args, **kwargs)

    monkeypatch.setattr(garage_promp, 'make_sampler', unlimited)
    every = tmp_path / 'every.csv'
    assert _invoke('meta_test', ml1_run, '--goals-per-class', 25, '--n-exploration-eps', 2,
                   '--n-test-episodes', 1, '--max-episode-length', 5,
                   '--csv', every).exit_code == 0
    assert _read_csv(out) == _read_csv(every)
