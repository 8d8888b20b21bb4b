#!/usr/bin/env python3
"""Learning benchmark: algorithms × seeds at a budget of env steps, side by side.

Every run is ``launchers/train.py`` (or, for garage's own ``MAMLTRPO``,
``benchmarks/garage_peer.py``) in a process of its own (single-threaded,
in-process sampler), at most ``--parallel`` at a time, so cores are shared
fairly; runs start seed by seed, so a time limit leaves every algorithm with
its first seeds done. Runs write to ``OUT/<algo>_seed=<s>/`` and can be resumed: a finished
run is skipped, an interrupted one continues with ``--resume``. Then it
writes ``OUT/summary.md`` (per algorithm, the mean ± std over seeds of the
pre- and post-update return at matched env steps, and Welch's t of every pair)
and ``OUT/learning_<env>.png`` (mean ± std bands against env steps: post-update
solid, pre-update dashed, one colour per algorithm, in the style of the
paper's Fig. 2).

    python benchmarks/learning.py --env HalfCheetahFwdBack --algo ProMP --algo MAML-TRPO \\
        --seeds 3 --steps 2000000 --parallel 2 --out benchmarks/results/learning
    python benchmarks/learning.py --summarize-only --out benchmarks/results/learning
"""
import dataclasses
import math
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import List

from garage_promp._process import die_with_parent
from garage_promp.experiment.env_names import EnvName
from garage_promp.experiment.paper_config import ALGOS, METAWORLD
from garage_promp.experiment.plotting import mean_std, plot_bands, post_update_key, read_progress
from garage_promp.experiment.run_dir import env_steps_done, variant_mismatch
from garage_promp.validation import (
    ENV_STEPS,
    OUTPUT_DIR,
    SECONDS,
    WORKERS,
    StrictCommand,
    check_batch_steps,
    check_set_agrees,
    count,
    parse_overrides,
    usage_errors,
    user_errors,
)

import click

HERE = pathlib.Path(__file__).resolve().parent
TRAIN = HERE.parent / 'launchers' / 'train.py'
PEER = HERE / 'garage_peer.py'
#: garage's own MAMLTRPO (benchmarks/garage_peer.py), the peer on the same batch.
GARAGE_PEER = 'garage-MAMLTRPO'


def _run_command(algo, env, seed, steps, batch, run_dir, resume, extra):
    """The command that runs (or continues) one run to ``steps`` env steps.

    garage_promp runs take the budget as it is (``train.py --max-env-steps``:
    every sampling round counted, so envs that end episodes early get the same
    budget as the rest); garage's MAMLTRPO counts epochs, so its budget is the
    nominal M x R x H x (K + 1) steps per epoch.
    """
    if algo == GARAGE_PEER:  # it takes ML1:<task> as it is
        cfg = _env_config(env)
        epochs = math.ceil(steps / (batch[0] * batch[1] * cfg['H'] * (cfg['K'] + 1)))
        if resume:
            return [sys.executable, str(PEER), '--resume', str(run_dir), '--epochs', str(epochs)]
        return [sys.executable, str(PEER), '--env', env, '--seed', str(seed),
                '--epochs', str(epochs), '--meta-batch-size', str(batch[0]),
                '--episodes-per-task', str(batch[1]), '--log-dir', str(run_dir)]
    if resume:
        return [sys.executable, str(TRAIN), '--resume', str(run_dir),
                '--max-env-steps', str(steps)]
    family, _, task = env.partition(':')  # train.py: --env ML1 --task reach-v3
    options = {'--algo': algo, '--env': family, **({'--task': task} if task else {}),
               '--seed': str(seed), '--max-env-steps': str(steps),
               '--meta-batch-size': str(batch[0]), '--episodes-per-task': str(batch[1]),
               '--evaluate-every': str(10 ** 6), '--n-test-tasks': '2', '--log-dir': str(run_dir)}
    if len(extra) % 2:
        raise ValueError(f'a run\'s options come in flag-value pairs, got {extra!r}')
    repeated = []  # --set, given once per key
    for flag, value in zip(extra[::2], extra[1::2]):  # a run's own options win (train.py
        if flag == '--set':                           # refuses an option given twice)
            repeated += [flag, value]
        else:
            options[flag] = value
    return [sys.executable, str(TRAIN), *(a for pair in options.items() for a in pair),
            *repeated]


