"""launchers/meta_test.py checks its options before any work and writes only where told.

Every count is refused at 0 and below with a click error naming the option,
before the snapshot is loaded; errors that are not about the command line
carry no ``Usage:`` header; a run writes its CSV and nothing else (in
particular no ``./data/local/experiment`` in the working directory).
"""
import csv
import errno
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

from click.testing import CliRunner
import cloudpickle
import pytest

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).parents[2]
LAUNCHERS = ROOT / 'launchers'

#: Options that count something: 0 and negative values make no sense.
COUNT_OPTIONS = ('--n-test-tasks', '--n-exploration-eps', '--n-test-episodes',
                 '--max-episode-length', '--n-workers')
#: Seeds: 0 is a seed, negative values are not.
SEED_OPTIONS = ('--seed', '--benchmark-seed')


def _load(name):
    return load_script(LAUNCHERS / f'{name}.py', f'{name}_launcher')


def _files(directory):
    """Every file under ``directory``: relative path -> (size, mtime)."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            stat = os.stat(path)
            out[os.path.relpath(path, directory)] = (stat.st_size, stat.st_mtime_ns)
    return out


@pytest.fixture(scope='module')
def snapshot_dir(tmp_path_factory):
    """One tiny ProMP epoch on PointEnvCorner (a few seconds); returns its log dir."""
    log_dir = tmp_path_factory.mktemp('meta_test_validation') / 'run'
    result = CliRunner().invoke(_load('train').main, [
        '--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--env', 'PointEnvCorner', '--log-dir', str(log_dir)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return log_dir


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """An empty working directory."""
    path = tmp_path / 'cwd'
    path.mkdir()
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def no_load(monkeypatch):
    """meta_test.py whose snapshot loading fails the test: refusals come before it."""
    launcher = _load('meta_test')

    def _load_snapshot(*args):
        raise AssertionError(f'the snapshot was loaded: {args}')

    monkeypatch.setattr(launcher, '_load_snapshot', _load_snapshot)
    return launcher


def _invoke(launcher, *args):
    return CliRunner().invoke(launcher.main, [str(a) for a in args])


def _assert_refused(result, option):
    """A click usage error (exit 2) naming ``option``, not a traceback."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert 'Traceback' not in result.output
    assert option in result.output, result.output


@pytest.mark.parametrize('value', [0, -1])
@pytest.mark.parametrize('option', COUNT_OPTIONS)
def test_counts_below_one_are_refused_before_the_snapshot_is_loaded(
        snapshot_dir, cwd, no_load, option, value):
    before = _files(snapshot_dir)
    result = _invoke(no_load, snapshot_dir, option, value)
    _assert_refused(result, option)
    assert re.search(r'\b1<=x\b|x>=1', result.output), result.output
    assert _files(snapshot_dir) == before  # no meta_test.csv, nothing touched
    assert not os.listdir(cwd)  # no ./data/local/experiment


@pytest.mark.parametrize('option', SEED_OPTIONS)
def test_negative_seeds_are_refused_before_the_snapshot_is_loaded(
        snapshot_dir, cwd, no_load, option):
    before = _files(snapshot_dir)
    result = _invoke(no_load, snapshot_dir, option, -1)
    _assert_refused(result, option)
    assert _files(snapshot_dir) == before
    assert not os.listdir(cwd)


@pytest.mark.parametrize('itr', ['-1', 'latest', '1.5', ''])
def test_bad_itr_is_refused_before_the_snapshot_is_loaded(snapshot_dir, cwd, no_load, itr):
    result = _invoke(no_load, snapshot_dir, '--itr', itr)
    _assert_refused(result, '--itr')
    assert not os.listdir(cwd)


@pytest.mark.parametrize('itr', ['7', '0007'])
def test_missing_epoch_names_itr(snapshot_dir, cwd, itr):
    """An epoch number with leading zeros is that epoch (it was looked for as itr_0007)."""
    before = _files(snapshot_dir)
    result = _invoke(_load('meta_test'), snapshot_dir, '--itr', itr)
    _assert_refused(result, '--itr')
    assert 'no snapshot of epoch 7:' in result.output
    assert _files(snapshot_dir) == before
    assert not os.listdir(cwd)


@pytest.mark.parametrize('where', ['missing/table.csv', '', '.'])
def test_unwritable_csv_is_refused_before_the_snapshot_is_loaded(
        snapshot_dir, cwd, no_load, where):
    result = _invoke(no_load, snapshot_dir, '--csv', where)
    _assert_refused(result, '--csv')
    assert not os.listdir(cwd)


