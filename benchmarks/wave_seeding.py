#!/usr/bin/env python3
"""A wave's seeding computed at once against numpy's objects built one by one, side by side.

    python benchmarks/wave_seeding.py        # HalfCheetahFwdBack and HopperRandParams
    python benchmarks/wave_seeding.py --env HopperRandParams --out benchmarks/results

Before every episode the sampler derives the env's seed and the action noise's
generator from the episode's key, and seeds the env (its reset-noise generator). One
by one that is four numpy ``SeedSequence`` objects, two ``PCG64`` and two
``Generator`` objects an episode; ``garage_promp._seeding`` computes the same states
for all of a wave's episodes at once and re-seeds one generator in place
(``garage_promp.sampler.rollout.wave_seeds``,
``garage_promp.envs.gymnasium_env.seeders``). For each env, alternating
``--repeats`` times in one process: microseconds per episode of the seeding alone
(``--envs`` episodes of one wave, the noise drawn as the sampler draws it), and
microseconds per env step of a whole in-process ProMP meta-batch (20 tasks x 10
episodes, every sampling round, the learner's work between them) with the seeding
at once and one by one. Medians. Run it on quiet cores.
"""
import contextlib
import math
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp._seeding import generator_for
from garage_promp.envs.base import MetaEnv
from garage_promp.envs.gymnasium_env import seeders
from garage_promp.experiment.env_names import ENVS
from garage_promp.sampler import rollout
from garage_promp.validation import IntRange, StrictCommand

from bench_io import measure_envs, medians, promp_experiment
import click
import numpy as np

DEFAULT_ENVS = ('HalfCheetahFwdBack', 'HopperRandParams')
KEY = (1, 0)


@contextlib.contextmanager
def one_by_one():
    """Inside, the sampler seeds with numpy's objects one by one (the path taken where a
    word of seed material is wider than 32 bits)."""
    saved_words = rollout.column_words
    saved_states = MetaEnv.__dict__['reset_generator_states']
    rollout.column_words = lambda values: None
    MetaEnv.reset_generator_states = staticmethod(lambda seeds: None)
    try:
        yield
    finally:
        rollout.column_words = saved_words
        MetaEnv.reset_generator_states = saved_states


def _seed_wave(envs, horizon, action_dim):
    """The sampler's seeding of one wave (``RolloutWorker._run_wave``) with the noise drawn,
    without the resets: seconds."""
    start = time.perf_counter()
    env_seeds, noise_seeds = rollout.wave_seeds(7, KEY, [(e // 10, e % 10)
                                                         for e in range(len(envs))])
    generator = None
    for call, material in zip(seeders(envs, env_seeds), noise_seeds):
        call()
        generator = generator_for(material, generator)
        generator.standard_normal((horizon, action_dim), dtype=np.float32)
    return time.perf_counter() - start


def _meta_batch_us(exp):
    start = time.perf_counter()
    batches = exp.algo.sample_meta_batch(1)
    return (time.perf_counter() - start) / sum(int(b.episodes.lengths.sum())
                                               for b in batches) * 1e6


def measure(env_name: str, n_envs: int, repeats: int) -> dict:
    env_class = ENVS[env_name]['env']
    envs = [env_class(seed=i) for i in range(n_envs)]
    horizon = envs[0].spec.max_episode_length
    action_dim = math.prod(envs[0].spec.action_space.shape)
    exp = promp_experiment(env_name, 20, 10, 1)
    exp.algo.sample_meta_batch(0)  # start-up: env copies
    at_once, each, batch_at_once, batch_each = [], [], [], []
    try:
        for _ in range(repeats):
            at_once.append(_seed_wave(envs, horizon, action_dim) / n_envs * 1e6)
            with one_by_one():
                each.append(_seed_wave(envs, horizon, action_dim) / n_envs * 1e6)
            batch_at_once.append(_meta_batch_us(exp))
            with one_by_one():
                batch_each.append(_meta_batch_us(exp))
    finally:
        exp.algo.sampler.shutdown_worker()
    row = dict(env=env_name, envs=n_envs, repeats=repeats,
               **medians(seeding_each_us=each, seeding_at_once_us=at_once,
                         meta_batch_each_us=batch_each, meta_batch_at_once_us=batch_at_once))
    for part in ('seeding', 'meta_batch'):  # one by one / at once
        row[f'{part}_speedup'] = row[f'{part}_each_us'] / row[f'{part}_at_once_us']
    return row


def format_table(rows) -> str:
    lines = ['A wave\'s seeding, numpy\'s objects one by one against computed at once '
             '(microseconds per episode: the env\'s seed, its reset generator, the action '
             'noise\'s generator and draw), and a whole in-process ProMP meta-batch (20 tasks '
             'x 10 episodes, microseconds per env step) with each; medians:', '',
             '| env | episodes | seeding, one by one | seeding, at once | speed-up | '
             'meta-batch, one by one | meta-batch, at once | speed-up |',
             '|---|---|---|---|---|---|---|---|']
    lines += [f'| {r["env"]} | {r["envs"]} | {r["seeding_each_us"]:.1f} | '
              f'{r["seeding_at_once_us"]:.1f} | {r["seeding_speedup"]:.2f} | '
              f'{r["meta_batch_each_us"]:.1f} | {r["meta_batch_at_once_us"]:.1f} | '
              f'{r["meta_batch_speedup"]:.3f} |' for r in rows]
    return '\n'.join(lines)


@click.command(cls=StrictCommand)
@click.option('--env', 'envs', multiple=True, type=click.Choice(sorted(ENVS)),
              default=DEFAULT_ENVS, show_default=True)
@click.option('--envs', 'n_envs', type=IntRange(1, 2000), default=200, show_default=True,
              help='Episodes of the seeded wave (a worker of the paper-size meta-batch: 20 x 10).')
@click.option('--repeats', type=IntRange(1, 1000), default=7, show_default=True)
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Write wave_seeding.json and wave_seeding.md here.')
def main(envs, n_envs, repeats, out):
    """Print the table of ENVS."""
    measure_envs(envs, lambda name: measure(name, n_envs, repeats), format_table, out,
                 'wave_seeding')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
