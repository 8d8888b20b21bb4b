#!/usr/bin/env python3
"""Meta-World's step for a whole wave against env by env, side by side, per env class.

    python benchmarks/metaworld_waves.py    # ML10's ten train classes
    python benchmarks/metaworld_waves.py --env door-open-v3 --out benchmarks/results

For each Meta-World v3 env class: a wave of ``--envs`` envs (ML1 train tasks, two
copies of each, as a sampler worker holds them at the ML1/ML10 settings) stepped by
``MetaWorldEnv.batch_step`` with random actions, resets every ``--horizon`` steps
(untimed), three ways, alternating ``--repeats`` times in one process:

* ``env by env``: each env's own ``step`` (Meta-World's, with the package's exact
  speed-ups), the wave path switched off;
* ``wave, reward env by env``: the wave (``garage_promp/envs/_metaworld_batch.py``), the
  class's own ``evaluate_state`` row by row;
* ``wave, array reward``: the wave with the class's reward as arrays (where it has one);
* ``wave, reads after the steps``: as the last, but what the observation and reward read
  of each simulation is gathered out of every ``MjData`` once all are stepped
  (``gp_gather``, as before 2026-11-28), not copied next to each step by the compiled loop;

and the bare physics of the same model (``mj_step`` x frame_skip with the same gripper
controls, one ``MjData``) for scale. Microseconds per env step (medians), and the
speed-ups. The three give the same numbers (``tests/envs/test_metaworld_batch.py``).
Run it on quiet cores.
"""
import contextlib
import pathlib
import statistics
import sys
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp.envs import MetaWorldTaskSampler, _metaworld_batch, make_benchmark
from garage_promp.envs.metaworld import MetaWorldEnv
from garage_promp.validation import IntRange, StrictCommand

import click
import mujoco
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_io import check_metaworld_names, write_results  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_ENVS = ('reach-v3', 'push-v3', 'pick-place-v3', 'door-open-v3', 'drawer-close-v3',
                'button-press-topdown-v3', 'peg-insert-side-v3', 'window-open-v3', 'sweep-v3',
                'basketball-v3')
MODES = ('env_by_env', 'wave_own_reward', 'wave_array_reward', 'wave_reads_after')


def _envs(name: str, count: int, horizon: int):
    sampler = MetaWorldTaskSampler(make_benchmark('ML1', name, seed=1), 'train',
                                   max_episode_length=horizon, seed=1)
    updates = sampler.sample(-(-count // 2))
    return [update() for update in updates for _ in range(2)][:count]


@contextlib.contextmanager
def mode(env_class, which: str):
    """Within ``with``: the wave off (``env_by_env``), the class's array reward off
    (``wave_own_reward``), everything as shipped (``wave_array_reward``), or the reads
    next to each step off (``wave_reads_after``)."""
    step_batch, parts_after = _metaworld_batch.step_batch, _metaworld_batch._parts_after  # pylint: disable=protected-access
    key = (env_class.__module__, env_class.__name__)
    kernel = _metaworld_batch.KERNELS.get(key)
    try:
        if which == 'env_by_env':
            _metaworld_batch.step_batch = lambda envs, actions: None
        elif which == 'wave_own_reward' and kernel is not None:
            _metaworld_batch.KERNELS[key] = _metaworld_batch.Kernel(kernel.positions,
                                                                    kernel.rotations)
        elif which == 'wave_reads_after':
            _metaworld_batch._parts_after = lambda plan: ()  # pylint: disable=protected-access
        _metaworld_batch._PLANS.clear()  # pylint: disable=protected-access
        yield
    finally:
        _metaworld_batch.step_batch = step_batch
        _metaworld_batch._parts_after = parts_after  # pylint: disable=protected-access
        if kernel is not None:
            _metaworld_batch.KERNELS[key] = kernel
        _metaworld_batch._PLANS.clear()  # pylint: disable=protected-access


def _time_waves(envs, actions, horizon) -> float:
    """Microseconds per env step over the waves of ``actions`` (``(steps, envs, 4)``),
    every env reset every ``horizon`` steps (untimed)."""
    total = 0.
    for start in range(0, len(actions), horizon):
        for env in envs:
            env.reset()
        begin = time.perf_counter()
        for wave in actions[start:start + horizon]:
            MetaWorldEnv.batch_step(envs, wave)
        total += time.perf_counter() - begin
    return total / (len(actions) * len(envs)) * 1e6


def _time_physics(env, actions) -> float:
    inner = env.unwrapped
    model, data = inner.model, inner.data
    begin = time.perf_counter()
    for action in actions:
        data.ctrl[:] = (action[-1], -action[-1])  # the gripper, as Meta-World's step sets it
        mujoco.mj_step(model, data, nstep=inner.frame_skip)
    return (time.perf_counter() - begin) / len(actions) * 1e6


def measure(name: str, n_envs: int, steps: int, repeats: int, horizon: int) -> dict:
    envs = _envs(name, n_envs, horizon)
    env_class = type(envs[0]._env)  # pylint: disable=protected-access
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, n_envs, 4))
    times = {which: [] for which in MODES}
    for _ in range(repeats):
        for which in MODES:
            with mode(env_class, which):
                times[which].append(_time_waves(envs, actions, horizon))
    envs[0].reset()
    physics = statistics.median(_time_physics(envs[0], actions[:, 0]) for _ in range(repeats))
    for env in envs:
        env.close()
    us = {which: statistics.median(values) for which, values in times.items()}
    has_array_reward = getattr(_metaworld_batch.KERNELS.get(
        (env_class.__module__, env_class.__name__)), 'reward', None) is not None
    return dict(env=name, envs=n_envs, physics_us=physics, array_reward=has_array_reward,
                **{f'{which}_us': value for which, value in us.items()},
                wave_speedup=us['env_by_env'] / us['wave_array_reward'],
                array_reward_speedup=us['wave_own_reward'] / us['wave_array_reward'],
                reads_speedup=us['wave_reads_after'] / us['wave_array_reward'],
                physics_fraction=physics / us['wave_array_reward'])


