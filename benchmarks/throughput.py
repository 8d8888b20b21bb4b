#!/usr/bin/env python3
"""Meta-training throughput, side by side, in one run.

``table`` mode (default) measures, for each environment and batch:

* ``raw``: random actions stepped through the same garage environments by the
  same number of processes, no policy: the machine's physical limit;
* ``garage``: garage 2021.3's own ``MAMLTRPO`` (one sampler call per task and
  inner step, one policy forward per env step), same envs, batch and workers;
* every garage_promp algorithm of the paper table,

each as seconds per iteration split into sampling (everything up to the
processed post-update batch, inner steps for sampling included) and update
(the outer optimisation and logging), with peak memory, and prints a table of
the ratios. ``scaling`` mode times ProMP at meta-batch sizes 10/20/40 with 1
and 2 workers and writes a PNG plot. Both write JSON.

Every measurement runs in a fresh Python process, so peak memory (the
process's peak RSS, and the largest sampler worker's) belongs to it alone.
Iteration 1 carries the start-up (worker processes, environment copies);
with ``--iters`` > 1 the reported time is the mean of the later iterations.

    python benchmarks/throughput.py                    # table, ~15 min on 2 cores
    (results go to data/benchmarks/ unless --out says otherwise; the tracked
    figures in benchmarks/results/ are updated only with --out benchmarks/results)
    python benchmarks/throughput.py --mode scaling     # + benchmarks/scaling.png
    python benchmarks/throughput.py --quick            # a 1-minute smoke run
"""
import functools
import json
import os
import pathlib
import platform
import queue
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings

from garage_promp._process import die_with_parent
from garage_promp.experiment.env_names import EnvName
from garage_promp.experiment.paper_config import ALGOS
from garage_promp.validation import (
    OUTPUT_DIR,
    SECONDS,
    WORKERS,
    CommaList,
    StrictGroup,
    check_device,
    check_output_path,
    count,
    distinct,
    given_flags,
    usage_errors,
)

import click

HERE = pathlib.Path(__file__).resolve().parent
# Its sibling modules (bench_io, checks_cost) import by name, also when a test loads this file.
sys.path.insert(0, str(HERE))
from bench_io import (  # noqa: E402  pylint: disable=wrong-import-position
    processor_name,
    read_saved_results,
    revisions,
)

#: Batches: the paper's (40 tasks × 20 episodes, paper Table 1) and a small one.
BATCHES = {
    'paper': dict(meta_batch_size=40, episodes_per_task=20),
    'small': dict(meta_batch_size=10, episodes_per_task=5),
    'quick': dict(meta_batch_size=2, episodes_per_task=2),
}


# ------------------------------------------------------------ measurements
def _env_setup(env_name):
    """The launchers' setup of ``env_name`` ('ML1:reach-v3' names an ML1 task)."""
    import garage_promp  # noqa: F401  (compat layer before garage)
    from garage_promp.experiment.env_setup import make_env_setup
    from garage_promp.experiment.paper_config import env_config
    family, _, task = env_name.partition(':')
    return env_config(family), make_env_setup(family, seed=1, task=task or None)


def _setup(env_name):
    """The launchers' setup of ``env_name``: its table row, env and tasks."""
    cfg, setup = _env_setup(env_name)
    return cfg, setup.env, setup.train_tasks


def _trainer(tmp):
    from garage.experiment.experiment import ExperimentContext
    from garage.trainer import Trainer
    return Trainer(ExperimentContext(snapshot_dir=tmp, snapshot_mode='none',
                                     snapshot_gap=1))


def _time_calls(obj, sample_name, update_name, timings):
    """Wrap two bound methods of ``obj`` to record their wall times."""
    for name, key in ((sample_name, 'sample'), (update_name, 'update')):
        method = getattr(obj, name)

        def timed(*args, _method=method, _key=key, **kwargs):
            start = time.perf_counter()
            out = _method(*args, **kwargs)
            timings[_key].append(time.perf_counter() - start)
            return out

        setattr(obj, name, timed)


def _raw_worker(env_name, n_steps, seed, barrier, results):
    import numpy as np
    _, _, task_sampler = _setup(env_name)
    np.random.seed(seed)
    env = task_sampler.sample(1)[0]()
    low, high = env.action_space.low, env.action_space.high
    rng = np.random.default_rng(seed)
    env.reset()
    barrier.wait()
    start = time.perf_counter()
    for _ in range(n_steps):
        if env.step(rng.uniform(low, high)).last:
            env.reset()
    results.put(time.perf_counter() - start)


