#!/usr/bin/env python3
"""A/B of the outer update with and without the padding after the longest episode.

``MetaPolicySearch.optimize`` cuts the K + 1 rounds after the last step that any
of their episodes reaches (``_batch.without_trailing_padding``); on envs whose
episodes end early (HopperRandParams, the walkers, HumanoidRandDirec) most of a
padded batch is padding. This samples one meta-batch at the paper's batch for
the env, then times the same update on the padded rounds (``_optimize``, as
before the cut) and through ``optimize`` (cut), alternated so that load from
other processes hits both alike (after one untimed update), and prints how far
θ ends apart.

    python benchmarks/padding_cut.py [--algo MAML-TRPO] [--env HumanoidRandDirec]
        [--meta-batch-size 20 --episodes-per-task 10] [--repeats 3]
"""
import statistics
import time

from garage_promp.experiment.env_names import EnvName
from garage_promp.experiment.paper_config import ALGOS
from garage_promp.validation import StrictCommand, count, usage_errors

from bench_io import update_restorer
import click


@click.command(cls=StrictCommand)
@click.option('--algo', type=click.Choice(sorted(ALGOS)), default='MAML-TRPO', show_default=True,
              help='A paper label.')
@click.option('--env', type=EnvName(metaworld=False), default='HumanoidRandDirec',
              show_default=True, help='A paper env.')
@click.option('--meta-batch-size', type=count(), default=None,
              help='Tasks per meta-batch [default: the paper table\'s].')
@click.option('--episodes-per-task', type=count(), default=None,
              help='Episodes per task and round [default: the paper table\'s].')
@click.option('--repeats', type=count(), default=3, show_default=True, help='Updates each way.')
def main(algo, env, meta_batch_size, episodes_per_task, repeats):
    """Time one update on padded and on cut rounds."""
    from garage_promp.experiment.builder import build_experiment

    import torch
    with usage_errors():  # nothing is sampled before the experiment is built
        algorithm, _, _ = build_experiment(algo, env, 1, n_test_tasks=None,
                                           meta_batch_size=meta_batch_size,
                                           episodes_per_task=episodes_per_task)
    batches = algorithm.sample_meta_batch(0)
    lengths = [batch.episodes.lengths for batch in batches]
    episodes, horizon = batches[0].mask[..., 0].numel(), batches[0].mask.shape[2]
    longest = max(batch.longest_episode for batch in batches)
    click.echo(f'{env}, {algo}: {sum(len(x) for x in lengths)} episodes of '
               f'{statistics.mean(float(x.mean()) for x in lengths):.1f} steps on average, '
               f'the longest {longest} of a horizon of {horizon} '
               f'({episodes * longest} of {episodes * horizon} cells a round kept)')
    if longest == horizon:
        click.echo('an episode reaches the horizon: nothing is cut, and both updates below are '
                   'the same computation (their ratio is run-to-run noise)')
    restore = update_restorer(algorithm)

    update = {'padded': lambda: algorithm._optimize(0, batches),  # pylint: disable=protected-access
              'cut': lambda: algorithm.optimize(0, batches)}
    update['cut']()  # not timed: the first update's one-time work (TRPO checks its HVPs once)
    times, thetas = {'padded': [], 'cut': []}, {}
    for mode in ['padded', 'cut'] * repeats:
        restore()
        start = time.perf_counter()
        update[mode]()
        times[mode].append(time.perf_counter() - start)
        thetas[mode] = torch.cat([p.detach().flatten() for p in algorithm.policy.parameters()])
    for mode, values in times.items():
        click.echo(f'{algo} update, {mode} rounds: '
                   + ', '.join(f'{v:.2f}' for v in values) + ' s')
    click.echo(f'padded / cut, medians: '
               f'{statistics.median(times["padded"]) / statistics.median(times["cut"]):.2f}')
    gap = float((thetas['cut'] - thetas['padded']).abs().max())
    click.echo(f'largest |θ_cut - θ_padded| after one update: {gap:.1e}')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