def table(rows) -> str:
    lines = ['| env | physics (µs) | env by env (µs) | wave, reward env by env (µs) | '
             'wave, array reward (µs) | wave, reads after the steps (µs) | array reward / '
             'reward env by env | wave / env by env | reads next to each step / after | '
             'physics / wave |', '|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['env']} | {r['physics_us']:.1f} | {r['env_by_env_us']:.1f} | "
                     f"{r['wave_own_reward_us']:.1f} | {r['wave_array_reward_us']:.1f} | "
                     f"{r['wave_reads_after_us']:.1f} | "
                     f"**{r['array_reward_speedup']:.2f}×** | **{r['wave_speedup']:.2f}×** | "
                     f"**{r['reads_speedup']:.3f}×** | {r['physics_fraction']:.2f} |")
    if len(rows) > 1:
        mean = {key: statistics.mean(r[key] for r in rows) for key in (
            'physics_us', 'env_by_env_us', 'wave_own_reward_us', 'wave_array_reward_us',
            'wave_reads_after_us')}
        lines.append(f"| mean of the {len(rows)} | {mean['physics_us']:.1f} | "
                     f"{mean['env_by_env_us']:.1f} | {mean['wave_own_reward_us']:.1f} | "
                     f"{mean['wave_array_reward_us']:.1f} | {mean['wave_reads_after_us']:.1f} | "
                     f"**{mean['wave_own_reward_us'] / mean['wave_array_reward_us']:.2f}×** | "
                     f"**{mean['env_by_env_us'] / mean['wave_array_reward_us']:.2f}×** | "
                     f"**{mean['wave_reads_after_us'] / mean['wave_array_reward_us']:.3f}×** | "
                     f"{mean['physics_us'] / mean['wave_array_reward_us']:.2f} |")
    return '\n'.join(lines)


@click.command(cls=StrictCommand)
@click.option('--env', 'names', multiple=True, default=DEFAULT_ENVS, show_default=True,
              help='Meta-World v3 env names.')
@click.option('--envs', 'n_envs', type=IntRange(min=1, max=200), default=40,
              show_default=True, help='Envs in the wave.')
@click.option('--steps', type=IntRange(min=1), default=200, show_default=True,
              help='Wave steps per timing.')
@click.option('--repeats', type=IntRange(min=1), default=3, show_default=True)
@click.option('--horizon', type=IntRange(min=1, max=500), default=100, show_default=True)
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Write metaworld_waves.json (with the machine and date) and .md here.')
def main(names, n_envs, steps, repeats, horizon, out):
    """Print the side-by-side table for the env classes."""
    check_metaworld_names(names)
    rows = []
    for name in names:
        rows.append(measure(name, n_envs, steps, repeats, horizon))
        click.echo(f"{name}: array reward {rows[-1]['array_reward_speedup']:.2f}x, "
                   f"wave {rows[-1]['wave_speedup']:.2f}x", err=True)
    text = table(rows)
    click.echo(text)
    if out is not None:
        write_results(out, 'metaworld_waves', rows, text, envs=n_envs, steps=steps,
                      repeats=repeats, horizon=horizon)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
