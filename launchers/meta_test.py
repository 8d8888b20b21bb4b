#!/usr/bin/env python3
"""Meta-test a snapshot of launchers/train.py and report each test task.

Loads the algorithm of a snapshot (``Snapshotter().load``), rebuilds the
experiment's meta-test task sampler from its ``variant.json`` (options given
here win: e.g. another Meta-World goal seed or reward version), runs the
MetaEvaluator (exploration episodes -> adapt, K times -> evaluation episodes
per test task) and prints one row per test task (Meta-World: per env class;
paper envs: per sampled task) plus the average; the table is also written as
CSV.

Counts, seeds, --itr and --csv are checked before the snapshot is loaded; the
CSV (LOG_DIR/meta_test.csv or --csv) is the only file written.

    python launchers/meta_test.py data/local/experiment/ProMP_ML1_reach-v3_seed=1 --n-test-tasks 50
"""
import signal
import threading

# Ctrl-C while the libraries load ends the launcher quietly (an ignored SIGINT stays
# ignored); run_command restores Python's handler before the run starts.
if (__name__ == '__main__' and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)

import collections
import csv
import math
import os
import pathlib
import time

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp._console import set_listener
from garage_promp._files import replace_atomically
from garage_promp._garage_compat import CorruptSnapshotError, check_training_snapshot
from garage_promp.envs.metaworld import REWARD_FUNCTION_VERSIONS
from garage_promp.experiment import MetaEvaluator
from garage_promp.experiment.env_setup import ENV_KWARGS, make_env_setup
from garage_promp.experiment.paper_config import ENVS, METAWORLD, env_config
from garage_promp.experiment.resume import check_snapshot_matches_variant
from garage_promp.experiment.run_dir import DamagedRunFile, read_variant
from garage_promp.objectives import TooFewStepsError
from garage_promp.sampler.backends import (
    DEFAULT_WORKER_TIMEOUT,
    STALL_NOTICE_SECONDS,
    SamplerWorkerError,
)
from garage_promp.validation import (
    EPISODE_LENGTH,
    MAX_SECONDS,
    OUTPUT_FILE,
    SEED,
    WORKERS,
    FiniteFloat,
    StrictCommand,
    check_batch_steps,
    check_output_path,
    check_run_dir,
    count,
    kernel_abspath,
    run_command,
    sampler_kind,
    user_errors,
)

import click
import dowel
from dowel import logger, tabular
from garage.experiment import Snapshotter
from garage.experiment.deterministic import set_seed
from garage.experiment.snapshotter import NotAFileError
import numpy as np

COLUMNS = ('task', 'goals', 'episodes', 'success_before', 'return_before', 'success_rate',
           'average_return', 'metaworld_evaluator_success')

#: Evaluation protocols: option defaults that --protocol sets (explicit options win).
#: 'metaworld-algorithms' is the maintained Meta-World baselines' meta-test
#: (metaworld-algorithms, MAML-TRPO on ML10): 40 goals per held-out class, 10
#: adaptation episodes, then 3 evaluation episodes with the mean action that
#: stop at their first success. 'reference' is the ProMP code's own.
PROTOCOLS = {
    'reference': dict(goals_per_class=None, n_exploration_eps=None, n_test_episodes=None,
                      deterministic=False, terminate_on_success=False,
                      before_adaptation=False),
    'metaworld-algorithms': dict(goals_per_class=40, n_exploration_eps=10, n_test_episodes=3,
                                 deterministic=True, terminate_on_success=True,
                                 before_adaptation=True),
}
#: Episodes per class that Meta-World 3.1.1's meta-learning evaluator counts.
METAWORLD_EVALUATOR_EPISODES = 3


def _success(episode) -> float:
    return float(np.any(episode.env_infos['success'])) if 'success' in episode.env_infos \
        else math.nan


