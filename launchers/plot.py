#!/usr/bin/env python3
"""Plot learning curves of your runs: seeds of one configuration as a mean ± std band.

    python launchers/plot.py data/local/experiment/ProMP_HalfCheetahFwdBack_seed=*
    python launchers/plot.py RUN_DIR... --key MetaTest/Average/AverageReturn --out meta_test.png
    python launchers/plot.py RUN_DIR... --key post --key pre --x TotalEnvSteps

Each RUN_DIR is a run's log directory (``progress.csv``, ``variant.json``).
Runs whose ``variant.json`` differ only in the seed (or in the sampler's
worker layout, the console or the epoch budget) are one configuration, drawn
as the mean over seeds with a ± one standard deviation band; configurations
are labelled by what differs between them. ``--key post`` / ``--key pre``
stand for the post-update (``Step_K-AverageReturn``) and pre-update
(``Step_0-AverageReturn``) returns, the default.
"""
import signal
import threading

# Ctrl-C while the libraries load ends the launcher quietly (an ignored SIGINT stays
# ignored); run_command restores Python's handler before the run starts.
if (__name__ == '__main__' and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)

import os
import pathlib

from garage_promp.experiment.plotting import group_runs, plot_bands, read_progress
from garage_promp.validation import OUTPUT_FILE, StrictCommand, run_command, user_errors

import click

ALIASES = {'post': None, 'pre': 'Step_0-AverageReturn'}


def _distinct_runs(ctx, param, run_dirs):
    """RUN_DIRS, each once: a run given twice would count as two seeds."""
    seen = {}
    for run in run_dirs:
        key = os.path.realpath(run)
        if key in seen:
            first = seen[key]
            raise click.BadParameter(f'{run!r} is given more than once'
                                     + ('' if first == run else f' (also as {first!r})'),
                                     ctx, param)
        seen[key] = run
    return run_dirs


def _image_path(ctx, param, out):
    """``--out`` names its format by its suffix, one that matplotlib writes."""
    from matplotlib.backend_bases import FigureCanvasBase  # pylint: disable=import-outside-toplevel
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = pathlib.Path(out).suffix.lstrip('.').lower()
    if suffix not in formats:
        raise click.BadParameter(f'{out!r} must end in the suffix of an image format matplotlib '
                                 f'writes ({", ".join("." + f for f in sorted(formats))})',
                                 ctx, param)
    return out


@click.command(cls=StrictCommand)
@click.argument('run_dirs', nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False), callback=_distinct_runs)
@click.option('--key', 'keys', multiple=True, default=('post', 'pre'), show_default=True,
              help="progress.csv column to draw (repeatable); 'post' and 'pre' are the "
                   'post- and pre-update returns.')
@click.option('--x', 'x_key', default='TotalEnvSteps', show_default=True,
              help='progress.csv column of the x axis.')
@click.option('--out', default='learning_curves.png', show_default=True,
              type=OUTPUT_FILE, callback=_image_path,
              help='Image to write, in the format its suffix names (.png, .pdf, .svg...).')
@click.option('--title', default='', help='Figure title.')
def main(run_dirs, keys, x_key, out, title):
    """Draw RUN_DIRS' learning curves into one PNG."""
    groups = {}
    # A directory that holds no run, or a corrupt variant.json or progress.csv:
    # not about the command line (one line, no usage text).
    with user_errors('RUN_DIRS'):
        runs_by_label = group_runs(run_dirs)
        rows_by_label = {label: [read_progress(run) for run in runs]
                         for label, runs in runs_by_label.items()}
    for label, runs in runs_by_label.items():
        rows = rows_by_label[label]
        empty = [str(run) for run, r in zip(runs, rows) if not r]
        if empty:
            raise click.ClickException(f'RUN_DIRS: no progress.csv rows in {", ".join(empty)}: '
                                       'not a run directory, or a run that has logged no epoch')
        for key in [ALIASES.get(k, k) for k in keys] + [x_key]:
            missing = [str(run) for run, r in zip(runs, rows)
                       if key is not None and key not in r[0]]
            if missing:
                raise click.BadParameter(f'column {key!r} is not in the progress.csv of '
                                         f'{", ".join(missing)}', param_hint='--key/--x')
        groups[label] = rows
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)  # --out was checked writable
    with user_errors('RUN_DIRS', expected=(KeyError, ValueError, OSError)):  # no Step_K column
        plot_bands(out, groups, [ALIASES.get(k, k) for k in keys], x_key=x_key, title=title)
    for label, rows in groups.items():
        click.echo(f'{label}: {len(rows)} run(s), {min(len(r) for r in rows)} epochs')
    click.echo(f'wrote {pathlib.Path(out).resolve()}')


if __name__ == '__main__':
    import garage_promp  # noqa: F401  (compat layer, as every launcher)
    run_command(main)