def run_variant(algo, env, seed, batch) -> dict:
    """What the ``variant.json`` of :func:`_run_command`'s run holds of its identity: the
    algorithm, env (``train.py``'s family and ``task``), seed and batch (garage's
    ``MAMLTRPO``: ``garage_peer.py`` records no ``algo`` and ``env`` as given)."""
    family, _, task = env.partition(':')
    if algo == GARAGE_PEER:
        return {'algo': None, 'env': env, 'seed': seed, 'meta_batch_size': batch[0],
                'episodes_per_task': batch[1]}
    return {'algo': algo, 'env': family, **({'task': task} if task else {}), 'seed': seed,
            'meta_batch_size': batch[0], 'episodes_per_task': batch[1]}


def check_run_dirs(runs, env, batch) -> None:
    """Refuse, before any run starts, a run directory that holds another run's snapshot or
    log (another env, algorithm, seed or batch; no ``variant.json``): it would be
    continued, counted as done and summarised as this benchmark's run.

    Args:
        runs (dict): (algo, seed) -> its run directory.
        env (str): The benchmark's env.
        batch (tuple): (meta_batch_size, episodes_per_task).

    Raises:
        click.ClickException: Naming the directory, what it holds and what was wanted.

    """
    for (algo, seed), run_dir in runs.items():
        if not (has_snapshot(run_dir) or read_progress(run_dir)):
            continue  # nothing of a run: prepare_run_dir clears a start's files
        why = variant_mismatch(run_dir, run_variant(algo, env, seed, batch))
        if why:
            raise click.ClickException(
                f'{run_dir}: {why}: it is not the run of {algo} seed {seed} on {env} at '
                f'{batch[0]} x {batch[1]}; move it away or give another --out')


def _env_config(env):
    import garage_promp  # noqa: F401  pylint: disable=import-outside-toplevel
    from garage_promp.experiment.paper_config import env_config  # pylint: disable=import-outside-toplevel
    return env_config(env.partition(':')[0])


def steps_done(run_dir) -> int:
    """``TotalEnvSteps`` of the last logged epoch of a run (0 if none); a damaged log raises
    :class:`~garage_promp.experiment.run_dir.DamagedRunFile`, naming it."""
    return env_steps_done(run_dir)


#: What ``launchers/train.py`` (and garage's ``wrap_experiment``) writes in a run
#: directory before its first snapshot; ``events.out.tfevents.*`` too.
START_FILES = frozenset({'.lock', 'debug.log', 'experiment.json', 'metadata.json',
                         'progress.csv', 'variant.json'})


def has_snapshot(run_dir) -> bool:
    """Whether ``run_dir`` holds a training snapshot (``params.pkl``, or ``itr_N.pkl``)."""
    run_dir = pathlib.Path(run_dir)
    return (run_dir / 'params.pkl').is_file() or any(run_dir.glob('itr_*.pkl'))


def set_aside(run_dir, why, then):
    """Move ``run_dir`` to ``<run_dir>.set-aside-<time>`` (never delete it) and say so."""
    run_dir = pathlib.Path(run_dir)
    aside = run_dir.with_name(f'{run_dir.name}.set-aside-{time.strftime("%Y%m%d-%H%M%S")}')
    run_dir.rename(aside)
    click.echo(f'{run_dir} {why}: moved to {aside}; {then}', err=True)
    return aside


def prepare_run_dir(run_dir) -> bool:
    """Make ``run_dir`` ready for its run's command; True if the run continues (``--resume``).

    A directory with a snapshot continues, whatever its ``progress.csv`` says
    (``train.py --resume`` checks the log against the snapshot, and refuses what does
    not fit, naming the file). Without one it holds a start that never saved: the
    files such a start writes (:data:`START_FILES`) are removed; a directory that holds
    anything else is moved aside to ``<run_dir>.set-aside-<time>``, not deleted, and a
    line says so. Nothing a run did not write is ever deleted.
    """
    run_dir = pathlib.Path(run_dir)
    if has_snapshot(run_dir):
        return True
    if run_dir.is_dir():
        entries = list(run_dir.iterdir())
        if all(e.is_file() and (e.name in START_FILES or e.name.startswith('events.out.tfevents.'))
               for e in entries):
            for entry in entries:
                entry.unlink()
            run_dir.rmdir()
        else:
            set_aside(run_dir, 'held no snapshot but files a run does not write', 'the run '
                      'starts again')
    elif run_dir.exists():
        raise click.ClickException(f'{run_dir} is in the way of a run directory (not a '
                                   'directory): move it away')
    return False


def _die_with_parent():
    """In a child, before exec: SIGTERM when the runner dies, even by SIGKILL (Linux)."""
    die_with_parent(signal.SIGTERM)


