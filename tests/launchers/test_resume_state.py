"""--resume restores the right state or refuses: newest snapshot by epoch, the run's own
snapshot only, and a progress.csv that covers the snapshot's epochs."""
import csv
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.helpers import invoke_script

ROOT = pathlib.Path(__file__).parents[2]
TRAIN = [sys.executable, str(ROOT / 'launchers' / 'train.py')]
TINY = ['--env', 'PointEnvCorner', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--evaluate-every', '1000']


def _run(*args, check=True):
    proc = subprocess.run([*TRAIN, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def _rows(log_dir):
    with open(log_dir / 'progress.csv', newline='') as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope='module')
def promp_run(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp('runs') / 'promp'
    _run(*TINY, '--algo', 'ProMP', '--epochs', '2', '--log-dir', str(log_dir))
    return log_dir


def test_resume_takes_the_newest_snapshot_by_epoch(promp_run, tmp_path):
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    # params.pkl holds epoch 1; a continuation in 'all' mode writes itr_2 and itr_3 only.
    _run('--resume', str(log_dir), '--epochs', '4', '--snapshot-mode', 'all')
    assert sorted(p.name for p in log_dir.glob('*.pkl')) == ['itr_2.pkl', 'itr_3.pkl',
                                                             'params.pkl']
    out = _run('--resume', str(log_dir), '--epochs', '5').stdout
    # Only epoch 5 ran: the run continued from itr_3.pkl, not from params.pkl's epoch 1.
    assert 'epoch 5/5' in out and 'epoch 3/5' not in out, out[-2000:]
    rows = _rows(log_dir)
    assert [int(r['Average/Iteration']) for r in rows] == [0, 1, 2, 3, 4]


def test_a_foreign_snapshot_is_refused(promp_run, tmp_path):
    log_dir = tmp_path / 'vpg'
    _run(*TINY, '--algo', 'LVC-VPG', '--epochs', '1', '--log-dir', str(log_dir))
    before = (log_dir / 'progress.csv').read_text()
    shutil.copyfile(promp_run / 'params.pkl', log_dir / 'params.pkl')
    proc = _run('--resume', str(log_dir), '--epochs', '3', check=False)
    assert proc.returncode != 0
    assert "not this run's snapshot" in proc.stderr and 'LVC-VPG' in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == before


def test_a_log_ahead_of_its_newest_snapshot_resumes_from_the_snapshot(tmp_path):
    """The newest snapshot lost (deleted, or skipped as unreadable) leaves the log a row
    ahead of the snapshot the run resumes from: that row is dropped and its epoch run
    again, so the log holds each epoch once, its env steps counting on from the
    snapshot's."""
    log_dir = tmp_path / 'all'
    _run(*TINY, '--algo', 'ProMP', '--epochs', '2', '--snapshot-mode', 'all',
         '--log-dir', str(log_dir))
    first = _rows(log_dir)
    (log_dir / 'itr_1.pkl').unlink()
    out = _run('--resume', str(log_dir), '--epochs', '3').stdout
    assert '1 epochs and' in out and f"{first[0]['TotalEnvSteps']} env steps done" in out, out
    rows = _rows(log_dir)
    assert [int(r['Average/Iteration']) for r in rows] == [0, 1, 2]
    assert rows[0] == first[0]
    steps = [int(r['TotalEnvSteps']) for r in rows]
    assert steps == [steps[0], 2 * steps[0], 3 * steps[0]]  # 2 x 2 x 4 x 2 steps an epoch


def test_a_budget_given_on_resume_bounds_the_epochs_left_by_the_steps_left(promp_run, tmp_path):
    """--max-env-steps on --resume: the epochs it names ("training to N epochs") are the
    snapshot's plus those that surely reach what is left of the budget (at least
    M x R x (K + 1) = 8 steps an epoch: 2 + ceil((100 - 64) / 8) = 7), and the run stops
    once the budget is reached."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    assert int(_rows(log_dir)[-1]['TotalEnvSteps']) == 64
    out = _run('--resume', str(log_dir), '--max-env-steps', '100').stdout
    assert 'training to 7 epochs' in out and 'epoch 3 | 96/100 steps' in out, out[-2000:]
    assert [int(r['TotalEnvSteps']) for r in _rows(log_dir)] == [32, 64, 96, 128]


def test_missing_progress_rows_are_reported_not_skipped(promp_run, tmp_path):
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    lines = (log_dir / 'progress.csv').read_text().splitlines(keepends=True)
    (log_dir / 'progress.csv').write_text(lines[0])  # both epochs' rows lost
    proc = _run('--resume', str(log_dir), '--epochs', '3', check=False)
    assert proc.returncode != 0
    assert 'rows 1..2 are missing' in proc.stderr
    assert len(_rows(log_dir)) == 0
    # A log that is missing altogether is refused the same way, and not created.
    (log_dir / 'progress.csv').unlink()
    proc = _run('--resume', str(log_dir), '--epochs', '3', check=False)
    assert proc.returncode != 0
    assert 'progress.csv is missing' in proc.stderr and 'rows 1..2' in proc.stderr
    assert not (log_dir / 'progress.csv').exists()


def test_a_row_lost_between_snapshot_and_log_is_only_warned_about(promp_run, tmp_path):
    """garage saves the snapshot before it writes the epoch's row: a run stopped in
    between continues (one row missing, said so) rather than being stuck for good."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    lines = (log_dir / 'progress.csv').read_text().splitlines(keepends=True)
    (log_dir / 'progress.csv').write_text(lines[0] + lines[1])  # epoch 1's row lost
    # A refused --epochs is the one thing said: no warning about a run that does not go on.
    proc = _run('--resume', str(log_dir), '--epochs', '2', check=False)
    assert proc.returncode == 2 and '--epochs must be more' in proc.stderr, proc.stderr
    assert 'lacks the row' not in proc.stderr + proc.stdout
    proc = _run('--resume', str(log_dir), '--epochs', '3')
    assert 'lacks the row of epoch 1' in proc.stderr + proc.stdout
    assert len(_rows(log_dir)) == 2


def _python_restore(from_dir, tmp_path):
    """garage's Python API, as a researcher's script calls it."""
    import garage_promp  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    from garage.experiment import SnapshotConfig  # pylint: disable=import-outside-toplevel
    from garage.trainer import Trainer  # pylint: disable=import-outside-toplevel
    trainer = Trainer(SnapshotConfig(snapshot_dir=str(tmp_path / 'out'), snapshot_mode='last',
                                     snapshot_gap=1))
    return trainer.restore(str(from_dir))


def test_the_python_api_refuses_what_the_launcher_refuses(promp_run, tmp_path):
    from garage_promp._garage_compat import NotASnapshotError  # pylint: disable=import-outside-toplevel
    # A foreign snapshot: variant.json says LVC-VPG, the snapshot is ProMP's.
    foreign = tmp_path / 'foreign'
    shutil.copytree(promp_run, foreign)
    variant = (foreign / 'variant.json').read_text()
    assert '"ProMP"' in variant
    (foreign / 'variant.json').write_text(variant.replace('"ProMP"', '"LVC-VPG"'))
    with pytest.raises(ValueError, match="not this run's snapshot"):
        _python_restore(foreign, tmp_path)
    # A pickle that is not a training snapshot.
    import cloudpickle  # pylint: disable=import-outside-toplevel
    other = tmp_path / 'other'
    other.mkdir()
    (other / 'params.pkl').write_bytes(cloudpickle.dumps({'algo': None}))
    with pytest.raises(NotASnapshotError, match='not a training snapshot'):
        _python_restore(other, tmp_path)
    # The run's own snapshot restores.
    args = _python_restore(promp_run, tmp_path)
    assert args.start_epoch == 2


def test_a_log_that_cannot_be_opened_leaves_no_noise_behind(tmp_path, monkeypatch):
    """The appending log's file fails to open (a read-only or immutable progress.csv):
    the error is raised, and no 'Exception ignored in __del__' follows it."""
    import gc

    from garage_promp.experiment.resume import AppendingCsvOutput

    import dowel
    progress = tmp_path / 'progress.csv'
    progress.write_text('a,b\n1,2\n')

    def refuse(self, file_name, mode='w'):
        raise PermissionError(1, 'Operation not permitted', file_name)

    monkeypatch.setattr(dowel.simple_outputs.FileOutput, '__init__', refuse)
    unraisable = []
    monkeypatch.setattr(sys, 'unraisablehook', unraisable.append)
    with pytest.raises(PermissionError):
        AppendingCsvOutput(str(progress))
    gc.collect()
    assert not unraisable, [u.exc_value for u in unraisable]


@pytest.mark.parametrize('key, value, named', [
    ('env', 'PointEnvMomentum', 'PointEnvCorner'),
    ('seed', 7, 'seed 1'),
    ('hidden_sizes', [7], 'hidden_sizes='),
    # null: left at the env's paper value (PointEnvCorner: 64 x 64, horizon 100), which the
    # snapshot's (4; horizon 4) are not.
    ('hidden_sizes', None, 'hidden_sizes=[4], its variant.json [64, 64]'),
    ('max_episode_length', None, 'max_episode_length=4, its variant.json 100'),
])
def test_a_snapshot_of_another_env_or_seed_is_refused_first(promp_run, tmp_path, key, value,
                                                            named):
    """variant.json names another env or seed than the snapshot holds (a snapshot copied in
    from another run): refused with one error line, before garage prints anything of the
    snapshot, and the run's files stay as they were."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    variant = json.loads((log_dir / 'variant.json').read_text())
    assert variant[key] != value
    variant[key] = value
    (log_dir / 'variant.json').write_text(json.dumps(variant))
    before = (log_dir / 'progress.csv').read_text()
    proc = invoke_script(TRAIN[1], '--resume', str(log_dir), '--epochs', '3')  # (a refusal)
    assert proc.returncode != 0
    assert "not this run's snapshot" in proc.stderr and named in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr
    assert 'last_itr' not in proc.stdout + proc.stderr  # garage's restore table
    assert (log_dir / 'progress.csv').read_text() == before
    # The Python API refuses it too.
    with pytest.raises(ValueError, match="not this run's snapshot"):
        _python_restore(log_dir, tmp_path)


def test_a_run_without_its_variant_is_not_resumed(promp_run, tmp_path):
    """No variant.json: the snapshot cannot be told from another run's, so --resume refuses,
    naming the file, and changes nothing (as meta_test.py refuses it)."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    (log_dir / 'variant.json').unlink()
    before = {p.name: p.read_bytes() for p in log_dir.iterdir() if p.is_file()}
    proc = _run('--resume', str(log_dir), '--epochs', '3', check=False)
    assert proc.returncode != 0
    assert 'has no variant.json' in proc.stderr and 'Traceback' not in proc.stderr
    assert {p.name: p.read_bytes() for p in log_dir.iterdir() if p.is_file()} == before


def test_a_snapshot_whose_entries_are_not_garages_is_refused(promp_run, tmp_path):
    """A dict with garage's keys but entries of other types: refused by name, not a
    TypeError from inside garage."""
    from garage_promp._garage_compat import NotASnapshotError  # pylint: disable=import-outside-toplevel

    import cloudpickle  # pylint: disable=import-outside-toplevel
    with open(promp_run / 'params.pkl', 'rb') as f:
        good = cloudpickle.load(f)
    for key, value, named in (('seed', 'x', 'seed'), ('train_args', None, "'train_args'"),
                              ('stats', {}, "'stats'"), ('algo', 3, "'algo'")):
        bad_dir = tmp_path / key
        shutil.copytree(promp_run, bad_dir)
        (bad_dir / 'params.pkl').write_bytes(cloudpickle.dumps({**good, key: value}))
        with pytest.raises(NotASnapshotError, match=named):
            _python_restore(bad_dir, tmp_path)


def test_a_log_header_without_some_columns_is_widened_in_place(promp_run, tmp_path):
    """progress.csv's header lacks columns the run logs (edited by hand, or written by an
    older version): the columns are added, the earlier rows keep every value they had,
    and no temporary copy is left in the run directory."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    rows = _rows(log_dir)
    dropped = ['Step_0-StdReturn', 'Step_1-MaxReturn']
    kept = [k for k in rows[0] if k not in dropped]
    with open(log_dir / 'progress.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=kept, extrasaction='ignore')
        writer.writeheader()
        writer.writerows(rows)
    proc = _run('--resume', str(log_dir), '--epochs', '3')
    assert 'lacks 2 column(s)' in proc.stderr + proc.stdout
    after = _rows(log_dir)
    assert len(after) == 3
    for old, new in zip(rows, after[:2]):
        assert {k: new[k] for k in kept} == {k: old[k] for k in kept}
        assert all(new[k] == '' for k in dropped)
    assert all(after[2][k] != '' for k in dropped)
    assert sorted(p.name for p in log_dir.iterdir() if p.name.endswith('.tmp')) == []


def test_a_meta_world_snapshot_must_be_of_the_variants_benchmark_and_task():
    """The env check on Meta-World: an ML1 run's env is its task's class (``task_name``); a
    non-Meta-World env under a Meta-World variant, or a paper env of another class, differs."""
    from garage_promp.experiment.resume import _env_differs  # pylint: disable=import-outside-toplevel
    sawyer = type('SawyerReachEnvV3', (), {'__module__': 'metaworld.envs.sawyer_reach_v3'})

    class Wrapped:  # what the trainer holds: a wrapper whose .unwrapped is Meta-World's env
        def __init__(self, inner, task_name):
            self.unwrapped, self.task_name = inner, task_name

    reach = Wrapped(sawyer(), 'reach-v3')
    assert _env_differs({'env': 'ML1', 'task': 'reach-v3'}, reach) is None
    assert 'ML1 push-v3' in _env_differs({'env': 'ML1', 'task': 'push-v3'}, reach)
    assert _env_differs({'env': 'ML10'}, reach) is None
    point = type('PointEnvCorner', (), {'__module__': 'garage_promp.envs.point_env_corner'})
    assert 'Meta-World ML10' in _env_differs({'env': 'ML10'}, Wrapped(point(), None))
    assert 'HalfCheetahFwdBack' in _env_differs({'env': 'HalfCheetahFwdBack'},
                                                Wrapped(point(), None))
    assert _env_differs({}, reach) is None  # a variant without an env (the Python API)


def test_a_log_whose_env_steps_are_not_the_snapshots_is_refused(promp_run, tmp_path):
    """The resumed rows count on from the snapshot's env steps: a log whose row of the
    snapshot's epoch says another count (another run's log, an edited one) is refused,
    naming both counts, and left as it was."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    rows = _rows(log_dir)
    steps = int(float(rows[-1]['TotalEnvSteps']))
    assert steps > 0
    text = (log_dir / 'progress.csv').read_text()
    lines = text.splitlines(keepends=True)
    header = next(csv.reader(lines[:1]))
    last = next(csv.reader(lines[-1:]))
    last[header.index('TotalEnvSteps')] = str(steps + 1000)
    edited = ''.join(lines[:-1]) + ','.join(last) + '\n'
    (log_dir / 'progress.csv').write_text(edited)
    proc = _run('--resume', str(log_dir), '--epochs', '3', check=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f'counts {steps + 1000} env steps' in proc.stderr
    assert f'snapshot, at the end of that epoch, {steps}' in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == edited
    # The run's own log resumes.
    (log_dir / 'progress.csv').write_text(text)
    _run('--resume', str(log_dir), '--epochs', '3')
    assert len(_rows(log_dir)) == 3


@pytest.mark.parametrize('seed', ['1e400', '"one"', 'true', '-3'])
def test_a_variant_whose_seed_no_run_records_is_damaged(promp_run, tmp_path, seed):
    """variant.json's seed is what the snapshot is checked against: one that is not a
    whole number >= 0 (inf, a string, a bool) is damage, named, not a check skipped."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    variant = json.loads((log_dir / 'variant.json').read_text())
    variant['seed'] = '@SEED@'
    (log_dir / 'variant.json').write_text(json.dumps(variant).replace('"@SEED@"', seed))
    before = (log_dir / 'progress.csv').read_text()
    proc = invoke_script(TRAIN[1], '--resume', str(log_dir), '--epochs', '3')  # (a refusal)
    assert proc.returncode == 1, proc.stderr
    assert 'variant.json: its seed is' in proc.stderr and 'not the whole number' in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == before


@pytest.mark.parametrize('options', [
    ['--set', 'reward_type=sparse'],  # an env option (the fixture's run: dense, the default)
    ['--set', 'inner_lr=0.5'],  # an algorithm option
    ['--evaluate-every', '1'],  # a launcher option that changes the log
])
def test_a_snapshot_of_a_run_with_other_options_is_refused(promp_run, tmp_path, options):
    """Two runs alike but for an option the checks above do not name (their ``--set``
    options, the meta-test schedule): the other run's snapshot, copied in, is refused
    naming the option (every launcher option is kept in the snapshot), and its log stays."""
    other = tmp_path / 'other'
    base = list(TINY)
    if options[0] in base:  # (an option the fixture gives: replaced, not given twice)
        del base[base.index(options[0]):base.index(options[0]) + 2]
    _run(*base, '--algo', 'ProMP', '--epochs', '2', '--log-dir', str(other), *options)
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    shutil.copyfile(other / 'params.pkl', log_dir / 'params.pkl')
    before = (log_dir / 'progress.csv').read_text()
    proc = invoke_script(TRAIN[1], '--resume', str(log_dir), '--epochs', '3')  # (a refusal)
    assert proc.returncode == 1, proc.stderr
    key = 'overrides' if options[0] == '--set' else 'evaluate_every'
    assert f'was made with {key}=' in proc.stderr and "not this run's snapshot" in proc.stderr
    assert 'Traceback' not in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == before
    with pytest.raises(ValueError, match=f'was made with {key}='):
        _python_restore(log_dir, tmp_path)


def test_how_a_run_is_executed_may_change_on_resume(promp_run, tmp_path):
    """The sampler, its workers, the device and the worker timeout say how a run is
    executed, not what it computes: variant.json edited there resumes, and with them
    (they were ignored: the snapshot's sampler ran), to the same numbers."""
    import cloudpickle  # pylint: disable=import-outside-toplevel
    as_recorded, edited = tmp_path / 'as_recorded', tmp_path / 'edited'
    for log_dir in (as_recorded, edited):
        shutil.copytree(promp_run, log_dir)
    variant = json.loads((edited / 'variant.json').read_text())
    variant.update(sampler='multiprocessing', n_workers=2, worker_timeout=60., envs_per_task=1)
    (edited / 'variant.json').write_text(json.dumps(variant))
    for log_dir in (as_recorded, edited):
        _run('--resume', str(log_dir), '--epochs', '3')
    with open(edited / 'params.pkl', 'rb') as f:
        sampler = cloudpickle.load(f)['algo'].sampler
    assert (sampler.kind, sampler.n_workers, sampler._envs_per_task,  # pylint: disable=protected-access
            sampler._worker_timeout) == ('multiprocessing', 2, 1, 60.)  # pylint: disable=protected-access
    numbers = [{k: v for k, v in _rows(log_dir)[2].items() if 'Time' not in k and 'time' not in k}
               for log_dir in (as_recorded, edited)]
    assert numbers[0] == numbers[1]


@pytest.mark.parametrize('key, value, named', [
    ('sampler', 'Local', "sampler must be one of"),
    ('n_workers', 0, 'n_workers must be an int'),
    ('n_workers', True, 'n_workers must be an int'),
    ('envs_per_task', 1.5, 'envs_per_task must be an int'),
    ('worker_timeout', 0.5, 'worker_timeout must be'),
    ('worker_timeout', 'NaN', 'worker_timeout must be'),
    ('device', 'cuda:3', 'device'),
])
def test_an_execution_option_edited_into_what_the_launcher_refuses_is_refused(
        promp_run, tmp_path, key, value, named):
    """Checked as train.py checks its options, naming the file and the entry, before the
    snapshot is read: nothing in the directory changes."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    variant = json.loads((log_dir / 'variant.json').read_text())
    variant[key] = value
    (log_dir / 'variant.json').write_text(json.dumps(variant))
    before = {p.name: p.read_bytes() for p in log_dir.iterdir() if p.name != '.lock'}
    # (In this process: a refusal before any work; the interpreter's start-up costs more.)
    proc = invoke_script(TRAIN[1], '--resume', str(log_dir), '--epochs', '3')
    assert proc.returncode == 1, proc.stderr
    assert f"variant.json's {key}" in proc.stderr and named in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr
    assert {p.name: p.read_bytes() for p in log_dir.iterdir() if p.name != '.lock'} == before


@pytest.mark.parametrize('key, value, named', [
    ('hidden_sizes', 'abc', "its hidden_sizes is 'abc'"),
    ('hidden_sizes', '4', "its hidden_sizes is '4'"),
    ('hidden_sizes', [4.0], 'its hidden_sizes is [4.0]'),
    ('env', None, 'its env is None'),
    ('meta_batch_size', '2', "meta_batch_size=2, its variant.json '2'"),
    ('overrides', [1, 2], 'its overrides are [1, 2], not the object'),
    ('overrides', 'abc', "its overrides are 'abc', not the object"),
    ('baseline_solver', 'qr', "its baseline_solver is 'qr', not one of ('lstsq', 'cholesky')"),
    ('baseline_solver', 5, 'its baseline_solver is 5, not one of'),
])
def test_a_hand_edited_variant_is_refused_naming_the_entry(promp_run, tmp_path, key, value,
                                                           named):
    """Entries no run records (hidden sizes that are not a list of whole numbers, no env
    name) are damage, named by --resume and meta_test.py; values that only print alike
    are told apart (their repr)."""
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    variant = json.loads((log_dir / 'variant.json').read_text())
    variant[key] = value
    (log_dir / 'variant.json').write_text(json.dumps(variant))
    before = (log_dir / 'progress.csv').read_text()
    # (In this process: refusals before any work; the interpreter's start-up costs more.)
    proc = invoke_script(TRAIN[1], '--resume', str(log_dir), '--epochs', '3')
    assert proc.returncode == 1 and named in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == before
    meta_test = invoke_script(ROOT / 'launchers' / 'meta_test.py', str(log_dir), '--csv',
                              str(tmp_path / 'mt.csv'))
    assert meta_test.returncode != 0 and named in meta_test.stderr, meta_test.stderr
    assert 'Traceback' not in meta_test.stderr


@pytest.mark.parametrize('kind', ['directory', 'fifo'])
def test_a_snapshot_name_taken_by_no_file_is_refused_before_any_epoch(promp_run, tmp_path,
                                                                      kind):
    """``itr_3.pkl`` a directory (or a pipe) where the resumed run would write its next
    snapshot: refused before anything is trained, the log as it was."""
    import os  # pylint: disable=import-outside-toplevel
    log_dir = tmp_path / 'run'
    shutil.copytree(promp_run, log_dir)
    taken = log_dir / 'itr_3.pkl'
    if kind == 'directory':
        taken.mkdir()
    else:
        os.mkfifo(taken)
    before = (log_dir / 'progress.csv').read_text()
    proc = _run('--resume', str(log_dir), '--epochs', '4', check=False)
    assert proc.returncode == 1, proc.stderr
    assert f'{taken} is a ' in proc.stderr and 'not a snapshot' in proc.stderr, proc.stderr
    assert 'epoch 3/4' not in proc.stdout
    assert (log_dir / 'progress.csv').read_text() == before


def test_a_ray_sampler_without_ray_is_refused_as_train_py_refuses_it(tmp_path, monkeypatch):
    """Refused naming the file and its entry, before any snapshot is read (it failed with an
    ImportError traceback after the snapshot was restored)."""
    from garage_promp.experiment import resume  # pylint: disable=import-outside-toplevel
    (tmp_path / 'variant.json').write_text(json.dumps({'sampler': 'ray', 'n_workers': 2}))
    monkeypatch.setattr(resume, 'ray_available', lambda: False)
    with pytest.raises(ValueError, match="variant.json's sampler is 'ray': 'ray' needs Ray"):
        resume.execution_options(str(tmp_path))
    monkeypatch.setattr(resume, 'ray_available', lambda: True)
    assert resume.execution_options(str(tmp_path)) == {'sampler': 'ray', 'n_workers': 2}
