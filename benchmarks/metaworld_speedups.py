#!/usr/bin/env python3
"""Meta-World's own per-step Python against the package's exact speed-ups, side by side.

    python benchmarks/metaworld_speedups.py    # reach, push and ML10's ten train classes
    python benchmarks/metaworld_speedups.py --env push-v3 --out benchmarks/results

For each Meta-World v3 env: microseconds per ``env.step`` of a garage
``MetaWorldEnv`` (random actions, resets at the horizon) with Meta-World
3.1.1's own code and with ``garage_promp/envs/_metaworld_speedups.py`` in place
(the object quaternion and the gripper-object contact test, equal bit for bit),
alternating the two ``--repeats`` times in one process, and the bare physics of
the same model (``mj_step`` x frame_skip with the same controls) for scale.
Medians; the ratio is the speed-up. Run it on quiet cores.
"""
import json
import pathlib
import statistics
import sys
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp.envs import MetaWorldTaskSampler, _metaworld_speedups, make_benchmark
from garage_promp.validation import IntRange, StrictCommand

import click
import mujoco
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_io import check_metaworld_names  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_ENVS = ('reach-v3', 'push-v3', 'pick-place-v3', 'door-open-v3', 'drawer-close-v3',
                'button-press-topdown-v3', 'peg-insert-side-v3', 'window-open-v3', 'sweep-v3',
                'basketball-v3')


def _env(name: str, horizon: int):
    sampler = MetaWorldTaskSampler(make_benchmark('ML1', name, seed=1), 'train',
                                   max_episode_length=horizon, seed=1)
    return sampler.sample(1)[0]()


def _time_steps(env, actions, horizon) -> float:
    """Microseconds per env.step over ``actions`` (reset every ``horizon`` steps, untimed)."""
    total = 0.
    for start in range(0, len(actions), horizon):
        env.reset()
        begin = time.perf_counter()
        for action in actions[start:start + horizon]:
            env.step(action)
        total += time.perf_counter() - begin
    return total / len(actions) * 1e6


def _time_physics(env, actions) -> float:
    inner = env.unwrapped
    model, data = inner.model, inner.data
    frame_skip = inner.frame_skip
    begin = time.perf_counter()
    for action in actions:
        data.ctrl[:] = (action[-1], -action[-1])  # the gripper, as Meta-World's step sets it
        mujoco.mj_step(model, data, nstep=frame_skip)
    return (time.perf_counter() - begin) / len(actions) * 1e6


def measure(name: str, steps: int, repeats: int, horizon: int) -> dict:
    env = _env(name, horizon)
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, 4))
    own, fast = [], []
    for _ in range(repeats):
        _metaworld_speedups.uninstall()
        own.append(_time_steps(env, actions, horizon))
        _metaworld_speedups.install()
        fast.append(_time_steps(env, actions, horizon))
    env.reset()
    physics = statistics.median(_time_physics(env, actions) for _ in range(repeats))
    env.close()
    own_us, fast_us = statistics.median(own), statistics.median(fast)
    return dict(env=name, physics_us=physics, metaworld_us=own_us, speedups_us=fast_us,
                speedup=own_us / fast_us, physics_fraction_before=physics / own_us,
                physics_fraction_after=physics / fast_us)


def table(rows) -> str:
    lines = ['| env | physics (µs) | Meta-World own (µs) | with speed-ups (µs) | speed-up | '
             'physics / step before | after |', '|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['env']} | {r['physics_us']:.1f} | {r['metaworld_us']:.1f} | "
                     f"{r['speedups_us']:.1f} | **{r['speedup']:.2f}×** | "
                     f"{r['physics_fraction_before']:.2f} | {r['physics_fraction_after']:.2f} |")
    return '\n'.join(lines)


@click.command(cls=StrictCommand)
@click.option('--env', 'envs', multiple=True, default=DEFAULT_ENVS, show_default=True,
              help='Meta-World v3 env names.')
@click.option('--steps', type=IntRange(min=100), default=2000, show_default=True)
@click.option('--repeats', type=IntRange(min=1), default=3, show_default=True)
@click.option('--horizon', type=IntRange(min=1, max=500), default=500, show_default=True)
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Write metaworld_speedups.json and .md here.')
def main(envs, steps, repeats, horizon, out):
    """Print the side-by-side table for the envs."""
    check_metaworld_names(envs)
    if out is not None:
        pathlib.Path(out).mkdir(parents=True, exist_ok=True)
    rows = []
    for name in envs:
        rows.append(measure(name, steps, repeats, horizon))
        click.echo(f"{name}: {rows[-1]['speedup']:.2f}x", err=True)
    text = table(rows)
    click.echo(text)
    if out is not None:
        (pathlib.Path(out) / 'metaworld_speedups.json').write_text(json.dumps(rows, indent=1))
        (pathlib.Path(out) / 'metaworld_speedups.md').write_text(text + '\n')
    _metaworld_speedups.install()


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