class Stopped(Exception):
    """The runner got SIGTERM or SIGHUP: its runs were stopped (and saved)."""


def _already_stopping(signum, frame):
    del frame
    click.echo(f'{signal.Signals(signum).name}: already stopping the runs', err=True)


def _stop_on_signal(signum, frame):
    del frame
    raise Stopped(signal.Signals(signum).name)


def ended_message(name, returncode, log):
    """The runner's line for a run that ended: done, failed, or killed by a signal."""
    if returncode == 0:
        return f'done {name}'
    if returncode < 0:
        try:
            how = signal.Signals(-returncode).name
        except ValueError:
            how = f'signal {-returncode}'
        hint = ' (the kernel\'s out-of-memory killer sends it)' if how == 'SIGKILL' else ''
        return (f'FAILED {name}: killed by {how}{hint}; its last snapshot stays and the next '
                f'run continues it; log: {log}')
    return f'FAILED {name} (exit {returncode}); log: {log}'


@dataclasses.dataclass
class Outcome:
    """How :func:`run_all` ended: ``ended`` is ``'done'`` (every command ran to its end),
    ``'time limit'``, or what stopped the runner (``'SIGTERM'``, ``'SIGHUP'``,
    ``'KeyboardInterrupt'``); ``failed`` names the commands that ended with a non-zero
    status on their own (not stopped by the runner). True when ``ended`` is ``'done'``."""

    ended: str
    failed: List[str]

    def __bool__(self):
        return self.ended == 'done'

    def exit(self):
        """End the runner's process as its outcome says: an error naming the failed runs
        (exit 1), else 128 + the signal's number where a signal or Ctrl-C stopped it (as a
        shell reports it), else normally (every run done, or the time limit reached)."""
        if self.failed:
            raise click.ClickException(
                f'{len(self.failed)} run(s) failed: {", ".join(self.failed)} (their logs are '
                'named above)')
        if self.ended == 'KeyboardInterrupt':
            sys.exit(128 + signal.SIGINT)
        if self.ended.startswith('SIG'):
            sys.exit(128 + signal.Signals[self.ended])


def run_all(specs, parallel, deadline, on_done=None) -> Outcome:
    """Run the specs' commands, ``parallel`` at a time, until done or the deadline.

    Args:
        specs (list): ``(name, command, log_path)`` triples, in order.
        parallel (int): Commands at a time (one core each).
        deadline (float or None): ``time.time()`` at which to stop the runs.
        on_done (callable): ``on_done(name, returncode)`` as each one ends.

    Every way out (done, deadline, Ctrl-C, SIGTERM, an exception) stops
    the runs still going with SIGTERM (a run ends at once; its snapshots are
    written whole or not at all, so its last one stays) and waits for them; a run
    also gets SIGTERM if the runner is killed outright. A run that ended on its
    own meanwhile is reported and, if it failed, counted failed. Returns how it
    ended (:class:`Outcome`, true when every command ran to its end).
    """
    pending, running, logs, failed = list(specs), [], {}, []
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    # SIGHUP only if it is not ignored: under nohup the runs must survive a hang-up too.
    stops = [signal.SIGTERM] + ([signal.SIGHUP] if signal.getsignal(signal.SIGHUP)
                                is not signal.SIG_IGN else [])
    handlers = {sig: signal.signal(sig, _stop_on_signal) for sig in stops}
    try:
        while pending or running:
            if deadline and time.time() > deadline:  # checked before any start, too: none
                click.echo('time limit reached', err=True)  # starts to be stopped at once
                return Outcome('time limit', failed)
            while pending and len(running) < parallel:
                name, command, log = pending.pop(0)
                logs[name] = log
                click.echo(f'start {name}', err=True)
                with open(log, 'a') as out:
                    running.append((name, subprocess.Popen(
                        command, env=env, stdout=out, stderr=subprocess.STDOUT,
                        preexec_fn=_die_with_parent)))
            time.sleep(1)
            for name, proc in list(running):
                if proc.poll() is not None:
                    click.echo(ended_message(name, proc.returncode, logs[name]), err=True)
                    running.remove((name, proc))
                    if proc.returncode != 0:
                        failed.append(name)
                    if on_done is not None:
                        on_done(name, proc.returncode)
        return Outcome('done', failed)
    except (KeyboardInterrupt, Stopped) as why:
        click.echo(f'stopping the runs ({why if isinstance(why, Stopped) else "Ctrl-C"})',
                   err=True)
        return Outcome(str(why) if isinstance(why, Stopped) else 'KeyboardInterrupt', failed)
    finally:
        # A second stop signal (or Ctrl-C) while the runs save must not cut this short.
        if signal.getsignal(signal.SIGINT) is not None:  # (None: set outside Python)
            handlers.setdefault(signal.SIGINT, signal.getsignal(signal.SIGINT))
        for sig in handlers:
            signal.signal(sig, _already_stopping)
        stopped = set()
        for name, proc in running:
            if proc.poll() is None:
                proc.terminate()  # Ctrl-C-like: the last snapshot stays intact
                stopped.add(name)
                click.echo(f'stopped {name}', err=True)
        failure = None
        for name, proc in running:  # every one waited for, whatever on_done raises
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if name in stopped:
                pass
            elif proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT):
                # Ctrl-C reaches the runs from the terminal too: stopped, not failed
                click.echo(f'stopped {name} (Ctrl-C)', err=True)
            else:  # it ended on its own, as the runner stopped
                click.echo(ended_message(name, proc.returncode, logs[name]), err=True)
                if proc.returncode != 0:
                    failed.append(name)
            if on_done is not None:
                try:
                    on_done(name, proc.returncode)
                except Exception as error:  # pylint: disable=broad-except
                    failure = failure or error
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if failure is not None:
            raise failure