def metaworld_evaluator_count(episodes, n_counted=METAWORLD_EVALUATOR_EPISODES) -> float:
    """The success rate Meta-World 3.1.1's own evaluator would report for one class.

    Its meta-learning evaluator (metaworld/evaluation.py) steps one vectorised
    env per goal and counts, per class, the first ``n_counted`` episodes to
    finish; with terminate-on-success on, a goal that succeeds at once
    finishes first and can supply all of them. Emulated here from the same
    episodes: the class's episodes in the order they would finish (shortest
    first, then goal and episode order) and the first ``n_counted`` counted.
    An upper bound of the class's success, not a success rate.
    """
    ordered = sorted(enumerate(episodes), key=lambda ie: (len(ie[1].rewards), ie[0]))
    counted = [_success(eps) for _, eps in ordered[:n_counted]]
    return float(np.mean(counted)) if counted else math.nan


def task_table(per_task_episodes, pre_update_episodes=None):
    """One row per test task name, plus the average over these rows.

    Args:
        per_task_episodes (list[EpisodeBatch]): Evaluation episodes of each
            sampled test task (``MetaEvaluator.evaluate``'s result).
        pre_update_episodes (list[EpisodeBatch] or None): The meta-policy's
            own evaluation episodes of the same tasks, before adaptation
            (``MetaEvaluator.last_pre_update_episodes``).

    Returns:
        list[dict]: Rows with :data:`COLUMNS`, in sampling order (on
            Meta-World, the benchmark's class order); the last row
            is 'Average' (mean of the rows, each task weighing the same).
            ``success_rate`` is the fraction of episodes with a success at
            any step (NaN if the env reports no ``success``); returns are
            undiscounted; ``*_before`` are those of the meta-policy before
            adaptation (NaN if not evaluated); ``metaworld_evaluator_success``
            is :func:`metaworld_evaluator_count` (an over-count, for
            comparison with numbers from that evaluator only).

    """
    groups = collections.defaultdict(list)
    for index, batch in enumerate(per_task_episodes):
        names = batch.env_infos.get('task_name')
        name = str(names[0]) if names is not None else f'task_{index}'
        groups[name].append(index)
    rows = []
    for name, indices in groups.items():
        episodes = [eps for i in indices for eps in per_task_episodes[i].split()]
        success = [_success(eps) for eps in episodes]
        before = ([eps for i in indices for eps in pre_update_episodes[i].split()]
                  if pre_update_episodes is not None else [])
        rows.append(dict(
            task=name, goals=len(indices), episodes=len(episodes),
            success_before=float(np.mean([_success(e) for e in before])) if before else math.nan,
            return_before=(float(np.mean([e.rewards.sum() for e in before])) if before
                           else math.nan),
            success_rate=float(np.mean(success)),
            average_return=float(np.mean([eps.rewards.sum() for eps in episodes])),
            metaworld_evaluator_success=metaworld_evaluator_count(episodes)))
    average = dict(task='Average', goals=sum(r['goals'] for r in rows),
                   episodes=sum(r['episodes'] for r in rows))
    for key in COLUMNS[3:]:
        average[key] = float(np.mean([r[key] for r in rows]))
    return rows + [average]


def format_table(rows):
    """The rows as a fixed-width text table; the column of Meta-World's own evaluator only
    where the env reports successes (the paper's envs do not)."""
    width = max(len(r['task']) for r in rows)
    evaluator = any(not math.isnan(r['metaworld_evaluator_success']) for r in rows)
    lines = [f'{"task":<{width}}  goals  episodes  success_before  success_after  '
             'return_before  return_after' + ('  metaworld_evaluator*' if evaluator else '')]
    for r in rows:
        lines.append(f'{r["task"]:<{width}}  {r["goals"]:>5}  {r["episodes"]:>8}  '
                     f'{r["success_before"]:>14.3f}  {r["success_rate"]:>13.3f}  '
                     f'{r["return_before"]:>13.2f}  {r["average_return"]:>12.2f}'
                     + (f'  {r["metaworld_evaluator_success"]:>20.3f}' if evaluator else ''))
    if evaluator:
        lines.append('* Meta-World 3.1.1\'s own evaluator, emulated: the first '
                     f'{METAWORLD_EVALUATOR_EPISODES} episodes to finish per class '
                     '(an over-count; for comparison with its numbers only)')
    return '\n'.join(lines)


