#!/usr/bin/env python3
"""Meta-train any garage_promp algorithm on any paper environment.

Defaults are the paper's (garage_promp/experiment/paper_config.py); every
hyperparameter can be overridden, e.g.

    python launchers/train.py --algo ProMP --env HalfCheetahFwdBack --epochs 1000
    python launchers/train.py --algo LVC-TRPO --env AntRandGoal --set max_kl_step=0.02
    python launchers/train.py --preset demo      # the README's few-minute run
    python launchers/train.py --env ML1 --task reach-v3   # Meta-World 3 (also ML10, ML45)

On Meta-World, training samples the benchmark's train split and the meta-test
(MetaEvaluator) its test split; ``launchers/meta_test.py`` re-runs the
meta-test of a snapshot.
"""
import signal
import threading

# Ctrl-C while the libraries load ends the launcher quietly (an ignored SIGINT stays
# ignored); run_command restores Python's handler before the run starts.
if (__name__ == '__main__' and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)

import os

from garage_promp._garage_compat import SnapshotWriteError
from garage_promp._process import dump_stacks_on_usr1
from garage_promp.baselines import BASELINE_SOLVERS
from garage_promp.envs.metaworld import REWARD_FUNCTION_VERSIONS
from garage_promp.experiment.builder import build_experiment, check_overrides, override_keys
from garage_promp.experiment.paper_config import ALGOS, ENVS, METAWORLD, algo_kwargs, env_config
from garage_promp.experiment.progress import ProgressOutput
from garage_promp.experiment.resume import SNAPSHOT_MODES, resume_run, run_record
from garage_promp.experiment.run_dir import (
    LOCK_NAME,
    DamagedRunFile,
    RunDirBusy,
    RunWriteError,
    owned_run_dir,
    run_files_written,
)
from garage_promp.objectives import TooFewStepsError
from garage_promp.policies import LOG_STD_KINDS
from garage_promp.sampler.backends import SamplerWorkerError, live_worker_pids
from garage_promp.validation import (
    ENV_STEPS,
    EPISODE_LENGTH,
    HIDDEN_SIZES,
    MAX_SECONDS,
    OUTPUT_DIR,
    SEED,
    SIZE_OPTIONS,
    WORKERS,
    FiniteFloat,
    StrictCommand,
    announce_new_run_beside,
    check_batch_steps,
    check_default_log_dir,
    check_output_path,
    check_run_dir,
    check_set_agrees,
    count,
    given_flags,
    parse_overrides,
    run_command,
    sampler_kind,
    usage_errors,
    user_errors,
)

import click
import dowel
from dowel import logger
from garage import wrap_experiment
from garage.trainer import Trainer

#: Errors that end a run part-way, whose message says all (which worker, env, task and step):
#: one ``Error:`` line and exit 1, the snapshots of the epochs done kept.
RUN_ERRORS = (SamplerWorkerError, FloatingPointError, SnapshotWriteError, RunWriteError,
              TooFewStepsError)

#: A few-minute ProMP run on 2 cores (the README's first command).
PRESETS = {
    'demo': dict(algo='ProMP', env='PointEnvCorner', epochs=25, meta_batch_size=20,
                 episodes_per_task=10, max_episode_length=50, n_test_tasks=4,
                 overrides={'learning_rate': 1e-2, 'reward_type': 'dense'}),
}


@wrap_experiment(archive_launch_repo=False, snapshot_mode='last')
def meta_train(ctxt, epochs, full_table=False, max_env_steps=None, **options):
    """Train what ``main`` built from these options (or build it again from them).

    ``options`` hold ``snapshot_mode`` where it is not garage's ``last`` (recorded in
    variant.json, so that ``--resume`` keeps it); the ``ctxt`` already applies it.
    """
    options.pop('snapshot_mode', None)
    experiment = _BUILT.pop(_key(options), None) or build_experiment(**options)
    # Kept in every snapshot: --resume refuses another run's (resume.run_record).
    experiment.algo.run_options = run_record(options)
    logger.log(experiment.setup.description)
    experiment.algo.max_env_steps = max_env_steps
    _RUN_DIR.append(ctxt.snapshot_dir)
    with owned_run_dir(ctxt.snapshot_dir):
        trainer = Trainer(ctxt)
        trainer.setup(experiment.algo, experiment.env)
        # One line per epoch on the console (--full-table adds garage's table).
        logger.remove_output_type(dowel.StdOutput)
        logger.add_output(ProgressOutput(epochs, full_table=full_table,
                                         max_env_steps=max_env_steps))
        with run_files_written(ctxt.snapshot_dir):
            return trainer.train(n_epochs=epochs, batch_size=1)


