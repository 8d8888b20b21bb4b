"""launchers/train.py runs 1 tiny epoch for every algorithm and every env."""
import csv
import json
import math
import os
import pathlib
import pickle
import sys

from garage_promp.experiment.paper_config import ALGOS, ENVS, algo_kwargs

from click.testing import CliRunner
import pytest

from tests.helpers import load_script, with_options

LAUNCHER = pathlib.Path(__file__).parents[2] / 'launchers' / 'train.py'


def _load_launcher():
    return load_script(LAUNCHER, 'train_launcher')


def _run(tmp_path, *args):
    launcher = _load_launcher()
    log_dir = str(tmp_path / 'log')
    result = CliRunner().invoke(launcher.main, [
        '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--log-dir', log_dir, *args
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open(os.path.join(log_dir, 'progress.csv')) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1
    assert math.isfinite(float(rows[0]['MetaTest/Average/AverageReturn']))
    return rows[0]


@pytest.mark.parametrize('algo', sorted(ALGOS))
def test_every_algorithm_runs_one_epoch(tmp_path, algo):
    row = _run(tmp_path, '--algo', algo, '--env', 'PointEnvCorner')
    assert math.isfinite(float(row['GaussianMLPPolicy/LossAfter']))


@pytest.mark.mujoco
@pytest.mark.parametrize('env', sorted(ENVS))
def test_every_environment_runs_one_epoch(tmp_path, env):
    row = _run(tmp_path, '--algo', 'ProMP', '--env', env)
    assert math.isfinite(float(row['Step_1-AverageReturn']))


def test_overrides_reach_the_algorithm(tmp_path):
    row = _run(tmp_path, '--algo', 'ProMP', '--env', 'PointEnvCorner', '--set', 'clip_eps=0.1')
    assert float(row['GaussianMLPPolicy/ClipEps']) == pytest.approx(0.1)


def test_log_std_per_dimension_reaches_the_snapshot_and_other_kinds_are_refused(tmp_path):
    _run(tmp_path, '--algo', 'MAML-TRPO', '--env', 'PointEnvCorner', '--log-std',
         'per-dimension')
    with open(tmp_path / 'log' / 'params.pkl', 'rb') as f:
        policy = pickle.load(f)['algo'].policy
    assert dict(policy.named_parameters())['_module._init_std'].shape == (2, )
    result = CliRunner().invoke(_load_launcher().main, ['--log-std', 'per-action'])
    assert result.exit_code == 2 and "'per-action' is not one of 'shared', 'per-dimension'" \
        in result.output


def test_paper_table_matches_the_reference():
    promp = algo_kwargs('ProMP', 'HalfCheetahFwdBack')
    assert (promp['clip_eps'], promp['init_inner_kl_penalty'], promp['num_promp_steps'],
            promp['inner_lr'], promp['meta_batch_size'], promp['episodes_per_task']) == (
                0.3, 5e-4, 5, 0.1, 40, 20)
    rand_params = algo_kwargs('ProMP', 'HopperRandParams')
    assert rand_params['adaptive_inner_kl_penalty'] and rand_params['inner_lr'] == 0.05
    assert algo_kwargs('E-MAML-TRPO', 'AntRandGoal')['num_inner_grad_steps'] == 2
    with pytest.raises(ValueError, match='unknown algorithm'):
        algo_kwargs('PPO', 'AntRandGoal')


@pytest.mark.mujoco
def test_gradient_variance_launcher_logs_rstd_for_both_arms(tmp_path):
    module = load_script(LAUNCHER.parent / 'gradient_variance.py', 'gv_launcher')
    log_dir = str(tmp_path / 'gv')
    result = CliRunner().invoke(module.main, [
        '--env', 'HalfCheetahFwdBack', '--epochs', '2', '--n-rounds', '2',
        '--meta-batch-size', '2', '--episodes-per-task', '2', '--log-dir', log_dir
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open(os.path.join(log_dir, 'progress.csv')) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for arm in ('LVC', 'DiCE'):
        assert float(rows[-1][f'{arm}/MetaGradientRStd']) > 0
    for row in rows:
        assert float(row['RStdRatio']) == pytest.approx(
            float(row['DiCE/MetaGradientRStd']) / float(row['LVC/MetaGradientRStd']))
    # (n_rounds + 1) x M x R x H x (K + 1) steps per arm and epoch, 2 arms.
    assert f'{2 * 3 * 2 * 2 * 100 * 2:,} env steps per epoch (both arms)' in result.output
    assert 'DiCE/LVC relative std of the meta-gradient: mean ratio' in result.output
    assert [int(r['TotalEnvSteps']) for r in rows] == [2 * 3 * 2 * 2 * 100 * 2 * (i + 1)
                                                      for i in range(2)]


def test_gradient_variance_refuses_a_batch_over_the_limit_before_its_log_dir(tmp_path):
    """Every sampling round is kept: (K + 1) x M x R x H env steps at once. Just under
    the limit without the rounds and over it with them is refused naming the option,
    before the log directory exists."""
    module = load_script(LAUNCHER.parent / 'gradient_variance.py', 'gv_launcher_limit')
    log_dir = tmp_path / 'gv'
    result = CliRunner().invoke(module.main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--n-rounds', '2',
        '--meta-batch-size', '900000', '--episodes-per-task', '1', '--log-dir', str(log_dir)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--meta-batch-size'" in result.output
    assert 'sampling rounds (num_inner_grad_steps + 1) = 2 x' in result.output
    assert not log_dir.exists()


def test_gradient_variance_says_the_ratio_is_undefined_where_lvc_does_not_vary(tmp_path):
    # One episode per task on PointEnvCorner: LVC's meta-gradient is the same every round
    # (relative std 0), so DiCE's over LVC's is undefined: NaN, said so, not a crash.
    module = load_script(LAUNCHER.parent / 'gradient_variance.py', 'gv_launcher')
    log_dir = str(tmp_path / 'gv')
    result = CliRunner().invoke(module.main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--n-rounds', '2',
        '--meta-batch-size', '2', '--episodes-per-task', '1', '--log-dir', log_dir])
    assert result.exit_code == 0, result.output
    with open(os.path.join(log_dir, 'progress.csv')) as f:
        rows = list(csv.DictReader(f))
    assert float(rows[0]['LVC/MetaGradientRStd']) == 0
    assert math.isnan(float(rows[0]['RStdRatio']))
    assert 'relative std of the meta-gradient: undefined' in result.output


def test_default_log_dir_is_short_and_names_the_run(tmp_path, monkeypatch):
    """Without --log-dir, garage's data/local/experiment/<name> is used; the
    name must stay well below the 255-byte file-name limit, with any options."""
    monkeypatch.chdir(tmp_path)
    launcher = _load_launcher()
    result = CliRunner().invoke(launcher.main, [
        '--preset', 'demo', '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--envs-per-task', '1', '--seed', '3', '--set', 'num_promp_steps=2'
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    runs = os.listdir(tmp_path / 'data' / 'local' / 'experiment')
    assert runs == ['ProMP_PointEnvCorner_seed=3']
    with open(tmp_path / 'data' / 'local' / 'experiment' / runs[0] / 'variant.json') as f:
        variant = f.read()
    assert '"envs_per_task": 1' in variant and 'num_promp_steps' in variant


def test_console_shows_one_line_per_epoch_not_the_table(tmp_path):
    launcher = _load_launcher()
    result = CliRunner().invoke(launcher.main, [
        '--algo', 'LVC-VPG', '--env', 'PointEnvCorner', '--epochs', '2',
        '--meta-batch-size', '2', '--episodes-per-task', '2', '--max-episode-length', '4',
        '--n-test-tasks', '1', '--hidden-sizes', '4', '--log-dir', str(tmp_path / 'log')
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert 'epoch 1/2 | 32 steps | pre ' in result.output
    assert 'epoch 2/2 | 64 steps | pre ' in result.output
    assert 'GaussianMLPPolicy/LossBefore' not in result.output


def test_paper_env_runs_under_the_multiprocessing_sampler(tmp_path):
    """The task updates of a paper env with launcher arguments (horizon,
    reward_type) must pickle: MultiprocessingSampler ships them to workers."""
    row = _run(tmp_path, '--algo', 'LVC-VPG', '--env', 'PointEnvCorner', '--sampler',
               'multiprocessing', '--n-workers', '2', '--set', 'reward_type="dense"')
    assert float(row['Average/NumEpisodes']) == 4


def test_paper_env_task_updates_pickle_with_their_arguments():
    from garage_promp.envs import PointEnvCorner
    from garage_promp.experiment.env_setup import make_env_setup
    setup = make_env_setup('PointEnvCorner', seed=1, max_episode_length=7,
                           env_kwargs={'reward_type': 'dense'})
    update = pickle.loads(pickle.dumps(setup.train_tasks.sample(1)[0]))
    env = update()
    assert isinstance(env.unwrapped, PointEnvCorner)
    assert env.spec.max_episode_length == 7
    assert setup.env.spec.max_episode_length == 7
    assert update(env) is env  # garage's re-tasking path still reuses the env


def _refused(tmp_path, *args):
    """train.py's exit code and output for a tiny run, and whether its log dir exists
    (a tiny batch, except for a size that ``args`` give through ``--set``)."""
    log_dir = tmp_path / 'log'
    sizes = [a for key, value in (('meta_batch_size', '2'), ('episodes_per_task', '2'))
             if not any(arg.startswith(key + '=') for arg in args)
             for a in ('--' + key.replace('_', '-'), value)]
    result = CliRunner().invoke(_load_launcher().main, with_options([
        '--epochs', '1', *sizes, '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--log-dir', str(log_dir)], list(args)))
    assert 'Traceback' not in result.output
    return result.exit_code, result.output, log_dir.exists()


@pytest.mark.parametrize('override', ['meta_batch_size=30000000', 'episodes_per_task=30000000',
                                      'num_inner_grad_steps=100000000'])
def test_a_batch_too_large_for_memory_given_by_set_is_refused_before_the_run_dir(
        tmp_path, override):
    code, output, made = _refused(tmp_path, '--set', override)
    assert code == 2 and '--set' in output and 'fit in memory' in output, output
    assert override.split('=')[0] in output and not made


@pytest.mark.parametrize('option', ['--meta-batch-size', '--episodes-per-task'])
def test_a_batch_too_large_for_memory_names_the_option_that_makes_it(tmp_path, option):
    """Not ``--task`` (a piece of ``--episodes-per-task``), nor the other, small factor."""
    code, output, made = _refused(tmp_path, option, '1000000000')
    assert code == 2 and f"Invalid value for '{option}'" in output, output
    assert 'fit in memory' in output and not made


def test_a_task_batch_of_one_step_with_normalize_adv_is_refused_before_the_run_dir(tmp_path):
    """One episode of one step: nothing to standardise the advantages over. It failed at
    the first sampling with a traceback, after the run's directory was made."""
    code, output, made = _refused(tmp_path, '--episodes-per-task', '1',
                                  '--max-episode-length', '1')
    assert code in (1, 2) and 'normalize_adv=True' in output and not made, output
    assert 'episodes_per_task=1 x max_episode_length=1 gives at most 1' in output
    code, output, made = _refused(tmp_path, '--episodes-per-task', '1', '--max-episode-length',
                                  '1', '--set', 'normalize_adv=false')
    assert code == 0 and made, output


def test_a_batch_too_large_for_memory_names_a_huge_episode_length(tmp_path):
    """The largest factor is blamed, the horizon included where the user gave it: here
    ``--max-episode-length``, not the meta-batch size listed beside it."""
    code, output, made = _refused(tmp_path, '--max-episode-length', '1000000',
                                  '--meta-batch-size', '200')
    assert code == 2 and "Invalid value for '--max-episode-length'" in output, output
    assert 'fit in memory' in output and not made


def test_set_and_an_option_of_its_own_give_one_value(tmp_path):
    """``--set meta_batch_size=3`` is recorded as the run's meta-batch size; against a
    different ``--meta-batch-size`` it is refused, as is a key given twice."""
    result = CliRunner().invoke(_load_launcher().main, [
        '--epochs', '1', '--episodes-per-task', '2', '--max-episode-length', '4',
        '--n-test-tasks', '1', '--hidden-sizes', '4', '--log-dir', str(tmp_path / 'log'),
        '--set', 'meta_batch_size=3'])
    assert result.exit_code == 0, result.output
    variant = json.loads((tmp_path / 'log' / 'variant.json').read_text())
    assert variant['meta_batch_size'] == 3 and variant['overrides'] == {'meta_batch_size': 3}
    code, output, made = _refused(tmp_path / 'b', '--meta-batch-size', '2', '--set',
                                  'meta_batch_size=3')
    assert code == 2 and 'contradicts --meta-batch-size 2' in output and not made, output
    code, output, made = _refused(tmp_path / 'c', '--set', 'inner_lr=0.1', '--set',
                                  'inner_lr=0.2')
    assert code == 2 and 'inner_lr given twice, 0.1 and 0.2' in output and not made, output
    # The device has its own option, recorded as its own entry: --set cannot give another.
    code, output, made = _refused(tmp_path / 'd', '--device', 'cuda', '--set', 'device=cpu')
    assert code == 2 and '--set device=cpu: give the device with --device' in output, output
    assert not made


def test_a_diverging_step_size_ends_the_run_with_one_error_line_naming_it(tmp_path):
    code, output, made = _refused(tmp_path, '--epochs', '8', '--set', 'learning_rate=1e37')
    assert code == 1 and 'Error: the outer step' in output, output
    assert 'learning_rate=1e+37' in output and made  # the epochs done keep their snapshot
    # One that is inf in float32 (Adam's step on the parameters) is refused before any work,
    # and so is one that is zero there.
    # Finite parameters so large that the policy's likelihoods overflow (learning rate 1e30:
    # the first step makes them about 1e30) are undone like non-finite ones and counted;
    # the run ends naming the step sizes, not with torch's error about a NaN scale.
    for algo in ('ProMP', 'LVC-VPG'):
        code, output, made = _refused(tmp_path / f'huge{algo}', '--algo', algo, '--epochs', '8',
                                      '--set', 'learning_rate=1e30')
        assert code == 1 and "Error: the outer step (the policy's likelihood" in output, output
        assert 'in 5 consecutive epochs' in output and 'learning_rate=1e+30' in output
    for value in ('1e39', '1e-60'):
        code, output, made = _refused(tmp_path / f'lr{value}', '--set', f'learning_rate={value}')
        assert code == 2 and 'learning_rate must be a finite number > 0.0 in float32' in output, (
            output)
        assert not made
    # An inner step size that is inf as stored (float32) is refused before any work; one that
    # diverges inside an inner step is named there (tests/algos/test_algos.py).
    code, output, made = _refused(tmp_path / 'b', '--set', 'inner_lr=1e308')
    assert code == 2 and 'must be finite and > 0 in torch.float32' in output and not made, output


def test_a_log_dir_that_holds_a_run_is_left_as_it_is(tmp_path):
    """The run goes beside it (``log_1``); the old run's lock file still names its own
    writer's pid, not this process's (tools read it to tell a run writing there)."""
    old = tmp_path / 'log'
    old.mkdir()
    (old / 'progress.csv').write_text('x\n')
    (old / '.lock').write_text('12345\n')
    code, output, _ = _refused(tmp_path)
    assert code == 0 and 'goes to a new directory' in output, output
    assert (old / '.lock').read_text() == '12345\n'
    assert (old / 'progress.csv').read_text() == 'x\n'
    assert (tmp_path / 'log_1' / 'progress.csv').is_file()


def test_a_foreign_log_dir_gets_no_lock_file(tmp_path):
    # A directory that is not a run's (no .lock: no run writes there) is left exactly as it
    # was; the run goes beside it.
    foreign = tmp_path / 'log'
    foreign.mkdir()
    (foreign / 'notes.txt').write_text('mine')
    code, output, _ = _refused(tmp_path)
    assert code == 0 and 'goes to a new directory' in output, output
    assert sorted(p.name for p in foreign.iterdir()) == ['notes.txt']
    assert (tmp_path / 'log_1' / 'progress.csv').is_file()


def test_an_env_argument_the_env_does_not_take_is_a_usage_error(tmp_path):
    code, output, made = _refused(tmp_path, '--env', 'HalfCheetahFwdBack', '--set',
                                  'reward_type=sparse')
    assert code == 2 and "takes no argument 'reward_type'" in output and not made, output


def test_a_worker_timeout_under_a_second_is_refused(tmp_path):
    code, output, made = _refused(tmp_path, '--worker-timeout', '0.5')
    assert code == 2 and '--worker-timeout' in output and not made, output


def test_a_sampler_worker_error_ends_the_run_with_one_error_line(tmp_path, monkeypatch):
    """A worker that stops making progress ends the run: its message, exit 1, no traceback."""
    launcher = _load_launcher()
    from garage_promp.sampler.backends import SamplerWorkerError

    def stuck(*args, **kwargs):
        raise SamplerWorkerError('sampler worker 0 made no progress for 600 s (...)')

    monkeypatch.setattr(launcher, 'meta_train', stuck)
    result = CliRunner().invoke(launcher.main, [
        '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--log-dir', str(tmp_path / 'log')])
    assert result.exit_code == 1, result.output
    assert 'Error: sampler worker 0 made no progress' in result.output
    assert isinstance(result.exception, SystemExit)


def test_a_task_batch_whose_episodes_all_end_at_once_ends_the_run_with_one_error_line(
        tmp_path, monkeypatch):
    """Episodes that all end at their first step leave ``normalize_adv`` nothing to
    standardise (no option can refuse that up front): one line naming the task, exit 1."""
    from garage_promp.algos import _batch
    from garage_promp.objectives import TooFewStepsError

    def one_step(*args):
        raise TooFewStepsError('normalize_adv needs at least 2 valid steps per task batch, '
                               'got 1')
    monkeypatch.setattr(_batch, 'normalize_advantages', one_step)
    result = CliRunner().invoke(_load_launcher().main, [
        '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--log-dir', str(tmp_path / 'log')])
    assert result.exit_code == 1 and 'Traceback' not in result.output, result.output
    assert ('Error: task 0 of the meta-batch: normalize_adv needs at least 2 valid steps per '
            'task batch, got 1, its episodes having ended at their first step; set '
            'normalize_adv=False') in result.output, result.output


def test_a_snapshot_that_cannot_be_written_ends_the_run_with_one_error_line(
        tmp_path, monkeypatch):
    """A full disk while saving: one line naming the snapshot, exit 1; the last whole
    snapshot (epoch 0) stays and the run resumes from it."""
    import errno

    import cloudpickle
    launcher = _load_launcher()
    real, calls = cloudpickle.dump, []

    def full_disk(obj, file, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:  # epoch 0's snapshot is written; epoch 1's finds the disk full
            raise OSError(errno.ENOSPC, 'No space left on device')
        return real(obj, file, *args, **kwargs)

    monkeypatch.setattr(cloudpickle, 'dump', full_disk)
    log_dir = tmp_path / 'log'
    args = ['--meta-batch-size', '2', '--episodes-per-task', '2', '--max-episode-length', '4',
            '--n-test-tasks', '1', '--hidden-sizes', '4']
    result = CliRunner().invoke(launcher.main, ['--epochs', '2', *args, '--log-dir',
                                                str(log_dir)])
    assert result.exit_code == 1, result.output
    assert (f'Error: {log_dir / "params.pkl"}: could not write the snapshot' in result.output
            and '(No space left on device); the previous one is kept' in result.output)
    assert 'Traceback' not in result.output
    assert isinstance(result.exception, SystemExit)
    monkeypatch.undo()
    import dowel
    dowel.logger.remove_all()  # what the process's exit does: epoch 1's row reaches the file
    assert sorted(p.name for p in log_dir.glob('*.pkl*')) == ['params.pkl']
    result = CliRunner().invoke(launcher.main, ['--resume', str(log_dir), '--epochs', '2'])
    assert result.exit_code == 0, result.output
    with open(log_dir / 'progress.csv') as f:
        assert [row['Average/Iteration'] for row in csv.DictReader(f)] == ['0', '1']


def test_epochs_and_a_budget_both_given_say_the_first_reached_ends_the_run(tmp_path):
    result = CliRunner().invoke(_load_launcher().main, [
        '--epochs', '1', '--max-env-steps', '100000', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--log-dir', str(tmp_path / 'log')])
    assert result.exit_code == 0, result.output
    assert ('--epochs 1 and --max-env-steps 100,000: the run stops at whichever it reaches '
            'first') in result.output
    with open(tmp_path / 'log' / 'progress.csv') as f:
        assert len(list(csv.DictReader(f))) == 1  # the epochs, here


def test_resume_refuses_other_options_by_their_flags(tmp_path):
    """--resume takes its options from variant.json: any other option is refused by its flag."""
    launcher = load_script(LAUNCHER, 'train_launcher_resume_flags')
    result = CliRunner().invoke(launcher.main, ['--resume', str(tmp_path), '--env',
                                                'PointEnvCorner', '--seed', '3'])
    assert result.exit_code == 2
    assert '(got --env, --seed)' in result.output, result.output


def test_the_ctrl_c_line_says_what_the_run_left(tmp_path, monkeypatch):
    """Interrupted, a run names its newest snapshot and the --resume that continues it;
    with none written (``--snapshot-mode none``, or stopped in its first epoch) it says
    there is nothing to continue from; before any run began, nothing."""
    launcher = _load_launcher()
    monkeypatch.setattr(launcher, '_RUN_DIR', [])
    assert launcher._interrupted_note() == ''
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'progress.csv').write_text('TotalEnvSteps\n')
    launcher._RUN_DIR.append(str(run))
    note = launcher._interrupted_note()
    assert note.startswith(f'no snapshot in {run} (--snapshot-mode none') and 'nothing' in note
    (run / 'itr_3.pkl').write_bytes(b'')
    assert launcher._interrupted_note() == (f'the newest snapshot in {run} stays; '
                                            f'--resume {run} continues from it')


def _tiny_into(log_dir):
    """train.py's one-epoch point-env run into ``log_dir`` (click's result)."""
    return CliRunner().invoke(_load_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--log-dir', str(log_dir)])


def test_a_log_dir_with_files_whose_sibling_cannot_be_named_or_a_linked_lock_is_refused(
        tmp_path):
    """A --log-dir that holds files sends the run beside it (<name>_1): a name too long
    for that is refused naming --log-dir (not garage's OSError after the notice), and a
    .lock there that is a symbolic link is refused, its target untouched."""
    long_dir = tmp_path / ('f' * 254)
    long_dir.mkdir()
    (long_dir / 'keep').write_text('x')
    result = _tiny_into(long_dir)
    assert result.exit_code == 2 and 'Invalid value for --log-dir' in result.output, (
        result.output)
    assert 'would need a name over' in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [long_dir.name]
    linked = tmp_path / 'linked'
    linked.mkdir()
    (linked / 'keep').write_text('x')
    (linked / '.lock').symlink_to('keep')
    result = _tiny_into(linked)
    assert result.exit_code == 1 and 'is not a file (a symbolic link' in result.output, (
        result.output)
    assert (linked / 'keep').read_text() == 'x'


@pytest.mark.parametrize('spelling', ['{}/', '{}/.', '{}//', 'inner/..'])
def test_a_log_dir_spelled_with_a_slash_or_dots_goes_beside_the_run_not_into_it(
        tmp_path, spelling, monkeypatch):
    """garage appends _1 to the path as written: 'run/' would put the new run in run/_1,
    inside the other run's directory, and '.' a hidden '._1'. The path is normalised, so
    the run goes to run_1 (the directory the notice names) and the old run is untouched."""
    run = tmp_path / 'run'
    assert _tiny_into(run).exit_code == 0
    (run / 'inner').mkdir()
    before = sorted(p.name for p in run.iterdir())
    monkeypatch.chdir(run if spelling.startswith('inner') else tmp_path)
    given = spelling.format('run')
    result = _tiny_into(given)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in run.iterdir()) == before
    beside = tmp_path / 'run_1'
    assert (beside / 'progress.csv').is_file()
    assert f'{beside if spelling.startswith("inner") else "run_1"} (garage' in \
        ' '.join(result.output.split()), result.output


def test_gradient_variance_says_where_it_goes_beside_a_log_dir_with_files(tmp_path):
    """As train.py: an existing --log-dir gets the run beside it, said up front (an empty
    one too: garage does not write into an existing directory)."""
    module = load_script(LAUNCHER.parent / 'gradient_variance.py', 'gv_launcher_beside')
    log_dir = tmp_path / 'gv'
    log_dir.mkdir()
    (log_dir / 'keep').write_text('x')
    result = CliRunner().invoke(module.main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--n-rounds', '2',
        '--meta-batch-size', '2', '--episodes-per-task', '1', '--log-dir', str(log_dir)])
    assert result.exit_code == 0, result.output
    assert (f'{log_dir} already exists: this run goes to a new directory beside it, '
            f'{log_dir}_1') in result.output
    assert (tmp_path / 'gv_1' / 'progress.csv').exists()
    assert sorted(p.name for p in log_dir.iterdir()) == ['keep']


def test_an_existing_empty_log_dir_gets_the_run_beside_it_said_up_front(tmp_path):
    """garage's wrap_experiment makes <name>_1 for any existing directory: said, with the
    suffix it will take (the first free one)."""
    log_dir = tmp_path / 'log'
    log_dir.mkdir()
    (tmp_path / 'log_1').mkdir()
    result = _tiny_into(log_dir)
    assert result.exit_code == 0, result.output
    assert f'{log_dir} already exists: this run goes to a new directory beside it, {log_dir}_2' \
        in result.output
    assert (tmp_path / 'log_2' / 'progress.csv').exists() and not any(log_dir.iterdir())


def _train_subprocess(log_dir, stdout, stderr):
    import subprocess
    import sys
    return subprocess.run(
        [sys.executable, str(LAUNCHER), '--algo', 'LVC-VPG', '--env', 'PointEnvCorner',
         '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '1',
         '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
         '--log-dir', log_dir], stdout=stdout, stderr=stderr, timeout=300, check=False)


def test_a_run_with_its_stdout_closed_trains_and_keeps_its_logs_apart(tmp_path):
    """`train.py >&-`: the console's isatty/flush on None ended the run in epoch 0 with a
    traceback, after the run dir was made; the closed descriptor is now /dev/null, so no
    log file takes it (and console output cannot land in a log)."""
    import subprocess
    import sys
    with open(tmp_path / 'err', 'w') as err:  # (closed before the interpreter starts, as >&-)
        result = subprocess.run(
            [sys.executable, str(LAUNCHER), '--algo', 'LVC-VPG', '--env', 'PointEnvCorner',
             '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '1',
             '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
             '--log-dir', str(tmp_path / 'log')],
            stderr=err, preexec_fn=lambda: os.close(1), timeout=300, check=False)
    assert result.returncode == 0, (tmp_path / 'err').read_text()
    assert (tmp_path / 'log' / 'params.pkl').is_file()
    rows = list(csv.DictReader(open(tmp_path / 'log' / 'progress.csv', encoding='utf-8')))
    assert len(rows) == 1 and 'epoch 1/1' not in (tmp_path / 'log' / 'progress.csv').read_text()


def test_a_log_dir_that_is_not_utf8_is_refused_before_it_is_made(tmp_path):
    """garage's logs write the path into debug.log as UTF-8: such a name ended the run
    with a UnicodeEncodeError after the directory was made."""
    import subprocess
    log_dir = os.fsencode(tmp_path) + b'/bad\xff'
    result = _train_subprocess(log_dir, subprocess.PIPE, subprocess.PIPE)
    assert result.returncode == 2
    assert b'--log-dir' in result.stderr and b'is not UTF-8 text' in result.stderr
    assert b'Traceback' not in result.stderr
    assert not os.path.lexists(log_dir)


def test_a_run_whose_console_reader_leaves_trains_on(tmp_path):
    """`train.py | head -1`: the next console line raised BrokenPipeError and ended the run
    in its first epoch, with no snapshot; the console is dropped once its reader has left."""
    import subprocess
    import sys
    process = subprocess.Popen(
        [sys.executable, str(LAUNCHER), '--algo', 'LVC-VPG', '--env', 'PointEnvCorner',
         '--epochs', '2', '--meta-batch-size', '2', '--episodes-per-task', '1',
         '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
         '--log-dir', str(tmp_path / 'log')], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline()  # the first line, then the reader leaves
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()
    assert b'BrokenPipeError' not in err
    assert len(list(csv.DictReader(open(tmp_path / 'log' / 'progress.csv',
                                        encoding='utf-8')))) == 2


def test_a_full_disk_ends_the_run_in_one_line_and_it_resumes_once_there_is_room(
        tmp_path, monkeypatch):
    """A full disk met by the run's log (dowel's flush, in garage's trainer) ended the run
    with a traceback and four more from the loggers' finalizers, and left a progress.csv
    without its header, which --resume refused: one Error: line naming the directory,
    what is kept and how to go on; once there is room, --resume continues the run."""
    import errno  # pylint: disable=import-outside-toplevel

    from dowel import simple_outputs  # pylint: disable=import-outside-toplevel
    log_dir = tmp_path / 'run'
    original = simple_outputs.FileOutput.dump
    dumps = []

    def full_after_the_first_epoch(self, step=None):
        dumps.append(type(self).__name__)
        if type(self).__name__ == 'CsvOutput':  # the log's first write: nothing of it lands
            self._log_file.truncate(0)  # pylint: disable=protected-access
            raise OSError(errno.ENOSPC, 'No space left on device')
        original(self, step)

    monkeypatch.setattr(simple_outputs.FileOutput, 'dump', full_after_the_first_epoch)
    # (The run's quiet hook for the full disk's finalizers is this process's: undone after.)
    monkeypatch.setattr(sys, 'unraisablehook', sys.unraisablehook)
    result = CliRunner().invoke(_load_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '3', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--snapshot-mode', 'all', '--log-dir', str(log_dir)])
    assert result.exit_code == 1, result.output
    assert 'Traceback' not in result.output and 'Usage:' not in result.output
    assert (f"Error: the run's logs in {log_dir} could not be written (No space left on "
            f'device); the snapshots saved so far are kept: make room, then --resume '
            f'{log_dir} continues from the newest') in result.output
    assert (log_dir / 'itr_0.pkl').exists() and (log_dir / 'progress.csv').stat().st_size == 0
    monkeypatch.setattr(simple_outputs.FileOutput, 'dump', original)  # room again
    result = CliRunner().invoke(_load_launcher().main, ['--resume', str(log_dir)])
    assert result.exit_code == 0, result.output
    with open(log_dir / 'progress.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    assert [r['Average/Iteration'] for r in rows] == ['1', '2']  # epoch 0's row stays lost


def test_a_workers_error_is_said_in_short_its_traceback_kept_in_the_runs_debug_log(tmp_path):
    """An inner step size that makes the policy's actions infinite ends the run: what the
    worker raised and where, and the file that holds its traceback (the run's debug.log),
    not the traceback on the console."""
    log_dir = tmp_path / 'run'
    result = CliRunner().invoke(_load_launcher().main, [
        '--env', 'PointEnvCorner', '--epochs', '1', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--set', 'reward_type="dense"', '--set', 'inner_lr=1e5',
        '--log-dir', str(log_dir)])
    assert result.exit_code == 1, result.output
    assert 'Traceback' not in result.output and 'worker traceback' not in result.output
    assert 'raised FloatingPointError: the policy gave a non-finite action' in result.output
    assert f"(the worker's traceback is in {log_dir / 'debug.log'})" in result.output
    logged = (log_dir / 'debug.log').read_text()
    assert 'worker traceback:' in logged and 'Traceback (most recent call last)' in logged


def test_the_baseline_solver_reaches_the_snapshot_and_is_recorded_where_not_the_default(
        tmp_path):
    _run(tmp_path / 'fast', '--algo', 'DiCE-VPG', '--env', 'PointEnvCorner',
         '--baseline-solver', 'cholesky')
    _run(tmp_path / 'usual', '--algo', 'DiCE-VPG', '--env', 'PointEnvCorner')
    for run, solver in (('fast', 'cholesky'), ('usual', 'lstsq')):
        with open(tmp_path / run / 'log' / 'params.pkl', 'rb') as f:
            processing = pickle.load(f)['algo']._processing
        assert processing.baseline.solver == solver == processing.dice_baseline.solver
    variants = {run: json.loads((tmp_path / run / 'log' / 'variant.json').read_text())
                for run in ('fast', 'usual')}
    assert variants['fast']['baseline_solver'] == 'cholesky'
    assert 'baseline_solver' not in variants['usual']  # (as runs made before the option)
    result = CliRunner().invoke(_load_launcher().main, ['--baseline-solver', 'svd'])
    assert result.exit_code == 2 and "'svd' is not one of 'lstsq', 'cholesky'" in result.output
