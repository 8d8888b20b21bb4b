"""The one-line-per-epoch console output."""
import math

from garage_promp import _console
from garage_promp.experiment.progress import ProgressOutput

from dowel import TabularInput


def _table(values):
    table = TabularInput()
    for key, value in values.items():
        table.record(key, value)
    return table


def test_epoch_line_has_steps_returns_time_and_eta(capsys, monkeypatch):
    clock = iter([0., 10., 22.])
    monkeypatch.setattr('garage_promp.experiment.progress.time.perf_counter',
                        lambda: next(clock))
    out = ProgressOutput(n_epochs=300)
    out.record(_table({'TotalEnvSteps': 2_300_000, 'Step_0-AverageReturn': -1.23,
                       'Step_1-AverageReturn': 85.24,
                       'MetaTest/Average/AverageReturn': 101.66}))
    out.record(_table({'TotalEnvSteps': 2_400_000, 'Step_0-AverageReturn': -1.,
                       'Step_1-AverageReturn': 86., 'Step_2-AverageReturn': 90.,
                       'MetaTest/Average/AverageReturn': math.nan}))
    first, second = capsys.readouterr().out.strip().splitlines()
    assert first == ('epoch 1/300 | 2.3M steps | pre -1.2 | post 85.2 | '
                     'meta-test 101.7 | 10.0 s/epoch | ETA 50m')
    # post is the last inner step's return; no meta-test this epoch; ETA
    # from the mean of the recent epochs (11 s) over the 298 left.
    assert second == ('epoch 2/300 | 2.4M steps | pre -1.0 | post 90.0 | '
                      'meta-test - | 11.0 s/epoch | ETA 55m')


def test_text_lines_and_full_table_are_still_printed(capsys):
    out = ProgressOutput(n_epochs=2, full_table=True, with_timestamp=False)
    out.record('Saving snapshot...')
    out.record(_table({'TotalEnvSteps': 500, 'Step_0-AverageReturn': 1.}))
    printed = capsys.readouterr().out
    assert printed.startswith('Saving snapshot...\n')
    assert 'TotalEnvSteps' in printed and 'epoch 1/2 | 500 steps' in printed


def test_phases_are_quiet_in_short_epochs_and_shown_in_long_ones(capsys, monkeypatch):
    clock = iter([0., 5., 40., 50., 75.])
    monkeypatch.setattr('garage_promp.experiment.progress.time.perf_counter',
                        lambda: next(clock))
    out = ProgressOutput(n_epochs=3)  # quiet_s=30; capsys is not a terminal
    _console.phase('sampling round 1/2')  # 5 s into the epoch: nothing
    _console.phase('update')              # 40 s: shown
    _console.phase('meta-test')           # 50 s, 10 s after the last line: nothing
    _console.phase('meta-test')           # 75 s: shown again
    assert capsys.readouterr().out.splitlines() == [
        '  epoch 1/3: update (40 s into the epoch)',
        '  epoch 1/3: meta-test (75 s into the epoch)']
    out.close()
    _console.phase('update')  # no listener after close
    assert capsys.readouterr().out == ''


def test_a_training_run_reports_every_phase(capsys):
    from dowel import logger
    from garage.experiment.experiment import ExperimentContext
    from garage.trainer import Trainer

    from tests.helpers import make_algo
    env, algo = make_algo('ProMP', evaluator=True)
    out = ProgressOutput(n_epochs=1, quiet_s=0.)
    logger.add_output(out)
    try:
        trainer = Trainer(ExperimentContext(snapshot_dir='/tmp', snapshot_mode='none',
                                            snapshot_gap=1))
        trainer.setup(algo, env)
        trainer.train(n_epochs=1, batch_size=1)
    finally:
        logger.remove_all()
    printed = capsys.readouterr().out
    for what in ('sampling round 1/2', 'sampling round 2/2', 'update', 'meta-test'):
        assert f'  epoch 1/1: {what} (' in printed
    assert printed.index('sampling round 2/2') < printed.index(': update (') \
        < printed.index(': meta-test (') < printed.index('epoch 1/1 |')
