#!/usr/bin/env python3
"""A lean wave's constants kept once against gathered at every step, and its reads of
the simulations next to each step against after all steps, side by side.

    python benchmarks/wave_constants.py        # the paper's MuJoCo envs, 200 envs a wave
    python benchmarks/wave_constants.py --env HalfCheetahFwdBack --out benchmarks/results

Within a wave of the lean stepping path, nothing changes an env's task, ``MjModel``
or ``MjData``, so the per-step Python that gathers them from every env of the wave
(each env's task direction and task row, the model to step it with, the addresses
the compiled loop takes) runs once a wave
(``garage_promp.envs._mujoco.wave_constant``). For each env: microseconds per env
step of the env class's ``batch_step`` over ``--envs`` envs (random actions, one
wave, the same MuJoCo calls), with the constants kept and with them gathered at
every step, and (the constants kept) with what the step reads of each simulation
gathered over all of them once all are stepped (``gp_gather``, as before
2026-11-28) instead of copied next to each simulation's step by the compiled loop
(``MujocoMetaEnv._step_all``'s parts), alternating the three ``--repeats`` times in
one process. Medians; the ratios are speed-ups of ``batch_step`` alone (the
sampler's step also holds the policy forward and the recording). Run it on quiet
cores.
"""
import statistics
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp.envs import _mujoco
from garage_promp.experiment.env_names import ENVS
from garage_promp.validation import IntRange, StrictCommand

from bench_io import write_results
import click
import numpy as np

DEFAULT_ENVS = ('HalfCheetahFwdBack', 'HopperRandParams', 'WalkerFwdBack', 'WalkerRandParams',
                'AntRandDirec', 'HumanoidRandDirec')


def _every_step(envs, name, compute):
    del envs, name
    return compute()


def _no_spec(datas, parts):
    del datas, parts


def _time(gym_cls, envs, actions, gather, reads_after=False) -> float:
    """Microseconds per env step of ``batch_step`` over ``actions`` in one wave."""
    kept, spec = _mujoco.wave_constant, _mujoco.MujocoMetaEnv.__dict__['_parts_spec']
    _mujoco.wave_constant = _every_step if gather else kept
    if reads_after:
        _mujoco.MujocoMetaEnv._parts_spec = staticmethod(_no_spec)  # pylint: disable=protected-access
    try:
        for env in envs:
            env.reset(seed=0)
        models = _mujoco.identical_models(envs)
        with _mujoco.stepping_with_models(models):
            start = time.perf_counter()
            for wave_actions in actions:
                gym_cls.batch_step(envs, wave_actions)
            elapsed = time.perf_counter() - start
    finally:
        _mujoco.wave_constant = kept
        _mujoco.MujocoMetaEnv._parts_spec = spec  # pylint: disable=protected-access
    return elapsed / actions.shape[0] / actions.shape[1] * 1e6


def measure(env_name: str, n_envs: int, steps: int, repeats: int) -> dict:
    gym_cls = ENVS[env_name]['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(n_envs)]
    for env, task in zip(envs, envs[0].sample_tasks(n_envs)):
        env.set_task(task)
    size = envs[0].action_space.shape[0]
    # Small actions: the walkers stay up for the whole wave (a fallen robot still steps).
    actions = np.random.default_rng(0).uniform(-0.1, 0.1, (steps, n_envs, size))
    kept, gathered, reads_after = [], [], []
    for _ in range(repeats):
        gathered.append(_time(gym_cls, envs, actions, gather=True))
        kept.append(_time(gym_cls, envs, actions, gather=False))
        reads_after.append(_time(gym_cls, envs, actions, gather=False, reads_after=True))
    row = dict(env=env_name, envs=n_envs, steps=steps, repeats=repeats,
               gathered_us=statistics.median(gathered), kept_us=statistics.median(kept),
               reads_after_us=statistics.median(reads_after))
    row['speedup'] = row['gathered_us'] / row['kept_us']
    row['reads_speedup'] = row['reads_after_us'] / row['kept_us']
    return row


def format_table(rows) -> str:
    lines = ['Microseconds per env step of `batch_step` in one lean wave (medians), the wave\'s '
             'constants gathered at every step and kept once, and (kept once) the reads of the '
             'simulations after all steps instead of next to each:', '',
             '| env | envs | gathered every step | kept once | speed-up | kept once, reads '
             'after the steps | reads next to each step: speed-up |',
             '|---|---|---|---|---|---|---|']
    lines += [f'| {r["env"]} | {r["envs"]} | {r["gathered_us"]:.1f} | {r["kept_us"]:.1f} | '
              f'{r["speedup"]:.3f} | {r["reads_after_us"]:.1f} | {r["reads_speedup"]:.3f} |'
              for r in rows]
    return '\n'.join(lines)


@click.command(cls=StrictCommand)
@click.option('--env', 'envs', multiple=True, type=click.Choice(DEFAULT_ENVS),
              default=DEFAULT_ENVS, show_default=True)
@click.option('--envs', 'n_envs', type=IntRange(1, 2000), default=200, show_default=True,
              help='Envs in the wave (a worker of the paper-size meta-batch: 20 x 10).')
@click.option('--steps', type=IntRange(1, 100000), default=50, show_default=True,
              help='Steps of the wave per timing.')
@click.option('--repeats', type=IntRange(1, 1000), default=10, show_default=True)
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Write wave_constants.json and wave_constants.md here.')
def main(envs, n_envs, steps, repeats, out):
    """Print the table of ENVS."""
    rows = []
    for env_name in envs:
        click.echo(f'measuring {env_name}', err=True)
        rows.append(measure(env_name, n_envs, steps, repeats))
    table = format_table(rows)
    click.echo(table)
    if out:
        write_results(out, 'wave_constants', rows, table)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
