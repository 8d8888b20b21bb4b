"""Logged values do not depend on being the last epoch or on the meta-test.

An epoch's row must be the same whether or not the run ends after it, and
whether or not the meta-test runs after the update (it adapts copies of the
policy, never the policy itself).
"""
import csv
import pathlib

from click.testing import CliRunner
import pytest

from tests.helpers import load_script

LAUNCHER = pathlib.Path(__file__).parents[2] / 'launchers' / 'train.py'
TINY = ['--preset', 'demo', '--meta-batch-size', '4', '--episodes-per-task', '2',
        '--max-episode-length', '10', '--n-test-tasks', '2', '--hidden-sizes', '8', '--seed', '5']


def _run(tmp_path, name, *args):
    module = load_script(LAUNCHER, f'train_launcher_{name}')
    result = CliRunner().invoke(module.main, [*TINY, *map(str, args), '--log-dir',
                                              str(tmp_path / name)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open(tmp_path / name / 'progress.csv', newline='') as f:
        return list(csv.DictReader(f))


def _comparable(row, skip=('Time/', 'MetaTest/')):
    return {k: v for k, v in row.items() if not k.startswith(skip)}


@pytest.mark.parametrize('algo', ['ProMP', 'MAML-TRPO'])
def test_last_epoch_logs_like_any_other(tmp_path, algo):
    short = _run(tmp_path, 'short', '--algo', algo, '--epochs', 3)
    long = _run(tmp_path, 'long', '--algo', algo, '--epochs', 4)
    assert [_comparable(r, ('Time/', )) for r in short] == \
        [_comparable(r, ('Time/', )) for r in long[:3]]
    kl = [float(r['GaussianMLPPolicy/KL']) for r in long]
    assert max(kl) < 5 * max(kl[:-1]) + 1e-3  # no outlier at the end


def test_meta_test_does_not_change_the_epochs_logged_values(tmp_path):
    evaluated = _run(tmp_path, 'eval', '--epochs', 1, '--evaluate-every', 1)
    skipped = _run(tmp_path, 'skip', '--epochs', 1, '--evaluate-every', 5)
    assert _comparable(evaluated[0]) == _comparable(skipped[0])
    assert evaluated[0]['MetaTest/Average/AverageReturn'] != 'nan'


def test_epochs_without_meta_test_print_no_nan_warning(tmp_path):
    """The NaN placeholders of epochs without a meta-test stay in progress.csv but
    never reach TensorBoard, so tensorboardX prints no "NaN or Inf" warning."""
    import subprocess
    import sys
    log_dir = tmp_path / 'run'
    proc = subprocess.run([sys.executable, str(LAUNCHER), *TINY, '--epochs', '3',
                           '--evaluate-every', '2', '--log-dir', str(log_dir)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'NaN or Inf' not in proc.stdout + proc.stderr
    with open(log_dir / 'progress.csv', newline='') as f:
        meta_test = [r['MetaTest/Average/AverageReturn'] for r in csv.DictReader(f)]
    assert meta_test[1] == 'nan' and meta_test[0] != 'nan' and meta_test[2] != 'nan'
    assert list(log_dir.glob('events.out.tfevents.*'))