def _parse_overrides(pairs):
    """``--set key=value`` pairs as a dict (garage_promp.validation.parse_overrides)."""
    return parse_overrides(pairs, '--set')


#: The experiment ``main`` built (and so checked) before creating its
#: directory; ``meta_train`` trains it rather than building it twice.
_BUILT = {}
#: The directory of the run this process trains (set as the run starts), for the
#: line printed at Ctrl-C.
_RUN_DIR = []


def _interrupted_note() -> str:
    """What a Ctrl-C leaves: the run's snapshot and how to continue, or that there is none."""
    if not _RUN_DIR:
        return ''  # stopped before a run began: nothing was written
    log_dir = _RUN_DIR[-1]
    try:
        check_run_dir(log_dir)
    except (ValueError, OSError):  # (OSError: the directory gone or unreadable since)
        return (f'no snapshot in {log_dir} (--snapshot-mode none, or stopped before the first '
                'epoch ended): there is nothing to continue from')
    return (f'the newest snapshot in {log_dir} stays; --resume {log_dir} '
            'continues from it')


def _key(options):
    # meta_train takes epochs apart from the options it builds from.
    return repr(sorted((k, v) for k, v in options.items() if k != 'epochs'))


@click.command(cls=StrictCommand)
@click.option('--preset', type=click.Choice(sorted(PRESETS)), default=None,
              help='A named configuration (options given explicitly still win).')
@click.option('--algo', type=click.Choice(sorted(ALGOS)), default='ProMP', show_default=True)
@click.option('--env', 'env_name', type=click.Choice(sorted(ENVS) + sorted(METAWORLD)),
              default='HalfCheetahFwdBack', show_default=True,
              help='A paper environment or a Meta-World benchmark (ML1 needs --task).')
@click.option('--task', default=None, help='Meta-World ML1 environment, e.g. reach-v3.')
@click.option('--reward-function-version', type=click.Choice(REWARD_FUNCTION_VERSIONS),
              default=None, help='Meta-World reward functions [default: v2].')
@click.option('--seed', type=SEED, default=1, show_default=True)
@click.option('--epochs', type=count(), default=1000, show_default=True,
              help='Epochs to run [with --max-env-steps: as many as the budget takes].')
@click.option('--max-env-steps', type=ENV_STEPS, default=None,
              help='Budget of env steps, every sampling round counted (TotalEnvSteps): '
                   'training ends at the first epoch boundary at or past it, whatever the '
                   "episodes' lengths.")
@click.option('--meta-batch-size', type=count(), default=None,
              help='Tasks per epoch [paper: 40; Meta-World: 20, ML45: 45].')
@click.option('--episodes-per-task', type=count(), default=None,
              help='[paper: 20; Meta-World: 10].')
@click.option('--max-episode-length', type=EPISODE_LENGTH, default=None,
              help='[paper: per env; Meta-World: 500].')
@click.option('--sampler', type=click.Choice(['local', 'multiprocessing', 'ray']), default='local',
              show_default=True, callback=sampler_kind)
@click.option('--n-workers', type=WORKERS, default=1, show_default=True,
              help='Sampler workers (local: objects in this process; multiprocessing: '
                   'worker processes; ray: Ray actors).')
@click.option('--envs-per-task', type=count(), default=None,
              help='Env copies per task per worker; episodes run in waves '
                   '[default: one per episode; Meta-World: at most 40 per worker].')
@click.option('--worker-timeout', type=FiniteFloat(min=1., max=MAX_SECONDS), default=None,
              help='Seconds (at least 1) a busy sampler worker (in process too) may make no '
                   'progress (not one env step) before the run ends naming it [default: 600].')
@click.option('--device', default='cpu', show_default=True,
              help="Where the meta-update runs: cpu, cuda or cuda:N (sampling stays on the CPU).")
@click.option('--n-test-tasks', type=count(), default=10, show_default=True)
@click.option('--evaluate-every', type=count(), default=1, show_default=True,
              help='Meta-test period (epochs).')
@click.option('--hidden-sizes', type=HIDDEN_SIZES, default=None,
              help='e.g. "64,64" [paper: per env].')
