#!/usr/bin/env python3
"""Meta-gradient variance of LVC vs DiCE (paper §7.2, Fig. 4).

Trains LVC-VPG and DiCE-VPG side by side (same seed, same tasks per epoch) and
logs, per epoch and arm, ``<arm>/MetaGradientRStd`` — the relative standard
deviation of ``--n-rounds`` meta-gradients sampled from fresh data at the
current θ (as the original ProMP code's experiments/gradient_variance/ scripts
compute it) — and the post-update return.

    python launchers/gradient_variance.py --env HalfCheetahFwdBack --epochs 300
"""
from garage_promp.experiment import relative_std, sample_meta_gradients
from garage_promp.experiment.builder import build_experiment
from garage_promp.experiment.paper_config import ENVS

import click
from dowel import logger, tabular
from garage import wrap_experiment

ARMS = {'LVC': 'LVC-VPG', 'DiCE': 'DiCE-VPG'}



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
    for epoch in range(epochs):
        tasks = task_sampler.sample(meta_batch_size)
        tabular.record('Epoch', epoch)
        for label, algo in arms.items():
            grads = sample_meta_gradients(algo, n_rounds, tasks)
            batches = algo.sample_meta_batch(epoch, tasks)
            with tabular.prefix(label + '/'):
                tabular.record('MetaGradientRStd', relative_std(grads.numpy()))
                tabular.record('Step_1-AverageReturn',
                               float(batches[-1].rewards.sum() / batches[-1].mask[..., 0].sum()))
                algo.optimize(epoch, batches)
        logger.log(tabular)
        logger.dump_all(epoch)
        tabular.clear()


@click.command()
@click.option('--env', 'env_name', type=click.Choice(sorted(ENVS)),
              default='HalfCheetahFwdBack', show_default=True)
@click.option('--seed', default=35, show_default=True)
@click.option('--epochs', default=300, show_default=True)
@click.option('--n-rounds', default=10, show_default=True)
@click.option('--meta-batch-size', default=20, show_default=True)
@click.option('--episodes-per-task', default=40, show_default=True)
@click.option('--log-dir', default=None)
def main(env_name, seed, epochs, n_rounds, meta_batch_size, episodes_per_task, log_dir):
    """Meta-gradient variance of LVC vs DiCE."""
    options = {'log_dir': log_dir} if log_dir else {}
    gradient_variance(options, env_name=env_name, seed=seed, epochs=epochs,
                      n_rounds=n_rounds, meta_batch_size=meta_batch_size,
                      episodes_per_task=episodes_per_task)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