def _experiment_options(log_dir, cli):
    """The env options of the experiment (variant.json), CLI values winning."""
    path = os.path.join(log_dir, 'variant.json')
    try:
        variant = read_variant(log_dir)
    except DamagedRunFile as error:  # not about the command line: one Error line, status 1
        raise click.ClickException(str(error)) from None
    if 'env' in variant and not isinstance(variant['env'], str):  # (damage, not a missing file)
        raise click.ClickException(f'{path}: its env is {variant["env"]!r}, not the env name a '
                                   'run records')
    if cli['env'] is not None and cli['env'] != variant.get('env'):
        # Another env family: the experiment's task and horizon do not apply.
        variant = {k: variant[k] for k in ('seed', 'episodes_per_task') if k in variant}
    options = {k: cli[k] if cli[k] is not None else variant.get(k) for k in cli}
    if options['env'] is None:
        raise click.UsageError(f'{path} not found: give --env (and --task for ML1)')
    options['env_kwargs'] = {k: v for k, v in (variant.get('overrides') or {}).items()
                             if k in ENV_KWARGS}
    options['episodes_per_task'] = variant.get('episodes_per_task')
    return options


def _stall_notices():
    """A console listener (``garage_promp._console``) that says, on stderr and at most every
    ``STALL_NOTICE_SECONDS``, which sampler worker the meta-test waits for (as the training
    console does), until ``--worker-timeout`` ends it."""
    last = [-math.inf]

    def notice(what: str) -> None:
        now = time.monotonic()
        if what.startswith('waiting for') and now - last[0] >= STALL_NOTICE_SECONDS:
            click.echo(f'meta-test: {what}', err=True)
            last[0] = now
    return notice


def _check_itr(ctx, param, value):
    """--itr: 'last', 'first' or an epoch number (an int >= 0; ``0007`` is epoch 7)."""
    del ctx, param
    if value in ('last', 'first'):
        return value
    if value.isascii() and value.isdigit():
        return value.lstrip('0') or '0'  # (the snapshot is itr_7.pkl; no int(): 5,000 digits)
    raise click.BadParameter(f"expected 'last', 'first' or an epoch number >= 0, got {value!r}")


def _check_csv_path(csv_path, log_dir):
    """Where the table goes (--csv, else LOG_DIR/meta_test.csv), refused before any work if
    it cannot be written as a file, or if it is a file that is not a meta-test table (the
    run's progress.csv or snapshot, say): it overwrites only a table of its own kind."""
    if csv_path is not None and not csv_path:
        raise click.BadParameter('expected a file name, got an empty one', param_hint='--csv')
    hint = '--csv' if csv_path is not None else '--csv (by default LOG_DIR/meta_test.csv)'
    path = csv_path if csv_path is not None else os.path.join(log_dir, 'meta_test.csv')
    if not os.path.isdir(os.path.dirname(kernel_abspath(path))):
        raise click.BadParameter(f'the directory of {path!r} does not exist', param_hint=hint)
    try:
        check_output_path(path, hint, directory=False)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if os.path.isfile(path):
        with open(path, 'rb') as f:
            first = f.readline().decode('utf-8', errors='replace').strip()
        if first != ','.join(COLUMNS + ('protocol', )):
            raise click.BadParameter(
                f'{path!r} exists and is not a meta-test table (its first line is '
                f'{first[:60]!r}): it is not overwritten; give another --csv', param_hint=hint)
    return path