def _series(rows, key):
    return [(float(r['TotalEnvSteps']), float(r[key])) for r in rows
            if r.get(key) not in (None, '', 'nan')]


def _at(series, steps, window=3):
    """Mean of the last ``window`` values logged at or before ``steps``."""
    values = [v for s, v in series if s <= steps]
    return sum(values[-window:]) / len(values[-window:]) if values else math.nan


def welch_t(a, b):
    """Welch's t statistic of two samples (positive when a's mean is larger)."""
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    se = math.sqrt(sa ** 2 / len(a) + sb ** 2 / len(b))
    return (ma - mb) / se if se > 0 else math.nan


def summarize(out, env, runs):
    """Write summary.md and the figure; return the summary text."""
    data = {}
    for (algo, seed), run_dir in runs.items():
        rows = read_progress(run_dir)
        if rows:
            data.setdefault(algo, {})[seed] = rows
    matched = min(float(rows[-1]['TotalEnvSteps']) for seeds in data.values()
                  for rows in seeds.values())
    lines = [f'# Learning benchmark: {env}', '',
             f'Returns at matched env steps ({matched:,.0f} per run; mean of the last 3 logged '
             'epochs up to there), mean ± std over seeds.', '',
             '| algorithm | seeds | env steps done (fewest) | pre-update return | '
             'post-update return |', '|---|---|---|---|---|']
    finals = {}
    for algo, seeds in data.items():
        post = [_at(_series(rows, post_update_key(rows)), matched) for rows in seeds.values()]
        pre = [_at(_series(rows, 'Step_0-AverageReturn'), matched) for rows in seeds.values()]
        finals[algo] = post
        (mpre, spre), (mpost, spost) = mean_std(pre), mean_std(post)
        done = min(float(rows[-1]['TotalEnvSteps']) for rows in seeds.values())
        lines.append(f'| {algo} | {len(seeds)} | {done:,.0f} | {mpre:.1f} ± {spre:.1f} | '
                     f'{mpost:.1f} ± {spost:.1f} |')
    lines += ['', "Welch's t of the post-update returns (row minus column):", '',
              '| | ' + ' | '.join(finals) + ' |', '|---' * (len(finals) + 1) + '|']
    for a in finals:
        cells = [('' if a == b else f'{welch_t(finals[a], finals[b]):+.2f}') for b in finals]
        lines.append(f'| {a} | ' + ' | '.join(cells) + ' |')
    text = '\n'.join(lines) + '\n'
    (out / 'summary.md').write_text(text)
    plot_bands(out / f'learning_{env}.png',
               {algo: list(seeds.values()) for algo, seeds in data.items()},
               [None, 'Step_0-AverageReturn'], title=f'{env}: mean ± std over seeds')
    return text


#: The most seeds per algorithm (each is a run of its own).
MAX_SEEDS = 1000