@click.option('--log-std', type=click.Choice(LOG_STD_KINDS), default='shared', show_default=True,
              help="The policy's learned log-std: one shared by all action dimensions "
                   "(garage's GaussianMLPPolicy) or one per dimension (the original ProMP "
                   "code's MetaGaussianMLPPolicy).")
@click.option('--baseline-solver', type=click.Choice(BASELINE_SOLVERS), default='lstsq',
              show_default=True,
              help="How the linear baselines solve their damped normal equations: the original "
                   "ProMP code's SVD least squares, or the same system by a Cholesky "
                   "factorisation (about 20x faster a fit on Humanoid's 756 features; other "
                   "rounding, so other numbers).")
@click.option('--snapshot-mode', type=click.Choice(SNAPSHOT_MODES),
              default='last', show_default=True)
@click.option('--log-dir', type=OUTPUT_DIR, default=None,
              help='Default: data/local/experiment/<name>.')
@click.option('--full-table', is_flag=True,
              help="Print garage's full table of logged values each epoch, not only the "
                   'one-line summary.')
@click.option('--resume', 'resume_dir', type=click.Path(exists=True, file_okay=False),
              default=None,
              help='Continue the run in this directory from its snapshot, to --epochs in all '
                   '[default: the run\'s], with its --snapshot-mode unless given; appends to '
                   'its progress.csv.')
@click.option('--set', 'overrides', multiple=True,
              help='Any other constructor argument, key=value (repeatable).')
