#!/usr/bin/env python3
"""What the sampler's checks of env output and the stuck-worker watchdog cost.

Side by side in one process, interleaved (``--repeats`` pairs, each pair in
alternating order, so that a noisy machine hits both alike): one ProMP
meta-batch (every sampling round, the inner steps between them) through the
in-process sampler with every check on, as every run has them, and with every
check off:

* the sampler's own checks of what an env returns
  (``RolloutWorker._check_step`` on the wrapped path: the observation has the
  observation space's shape, the reward is one number, the env infos keep the
  first step's keys; ``RolloutWorker._check_wave_finite`` on both paths: no
  NaN/inf reward or observation, once per lockstep step for the whole wave);
* the env's own finiteness checks of actions, rewards and observations
  (``GymnasiumEnv(check_finite=True)``): the lean path applies them once per
  lockstep step for all its envs; on the wrapped path the sampler's checks
  stand in for them (``finiteness_checked_by_caller``), so that the same
  values are not checked twice, one small array at a time.

The watchdog costs a sampling worker nothing per step but a counter
increment; in a pool worker, a thread wakes every ``HEARTBEAT_SECONDS`` and
sends the counter and where the worker is. Its cost is measured directly: the
time of one such report (the lock, pickling, sending over a pipe that another
thread drains), as a fraction of the beat interval.

    python benchmarks/checks_cost.py
    python benchmarks/checks_cost.py --env HalfCheetahFwdBack --env WalkerFwdBack --repeats 7
    python benchmarks/throughput.py --mode checks --env HalfCheetahFwdBack   # the same table
"""
import contextlib
import multiprocessing
import os
import pathlib
import pickle
import statistics
import sys
import threading
import time

from garage_promp.experiment.env_names import EnvName
from garage_promp.validation import (
    OUTPUT_DIR,
    StrictCommand,
    count,
)

import click

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_io import check_env_batches, env_setup, promp_experiment, write_results  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_ENVS = ('HalfCheetahFwdBack', 'WalkerFwdBack')


def _gymnasium_envs(env):
    """Every ``GymnasiumEnv`` layer of a garage env (under garage's wrappers)."""
    from garage_promp.envs.gymnasium_env import GymnasiumEnv  # pylint: disable=import-outside-toplevel
    found, seen = [], 0
    while env is not None and seen < 10:
        if isinstance(env, GymnasiumEnv):
            found.append(env)
        env, seen = getattr(env, '_env', None), seen + 1
    return found


@contextlib.contextmanager
def checks_off(backend):
    """Every check of env output off in ``backend``'s in-process workers, then back on."""
    from garage_promp.sampler.rollout import RolloutWorker  # pylint: disable=import-outside-toplevel
    saved = {name: RolloutWorker.__dict__[name] for name in ('_check_step', '_check_wave_finite')}
    layers = [layer for worker in backend._workers  # pylint: disable=protected-access
              for env in [worker._template, *worker._pool]  # pylint: disable=protected-access
              for layer in _gymnasium_envs(env)]
    flags = [layer._check_finite for layer in layers]  # pylint: disable=protected-access
    try:
        for name in saved:
            setattr(RolloutWorker, name, lambda *args, **kwargs: None)
        for layer in layers:
            layer._check_finite = False  # pylint: disable=protected-access
        yield
    finally:
        for name, method in saved.items():
            setattr(RolloutWorker, name, method)
        for layer, flag in zip(layers, flags):
            layer._check_finite = flag  # pylint: disable=protected-access


def sampling_seconds(env_name, lean, repeats, meta_batch_size, episodes_per_task):
    """Seconds of one meta-batch with the checks on and off, ``repeats`` interleaved pairs."""
    exp = promp_experiment(env_name, meta_batch_size, episodes_per_task)
    algo = exp.algo
    algo.sampler._lean = lean  # pylint: disable=protected-access
    times = {'on': [], 'off': []}
    steps = []
    try:
        algo.sample_meta_batch(0)  # start-up: env copies, first forward
        backend = algo.sampler.backend
        for i in range(repeats):
            for which in (('on', 'off') if i % 2 == 0 else ('off', 'on')):
                with (checks_off(backend) if which == 'off' else contextlib.nullcontext()):
                    start = time.perf_counter()
                    batches = algo.sample_meta_batch(1 + i)
                    times[which].append(time.perf_counter() - start)
                steps.append(sum(int(b.episodes.lengths.sum()) for b in batches))
        heartbeat = heartbeat_cost(backend._workers[0])  # pylint: disable=protected-access
    finally:
        algo.sampler.shutdown_worker()
    return times, statistics.median(steps), heartbeat


