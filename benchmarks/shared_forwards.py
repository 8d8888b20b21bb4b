#!/usr/bin/env python3
"""A/B of the meta-objective's shared forwards, on one batch, in one process.

Within a meta-objective, the policy's forward at φ_k on D_k is computed once
and reused by ProMP's inner-KL penalty (``MetaPolicySearch._shared_forwards``).
This times the same update with and without that sharing, alternated so that
load from other processes hits both alike, and prints how far θ ends apart.

    python benchmarks/shared_forwards.py [--algo ProMP] [--repeats 4]
"""
import contextlib
import time

from garage_promp.experiment.env_names import EnvName
from garage_promp.experiment.paper_config import ALGOS, METAWORLD
from garage_promp.validation import StrictCommand, count, usage_errors

from bench_io import update_restorer
import click


@click.command(cls=StrictCommand)
@click.option('--algo', type=click.Choice(sorted(ALGOS)), default='ProMP', show_default=True,
              help='A paper label.')
@click.option('--env', type=EnvName(ml1_task=True), default='HalfCheetahFwdBack',
              show_default=True, help='A paper env, ML10, ML45 or ML1:<task>.')
@click.option('--repeats', type=count(), default=4, show_default=True, help='Updates each way.')
def main(algo, env, repeats):
    """Time one update with and without shared forwards."""
    from garage_promp.experiment.builder import build_experiment

    import torch
    family, _, task = env.partition(':')
    with usage_errors():  # nothing is sampled before the experiment is built
        algorithm, _, _ = build_experiment(
            algo, family, 1, n_test_tasks=None, task=task or None,
            reward_function_version='v2' if family in METAWORLD else None)
    batches = algorithm.sample_meta_batch(0)
    restore = update_restorer(algorithm)

    shared = type(algorithm)._shared_forwards
    times, thetas = {'shared': [], 'separate': []}, {}
    for mode in ['separate', 'shared'] * repeats:
        type(algorithm)._shared_forwards = (
            shared if mode == 'shared' else lambda self: contextlib.nullcontext())
        restore()
        start = time.perf_counter()
        algorithm.optimize(0, batches)
        times[mode].append(time.perf_counter() - start)
        thetas[mode] = torch.cat([p.detach().flatten() for p in algorithm.policy.parameters()])
    type(algorithm)._shared_forwards = shared
    for mode, values in times.items():
        click.echo(f'{algo} update, {mode} forwards: '
                   + ', '.join(f'{v:.2f}' for v in values) + ' s')
    gap = float((thetas['shared'] - thetas['separate']).abs().max())
    click.echo(f'largest |θ_shared - θ_separate| after one update: {gap:.1e}')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
