"""launchers/plot.py: one mean ± std band per configuration of runs the test makes."""
import csv
import pathlib

from garage_promp.experiment import plotting

from click.testing import CliRunner
import pytest

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).parents[2]
TINY = ['--env', 'PointEnvCorner', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4',
        '--epochs', '3']


def _main(name):
    return load_script(ROOT / 'launchers' / f'{name}.py', f'{name}_launcher_plot').main


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """ProMP with seeds 1 and 2, MAML-TRPO with seed 1."""
    root = tmp_path_factory.mktemp('runs')
    train = _main('train')
    made = {}
    for algo, seed in (('ProMP', 1), ('ProMP', 2), ('MAML-TRPO', 1)):
        log_dir = root / f'{algo}_{seed}'
        result = CliRunner().invoke(train, [*TINY, '--algo', algo, '--seed', str(seed),
                                            '--log-dir', str(log_dir)],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        made[(algo, seed)] = log_dir
    return made


def _column(run, key):
    with open(run / 'progress.csv', newline='') as f:
        return [float(r[key]) for r in csv.DictReader(f)]


def test_plot_groups_seeds_into_one_band_per_configuration(runs, tmp_path):
    out = tmp_path / 'curves.png'
    result = CliRunner().invoke(_main('plot'), [*map(str, runs.values()), '--out', str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert 'ProMP: 2 run(s), 3 epochs' in result.output
    assert 'MAML-TRPO: 1 run(s), 3 epochs' in result.output
    assert out.stat().st_size > 1000
    # The numbers drawn: the mean and sample std over the two ProMP seeds.
    groups = {label: [plotting.read_progress(r) for r in dirs]
              for label, dirs in plotting.group_runs(runs.values()).items()}
    assert sorted(groups) == ['MAML-TRPO', 'ProMP']
    drawn = plotting.plot_bands(tmp_path / 'again.png', groups, [None, 'Step_0-AverageReturn'])
    a, b = (_column(runs[('ProMP', s)], 'Step_1-AverageReturn') for s in (1, 2))
    xs, mean, std = drawn['ProMP']['post-update']
    assert xs == _column(runs[('ProMP', 1)], 'TotalEnvSteps')
    assert mean == pytest.approx([(x + y) / 2 for x, y in zip(a, b)])
    assert std == pytest.approx([abs(x - y) / 2 ** 0.5 for x, y in zip(a, b)])
    assert drawn['MAML-TRPO']['post-update'][2] == [0.] * 3  # one seed: no spread


def test_plot_names_a_missing_column(runs, tmp_path):
    result = CliRunner().invoke(_main('plot'), [str(runs[('ProMP', 1)]), '--key', 'Nope',
                                                '--out', str(tmp_path / 'x.png')])
    assert result.exit_code != 0
    assert "column 'Nope' is not in the progress.csv" in result.output


def test_plot_refuses_a_run_given_twice_and_an_image_format_it_cannot_write(runs, tmp_path):
    """A run named twice would count as two seeds; --out names its format by its suffix.
    Both are usage errors naming the culprit, and nothing is written."""
    run = runs[('ProMP', 1)]
    result = CliRunner().invoke(_main('plot'), [str(run), f'{run}/', '--out',
                                                str(tmp_path / 'x.png')])
    assert result.exit_code == 2 and 'is given more than once' in result.output, result.output
    same = str(run)  # one string object twice, as a shell gives `plot.py a a`
    result = CliRunner().invoke(_main('plot'), [same, same, '--out', str(tmp_path / 'x.png')])
    assert result.exit_code == 2 and 'is given more than once' in result.output, result.output
    for name in ('x.txt', 'x'):
        result = CliRunner().invoke(_main('plot'), [str(run), '--out', str(tmp_path / name)])
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--out'" in result.output and '.png' in result.output
    assert list(tmp_path.iterdir()) == []


def test_plot_writes_into_a_directory_it_makes(runs, tmp_path):
    out = tmp_path / 'new' / 'dir' / 'curves.pdf'
    result = CliRunner().invoke(_main('plot'), [str(runs[('ProMP', 1)]), '--out', str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b'%PDF')


def test_plot_refuses_a_copy_of_a_run_as_a_second_seed(runs, tmp_path):
    """Two directories of one configuration and one seed are one run (the sampler
    gives the same episodes for any worker count): averaged as two seeds they would
    narrow the band, so the plot names both and draws nothing."""
    import shutil
    copy = tmp_path / 'copy'
    shutil.copytree(runs[('ProMP', 1)], copy)
    out = tmp_path / 'x.png'
    result = CliRunner().invoke(_main('plot'), [str(runs[('ProMP', 1)]), str(runs[('ProMP', 2)]),
                                                str(copy), '--out', str(out)])
    assert result.exit_code == 1, result.output
    assert 'the same seed (1)' in result.output and str(copy) in result.output
    assert str(runs[('ProMP', 1)]) in result.output
    assert not out.exists()
    # The same seed in another configuration is another run.
    result = CliRunner().invoke(_main('plot'), [str(runs[('ProMP', 1)]),
                                                str(runs[('MAML-TRPO', 1)]), '--out', str(out)])
    assert result.exit_code == 0, result.output


def test_mean_std_of_huge_finite_returns_does_not_overflow():
    """Squares of |x| > 1e154 overflow a Python float: plot.py ended with OverflowError."""
    import math

    from garage_promp.experiment.plotting import mean_std
    mean, std = mean_std([1e160, -1e160, math.nan])
    assert mean == 0. and math.isclose(std, math.sqrt(2) * 1e160, rel_tol=1e-12)
    assert mean_std([1., 3.]) == (2., math.sqrt(2.))  # ordinary values: the plain formula
    assert mean_std([1e308, 1e308]) == (1e308, 0.)  # a sum beyond float range
    assert math.isinf(mean_std([math.inf, 1.])[0])  # (inf is refused when the log is read)


def _with_column(src, dst, key, value):
    """A copy of the run ``src`` whose ``key`` column holds ``value`` in every row."""
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.copytree(src, dst)
    (dst / '.lock').unlink(missing_ok=True)
    with open(dst / 'progress.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row[key] = value
    with open(dst / 'progress.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return dst


@pytest.mark.parametrize('value, message', [
    ('1e308', "mean ± std reaches 1.21e+308, beyond what the figure can draw"),
    ('nan', "have no number in 'Step_1-AverageReturn'"),
    ('', "have no number in 'Step_1-AverageReturn'")])
def test_plot_refuses_a_line_it_cannot_draw_naming_it_and_writes_nothing(
        runs, tmp_path, value, message):
    """Returns near the float range (their band's limits overflow in matplotlib) or a
    column with no number: one Error line naming the group and the column, no image."""
    import json  # pylint: disable=import-outside-toplevel
    odd = _with_column(runs[('ProMP', 2)], tmp_path / 'odd', 'Step_1-AverageReturn', value)
    if value == '1e308':  # huge: averaged with the other seed's ordinary returns
        others = [str(runs[('ProMP', 1)])]
    else:  # none: alone, a configuration of its own
        variant = json.loads((odd / 'variant.json').read_text())
        (odd / 'variant.json').write_text(json.dumps(dict(variant, discount=0.5)))
        others = []
    out = tmp_path / 'x.png'
    result = CliRunner().invoke(_main('plot'), [*others, str(odd), '--out', str(out)])
    assert result.exit_code == 1, (result.output, result.exception)
    assert message in result.output and 'Traceback' not in result.output, result.output
    assert not out.exists()


def test_a_column_logged_every_few_epochs_is_drawn_through_the_epochs_that_have_it(
        runs, tmp_path, monkeypatch):
    """``MetaTest/*`` with ``--evaluate-every 2`` is empty in the rows between: every
    number would be a lone point between NaNs, and the line invisible. The line joins
    the rows that have a number; where none of them has an x, nothing can be drawn."""
    import matplotlib.axes  # pylint: disable=import-outside-toplevel
    src = runs[('ProMP', 1)]
    dst = tmp_path / 'sparse'
    _with_column(src, dst, 'Step_1-AverageReturn', '')
    with open(src / 'progress.csv', newline='') as f:
        original = list(csv.DictReader(f))
    with open(dst / 'progress.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    for i in (0, 2):  # epochs 0 and 2 evaluated, 1 not
        rows[i]['Step_1-AverageReturn'] = original[i]['Step_1-AverageReturn']
    with open(dst / 'progress.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = []
    real_plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, 'plot', lambda self, xs, ys, *a, **k: (
        lines.append((list(xs), list(ys))), real_plot(self, xs, ys, *a, **k))[1])
    groups = {'sparse': [plotting.read_progress(dst)]}
    plotting.plot_bands(tmp_path / 'sparse.png', groups, ['Step_1-AverageReturn'])
    assert lines == [([float(original[i]['TotalEnvSteps']) for i in (0, 2)],
                      [float(original[i]['Step_1-AverageReturn']) for i in (0, 2)])]
    for row in rows:  # an x only where the column has no number
        row['TotalEnvSteps'] = '' if row['Step_1-AverageReturn'] else '1'
    with open(dst / 'progress.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ValueError, match="none in a row with a number in 'TotalEnvSteps'"):
        plotting.plot_bands(tmp_path / 'none.png', {'sparse': [plotting.read_progress(dst)]},
                            ['Step_1-AverageReturn'])
    assert not (tmp_path / 'none.png').exists()


def _rows_at(steps, returns):
    return [{'TotalEnvSteps': str(s), 'Step_1-AverageReturn': str(r)}
            for s, r in zip(steps, returns)]


def test_seeds_that_log_other_env_steps_are_averaged_at_equal_env_steps(tmp_path):
    """Where episodes end early the seeds' epochs end at other env steps: each row's mean
    was drawn at the first seed's steps, so the figure changed with the order of the runs.
    Each seed is interpolated onto the steps the seeds logged (no extrapolation)."""
    a = _rows_at([100, 200, 300], [1., 2., 3.])
    b = _rows_at([150, 250, 350], [10., 20., 30.])
    one = plotting.plot_bands(tmp_path / 'ab.png', {'g': [a, b]}, [None])['g']['post-update']
    other = plotting.plot_bands(tmp_path / 'ba.png', {'g': [b, a]}, [None])['g']['post-update']
    assert one == other
    xs, means, _ = one
    assert xs == [150., 200., 250., 300.]  # from the later first to the earlier last
    # a at 150: 1.5, at 250: 2.5; b at 200: 15, at 300: 25
    assert means == pytest.approx([(1.5 + 10) / 2, (2 + 15) / 2, (2.5 + 20) / 2, (3 + 25) / 2])
    # Seeds at the same steps: each row's mean at its steps, as before.
    c = _rows_at([100, 200, 300], [3., 4., 5.])
    xs, means, _ = plotting.plot_bands(tmp_path / 'ac.png', {'g': [a, c]}, [None])['g'][
        'post-update']
    assert xs == [100., 200., 300.] and means == pytest.approx([2., 3., 4.])
    # Runs whose steps do not overlap have no x at which to be averaged: said so.
    late = _rows_at([1000, 2000], [1., 2.])
    with pytest.raises(ValueError, match=r'g: its runs logged .* over TotalEnvSteps ranges '
                                         r'that do not overlap \(100-300, 1000-2000\)'):
        plotting.plot_bands(tmp_path / 'late.png', {'g': [a, late]}, [None])