def heartbeat_cost(worker, beats=2000):
    """Seconds of one watchdog progress report of ``worker`` (a ``RolloutWorker`` that
    has sampled, so its report says where it is), and that over the beat interval."""
    from garage_promp.sampler import backends  # pylint: disable=import-outside-toplevel
    reader, writer = multiprocessing.Pipe(duplex=False)
    drained = threading.Thread(target=lambda: [reader.recv_bytes() for _ in range(beats)],
                               daemon=True)
    drained.start()
    lock = threading.Lock()
    start = time.perf_counter()
    for _ in range(beats):
        with lock:
            writer.send_bytes(pickle.dumps(('progress', (worker.progress,
                                                         backends._where(worker)))))  # pylint: disable=protected-access
    seconds = (time.perf_counter() - start) / beats
    drained.join(timeout=10)
    return seconds, seconds / backends.HEARTBEAT_SECONDS


def format_table(results):
    lines = ['Seconds of one ProMP meta-batch (every sampling round) in one process, checks on and '
             'off, medians of interleaved pairs; cost = on / off - 1 (median of the pairs\' '
             'ratios):', '',
             '| env | path | env steps | checks on (s) | checks off (s) | cost of the checks |',
             '|---|---|---|---|---|---|']
    for r in results:
        lines.append(f"| {r['env']} | {r['path']} | {r['steps']:,.0f} | {r['on_s']:.3f} | "
                     f"{r['off_s']:.3f} | {100 * r['cost']:+.2f}% |")
    seconds = max(r['heartbeat_s'] for r in results)
    lines += ['', f'Watchdog: one progress report of a pool worker takes at most '
              f'{1e6 * seconds:.1f} µs, every {_beat()} s: at most '
              f'{100 * seconds / _beat():.4f}% of a worker\'s time.']
    return '\n'.join(lines)


def _beat():
    from garage_promp.sampler.backends import HEARTBEAT_SECONDS  # pylint: disable=import-outside-toplevel
    return HEARTBEAT_SECONDS


def measure(envs, repeats, meta_batch_size, episodes_per_task):
    """The cost of the checks on each of ``envs`` (lean and wrapped path for the package's
    envs, wrapped for ML1), as the rows :func:`format_table` prints; one thread, as a
    sampling worker."""
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    check_env_batches(envs, meta_batch_size, episodes_per_task, env_setup)
    results = []
    for env_name in envs:
        for lean in ((False, ) if env_name.startswith('ML1:') else (True, False)):
            click.echo(f'measuring {env_name} ({"lean" if lean else "wrapped"} path)', err=True)
            times, steps, heartbeat = sampling_seconds(env_name, lean, repeats,
                                                       meta_batch_size, episodes_per_task)
            ratios = [a / b for a, b in zip(times['on'], times['off'])]
            results.append(dict(env=env_name, path='lean' if lean else 'wrapped', steps=steps,
                                on_s=statistics.median(times['on']),
                                off_s=statistics.median(times['off']),
                                cost=statistics.median(ratios) - 1, repeats=repeats,
                                on_all=times['on'], off_all=times['off'],
                                heartbeat_s=heartbeat[0]))
    return results


@click.command(cls=StrictCommand)
@click.option('--env', 'envs', multiple=True, type=EnvName(ml1_task=True), default=DEFAULT_ENVS,
              show_default=True,
              help='A paper env, or ML1:<task> for a Meta-World ML1 task (wrapped path only).')
@click.option('--repeats', type=count(), default=5, show_default=True,
              help='Interleaved on/off pairs per env and path.')
@click.option('-M', '--meta-batch-size', type=count(), default=20, show_default=True)
@click.option('-R', '--episodes-per-task', type=count(), default=10, show_default=True)
@click.option('--out', type=OUTPUT_DIR, default=None,
              help='Write checks_cost.json and checks_cost.md here.')
def main(envs, repeats, meta_batch_size, episodes_per_task, out):
    """Print what the checks and the watchdog cost on ENVS."""
    results = measure(envs, repeats, meta_batch_size, episodes_per_task)
    table = format_table(results)
    click.echo(table)
    if out:
        write_results(out, 'checks_cost', results, table, meta_batch_size=meta_batch_size,
                      episodes_per_task=episodes_per_task)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