def at_barrier(target, args_per_process):
    """Run ``target(*args, barrier, queue)`` in one forked process per ``args``; their results.

    Each process sets up, waits at the shared barrier, then puts its result
    on the queue, so the processes' timed parts run at the same time.
    """
    import multiprocessing as mp
    ctx = mp.get_context('fork')
    barrier, results = ctx.Barrier(len(args_per_process)), ctx.Queue()
    procs = [ctx.Process(target=_ending_with_parent, args=(os.getpid(), target,
                                                           (*args, barrier, results)))
             for args in args_per_process]
    for proc in procs:
        proc.start()
    out = []
    try:
        while len(out) < len(procs):
            try:
                out.append(results.get(timeout=1.))
            except queue.Empty:  # one that died gives no result, and the others wait for it
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise click.ClickException(
                        f'a measurement process (pid {dead[0].pid}) ended with exit status '
                        f'{dead[0].exitcode} before giving its result') from None
    finally:
        if len(out) < len(procs):
            for proc in procs:
                proc.kill()
        for proc in procs:
            proc.join()
    return out


def _ending_with_parent(parent_pid, target, args):
    """A measurement process that the kernel ends when the benchmark ends, however it ends."""
    die_with_parent(parent_pid=parent_pid)
    target(*args)


def measure_raw(env_name, n_workers, n_steps):
    """Aggregate random-action steps/s of ``n_workers`` processes.

    Environments are built before a barrier, so only stepping is timed.
    """
    _setup(env_name)  # import everything before forking
    elapsed = at_barrier(_raw_worker, [(env_name, n_steps, s) for s in range(n_workers)])
    return dict(steps_per_s=n_workers * n_steps / max(elapsed))


def measure_algo(env_name, algo, meta_batch_size, episodes_per_task, n_workers, iters, seed=1,
                 n_test_tasks=0, device='cpu'):
    """Seconds per iteration (sampling / update / meta-test) of one algorithm."""
    from garage_promp.experiment.builder import build_experiment
    from garage_promp.experiment.paper_config import env_config
    family, _, task = env_name.partition(':')
    cfg = env_config(family)
    timings = dict(sample=[], update=[])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = _trainer(tmp)
        if algo == 'garage-MAMLTRPO':
            from garage_peer import make_garage_maml_trpo
            algorithm, env = make_garage_maml_trpo(env_name, meta_batch_size, n_workers=n_workers,
                                                   seed=seed)
            _time_calls(algorithm, '_obtain_samples', '_train_once', timings)
        else:
            algorithm, env, setup = build_experiment(
                algo, family, seed, task=task or None, meta_batch_size=meta_batch_size,
                episodes_per_task=episodes_per_task, n_test_tasks=n_test_tasks or None,
                sampler='local' if n_workers == 1 else 'multiprocessing', n_workers=n_workers,
                device=device)
        trainer.setup(algorithm, env)
        trainer.train(n_epochs=iters,
                      batch_size=episodes_per_task * env.spec.max_episode_length)
        if algo != 'garage-MAMLTRPO':
            # The algorithm's own per-epoch timers (also logged as Time/...).
            timings['sample'] = [t['Sampling'] for t in algorithm.epoch_timings]
            timings['update'] = [t['Update'] for t in algorithm.epoch_timings]
            timings['meta_test'] = [t['MetaTest'] for t in algorithm.epoch_timings]
            timings['parts'] = {part: [t.get(f'Update/{part}', 0.)
                                       for t in algorithm.epoch_timings]
                                for part in algorithm.UPDATE_PARTS}
    steady = slice(1, None) if iters > 1 else slice(0, None)
    sample = sum(timings['sample'][steady]) / len(timings['sample'][steady])
    update = sum(timings['update'][steady]) / len(timings['update'][steady])
    env_steps = (cfg['K'] + 1) * meta_batch_size * episodes_per_task * env.spec.max_episode_length
    extra = {}
    if 'parts' in timings:  # the update's breakdown (Time/Update/<part>)
        extra['update_parts'] = {part: sum(v[steady]) / len(v[steady])
                                 for part, v in timings['parts'].items()}
    if n_test_tasks:
        meta_test = timings['meta_test'][steady]
        extra = dict(meta_test_s=sum(meta_test) / len(meta_test),
                     meta_test_steps=n_test_tasks * env.spec.max_episode_length * (
                         cfg['K'] * episodes_per_task + setup.n_test_episodes))
        extra['meta_test_steps_per_s'] = extra['meta_test_steps'] / extra['meta_test_s']
    return dict(sample_s=sample, update_s=update, iter_s=sample + update, K=cfg['K'], **extra,
                horizon=env.spec.max_episode_length,
                first_iter_s=timings['sample'][0] + timings['update'][0],
                env_steps=env_steps, sample_steps_per_s=env_steps / sample)