def _check_runs(env, algos, meta_batch_size, episodes_per_task, overrides):
    """What train.py would refuse, refused here, before any run starts or anything is written.

    Every garage_promp algorithm is built once as its runs will be (in this
    process, no sampling), so a bad ``--set`` value fails now by name, not in
    every run's log.
    """
    # pylint: disable=import-outside-toplevel
    from garage_promp.experiment.builder import build_experiment
    family, _, task = env.partition(':')
    parsed = parse_overrides(overrides)
    # Every run is given both sizes as options: a --set of either must agree.
    check_set_agrees(parsed, dict(meta_batch_size=meta_batch_size,
                                  episodes_per_task=episodes_per_task))
    with usage_errors():
        check_batch_steps(_env_config(env)['H'], meta_batch_size=meta_batch_size,
                          episodes_per_task=episodes_per_task)
    if parsed and GARAGE_PEER in algos:  # garage's own MAMLTRPO takes no --set
        if set(algos) == {GARAGE_PEER}:
            raise click.UsageError(f'--set applies to the garage_promp algorithms; {GARAGE_PEER} '
                                   "(garage's own MAMLTRPO) takes none")
        click.echo(f'--set applies to the garage_promp algorithms, not to {GARAGE_PEER}',
                   err=True)
    for algo in dict.fromkeys(algos):
        if algo == GARAGE_PEER:
            continue
        with usage_errors(hints=dict.fromkeys(parsed, '--set')):
            build_experiment(algo, family, 1, task=task or None, meta_batch_size=meta_batch_size,
                             episodes_per_task=episodes_per_task, n_test_tasks=2,
                             overrides=parsed, reward_function_version=(
                                 'v2' if family in METAWORLD else None))


@click.command(cls=StrictCommand)
@click.option('--env', type=EnvName(ml1_task=True), default='HalfCheetahFwdBack',
              show_default=True, help='A paper env, ML10, ML45 or ML1:<task>.')
@click.option('--algo', 'algos', multiple=True, type=click.Choice(sorted(ALGOS) + [GARAGE_PEER]),
              default=['ProMP', 'MAML-TRPO', 'E-MAML-TRPO', 'LVC-VPG', 'DiCE-VPG', GARAGE_PEER],
              show_default=True,
              help=f'Paper labels of garage_promp algorithms, or {GARAGE_PEER} for garage '
                   "2021.3's own MAMLTRPO (benchmarks/garage_peer.py; --set does not apply).")
@click.option('--seeds', type=count(1, MAX_SEEDS), default=3, show_default=True)
@click.option('--steps', type=ENV_STEPS, default=2_000_000, show_default=True,
              help='Env steps per run (all K+1 sampling rounds counted).')
@click.option('--meta-batch-size', type=count(), default=20, show_default=True)
@click.option('--episodes-per-task', type=count(), default=10, show_default=True)
@click.option('--parallel', type=WORKERS, default=2, show_default=True,
              help='Runs at a time (one core each).')
@click.option('--time-limit', type=SECONDS, default=None,
              help='Stop the runs after this many seconds (resume later).')
@click.option('--set', 'overrides', multiple=True,
              help='Passed on to launchers/train.py (key=value, repeatable).')
@click.option('--summarize-only', is_flag=True)
@click.option('--out', type=OUTPUT_DIR, required=True,
              help='Directory of the runs and the summary.')
def main(env, algos, seeds, steps, meta_batch_size, episodes_per_task, parallel, time_limit,
         overrides, summarize_only, out):
    """Run algorithms × seeds on ENV at a budget of env steps and summarise."""
    out = pathlib.Path(out)
    runs = {(a, s): out / f'{a}_seed={s}' for s in range(1, seeds + 1) for a in algos}
    if summarize_only and not out.is_dir():
        raise click.BadParameter(f'{str(out)!r} does not exist: no runs to summarise',
                                 param_hint='--out')
    if not summarize_only:
        _check_runs(env, algos, meta_batch_size, episodes_per_task, overrides)
    with user_errors():  # (a damaged variant.json: one Error line)
        check_run_dirs(runs, env, (meta_batch_size, episodes_per_task))
    if not summarize_only:
        out.mkdir(parents=True, exist_ok=True)
        specs = []
        for (algo, seed), run_dir in runs.items():
            done = steps_done(run_dir)
            if done >= steps:
                continue
            resume = prepare_run_dir(run_dir)
            specs.append((f'{algo} seed {seed}',
                          _run_command(algo, env, seed, steps,
                                       (meta_batch_size, episodes_per_task), run_dir, resume,
                                       [a for o in overrides for a in ('--set', o)]),
                          out / f'{algo}_seed={seed}.log'))
        outcome = run_all(specs, parallel, time.time() + time_limit if time_limit else None)
    else:
        outcome = Outcome('done', [])
    if not any(read_progress(run_dir) for run_dir in runs.values()):
        outcome.exit()  # a failure or a stop says so first
        raise click.ClickException(f'no run in {out} has logged an epoch yet: nothing to summarise')
    click.echo(summarize(out, env, runs))
    outcome.exit()


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