def test_env_errors_are_click_errors(snapshot_dir, cwd):
    before = _files(snapshot_dir)
    result = _invoke(_load('meta_test'), snapshot_dir, '--env', 'PointEnvCorner',
                     '--task', 'reach-v3')
    _assert_refused(result, 'Meta-World option')
    assert _files(snapshot_dir) == before
    assert not os.listdir(cwd)


def test_adaptation_on_one_step_with_normalize_adv_is_refused_before_any_sampling(
        snapshot_dir, cwd):
    """One exploration episode of one step: the algorithm's advantages cannot be
    standardised. It failed with a traceback from the inner step, after sampling."""
    before = _files(snapshot_dir)
    result = _invoke(_load('meta_test'), snapshot_dir, '--max-episode-length', 1,
                     '--n-exploration-eps', 1)
    _assert_refused(result, 'n_exploration_eps=1 x max_episode_length=1 gives at most 1')
    assert 'Sampling' not in result.output
    assert _files(snapshot_dir) == before and not os.listdir(cwd)


def _assert_failed_without_usage(result, message):
    """A click error that is not about the command line: exit 1, no Usage header."""
    assert result.exit_code == 1, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert 'Usage:' not in result.output and 'Traceback' not in result.output
    assert message in result.output, result.output


def test_a_directory_without_snapshot_is_an_error_without_usage(tmp_path, cwd):
    empty = tmp_path / 'empty'
    empty.mkdir()
    result = _invoke(_load('meta_test'), empty, '--env', 'PointEnvCorner')
    _assert_failed_without_usage(result, 'no snapshot')
    assert not os.listdir(empty) and not os.listdir(cwd)


def test_a_pickle_that_is_no_training_snapshot_is_an_error_without_usage(tmp_path, cwd):
    log_dir = tmp_path / 'other'
    log_dir.mkdir()
    with open(log_dir / 'params.pkl', 'wb') as f:
        cloudpickle.dump({'answer': 42}, f)
    result = _invoke(_load('meta_test'), log_dir, '--env', 'PointEnvCorner')
    _assert_failed_without_usage(result, 'not a training snapshot')
    assert sorted(os.listdir(log_dir)) == ['params.pkl'] and not os.listdir(cwd)


def test_a_corrupt_snapshot_is_an_error_without_usage(tmp_path, cwd):
    log_dir = tmp_path / 'corrupt'
    log_dir.mkdir()
    (log_dir / 'params.pkl').write_bytes(b'not a pickle')
    import warnings
    with warnings.catch_warnings(record=True) as caught:  # no 'trying ...': nothing is left
        warnings.simplefilter('always')
        result = _invoke(_load('meta_test'), log_dir, '--env', 'PointEnvCorner')
    assert not [w for w in caught if 'trying' in str(w.message)], caught
    _assert_failed_without_usage(result, 'no intact snapshot')
    assert sorted(os.listdir(log_dir)) == ['params.pkl'] and not os.listdir(cwd)


