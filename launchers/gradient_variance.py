#!/usr/bin/env python3
"""Meta-gradient variance of LVC vs DiCE (paper §7.2, Fig. 4).

Trains LVC-VPG and DiCE-VPG side by side (same seed, same tasks per epoch) and
logs, per epoch and arm, ``<arm>/MetaGradientRStd`` — the relative standard
deviation of ``--n-rounds`` meta-gradients sampled from fresh data at the
current θ (as the original ProMP code's experiments/gradient_variance/ scripts
compute it) — and the post-update return.

    python launchers/gradient_variance.py --preset short     # minutes: the ratio's trend
    python launchers/gradient_variance.py --env HalfCheetahFwdBack --epochs 300   # paper scale

It also logs ``RStdRatio`` (DiCE's relative std over LVC's) per epoch and
prints the mean ratio at the end; the paper's Fig. 4 shows DiCE about 60%
higher (a ratio of about 1.6) on HalfCheetahFwdBack. The presets' env-step
counts are printed at the start (see docs/results.md for measured times).
"""
import signal
import threading

# Ctrl-C while the libraries load ends the launcher quietly (an ignored SIGINT stays
# ignored); run_command restores Python's handler before the run starts.
if (__name__ == '__main__' and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)


from garage_promp.experiment import relative_std, sample_meta_gradients
from garage_promp.experiment.builder import build_experiment
from garage_promp.experiment.paper_config import ENVS, env_config
from garage_promp.validation import (
    OUTPUT_DIR,
    SEED,
    StrictCommand,
    announce_new_run_beside,
    check_batch_steps,
    check_default_log_dir,
    count,
    run_command,
    usage_errors,
)

import click
from dowel import logger, tabular
from garage import wrap_experiment
import numpy as np

ARMS = {'LVC': 'LVC-VPG', 'DiCE': 'DiCE-VPG'}

#: Named settings; options given explicitly win. 'paper' is the original
#: ProMP code's gradient-variance setting, 'short' a minutes-long run.
PRESETS = {
    'paper': dict(epochs=300, n_rounds=10, meta_batch_size=20, episodes_per_task=40),
    'short': dict(epochs=10, n_rounds=5, meta_batch_size=10, episodes_per_task=10),
}


def _build(label, env_name, seed, meta_batch_size, episodes_per_task):
    return build_experiment(ARMS[label], env_name, seed, meta_batch_size=meta_batch_size,
                            episodes_per_task=episodes_per_task, n_test_tasks=None).algo


@wrap_experiment(archive_launch_repo=False, snapshot_mode='none')
def gradient_variance(ctxt, env_name, seed, epochs, n_rounds, meta_batch_size,
                      episodes_per_task):
    """LVC vs DiCE meta-gradient relative std, epoch by epoch."""
    del ctxt
    arms = {label: _build(label, env_name, seed, meta_batch_size, episodes_per_task)
            for label in ARMS}
    task_sampler = arms['LVC']._task_sampler
    ratios, steps = [], 0
    for epoch in range(epochs):
        tasks = task_sampler.sample(meta_batch_size)
        tabular.record('Epoch', epoch)
        rstd = {}
        for label, algo in arms.items():
            grads = sample_meta_gradients(algo, n_rounds, tasks)
            batches = algo.sample_meta_batch(epoch, tasks)
            rstd[label] = relative_std(grads.numpy())
            # n_rounds gradient samples of the same size as this batch, plus it.
            steps += (n_rounds + 1) * sum(int(b.episodes.lengths.sum()) for b in batches)
            with tabular.prefix(label + '/'):
                tabular.record('MetaGradientRStd', rstd[label])
                tabular.record('Step_1-AverageReturn',
                               float(batches[-1].rewards.sum() / batches[-1].mask[..., 0].sum()))
                algo.optimize(epoch, batches)
        # Undefined (NaN) where LVC's meta-gradients did not vary over the rounds at all.
        ratios.append(rstd['DiCE'] / rstd['LVC'] if rstd['LVC'] > 0 else float('nan'))
        tabular.record('RStdRatio', ratios[-1])
        tabular.record('TotalEnvSteps', steps)  # both arms, all rounds so far
        logger.log(tabular)
        logger.dump_all(epoch)
        tabular.clear()
    defined = [r for r in ratios if not np.isnan(r)]
    if not defined:
        logger.log("DiCE/LVC relative std of the meta-gradient: undefined (LVC's meta-gradient "
                   'did not vary between rounds in any epoch: too small a batch to measure '
                   'its variance)')
        return float('nan')
    logger.log(f'DiCE/LVC relative std of the meta-gradient: mean ratio {np.mean(defined):.2f} '
               f'over {len(defined)} of {epochs} epochs (min {np.min(defined):.2f}, max '
               f'{np.max(defined):.2f}; paper Fig. 4: about 1.6)')
    return float(np.mean(defined))


@click.command(cls=StrictCommand)
@click.option('--env', 'env_name', type=click.Choice(sorted(ENVS)),
              default='HalfCheetahFwdBack', show_default=True)
@click.option('--preset', type=click.Choice(sorted(PRESETS)), default='paper', show_default=True,
              help='Named settings: epochs, rounds, tasks, episodes (explicit options win).')
@click.option('--seed', type=SEED, default=35, show_default=True)
@click.option('--epochs', type=count(), default=None, help='[preset]')
@click.option('--n-rounds', type=count(2), default=None,
              help='Meta-gradient samples per epoch and arm [preset].')
@click.option('--meta-batch-size', type=count(), default=None, help='[preset]')
@click.option('--episodes-per-task', type=count(), default=None, help='[preset]')
@click.option('--log-dir', type=OUTPUT_DIR, default=None,
              help='Default: data/local/experiment/gradient_variance.')
def main(env_name, preset, seed, epochs, n_rounds, meta_batch_size, episodes_per_task, log_dir):
    """Meta-gradient variance of LVC vs DiCE."""
    given = dict(epochs=epochs, n_rounds=n_rounds, meta_batch_size=meta_batch_size,
                 episodes_per_task=episodes_per_task)
    settings = {k: v if v is not None else PRESETS[preset][k] for k, v in given.items()}
    cfg = env_config(env_name)
    with usage_errors():
        # Every sampling round of a meta-batch is kept for the meta-gradient (as the
        # algorithms check it, but before the log directory exists).
        check_batch_steps(cfg['H'], cfg['K'] + 1,
                          factor_name='sampling rounds (num_inner_grad_steps + 1)',
                          meta_batch_size=settings['meta_batch_size'],
                          episodes_per_task=settings['episodes_per_task'])
    if not log_dir:  # --log-dir itself is checked while parsing (OUTPUT_DIR)
        with usage_errors('--log-dir'):
            check_default_log_dir()
    per_epoch = (2 * (settings['n_rounds'] + 1) * settings['meta_batch_size']
                 * settings['episodes_per_task'] * cfg['H'] * (cfg['K'] + 1))
    click.echo(f'{per_epoch:,} env steps per epoch (both arms), '
               f"{per_epoch * settings['epochs']:,} in all", err=True)
    if log_dir:
        announce_new_run_beside(log_dir)
    options = {'log_dir': log_dir} if log_dir else {}
    gradient_variance(options, env_name=env_name, seed=seed, **settings)


if __name__ == '__main__':
    run_command(main)