@click.pass_context
def main(click_ctx, preset, algo, env_name, task, reward_function_version, seed, epochs,
         max_env_steps,
         meta_batch_size, episodes_per_task, max_episode_length, sampler, n_workers, envs_per_task,
         worker_timeout, device, n_test_tasks,
         evaluate_every, hidden_sizes, log_std, baseline_solver, snapshot_mode, log_dir,
         full_table, resume_dir, overrides):
    """Meta-train one algorithm on one paper environment or Meta-World benchmark."""
    if resume_dir:
        given = given_flags(click_ctx, exclude=('resume_dir', 'epochs', 'max_env_steps',
                                                'full_table', 'snapshot_mode'))
        if given:
            raise click.UsageError('--resume continues the run as configured in its '
                                   'variant.json; it takes only --epochs, --max-env-steps, '
                                   f'--snapshot-mode and --full-table (got {", ".join(given)})')
        epochs_given = click_ctx.get_parameter_source(
            'epochs') == click.core.ParameterSource.COMMANDLINE
        # Not about the command line (no run there, a corrupt snapshot, another
        # run writing to it): one line, no usage text; unless the error names
        # an option (--epochs must be more): a usage error.
        with user_errors('--resume'):
            check_run_dir(resume_dir)  # before its lock file is written there
            check_output_path(resume_dir, 'the run directory')
            _RUN_DIR.append(resume_dir)
            with user_errors(expected=RUN_ERRORS):
                mode_given = click_ctx.get_parameter_source(
                    'snapshot_mode') == click.core.ParameterSource.COMMANDLINE
                resume_run(resume_dir, epochs if epochs_given else None,
                           snapshot_mode if mode_given else None, full_table,
                           max_env_steps=max_env_steps)
        return
    args = dict(algo=algo, env=env_name, seed=seed, epochs=epochs,
                meta_batch_size=meta_batch_size, episodes_per_task=episodes_per_task,
                max_episode_length=max_episode_length, n_test_tasks=n_test_tasks)
    parsed = _parse_overrides(overrides)
    explicit = {k for k in args if click_ctx.get_parameter_source(
        'env_name' if k == 'env' else k) == click.core.ParameterSource.COMMANDLINE}
    if preset:
        for key, value in PRESETS[preset].items():
            if key != 'overrides' and key not in explicit:
                args[key] = value
        # The preset's overrides that the chosen algorithm takes (the demo's
        # ProMP learning rate does not apply to --algo MAML-TRPO).
        keys = override_keys(args['algo'])
        parsed = {**{k: v for k, v in PRESETS[preset].get('overrides', {}).items()
                     if k in keys}, **parsed}
    # Sizes with options of their own that --set may give too: one value.
    check_set_agrees(parsed, {key: args[key] for key in explicit})
    options = dict(snapshot_mode=snapshot_mode)
    if log_dir:
        options['log_dir'] = log_dir
    else:
        # data/local/experiment/<name>[_N]; every argument is in variant.json.
        task_part = f'_{task}' if task else ''
        options['name'] = f"{args['algo']}_{args['env']}{task_part}_seed={args['seed']}"
        with usage_errors('--log-dir'):  # a given --log-dir is checked while parsing
            check_default_log_dir()
    with usage_errors('--set'):
        check_overrides(args['algo'], parsed)
    if 'device' in parsed:  # one place for it: the run's record has --device as its own entry
        raise click.UsageError(f'--set device={parsed["device"]}: give the device with --device')
    if args['env'] in METAWORLD:
        args.update(task=task, reward_function_version=reward_function_version or 'v2')
    elif task is not None or reward_function_version is not None:
        raise click.UsageError('--task and --reward-function-version are Meta-World options '
                               f'(--env {"/".join(METAWORLD)})')
    run = dict(sampler=sampler, n_workers=n_workers, envs_per_task=envs_per_task, device=device,
               worker_timeout=worker_timeout,
               evaluate_every=evaluate_every, hidden_sizes=hidden_sizes, overrides=parsed, **args)
    if log_std != 'shared':  # recorded only where it is not the default, so that runs made
        run['log_std'] = log_std  # before the option group with today's (plot.py, paper.py)
    if baseline_solver != 'lstsq':  # (likewise)
        run['baseline_solver'] = baseline_solver
    # Every check runs here, before the experiment's directory exists; an error
    # names the option of the argument it is about (--set for an override).
    with usage_errors(hints=dict.fromkeys(parsed, '--set')):
        defaults = algo_kwargs(args['algo'], args['env'])
        horizon = args['max_episode_length'] or env_config(args['env'])['H']
        episodes = args['episodes_per_task'] or defaults['episodes_per_task']
        # --max-episode-length is named where given, as a size among the others.
        horizon_name = 'max_episode_length' if args['max_episode_length'] else None
        check_batch_steps(horizon, horizon_name=horizon_name, meta_batch_size=args[
            'meta_batch_size'] or defaults['meta_batch_size'], episodes_per_task=episodes)
        check_batch_steps(horizon, horizon_name=horizon_name, n_test_tasks=args['n_test_tasks'],
                          episodes_per_task=episodes)
        built = build_experiment(**run)
    # ... recorded as the option's too, so variant.json's top level says what the run used
    # (the override is what the builder applied; checked above naming --set).
    run.update({key: parsed[key] for key in SIZE_OPTIONS if key in parsed})
    if log_dir and os.path.isdir(log_dir):
        # Another run writing there: not about the command line (one line, no
        # usage text); checked before garage's wrap_experiment touches its files.
        if os.path.exists(os.path.join(log_dir, LOCK_NAME)):  # (a run writing there has one;
            with user_errors(expected=(RunDirBusy, DamagedRunFile)):  # (none is made in a
                # foreign dir; one that is no plain file is refused, not written through)
                with owned_run_dir(log_dir, record_pid=False):  # this run may go beside it
                    pass
    if log_dir:  # (a path garage cannot log is refused; an existing one is announced)
        announce_new_run_beside(log_dir, f'To continue the run in {log_dir}: --resume '
                                         f'{log_dir}')
    if max_env_steps is not None and click_ctx.get_parameter_source(
            'epochs') != click.core.ParameterSource.COMMANDLINE:
        run['epochs'] = built.algo.epochs_for_budget(max_env_steps)
    elif max_env_steps is not None:  # both limits given: say which ends the run
        click.echo(f'--epochs {run["epochs"]} and --max-env-steps {max_env_steps:,}: the run '
                   'stops at whichever it reaches first', err=True)
    _BUILT[_key(run)] = built
    if snapshot_mode != 'last':  # recorded where not the default, as --log-std; --resume
        run['snapshot_mode'] = snapshot_mode  # takes it from variant.json
    try:
        with user_errors(expected=RUN_ERRORS):
            meta_train(options, full_table=full_table, max_env_steps=max_env_steps, **run)
    except RunDirBusy as error:
        raise click.ClickException(str(error)) from error


if __name__ == '__main__':
    # `kill -USR1 <pid>` prints every thread's stack, then every sampler worker's:
    # what a run that seems stuck is doing.
    dump_stacks_on_usr1(live_worker_pids)
    run_command(main, _interrupted_note)