def _load_snapshot(log_dir, itr):
    """The training snapshot of LOG_DIR at --itr, as a click error if there is none."""
    # Snapshotter() would create its default snapshot_dir, ./data/local/experiment
    # in the working directory: LOG_DIR exists, so giving it creates nothing.
    snapshotter = Snapshotter(snapshot_dir=log_dir)
    try:
        snapshot = snapshotter.load(log_dir, itr)
    except NotAFileError as error:
        raise click.BadParameter(str(error), param_hint='--itr') from error
    except (FileNotFoundError, CorruptSnapshotError) as error:
        raise click.ClickException(str(error)) from error
    try:
        check_training_snapshot(snapshot, log_dir)
    except CorruptSnapshotError as error:
        raise click.ClickException(str(error)) from error
    if itr == 'first' and not any(pathlib.Path(log_dir).glob('itr_*.pkl')):
        click.echo(f'--itr first: {log_dir} keeps no itr_<epoch>.pkl (snapshot mode '
                   "'last', or they were removed): its last snapshot, params.pkl, is the one "
                   'tested', err=True)
    return snapshot


@click.command(cls=StrictCommand)
@click.argument('log_dir', type=click.Path(exists=True, file_okay=False))
@click.option('--itr', default='last', show_default=True, callback=_check_itr,
              help="Snapshot epoch, 'last' or 'first'.")
@click.option('--env', type=click.Choice(sorted(ENVS) + sorted(METAWORLD)), default=None,
              help="Test on this env family [default: the experiment's].")
@click.option('--task', default=None, help='Meta-World ML1 environment, e.g. reach-v3.')
@click.option('--benchmark-seed', type=SEED, default=None,
              help="Meta-World goals seed [default: the experiment's seed].")
@click.option('--max-episode-length', type=EPISODE_LENGTH, default=None,
              help="[default: the experiment's].")
@click.option('--reward-function-version', type=click.Choice(REWARD_FUNCTION_VERSIONS),
              default=None, help="Meta-World reward functions [default: the experiment's].")
@click.option('--n-test-tasks', type=count(), default=None,
              help='Test tasks (goals) [default: 10; Meta-World: a multiple of the test classes].')
@click.option('--n-exploration-eps', type=count(), default=None,
              help="Episodes per adaptation step [default: the experiment's episodes_per_task].")
@click.option('--n-test-episodes', type=count(), default=None,
              help='Evaluation episodes per test task [default: 3 on Meta-World, else 2].')
@click.option('--seed', type=SEED, default=1, show_default=True,
              help='Sampling seed.')
@click.option('--sampler', type=click.Choice(list(garage_promp.sampler.SAMPLER_KINDS)),
              default='local', show_default=True, callback=sampler_kind,
              help='Sampler backend for the test tasks (local: no worker process).')
@click.option('--n-workers', type=WORKERS, default=1, show_default=True,
              help='Sampler workers.')
@click.option('--worker-timeout', type=FiniteFloat(min=1., max=MAX_SECONDS), default=None,
              help='Seconds (at least 1) a busy sampler worker may make no progress (not one '
                   'env step) before the meta-test ends naming it [default: 600].')
@click.option('--csv', 'csv_path', type=OUTPUT_FILE, default=None,
              help='Where to write the table [default: LOG_DIR/meta_test.csv].')
@click.option('--protocol', type=click.Choice(sorted(PROTOCOLS)), default='reference',
              show_default=True,
              help='Evaluation protocol: the defaults of the options below (given ones win). '
                   'metaworld-algorithms: 40 goals per class, 10 adaptation episodes, 3 '
                   'deterministic evaluation episodes ending at success, and before '
                   'adaptation too.')
@click.option('--goals-per-class', type=count(), default=None,
              help='Meta-World: test goals per test class (instead of --n-test-tasks).')
@click.option('--deterministic/--stochastic', default=None,
              help='Evaluation episodes act with the mean action [protocol].')
