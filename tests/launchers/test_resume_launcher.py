"""launchers/train.py --resume: appends to progress.csv and continues exactly."""
import csv
import json
import pathlib
import pickle

from click.testing import CliRunner
import pytest

from tests.helpers import load_script

LAUNCHER = pathlib.Path(__file__).parents[2] / 'launchers' / 'train.py'
TINY = ['--algo', 'ProMP', '--env', 'PointEnvCorner', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--hidden-sizes', '4', '--seed', '3']


def _main():
    return load_script(LAUNCHER, 'train_launcher_resume').main


def _invoke(*args):
    result = CliRunner().invoke(_main(), [str(a) for a in args], catch_exceptions=False)
    return result


def _rows(log_dir):
    with open(log_dir / 'progress.csv', newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize('options', [[], ['--log-std', 'per-dimension']],
                         ids=['log-std shared', 'log-std per dimension'])
def test_resume_appends_and_continues_exactly(tmp_path, options):
    full, half = tmp_path / 'full', tmp_path / 'half'
    assert _invoke(*TINY, *options, '--epochs', 4, '--log-dir', full).exit_code == 0
    assert _invoke(*TINY, *options, '--epochs', 2, '--log-dir', half).exit_code == 0
    assert json.loads((half / 'variant.json').read_text()).get('log_std') == (
        options[1] if options else None)  # the default is not recorded: as in older runs
    before = (half / 'progress.csv').read_text()
    variant = (half / 'variant.json').read_text()
    result = _invoke('--resume', half, '--epochs', 4)
    assert result.exit_code == 0, result.output
    assert 'epoch 3/4' in result.output and 'epoch 4/4' in result.output
    after = (half / 'progress.csv').read_text()
    assert after.startswith(before)  # earlier rows untouched
    assert (half / 'variant.json').read_text() == variant
    resumed, uninterrupted = _rows(half), _rows(full)
    assert len(resumed) == 4
    for a, b in zip(resumed, uninterrupted):
        assert {k: v for k, v in a.items() if not k.startswith('Time/')} == \
            {k: v for k, v in b.items() if not k.startswith('Time/')}


def test_resume_refuses_other_options_and_a_finished_run(tmp_path):
    run = tmp_path / 'run'
    assert _invoke(*TINY, '--epochs', 1, '--log-dir', run).exit_code == 0
    result = _invoke('--resume', run, '--meta-batch-size', 4)
    assert result.exit_code == 2 and '--epochs' in result.output
    result = _invoke('--resume', run, '--epochs', 1)
    assert result.exit_code == 2 and 'has done 1 epochs' in result.output
    # No --epochs given: the run's own are done, and the message says so (not "got 1").
    result = _invoke('--resume', run)
    assert result.exit_code == 2, result.output
    assert 'has done all its 1 epochs: give --epochs more than 1' in result.output
    assert len(_rows(run)) == 1


def test_a_row_cut_short_by_a_kill_is_dropped_before_appending(tmp_path):
    """A kill while dowel wrote the row of the snapshot's epoch leaves part of that row:
    the resume drops it (that row stays missing, with a warning) instead of appending the
    next row to the same line."""
    cut, full = tmp_path / 'cut', tmp_path / 'full'
    assert _invoke(*TINY, '--epochs', 4, '--log-dir', full).exit_code == 0
    assert _invoke(*TINY, '--epochs', 3, '--log-dir', cut).exit_code == 0
    text = (cut / 'progress.csv').read_text()
    last = text.rstrip('\r\n').rfind('\n') + 1
    (cut / 'progress.csv').write_text(text[:last + (len(text) - last) // 2])
    result = _invoke('--resume', cut, '--epochs', 4)
    assert result.exit_code == 0, result.output
    resumed, uninterrupted = _rows(cut), _rows(full)
    assert len(resumed) == 3  # epochs 1, 2 and 4
    assert all(None not in row and None not in row.values() for row in resumed)
    for a, b in zip(resumed, [uninterrupted[i] for i in (0, 1, 3)]):
        assert {k: v for k, v in a.items() if not k.startswith('Time/')} == \
            {k: v for k, v in b.items() if not k.startswith('Time/')}


@pytest.mark.parametrize('name, text, message', [
    ('progress.csv', 'foo,bar\n1,2\n', 'progress.csv has no TotalEnvSteps column'),
    ('variant.json', '[]', 'variant.json holds a JSON list')])
def test_a_damaged_run_file_is_refused_on_resume_naming_it(tmp_path, name, text, message):
    run = tmp_path / 'run'
    assert _invoke(*TINY, '--epochs', 1, '--log-dir', run).exit_code == 0
    (run / name).write_text(text)
    log = (run / 'progress.csv').read_text()
    result = CliRunner().invoke(_main(), ['--resume', str(run), '--epochs', '2'])
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert 'Traceback' not in result.output
    assert (run / 'progress.csv').read_text() == log  # nothing appended


def test_a_snapshot_whose_log_std_is_not_the_variants_is_refused(tmp_path):
    run = tmp_path / 'run'
    assert _invoke(*TINY, '--log-std', 'per-dimension', '--epochs', 1, '--log-dir',
                   run).exit_code == 0
    variant = json.loads((run / 'variant.json').read_text())
    del variant['log_std']  # as if a shared-std run's directory held this snapshot
    (run / 'variant.json').write_text(json.dumps(variant))
    before = (run / 'progress.csv').read_text()
    result = _invoke('--resume', run, '--epochs', 2)
    assert result.exit_code != 0
    assert "has a log-std of shape (2,), its variant.json log_std='shared'" in result.output
    assert (run / 'progress.csv').read_text() == before


def test_a_refused_resume_leaves_the_runs_snapshot_mode_as_it_was(tmp_path):
    """A mode given with a resume that is then refused (too few epochs) is not recorded: the
    next plain resume saves as the run always did, and variant.json is byte for byte the same."""
    log_dir = tmp_path / 'run'
    assert _invoke(*TINY, '--epochs', '1', '--log-dir', str(log_dir)).exit_code == 0
    before = (log_dir / 'variant.json').read_bytes()
    for mode in ('none', 'all'):
        result = _invoke('--resume', str(log_dir), '--epochs', '1', '--snapshot-mode', mode)
        assert result.exit_code != 0 and '--epochs must be more' in result.output, result.output
        assert (log_dir / 'variant.json').read_bytes() == before
    assert _invoke('--resume', str(log_dir), '--epochs', '2').exit_code == 0
    assert (log_dir / 'params.pkl').is_file() and not list(log_dir.glob('itr_*.pkl'))


def test_resume_keeps_the_runs_snapshot_mode_unless_given(tmp_path):
    # The mode is the run's (variant.json), not garage's default 'last': a run saving every
    # epoch goes on saving every epoch; a mode given on resume is recorded for the next.
    log_dir = tmp_path / 'run'
    result = _invoke(*TINY, '--epochs', '1', '--snapshot-mode', 'all', '--log-dir', str(log_dir))
    assert result.exit_code == 0, result.output
    assert json.loads((log_dir / 'variant.json').read_text())['snapshot_mode'] == 'all'
    assert _invoke('--resume', str(log_dir), '--epochs', '2').exit_code == 0
    assert sorted(p.name for p in log_dir.glob('*.pkl')) == ['itr_0.pkl', 'itr_1.pkl']
    assert _invoke('--resume', str(log_dir), '--epochs', '3', '--snapshot-mode',
                   'last').exit_code == 0
    assert 'snapshot_mode' not in json.loads((log_dir / 'variant.json').read_text())
    assert _invoke('--resume', str(log_dir), '--epochs', '4').exit_code == 0
    assert sorted(p.name for p in log_dir.glob('*.pkl')) == ['itr_0.pkl', 'itr_1.pkl',
                                                             'params.pkl']
    assert len(_rows(log_dir)) == 4
    # A run started with the default records none (its variant.json as before).
    other = tmp_path / 'default'
    assert _invoke(*TINY, '--epochs', '1', '--log-dir', str(other)).exit_code == 0
    assert 'snapshot_mode' not in json.loads((other / 'variant.json').read_text())


def test_a_run_with_the_cholesky_baseline_resumes_exactly_and_keeps_its_solver(tmp_path):
    full, half = tmp_path / 'full', tmp_path / 'half'
    options = ['--baseline-solver', 'cholesky', '--set', 'reward_type=dense']  # (returns to fit)
    assert _invoke(*TINY, *options, '--epochs', 3, '--log-dir', full).exit_code == 0
    assert _invoke(*TINY, *options, '--epochs', 1, '--log-dir', half).exit_code == 0
    result = _invoke('--resume', half, '--epochs', 3)
    assert result.exit_code == 0, result.output
    resumed, uninterrupted = _rows(half), _rows(full)
    assert len(resumed) == 3
    for a, b in zip(resumed, uninterrupted):
        assert {k: v for k, v in a.items() if not k.startswith('Time/')} == \
            {k: v for k, v in b.items() if not k.startswith('Time/')}
    with open(half / 'params.pkl', 'rb') as f:
        assert pickle.load(f)['algo']._processing.baseline.solver == 'cholesky'
    variant = json.loads((half / 'variant.json').read_text())
    del variant['baseline_solver']  # as if the default's run directory held this snapshot
    (half / 'variant.json').write_text(json.dumps(variant))
    result = _invoke('--resume', half, '--epochs', 4)
    assert result.exit_code != 0
    assert "has a baseline solving with 'cholesky', its variant.json " \
           "baseline_solver='lstsq'" in result.output


def test_a_default_solver_snapshot_under_a_cholesky_variant_is_refused(tmp_path):
    """variant.json saying ``baseline_solver='cholesky'`` over a snapshot whose baselines
    solve by ``lstsq`` (a default run's; its record names no solver) is not this run."""
    run = tmp_path / 'run'
    assert _invoke(*TINY, '--epochs', 1, '--log-dir', run).exit_code == 0
    variant = json.loads((run / 'variant.json').read_text())
    variant['baseline_solver'] = 'cholesky'
    (run / 'variant.json').write_text(json.dumps(variant))
    result = _invoke('--resume', run, '--epochs', 2)
    assert result.exit_code != 0
    assert "has a baseline solving with 'lstsq', its variant.json baseline_solver='cholesky'" \
        in result.output, result.output


@pytest.mark.parametrize('part', ['baseline', 'dice_baseline'])
def test_either_linear_baseline_of_another_solver_is_refused(tmp_path, part):
    """Both of a DiCE algorithm's linear baselines are checked against variant.json's
    solver; another class of baseline (``ZeroBaseline``) is not."""
    import types  # pylint: disable=import-outside-toplevel

    from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline
    from garage_promp.experiment.resume import _check_baseline_solver
    baselines = dict(baseline=LinearFeatureBaseline(solver='cholesky'),
                     dice_baseline=LinearTimeBaseline(solver='cholesky'))
    algo = types.SimpleNamespace(_processing=types.SimpleNamespace(**baselines))
    _check_baseline_solver(str(tmp_path), {'baseline_solver': 'cholesky'}, algo)
    setattr(algo._processing, part, type(baselines[part])())  # lstsq
    with pytest.raises(ValueError, match=f"has a {part} solving with 'lstsq', its "
                                         "variant.json baseline_solver='cholesky'"):
        _check_baseline_solver(str(tmp_path), {'baseline_solver': 'cholesky'}, algo)
    setattr(algo._processing, part, ZeroBaseline())
    _check_baseline_solver(str(tmp_path), {'baseline_solver': 'cholesky'}, algo)