def run_one(spec):
    """Run one measurement (in this process) and add peak memory."""
    warnings.simplefilter('ignore')
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    if spec['what'] == 'raw':
        out = measure_raw(spec['env'], spec['n_workers'], spec['n_steps'])
    else:
        out = measure_algo(spec['env'], spec['what'], spec['meta_batch_size'],
                           spec['episodes_per_task'], spec['n_workers'], spec['iters'],
                           n_test_tasks=spec.get('n_test_tasks', 0),
                           device=spec.get('device', 'cpu'))
    out['peak_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out['worker_peak_rss_mb'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def run_isolated(spec):
    """One measurement in a fresh Python process."""
    # Told to end (SIGTERM, which ends its own children too) when this process ends.
    proc = subprocess.run([sys.executable, __file__, '_one', json.dumps(spec)],
                          capture_output=True, text=True, check=False,
                          preexec_fn=functools.partial(die_with_parent, signal.SIGTERM,
                                                       os.getpid()))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{')]
    if proc.returncode != 0 or not lines:
        raise click.ClickException(f'measurement {spec} failed:\n{proc.stderr[-3000:]}')
    return {**spec, **json.loads(lines[-1])}


def _gpu_name():
    import torch
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


class Deadline:
    """``--time-limit``: measurements not started within the limit are skipped, and listed."""

    def __init__(self, seconds):
        self.end = None if seconds is None else time.monotonic() + seconds
        self.skipped = []

    def skip(self, spec) -> bool:
        """Whether ``spec`` must be skipped (and then it is recorded as skipped)."""
        if self.end is None or time.monotonic() < self.end:
            return False
        self.skipped.append(spec)
        return True

    def report(self):
        if self.skipped:
            click.echo(f'time limit: {len(self.skipped)} measurement(s) not started: '
                       + '; '.join(json.dumps(spec) for spec in self.skipped), err=True)


def _saved_runs(saved) -> list:
    """``(title, meta, results)`` of a saved file: one run, or several under ``runs``."""
    if isinstance(saved, dict) and isinstance(saved.get('runs'), dict):
        return [(name, run.get('meta') or {}, run['results'])
                for name, run in saved['runs'].items()]
    return [(None, saved.get('meta') or {}, saved['results'])]


def _summary(meta, results) -> str:
    # workers mode: rows with their own raw rate (and its worker counts as a list)
    workers = isinstance(meta.get('n_workers'), list) or any(
        'raw_steps_per_s' in r for r in results if r['what'] != 'raw')
    if not results:
        text = 'no measurements'
    elif workers:
        text = format_worker_table(results)
    else:
        text = format_table(results)
        if any(r.get('update_parts') for r in results):
            text += ('\n\nUpdate breakdown (seconds, share of the update):\n\n'
                     + format_breakdown(results))
    skipped = meta.get('skipped') or []
    if skipped:
        text += (f'\n\nNot measured (time limit): {len(skipped)}\n'
                 + '\n'.join(f'- {json.dumps(spec)}' for spec in skipped))
    return text


def summarize_file(path) -> str:
    """The tables of a saved ``throughput.json`` (table mode) or ``workers.json`` (or of
    several such runs kept under ``runs``), and the measurements a time limit skipped."""
    try:
        runs = _saved_runs(read_saved_results(path))
        if not runs:
            raise ValueError('its "runs" hold no run')
        for _, meta, results in runs:
            if not (isinstance(meta, dict) and isinstance(results, list)
                    and all(isinstance(r, dict) and 'what' in r for r in results)):
                raise ValueError('no meta and results of measurements')
            for i, row in enumerate(results):  # no measurement of these is a truth value
                for key, value in row.items():
                    if isinstance(value, bool):
                        raise ValueError(f'results[{i}].{key} is {str(value).lower()}, '
                                         'where a measurement belongs')
        # Formatting reads every value as its column's: text where a time belongs is damage.
        if len(runs) == 1:
            return _summary(*runs[0][1:])
        return '\n\n'.join(f'## {title}\n\n{_summary(meta, results)}'
                             for title, meta, results in runs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as error:
        raise click.BadParameter(f'{path} is not a saved throughput.json or workers.json '
                                 f'({type(error).__name__}: {error})',
                                 param_hint='--summarize') from None


# ------------------------------------------------------------------ tables
def table_specs(envs, batches, algos, n_workers, iters, garage_iters, raw_steps, gpu=False):
    """Every measurement of the table mode, in run order.

    With ``gpu``, every garage_promp algorithm is measured a second time with
    its meta-update on the GPU (``device='cuda'``), for the GPU column, right
    after its CPU measurement (a run stopped at its time limit leaves whole rows).
    """
    specs = []
    for env in envs:
        specs.append(dict(what='raw', env=env, n_workers=n_workers, n_steps=raw_steps))
        for batch in batches:
            common = dict(env=env, batch=batch, n_workers=n_workers, **BATCHES[batch])
            if garage_iters:
                specs.append(dict(what='garage-MAMLTRPO', iters=garage_iters, **common))
            for a in algos:
                specs.append(dict(what=a, iters=iters, **common))
                if gpu:
                    specs.append(dict(what=a, iters=iters, device='cuda', **common))
        # Again at the end: the raw rate is the mean of the two, so that load
        # from other tenants during the run moves both sides of the ratio.
        specs.append(dict(what='raw', env=env, n_workers=n_workers, n_steps=raw_steps))
    return specs


def format_table(results):
    """Markdown table with ratios to the raw step rate and to garage."""
    raw_runs = {}
    for r in results:
        if r['what'] == 'raw':
            raw_runs.setdefault(r['env'], []).append(r['steps_per_s'])
    raw = {env: sum(rates) / len(rates) for env, rates in raw_runs.items()}
    garage = {(r['env'], r['batch']): r['iter_s'] for r in results
              if r['what'] == 'garage-MAMLTRPO'}
    on_gpu = {(r['env'], r['batch'], r['what']): r for r in results
              if r.get('device', 'cpu') != 'cpu'}
    head = ('| env | batch (M×R×H×(K+1)) | algorithm | s/iter | sampling s | update s | '
            'update share | sampling steps/s | vs raw steps/s | speed-up vs garage | '
            'peak RSS MB (main / worker) |')
    if on_gpu:
        head += ' GPU: update s | GPU: update share¹ | GPU: speed-up vs garage¹ |'
    lines = [head, '|' + '---|' * (head.count('|') - 1)]
    for env, rate in raw.items():
        spread = (f"before – after: {' – '.join(f'{r:,.0f}' for r in raw_runs[env])}"
                  if len(raw_runs[env]) > 1 else 'measured once')
        lines.append(f'| {env} | random actions ({spread}) | raw env steps | | | '
                     f'| | {rate:,.0f} | 1.00 | | |' + (' | | |' if on_gpu else ''))
    for r in results:
        if r['what'] == 'raw' or r.get('device', 'cpu') != 'cpu' or 'iter_s' not in r:
            continue
        steps = f"{r['meta_batch_size']}×{r['episodes_per_task']}×{r['horizon']}×{r['K'] + 1}"
        vs_raw = f"{r['sample_steps_per_s'] / raw[r['env']]:.2f}" if r['env'] in raw else ''
        garage_s = garage.get((r['env'], r['batch']))
        speedup = '' if garage_s is None else f"{garage_s / r['iter_s']:.1f}×"
        lines.append(
            f"| {r['env']} | {r['batch']} ({steps}) | {r['what']} | {r['iter_s']:.2f} | "
            f"{r['sample_s']:.2f} | {r['update_s']:.2f} | "
            f"{r['update_s'] / r['iter_s']:.0%} | {r['sample_steps_per_s']:,.0f} | "
            f"{vs_raw} | "
            f"{speedup} | "
            f"{r['peak_rss_mb']:,.0f} / {r['worker_peak_rss_mb']:,.0f} |")
        if on_gpu:
            gpu = on_gpu.get((r['env'], r['batch'], r['what']))
            if gpu is None:
                lines[-1] += ' | | |'
            else:
                # The CPU run's sampling with the GPU run's update: only the update differs
                # between the columns (each run's sampling has its own window of the machine).
                iter_s = r['sample_s'] + gpu['update_s']
                gpu_speedup = '' if garage_s is None else f"{garage_s / iter_s:.1f}×"
                lines[-1] += (f" {gpu['update_s']:.2f} | {gpu['update_s'] / iter_s:.0%} | "
                              f"{gpu_speedup} |")
    if on_gpu:
        lines += ['', "¹ of the CPU row's sampling plus the GPU run's update (iterations on the "
                      "GPU, their own sampling included, are in the JSON)."]
    return '\n'.join(lines)


def format_breakdown(results):
    """Markdown table: where each algorithm's update time goes."""
    rows = [r for r in results if r.get('update_parts')]

    def label(r):
        return r['what'] + (f" ({r['device']})" if r.get('device', 'cpu') != 'cpu' else '')

    parts = sorted({p for r in rows for p in r['update_parts']},
                   key=['MetaObjective', 'ConjugateGradient', 'LineSearch', 'After'].index)
    head = '| env | batch | algorithm | update s | ' + ' | '.join(parts) + ' | other |'
    lines = [head, '|' + '---|' * (head.count('|') - 1)]
    for r in rows:
        cells = [f"{r['update_parts'][p]:.2f} ({r['update_parts'][p] / r['update_s']:.0%})"
                 if p in r['update_parts'] else '' for p in parts]
        other = r['update_s'] - sum(r['update_parts'].values())
        lines.append(f"| {r['env']} | {r['batch']} | {label(r)} | {r['update_s']:.2f} | "
                     + ' | '.join(cells) + f' | {other:.2f} |')
    return '\n'.join(lines)


def plot_scaling(results, path):
    """Seconds per iteration against meta-batch size, one line per workers."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for workers in sorted({r['n_workers'] for r in results}):
        rows = sorted((r for r in results if r['n_workers'] == workers),
                      key=lambda r: r['meta_batch_size'])
        sizes = [r['meta_batch_size'] for r in rows]
        ax.plot(sizes, [r['iter_s'] for r in rows], 'o-', label=f'{workers} worker(s): iteration')
        ax.plot(sizes, [r['sample_s'] for r in rows], 'x--', label=f'{workers} worker(s): sampling')
        ax.plot(sizes, [r['env_steps'] / r['raw_steps_per_s'] for r in rows], ':',
                label=f'{workers} worker(s): raw-step limit')
    ax.set_xlabel('meta-batch size (tasks)')
    ax.set_ylabel('seconds per iteration')
    ax.set_title(f"{results[0]['what']} on {results[0]['env']}, "
                 f"{results[0]['episodes_per_task']} episodes per task")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _workers_batch(env, quick):
    """The batch of the workers mode on ``env``: the env's own (the paper's 40 × 20 where it
    has none), tiny with ``quick``."""
    from garage_promp.experiment.paper_config import env_config  # pylint: disable=import-outside-toplevel
    if quick:
        return dict(meta_batch_size=2, episodes_per_task=2, n_test_tasks=2)
    cfg = env_config(env.partition(':')[0])
    return dict(meta_batch_size=cfg.get('meta_batch_size', 40),
                episodes_per_task=cfg.get('episodes_per_task', 20), n_test_tasks=10)


def measure_worker_scaling(envs, counts, algo, iters, raw_steps, quick, deadline=None,
                           save=None):
    """Sampling (and meta-test) steps/s against the raw rate of as many processes; the
    ``(env, workers)`` pairs not started by ``deadline`` (a :class:`Deadline`) are left out,
    and ``save(results)`` is called after each pair."""
    results = []
    for env in envs:
        for workers in counts:
            if deadline is not None and deadline.skip(dict(env=env, n_workers=workers)):
                continue
            raw_spec = dict(what='raw', env=env, n_workers=workers, n_steps=raw_steps)
            before = run_isolated(raw_spec)['steps_per_s']
            spec = dict(what=algo, env=env, batch='default', n_workers=workers, iters=iters,
                        **_workers_batch(env, quick))
            click.echo(f'measuring {spec}', err=True)
            result = run_isolated(spec)
            after = run_isolated(raw_spec)['steps_per_s']  # the mean of before and after
            results.append({**result, 'raw_steps_per_s': (before + after) / 2,
                            'raw_before_after': [before, after]})
            if save is not None:
                save(results)
    return results


def format_worker_table(results):
    """Markdown table of the workers mode."""
    lines = ['| env | workers | batch (M×R×H×(K+1)) | s/iter | sampling s | update s | '
             'sampling / raw | meta-test s | meta-test / raw |',
             '|---|---|---|---|---|---|---|---|---|']
    for r in results:
        raw = r['raw_steps_per_s']
        lines.append(
            f"| {r['env']} | {r['n_workers']} | {r['meta_batch_size']}×{r['episodes_per_task']}×"
            f"{r['horizon']}×{r['K'] + 1} | {r['iter_s']:.2f} | {r['sample_s']:.2f} | "
            f"{r['update_s']:.2f} | {r['sample_steps_per_s'] / raw:.2f} | "
            f"{r.get('meta_test_s', float('nan')):.2f} | "
            f"{r.get('meta_test_steps_per_s', float('nan')) / raw:.2f} |")
    return '\n'.join(lines)


def _check_batches_fit(mode, envs, batches, memory_env, quick):
    """Refuse, before anything is measured, a batch that an env cannot sample (ML10 and
    ML45 need a multiple of their train classes)."""
    from garage_promp.experiment.paper_config import check_meta_batch_fits  # pylint: disable=import-outside-toplevel
    if mode == 'workers':
        pairs = [(env, _workers_batch(env, quick)['meta_batch_size'], '--env') for env in envs]
    else:
        used = batches[:1] if mode == 'checks' else batches
        pairs = [(env, BATCHES[batch]['meta_batch_size'], '--env') for env in envs
                 for batch in used]
    if mode == 'table' and memory_env:
        pairs.append((memory_env, BATCHES['paper']['meta_batch_size'], '--memory-env'))
    for env, size, option in pairs:
        try:
            check_meta_batch_fits(env, size, 'the batch\'s meta-batch size')
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint=option) from error


#: The modes each option is read in (an option not named here is read in every mode).
OPTION_MODES = {'check_pairs': ('checks', ), 'worker_counts': ('workers', ),
                'batches': ('table', 'checks'), 'garage_iters': ('table', ),
                'memory_env': ('table', ), 'gpu': ('table', ),
                'time_limit': ('table', 'workers'),
                # workers mode runs --worker-counts, scaling 1 and 2 workers
                'n_workers': ('table', ), 'iters': ('table', 'workers', 'scaling'),
                'raw_steps': ('table', 'workers', 'scaling'),
                'algos': ('table', 'workers', 'scaling')}
#: Repeatable options that these modes read once (their first value).
ONE_VALUE_MODES = {'algos': ('workers', 'scaling'), 'envs': ('scaling', )}
#: What --quick sets itself.
QUICK_SETS = ('batches', 'iters', 'raw_steps', 'memory_env')


def _refuse_unused_options(ctx, mode: str, quick: bool) -> None:
    """An option given on the command line that this run would not read is refused, naming
    it (it would otherwise be ignored without a word)."""
    def given(name):
        return ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE

    def flag(name):
        return next(p.opts[0] for p in ctx.command.params if p.name == name)

    for name, modes in OPTION_MODES.items():
        if given(name) and mode not in modes:
            raise click.UsageError(f'{flag(name)} is read in --mode {"/".join(modes)} only, '
                                   f'not in --mode {mode}')
    for name, modes in ONE_VALUE_MODES.items():
        if given(name) and mode in modes and len(ctx.params[name]) > 1:
            raise click.UsageError(f'--mode {mode} measures one {flag(name)}: give it once, '
                                   f'not {len(ctx.params[name])} times')
    if quick:
        for name in QUICK_SETS:
            if given(name):
                raise click.UsageError(f'--quick sets {flag(name)} itself: give one or the other')


@click.group(cls=StrictGroup, invoke_without_command=True)
@click.option('--mode', type=click.Choice(['table', 'scaling', 'workers', 'checks']),
              default='table', show_default=True,
              help="checks: what the sampler's checks of env output and the watchdog cost "
                   '(benchmarks/checks_cost.py, at the --batch given first).')
@click.option('--check-pairs', type=count(), default=7, show_default=True,
              help='checks mode: interleaved checks-on / checks-off pairs per env and path.')
@click.option('--worker-counts', type=CommaList(WORKERS, '1,2'), default='1,2', show_default=True,
              callback=distinct,
              help='workers mode: comma-separated worker counts.')
@click.option('--env', 'envs', multiple=True, type=EnvName(ml1_task=True), callback=distinct,
              default=['HalfCheetahFwdBack', 'PointEnvCorner'], show_default=True,
              help='A paper env, ML10, ML45 or ML1:<task> (repeatable).')
@click.option('--batch', 'batches', multiple=True, default=['paper', 'small'], show_default=True,
              callback=distinct,
              type=click.Choice(sorted(BATCHES)))
@click.option('--algo', 'algos', multiple=True, default=None, type=click.Choice(sorted(ALGOS)),
              callback=distinct,
              help='garage_promp algorithms (paper labels; default: all).')
@click.option('--n-workers', type=WORKERS, default=2, show_default=True)
@click.option('--iters', type=count(), default=2, show_default=True,
              help='Iterations per algorithm.')
@click.option('--garage-iters', type=count(0), default=2, show_default=True,
              help="garage MAMLTRPO iterations (0 skips it; with 2 or more, as for ours, the "
                   "first, which carries the start-up, is left out).")
@click.option('--raw-steps', type=count(), default=20000, show_default=True,
              help='Steps per raw process.')
@click.option('--memory-env', type=EnvName(ml1_task=True, optional=True),
              default='HumanoidRandDirec', show_default=True,
              help='One ProMP iteration at the paper batch for peak memory ("" skips).')
@click.option('--gpu', type=click.Choice(['auto', 'yes', 'no']), default='auto', show_default=True,
              help='Table mode: also time every update with device=cuda (auto: where a GPU '
                   'exists), for the GPU columns.')
@click.option('--quick', is_flag=True,
              help='Tiny batches, on the point env unless --env is given: a smoke run.')
@click.option('--out', type=OUTPUT_DIR, default=None,
              help='Directory for the JSON (and PNG) [default: data/benchmarks].')
@click.option('--time-limit', type=SECONDS, default=None,
              help='Table and workers modes: seconds after which no new measurement starts; '
                   'the tables show what was measured and the skipped ones are listed (also '
                   'in the JSON, as meta.skipped).')
@click.option('--summarize', type=click.Path(exists=True, dir_okay=False), default=None,
              help='Print the tables of a saved throughput.json or workers.json; measures '
                   'nothing.')
@click.pass_context
def main(ctx, mode, check_pairs, worker_counts, envs, batches, algos, n_workers, iters,
         garage_iters, raw_steps, memory_env, gpu, quick, out, time_limit, summarize):
    """Measure and print the throughput table (or the scaling plot)."""
    if summarize is not None:
        others = given_flags(ctx, exclude=('summarize', ))
        if ctx.invoked_subcommand is not None:
            others.append(ctx.invoked_subcommand)
        if others:
            raise click.UsageError(f'--summarize prints a saved file and measures nothing: '
                                   f'{", ".join(others)} would not be read')
        click.echo(summarize_file(summarize))
        return
    if ctx.invoked_subcommand is not None:
        return
    _refuse_unused_options(ctx, mode, quick)
    algos = list(algos) or list(ALGOS)
    if quick:  # tiny batches; the point env unless --env was given
        env_given = ctx.get_parameter_source('envs') == click.core.ParameterSource.COMMANDLINE
        envs = envs if env_given else ['PointEnvCorner']
        batches, iters, raw_steps, memory_env = ['quick'], 2, 500, ''
    _check_batches_fit(mode, envs, batches, memory_env, quick)
    if gpu == 'auto':
        import torch
        gpu = 'yes' if torch.cuda.is_available() else 'no'
    elif gpu == 'yes':
        with usage_errors('--gpu'):  # before anything is written or measured
            check_device('cuda', 'device')
    if out is None:  # not a click default: the internal _one command writes nothing
        out = str(HERE.parent / 'data' / 'benchmarks')
        with usage_errors('--out'):
            check_output_path(out, 'the default output directory')
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(machine=platform.platform(), python=platform.python_version(),
                cpus=os.cpu_count(), date=time.strftime('%Y-%m-%d'),
                processor=processor_name(), **revisions(),
                # workers mode runs its own counts; --n-workers is for the other modes
                n_workers=list(worker_counts) if mode == 'workers' else n_workers)
    meta['gpu'] = _gpu_name() if gpu == 'yes' else None
    deadline = Deadline(time_limit)
    meta['skipped'] = deadline.skipped  # the same list: filled as measurements are skipped

    def save(name, results):
        if not results:  # a time limit that left nothing: an earlier run's file is kept
            click.echo(f'nothing was measured: {out / name} '
                       f'{"is left as it was" if (out / name).exists() else "is not written"}',
                       err=True)
            return
        (out / name).write_text(json.dumps(dict(meta=meta, results=results), indent=1))

    if mode == 'table':
        results = []
        specs = []
        if memory_env:  # first, so that --time-limit does not leave out the GPU goal's row
            spec = dict(what='ProMP', env=memory_env, batch='paper', n_workers=n_workers,
                        iters=1, **BATCHES['paper'])
            specs += [spec] + ([{**spec, 'device': 'cuda'}] if gpu == 'yes' else [])
        specs += table_specs(envs, batches, algos, n_workers, iters, garage_iters, raw_steps,
                             gpu=gpu == 'yes')
        for spec in specs:
            if deadline.skip(spec):
                continue
            click.echo(f'measuring {spec}', err=True)
            results.append(run_isolated(spec))
            save('throughput.json', results)
        click.echo(format_table(results))
        click.echo('\nUpdate breakdown (seconds, share of the update):\n')
        click.echo(format_breakdown(results))
        save('throughput.json', results)  # with the skipped measurements
        deadline.report()
    elif mode == 'checks':
        from bench_io import write_results  # pylint: disable=import-outside-toplevel
        import checks_cost  # pylint: disable=import-outside-toplevel
        batch = BATCHES[batches[0]]
        results = checks_cost.measure(envs, check_pairs, batch['meta_batch_size'],
                                      batch['episodes_per_task'])
        table = checks_cost.format_table(results)
        click.echo(table)
        write_results(str(out), 'checks_cost', results, table, **batch)
    elif mode == 'workers':
        results = measure_worker_scaling(envs, worker_counts, algos[0], iters, raw_steps, quick,
                                         deadline, lambda rows: save('workers.json', rows))
        click.echo(format_worker_table(results))
        save('workers.json', results)
        deadline.report()
    else:
        env = envs[0]
        results = []
        for workers in (1, 2):
            raw = run_isolated(dict(what='raw', env=env, n_workers=workers, n_steps=raw_steps))
            for size in (10, 20, 40):
                spec = dict(what=algos[0], env=env, batch=f'M={size}', n_workers=workers,
                            iters=iters, meta_batch_size=size,
                            episodes_per_task=BATCHES['paper']['episodes_per_task'])
                if quick:
                    spec.update(meta_batch_size=max(2, size // 10), episodes_per_task=2)
                click.echo(f'measuring {spec}', err=True)
                results.append({**run_isolated(spec), 'raw_steps_per_s': raw['steps_per_s']})
        for r in results:
            click.echo(f"{r['n_workers']} worker(s) M={r['meta_batch_size']:>2}: "
                       f"{r['iter_s']:.2f} s/iter (sampling {r['sample_s']:.2f} s, update "
                       f"{r['update_s']:.2f} s; raw-step limit "
                       f"{r['env_steps'] / r['raw_steps_per_s']:.2f} s)")
        (out / 'scaling.json').write_text(json.dumps(dict(meta=meta, results=results), indent=1))
        plot_scaling(results, out / 'scaling.png')
        click.echo(f'wrote {out / "scaling.png"}')


@main.command('_one', hidden=True)
@click.argument('spec')
def one(spec):
    """Internal: one measurement, printed as a JSON line."""
    signal.signal(signal.SIGTERM, _end_with_children)
    click.echo(json.dumps(run_one(json.loads(spec))))


def _end_with_children(signum, _frame):
    """SIGTERM to a measurement: its processes (garage's sampler workers too) end with it."""
    import psutil  # pylint: disable=import-outside-toplevel
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass
    os._exit(128 + signum)  # pylint: disable=protected-access


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
