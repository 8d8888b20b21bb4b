"""The one-line-per-epoch console output."""
import math

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
