#!/usr/bin/env python3
"""A process's start-up: ``import garage_promp`` against the same with the modules it defers.

    python benchmarks/startup.py                     # 10 pairs
    python benchmarks/startup.py --repeats 20 --out benchmarks/results

Every launcher, sampler worker and ``--help`` starts with ``import garage_promp``
(garage and dowel come with it). garage and dowel import at module level modules that
only a few of their functions use (``ray``, ``cma``, ``scipy.signal``, ``scipy.stats``,
``matplotlib.pyplot``); ``garage_promp/_garage_compat.py`` (workaround 13) has them
imported at their first use instead. Side by side, alternating ``--repeats`` times,
each in a fresh interpreter: the wall seconds and the peak resident memory of
``import garage_promp, garage_promp.experiment`` (what the launchers import), and of
the same followed by importing those modules, which is what every process paid before.
The ratios are taken pair by pair; medians. Run it on quiet cores.
"""
import os
import subprocess
import sys
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp._garage_compat import DEFERRED_IMPORTS
from garage_promp.validation import IntRange, StrictCommand

from bench_io import medians, write_results
import click

IMPORT = 'import garage_promp, garage_promp.experiment'


def deferred_modules() -> list:
    """The modules workaround 13 defers, each once (what the package's imports skip)."""
    return sorted({target for names in DEFERRED_IMPORTS.values()
                   for _, target in names.values()})


#: The longest a process may take before it is killed and the benchmark ends.
TIMEOUT_S = 300.


def timed_process(code: str) -> tuple:
    """Wall seconds and peak resident MiB of ``python -c code`` in a fresh interpreter.

    Raises:
        RuntimeError: If it fails, or takes more than :data:`TIMEOUT_S` (then killed).

    """
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    while True:  # (os.wait4 for the child's own peak memory; polled, so it cannot hang)
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        wall = time.perf_counter() - start
        if pid:
            break
        if wall > TIMEOUT_S:
            process.kill()
            os.wait4(process.pid, 0)
            raise RuntimeError(f'python -c {code!r} took more than {TIMEOUT_S:.0f} s: killed')
        time.sleep(0.002)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f'python -c {code!r} exited {process.returncode} (run it to see why)')
    return wall, usage.ru_maxrss / 1024  # (Linux: KiB)


def measure(repeats: int) -> dict:
    """The two processes alternating ``repeats`` times (after one of each not counted)."""
    modules = deferred_modules()
    eager = f'{IMPORT}; import {", ".join(modules)}'
    timed_process(IMPORT)  # warm the file cache
    timed_process(eager)
    deferred, every = [], []  # (wall s, peak MiB) per pair
    for _ in range(repeats):
        deferred.append(timed_process(IMPORT))
        every.append(timed_process(eager))
    return dict(
        deferred_modules=modules, repeats=repeats,
        **medians(deferred_s=[s for s, _ in deferred], eager_s=[s for s, _ in every],
                  time_ratio=[d[0] / e[0] for d, e in zip(deferred, every)],
                  deferred_peak_mib=[m for _, m in deferred],
                  eager_peak_mib=[m for _, m in every],
                  memory_ratio=[d[1] / e[1] for d, e in zip(deferred, every)]))


def format_table(row: dict) -> str:
    return '\n'.join([
        f'`{IMPORT}` in a fresh interpreter, against the same followed by importing '
        f'{", ".join(row["deferred_modules"])} (medians of {row["repeats"]} pairs):',
        '',
        '| process | wall (s) | peak memory (MiB) |',
        '|---|---|---|',
        f'| the deferred imports (today) | {row["deferred_s"]:.2f} | '
        f'{row["deferred_peak_mib"]:.0f} |',
        f'| every module imported at start-up | {row["eager_s"]:.2f} | '
        f'{row["eager_peak_mib"]:.0f} |',
        f'| today / every module | {row["time_ratio"]:.2f} | {row["memory_ratio"]:.2f} |'])


@click.command(cls=StrictCommand)
@click.option('--repeats', type=IntRange(1, 1000), default=10, show_default=True,
              help='Pairs of processes, alternating.')
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Directory for startup.{json,md}.')
def main(repeats, out):
    """Time a process's start-up with and without the deferred imports, side by side."""
    row = measure(repeats)
    table = format_table(row)
    click.echo(table)
    if out:
        write_results(out, 'startup', [row], table, python=sys.version.split()[0])


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