@click.option('--terminate-on-success/--no-terminate-on-success', default=None,
              help='Meta-World: test episodes end at their first success [protocol].')
@click.option('--before-adaptation/--no-before-adaptation', default=None,
              help='Also evaluate the meta-policy before any inner step [protocol].')
def main(log_dir, itr, env, task, benchmark_seed, max_episode_length, reward_function_version,
         n_test_tasks, n_exploration_eps, n_test_episodes, seed, sampler, n_workers,
         worker_timeout, csv_path, protocol, goals_per_class, deterministic,
         terminate_on_success, before_adaptation):
    """Meta-test the snapshot in LOG_DIR on the test tasks; print and save a per-task table."""
    csv_path = _check_csv_path(csv_path, log_dir)
    with user_errors():  # a directory without a snapshot, named before anything else
        check_run_dir(log_dir)
    if goals_per_class is not None and n_test_tasks is not None:
        raise click.UsageError('give --goals-per-class or --n-test-tasks, not both')
    options = _experiment_options(log_dir, dict(
        env=env, task=task, seed=benchmark_seed, max_episode_length=max_episode_length,
        reward_function_version=reward_function_version))
    preset = dict(PROTOCOLS[protocol])
    if options['env'] not in METAWORLD:
        # Meta-World's protocol and options are refused (no classes, no success here).
        for name, value in (('--protocol', protocol if protocol != 'reference' else None),
                            ('--goals-per-class', goals_per_class),
                            ('--terminate-on-success', terminate_on_success),
                            ('--benchmark-seed', benchmark_seed)):
            if value is not None and value is not False:
                given = name if value is True else f'{name} {value}'
                raise click.UsageError(f'{given} is a Meta-World option; '
                                       f'{options["env"]} does not take it')
    if goals_per_class is None and n_test_tasks is None:
        goals_per_class = preset['goals_per_class']
    n_exploration_eps = n_exploration_eps or preset['n_exploration_eps']
    n_test_episodes = n_test_episodes or preset['n_test_episodes']
    deterministic, terminate_on_success, before_adaptation = (
        preset[k] if v is None else v for k, v in (
            ('deterministic', deterministic), ('terminate_on_success', terminate_on_success),
            ('before_adaptation', before_adaptation)))
    snapshot = _load_snapshot(log_dir, itr)
    algo = snapshot['algo']
    if env is None:
        # The env comes from variant.json (if any): it must be this snapshot's run.
        with user_errors():
            check_snapshot_matches_variant(log_dir, algo, snapshot['env'], snapshot['seed'])
    horizon = snapshot['env'].spec.max_episode_length
    if options['max_episode_length'] is not None and options['max_episode_length'] > horizon:
        raise click.BadParameter(f'the algorithm was trained with episodes of {horizon} steps '
                                 'and cannot adapt on longer ones',
                                 param_hint='--max-episode-length')
    set_seed(seed)
    try:
        setup = make_env_setup(
            options['env'],
            seed=seed if options['seed'] is None else options['seed'],
            max_episode_length=(horizon if options['max_episode_length'] is None
                                else options['max_episode_length']),
            task=options['task'],
            reward_function_version=options['reward_function_version'],
            env_kwargs=options['env_kwargs'],
            test_terminate_on_success=terminate_on_success)
    except ValueError as error:  # e.g. ML1 without --task, --task off Meta-World
        raise click.UsageError(str(error)) from error
    if setup.env.spec.observation_space.shape != snapshot['env'].spec.observation_space.shape \
            or setup.env.spec.action_space.shape != snapshot['env'].spec.action_space.shape:
        raise click.UsageError(f'{options["env"]} has other observation/action spaces than the '
                               'environment of the snapshot')
    if goals_per_class is not None:
        n_test_tasks = goals_per_class * len(setup.test_tasks.class_names)
    if n_test_tasks is None:
        n_test_tasks = 10
    if goals_per_class is not None and goals_per_class > setup.test_tasks.goals_per_class:
        raise click.BadParameter(
            f'{goals_per_class} goals of each test class, but {options["env"]} has '
            f'{setup.test_tasks.goals_per_class} goals a class: a goal would be drawn and counted '
            'twice', param_hint='--goals-per-class')
    try:
        setup.check_task_counts(n_test_tasks=n_test_tasks)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint='--n-test-tasks') from error
    if n_exploration_eps is None:
        n_exploration_eps = options['episodes_per_task']
    if n_exploration_eps is None:
        n_exploration_eps = env_config(options['env']).get('episodes_per_task', 20)
    if n_test_episodes is None:
        n_test_episodes = setup.n_test_episodes
    try:  # each round samples every test goal's episodes at once
        for episodes in (dict(n_exploration_eps=n_exploration_eps),
                         dict(n_test_episodes=n_test_episodes)):
            check_batch_steps(setup.env.spec.max_episode_length, n_test_tasks=n_test_tasks,
                              **episodes)
        algo.check_adaptation_batch(n_exploration_eps, setup.env.spec.max_episode_length)
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    # A sampler of its own: the snapshot's (pickled as configuration) is never
    # started, and the test tasks may have a shorter horizon. It keeps the env's
    # budget of env copies per worker (Meta-World: 40): without it a worker would
    # build a copy for every episode of every goal in a round (2,000 Sawyer envs,
    # tens of GB, for the 200 goals of ML10's metaworld-algorithms protocol).
    test_sampler = garage_promp.make_sampler(
        algo.policy, setup.env, kind=sampler, n_workers=n_workers, seed=seed,
        max_episode_length=setup.env.spec.max_episode_length,
        max_envs_per_worker=setup.max_envs_per_worker,
        worker_timeout=DEFAULT_WORKER_TIMEOUT if worker_timeout is None else worker_timeout)
    evaluator = MetaEvaluator(
        sampler=test_sampler,
        test_task_sampler=setup.test_tasks, n_test_tasks=n_test_tasks,
        n_exploration_eps=n_exploration_eps, n_test_episodes=n_test_episodes,
        deterministic=deterministic, before_adaptation=before_adaptation)
    described = (f'protocol {protocol}: {n_test_tasks} test goals, {n_exploration_eps} '
                 f'adaptation episodes per inner step x {algo.num_inner_grad_steps}, '
                 f'{n_test_episodes} evaluation episodes '
                 f'({"mean action" if deterministic else "sampled actions"}'
                 f'{", ending at success" if terminate_on_success else ""})'
                 f'{", and before adaptation" if before_adaptation else ""}')
    click.echo(setup.description)
    click.echo(described)
    # The evaluator logs progress and garage's MetaTest/... keys through dowel.
    logger.add_output(dowel.StdOutput())
    set_listener(_stall_notices())
    try:
        # A worker that died or made no progress, a non-finite number: one Error line.
        with user_errors(expected=(SamplerWorkerError, FloatingPointError, TooFewStepsError)):
            rows = task_table(evaluator.evaluate(algo), evaluator.last_pre_update_episodes)
        logger.log(tabular)
        logger.dump_all()
    finally:
        set_listener(None)
        test_sampler.shutdown_worker()
        tabular.clear()
        logger.remove_output_type(dowel.StdOutput)
    click.echo(format_table(rows))
    def write(f):
        writer = csv.DictWriter(f, fieldnames=COLUMNS + ('protocol', ))
        writer.writeheader()
        writer.writerows([dict(r, protocol=described) for r in rows])
    try:  # whole or not at all: a full disk leaves the table that was there
        replace_atomically(csv_path, write)
    except OSError as error:
        raise click.ClickException(f'--csv: cannot write {csv_path} '
                                   f'({error.strerror or error}); the table is printed '
                                   'above') from None
    click.echo(f'wrote {csv_path}')
    return rows


if __name__ == '__main__':
    run_command(main)
