#!/usr/bin/env python3
"""A lean wave's constants kept once against gathered at every step, its reads of the
simulations next to each step against after all steps, and a part's constants taken
out of the wave's against computed, side by side.

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
(``MujocoMetaEnv._step_all``'s parts). Then, where episodes end early (a walker
that falls: 4% of the envs left end at each step, :func:`ending_parts`), each step
steps another part of the wave, whose constants are taken out of the whole wave's
(``wave_constant``'s ``take``: the rows of an array, the plan's models and
addresses at those positions) against computed from the part's envs at every step
where the part changed (as before 2026-11-28). The five alternate ``--repeats``
times in one process. Medians; the ratios are speed-ups of ``batch_step`` alone (the
sampler's step also holds the policy forward and the recording). Run it on quiet
cores.
"""
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp.envs import _mujoco, _robots
from garage_promp.experiment.env_names import ENVS
from garage_promp.validation import IntRange, StrictCommand

from bench_io import measure_envs, medians
import click
import numpy as np

DEFAULT_ENVS = ('HalfCheetahFwdBack', 'HopperRandParams', 'WalkerFwdBack', 'WalkerRandParams',
                'AntRandDirec', 'HumanoidRandDirec')


def _every_step(envs, name, compute, take=None):
    del name, take
    return compute(envs)


def _each_part_computed(envs, name, compute, take=None):
    del take
    return _KEPT(envs, name, compute)


_KEPT = _mujoco.wave_constant


def _no_spec(datas, parts):
    del datas, parts


def _time(gym_cls, envs, actions, gather, reads_after=False, parts=None,
          part_computed=False) -> float:
    """Microseconds per env step of ``batch_step`` over ``actions`` in one wave; with
    ``parts``, step ``t`` steps the envs ``parts[t]`` only (episodes that end), and
    with ``part_computed`` each part's constants are computed from its envs rather
    than taken out of the wave's."""
    spec = _mujoco.MujocoMetaEnv.__dict__['_parts_spec']
    saved = _mujoco.wave_constant, _robots.wave_constant
    lookup = _every_step if gather else _each_part_computed if part_computed else _KEPT
    _mujoco.wave_constant = _robots.wave_constant = lookup
    if reads_after:
        _mujoco.MujocoMetaEnv._parts_spec = staticmethod(_no_spec)  # pylint: disable=protected-access
    try:
        for env in envs:
            env.reset(seed=0)
        models = _mujoco.identical_models(envs)
        models.wave = envs
        if parts is None:
            parts = [np.arange(len(envs))] * actions.shape[0]
        stepped = sum(len(part) for part in parts)
        subsets = [[envs[i] for i in part] for part in parts]
        with _mujoco.stepping_with_models(models):
            start = time.perf_counter()
            for wave_actions, part, subset in zip(actions, parts, subsets):
                gym_cls.batch_step(subset, wave_actions[part])
            elapsed = time.perf_counter() - start
    finally:
        _mujoco.wave_constant, _robots.wave_constant = saved
        _mujoco.MujocoMetaEnv._parts_spec = spec  # pylint: disable=protected-access
    return elapsed / stepped * 1e6


def ending_parts(n_envs: int, steps: int, seed: int = 0) -> list:
    """The envs each step steps where episodes end as early HopperRandParams episodes do:
    every env at the first step, then 4% of those left end at each step (of 200, about
    a quarter stepped at the 35th step), at random."""
    rng = np.random.default_rng(seed)
    left, parts = np.arange(n_envs), []
    for _ in range(steps):
        parts.append(left)
        left = np.sort(rng.choice(left, int(round(len(left) * 0.96)), replace=False))
        if not len(left):
            left = parts[-1][:1]
    return parts


def measure(env_name: str, n_envs: int, steps: int, repeats: int) -> dict:
    gym_cls = ENVS[env_name]['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(n_envs)]
    for env, task in zip(envs, envs[0].sample_tasks(n_envs)):
        env.set_task(task)
    size = envs[0].action_space.shape[0]
    # Small actions: the walkers stay up for the whole wave (a fallen robot still steps).
    actions = np.random.default_rng(0).uniform(-0.1, 0.1, (steps, n_envs, size))
    parts = ending_parts(n_envs, steps)
    kept, gathered, reads_after, taken, computed = [], [], [], [], []
    for _ in range(repeats):
        gathered.append(_time(gym_cls, envs, actions, gather=True))
        kept.append(_time(gym_cls, envs, actions, gather=False))
        reads_after.append(_time(gym_cls, envs, actions, gather=False, reads_after=True))
        taken.append(_time(gym_cls, envs, actions, gather=False, parts=parts))
        computed.append(_time(gym_cls, envs, actions, gather=False, parts=parts,
                              part_computed=True))
    row = dict(env=env_name, envs=n_envs, steps=steps, repeats=repeats,
               **medians(gathered_us=gathered, kept_us=kept, reads_after_us=reads_after,
                         parts_taken_us=taken, parts_computed_us=computed))
    row['speedup'] = row['gathered_us'] / row['kept_us']
    row['reads_speedup'] = row['reads_after_us'] / row['kept_us']
    row['parts_speedup'] = row['parts_computed_us'] / row['parts_taken_us']
    return row


def format_table(rows) -> str:
    lines = ['Microseconds per env step of `batch_step` in one lean wave (medians), the wave\'s '
             'constants gathered at every step and kept once, and (kept once) the reads of the '
             'simulations after all steps instead of next to each; then a wave whose episodes '
             'end (4% of those left at each step), each step\'s part of the constants computed '
             'from its envs or taken out of the wave\'s:', '',
             '| env | envs | gathered every step | kept once | speed-up | kept once, reads '
             'after the steps | reads next to each step: speed-up | ending: parts computed | '
             'ending: parts taken | parts taken: speed-up |',
             '|---|---|---|---|---|---|---|---|---|---|']
    lines += [f'| {r["env"]} | {r["envs"]} | {r["gathered_us"]:.1f} | {r["kept_us"]:.1f} | '
              f'{r["speedup"]:.3f} | {r["reads_after_us"]:.1f} | {r["reads_speedup"]:.3f} | '
              f'{r["parts_computed_us"]:.1f} | {r["parts_taken_us"]:.1f} | '
              f'{r["parts_speedup"]:.3f} |'
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
    measure_envs(envs, lambda name: measure(name, n_envs, steps, repeats), format_table, out,
                 'wave_constants')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