def _run_script(cwd, *args):
    """meta_test.py as its own process in ``cwd`` (garage's defaults use the cwd at import)."""
    result = subprocess.run(
        [sys.executable, str(LAUNCHERS / 'meta_test.py'), *[str(a) for a in args]],
        cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=600, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


def _read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_a_run_writes_only_the_csv_it_is_given(snapshot_dir, cwd, tmp_path):
    before = _files(snapshot_dir)
    out = tmp_path / 'out' / 'table.csv'
    out.parent.mkdir()
    _run_script(cwd, snapshot_dir, '--n-test-tasks', 2, '--n-exploration-eps', 1,
                '--n-test-episodes', 3, '--max-episode-length', 3, '--csv', out)
    assert not os.listdir(cwd)  # no ./data/local/experiment
    assert _files(snapshot_dir) == before
    assert os.listdir(out.parent) == ['table.csv']
    rows = _read_csv(out)
    assert [r['task'] for r in rows] == ['task_0', 'task_1', 'Average']
    assert [int(r['goals']) for r in rows] == [1, 1, 2]
    assert [int(r['episodes']) for r in rows] == [3, 3, 6]  # the counts asked for


def test_a_run_with_defaults_writes_only_meta_test_csv_in_log_dir(snapshot_dir, cwd, tmp_path):
    log_dir = tmp_path / 'copy'
    shutil.copytree(snapshot_dir, log_dir)
    before = _files(log_dir)
    _run_script(cwd, log_dir)
    assert not os.listdir(cwd)
    after = _files(log_dir)
    assert after.pop('meta_test.csv')
    assert after == before
    rows = _read_csv(log_dir / 'meta_test.csv')
    assert len(rows) == 10 + 1  # 10 test tasks by default, plus the average
    assert all(int(r['episodes']) == 2 for r in rows[:-1])  # 2 per task off Meta-World


def _copy_run(snapshot_dir, tmp_path):
    run = tmp_path / 'run'
    shutil.copytree(snapshot_dir, run)
    (run / '.lock').unlink(missing_ok=True)
    return run


@pytest.mark.parametrize('variant', ['{"env": ', '[]', '"PointEnvCorner"'])
def test_a_variant_json_that_is_not_an_object_is_an_error_naming_it(
        snapshot_dir, tmp_path, no_load, variant):
    """A damaged run file is not about the command line: one Error line, status 1, as
    for another run's variant.json (no usage text)."""
    run = _copy_run(snapshot_dir, tmp_path)
    (run / 'variant.json').write_text(variant)
    result = _invoke(no_load, run)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.output.startswith('Error: ') and 'Usage:' not in result.output
    assert 'variant.json' in result.output and 'Traceback' not in result.output


def test_the_default_table_path_is_checked_before_any_work(snapshot_dir, tmp_path, no_load):
    run = _copy_run(snapshot_dir, tmp_path)
    (run / 'meta_test.csv').mkdir()
    result = _invoke(no_load, run)
    _assert_refused(result, '--csv')
    assert 'meta_test.csv' in result.output


@pytest.mark.parametrize('name', ['progress.csv', 'params.pkl', 'variant.json'])
def test_csv_never_overwrites_a_file_that_is_not_a_meta_test_table(
        snapshot_dir, tmp_path, no_load, name):
    run = _copy_run(snapshot_dir, tmp_path)
    before = (run / name).read_bytes()
    result = _invoke(no_load, run, '--csv', run / name)
    _assert_refused(result, '--csv')
    assert 'not a meta-test table' in result.output
    assert (run / name).read_bytes() == before


@pytest.mark.parametrize('target', ['fifo', '/dev/full', '/dev/null'])
def test_csv_that_is_no_regular_file_is_refused_before_any_work(
        snapshot_dir, tmp_path, no_load, target):
    """A named pipe would block the table's write until a reader came (after the whole
    meta-test), a device take or refuse it at the end: refused naming --csv up front."""
    run = _copy_run(snapshot_dir, tmp_path)
    if target == 'fifo':
        target = tmp_path / 'table.csv'
        os.mkfifo(target)
    result = _invoke(no_load, run, '--csv', target)
    _assert_refused(result, '--csv')
    assert 'not a regular file' in result.output


def test_a_dash_is_not_taken_for_a_file_named_dash(snapshot_dir, tmp_path, no_load,
                                                   monkeypatch):
    """``--csv -`` wrote a file named ``-`` in the current directory (the usual meaning is
    standard output): refused up front, naming the way to that file (``./-``)."""
    run = _copy_run(snapshot_dir, tmp_path)
    monkeypatch.chdir(tmp_path)
    result = _invoke(no_load, run, '--csv', '-')
    _assert_refused(result, '--csv')
    assert "'-' is not standard output here" in result.output and './-' in result.output
    assert not (tmp_path / '-').exists()


def test_a_table_that_cannot_be_written_at_the_end_is_one_error_and_the_old_one_stays(
        snapshot_dir, tmp_path, monkeypatch):
    """A full disk at the end: one Error line naming --csv (the table is printed above),
    the previous table whole and no partial file left; a --csv that is a symbolic link has
    the table it names replaced, the link and the table's permissions kept."""
    run = _copy_run(snapshot_dir, tmp_path)
    table = tmp_path / 'tables' / 'meta_test.csv'
    table.parent.mkdir()
    options = (run, '--n-test-tasks', 1, '--n-exploration-eps', 1, '--n-test-episodes', 1)
    module = _load('meta_test')
    assert _invoke(module, *options, '--csv', table).exit_code == 0
    link = run / 'latest.csv'
    link.symlink_to(table)
    args = (*options, '--csv', link)
    table.chmod(0o640)
    before = table.read_bytes()
    listing = sorted(p.name for p in [*run.iterdir(), *table.parent.iterdir()])
    from garage_promp import _files  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(module, 'replace_atomically',
                        lambda path, write: _files.replace_atomically(path, _raise_enospc))
    result = _invoke(module, *args)
    assert result.exit_code == 1, (result.output, result.exception)
    assert 'Error: --csv: cannot write' in result.output and 'No space left' in result.output
    assert 'Traceback' not in result.output
    assert table.read_bytes() == before
    assert sorted(p.name for p in [*run.iterdir(), *table.parent.iterdir()]) == listing
    monkeypatch.undo()
    assert _invoke(_load('meta_test'), *args).exit_code == 0
    assert link.is_symlink() and table.stat().st_mode & 0o777 == 0o640


def _raise_enospc(_):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_meta_test_table_is_overwritten_by_the_next_one(snapshot_dir, tmp_path):
    run = _copy_run(snapshot_dir, tmp_path)
    args = (run, '--n-test-tasks', 1, '--n-exploration-eps', 1, '--n-test-episodes', 1)
    for _ in range(2):
        result = _invoke(_load('meta_test'), *args)
        assert result.exit_code == 0, (result.output, result.exception)
    assert len(_rows(run / 'meta_test.csv')) >= 1


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize('option', ['--n-exploration-eps', '--n-test-episodes'])
def test_an_evaluation_too_large_for_memory_is_refused_before_sampling(
        snapshot_dir, tmp_path, option):
    run = _copy_run(snapshot_dir, tmp_path)
    result = _invoke(_load('meta_test'), run, '--n-test-tasks', 1, option, 10 ** 8)
    assert result.exit_code == 2, (result.output, result.exception)
    assert option in result.output and 'fit in memory' in result.output
    assert not (run / 'meta_test.csv').exists()


def test_another_runs_variant_json_is_named_not_the_env(snapshot_dir, tmp_path):
    """variant.json names the env to meta-test on; one copied from another run (another
    algorithm and env) is refused as not this snapshot's, before any sampling."""
    run = _copy_run(snapshot_dir, tmp_path)
    variant = json.loads((run / 'variant.json').read_text())
    variant.update(algo='MAML-TRPO', env='PointEnvMomentum')
    (run / 'variant.json').write_text(json.dumps(variant))
    result = _invoke(_load('meta_test'), run)
    assert result.exit_code == 1, (result.output, result.exception)
    assert "variant.json is a MAML-TRPO run" in result.output
    assert "not this run's snapshot" in result.output and 'Traceback' not in result.output
    assert not (run / 'meta_test.csv').exists()


def test_the_meta_world_protocol_is_refused_for_other_envs(snapshot_dir, cwd, no_load):
    """Its success columns and class-wise goals mean nothing there: refused, not run."""
    before = _files(snapshot_dir)
    result = _invoke(no_load, snapshot_dir, '--protocol', 'metaworld-algorithms')
    _assert_refused(result, '--protocol metaworld-algorithms is a Meta-World option; '
                            'PointEnvCorner does not take it')
    assert _files(snapshot_dir) == before
    assert not os.listdir(cwd)


def test_the_meta_world_goal_seed_is_refused_for_other_envs(snapshot_dir, cwd, no_load):
    """--benchmark-seed seeds Meta-World's goals; on a paper env it would be ignored."""
    before = _files(snapshot_dir)
    result = _invoke(no_load, snapshot_dir, '--benchmark-seed', '0')
    _assert_refused(result, '--benchmark-seed 0 is a Meta-World option')
    assert _files(snapshot_dir) == before


def test_a_directory_without_a_snapshot_says_so(tmp_path, cwd):
    """Not 'variant.json not found: give --env': the directory holds no run to test."""
    empty = tmp_path / 'empty'
    empty.mkdir()
    result = _invoke(_load('meta_test'), empty)
    assert result.exit_code == 1, (result.output, result.exception)
    assert 'holds no snapshot' in result.output and 'Traceback' not in result.output
    assert os.listdir(empty) == [] and os.listdir(cwd) == []


def test_a_missing_epoch_names_the_snapshots_there(snapshot_dir, cwd):
    """--itr N without itr_N.pkl (snapshot mode 'last' keeps params.pkl only): the error
    says which snapshots exist and that params.pkl is the last one."""
    result = _invoke(_load('meta_test'), snapshot_dir, '--itr', '1')
    _assert_refused(result, '--itr')
    assert 'numbered snapshots here: none' in result.output
    assert 'params.pkl holds the last epoch saved' in result.output


def test_itr_first_of_a_run_keeping_only_its_last_snapshot_says_so(snapshot_dir, cwd):
    """Snapshot mode 'last' keeps params.pkl only: --itr first tested it without a word."""
    result = _invoke(_load('meta_test'), snapshot_dir, '--itr', 'first', '--csv',
                     str(cwd / 'first.csv'))
    assert result.exit_code == 0, result.output
    assert '--itr first: ' in result.output and 'keeps no itr_<epoch>.pkl' in result.output
    result = _invoke(_load('meta_test'), snapshot_dir, '--itr', 'last', '--csv',
                     str(cwd / 'last.csv'))
    assert result.exit_code == 0 and 'keeps no itr_' not in result.output
