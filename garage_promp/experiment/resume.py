"""Continue a run in its own directory: the snapshot, then appended logs.

garage's ``wrap_experiment`` reopens ``progress.csv`` with mode ``'w'`` (it
would truncate it) and rewrites ``variant.json``; :func:`resume_run` does
neither. It restores the newest snapshot with garage's ``Trainer.restore``,
drops ``progress.csv`` rows of epochs after that snapshot (they are run
again), appends the new epochs' rows, and leaves ``variant.json`` as it was.
With garage_promp's algorithms the continued rows equal those of an
uninterrupted run (see ``MetaPolicySearch.__getstate__``).
"""
import csv
import json
import numbers
import os
import re
import stat
from typing import Any, List
import warnings

from garage_promp._files import replace_atomically
from garage_promp._garage_compat import RAY_MISSING_MESSAGE, check_training_snapshot, ray_available
from garage_promp.experiment.progress import ProgressOutput
from garage_promp.experiment.run_dir import (
    DamagedRunFile,
    complete_lines,
    owned_run_dir,
    read_progress,
    read_variant,
    run_files_written,
)
from garage_promp.validation import (
    MAX_COUNT,
    MAX_ENV_STEPS,
    MAX_SECONDS,
    MAX_WORKERS,
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_int,
    check_run_dir,
)

import dowel
from dowel import CsvOutput, logger
from garage.experiment.experiment import ExperimentContext
from garage.trainer import Trainer
import torch


class AppendingCsvOutput(CsvOutput):
    """dowel's CSV output, appending to an existing file under its header."""

    def __init__(self, file_name: str):  # pylint: disable=super-init-not-called
        # dowel's __del__ closes the file: there is none yet if opening it fails below.
        self._log_file = None
        with open(file_name, newline='') as f:
            header = next(csv.reader(f), None)
        if not header:
            raise ValueError(f'{file_name} has no header row to append under')
        self._filename = file_name
        self._append_under(header)

    def _append_under(self, header):
        """Open the file to append rows under ``header``, its first line."""
        dowel.simple_outputs.FileOutput.__init__(self, self._filename, mode='a')
        self._header = header
        self._fieldnames = set(header)
        self._writer = csv.DictWriter(self._log_file, fieldnames=header,
                                      restval='', extrasaction='raise')

    def record(self, data, prefix=''):
        """Append one row; a key the header lacks widens it (see :meth:`_widen`).

        dowel's own ``record`` rewrites the whole file whenever a row's keys differ
        from the header, and leaves a ``.tmp`` copy behind; a row without some of the
        header's keys here gets blank cells, as dowel fills them.
        """
        del prefix
        if not isinstance(data, dowel.TabularInput):
            raise ValueError('Unacceptable type.')
        row = data.as_primitive_dict
        new = [key for key in row if key not in self._fieldnames]
        if new:
            self._widen(new)
        self._writer.writerow(row)
        for key in row:
            data.mark(key)

    def _widen(self, new):
        """Add columns ``new`` to the header, blank in the rows already there (whose cells
        keep their values), by writing the widened file beside it and replacing it."""
        warnings.warn(f'{self._filename}: its header lacks {len(new)} column(s) this run logs '
                      f'({", ".join(new[:3])}{", ..." if len(new) > 3 else ""}); they are '
                      'added, blank in the earlier rows')
        self._log_file.close()
        with open(self._filename, newline='', encoding='utf-8') as f:
            rows = list(csv.reader(f))
        header = self._header + new

        def write(f):
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(row + [''] * len(new) for row in rows[1:])

        replace_atomically(self._filename, write)
        self._append_under(header)


class _Discard(dowel.LogOutput):
    """A dowel output that takes text and keeps none of it."""

    @property
    def types_accepted(self):
        return (str, )

    def record(self, data, prefix=''):
        del data, prefix


def _keep_rows(path: str, n_rows: int):
    """Keep the header and the first ``n_rows`` complete rows of a CSV (atomically); a last
    row cut short by a kill goes too."""
    with open(path, newline='', encoding='utf-8') as f:
        text = f.read()
    kept = complete_lines(path)[:n_rows + 1]
    if ''.join(kept) == text:
        return
    replace_atomically(path, lambda f: f.writelines(kept))


def _logged_rows(path: str) -> List[dict] | None:
    """The complete epoch rows of a run's ``progress.csv`` (None if it has none).

    Raises:
        DamagedRunFile: If it is not a run's log (no ``TotalEnvSteps`` column, rows that
            do not fit the header).

    """
    if not os.path.exists(path):
        return None
    rows = read_progress(os.path.dirname(path) or '.')
    lines = complete_lines(path)
    if lines and 'TotalEnvSteps' not in next(csv.reader(lines[:1])):
        raise DamagedRunFile(f'{path} has no TotalEnvSteps column: not the log of a training '
                             'run, so the resumed epochs cannot be appended to it')
    return rows


def _check_logged_steps(path: str, rows: List[dict], done: int, steps: int):
    """Row ``done`` of the log ``rows`` (the snapshot's epoch) must count the snapshot's env
    steps.

    The resumed rows continue from the snapshot's count, so a log whose row says otherwise
    (another run's ``progress.csv``, or an edited one) would show the count jump or fall
    back where the rows join.

    Raises:
        DamagedRunFile: Naming the file, the row and both counts.

    """
    logged = rows[done - 1].get('TotalEnvSteps')
    if logged in (None, '') or float(logged) != steps:
        raise DamagedRunFile(
            f'{path}: the row of epoch {done - 1} counts {logged or "no"} env steps but the '
            f'snapshot, at the end of that epoch, {steps}: the log is not this snapshot\'s '
            '(another run\'s progress.csv, an edited one, or one whose rows shifted when a row '
            'was lost at an earlier stop). Restore the run\'s own progress.csv, or start the '
            'run again')


def _env_differs(variant: dict, env) -> str | None:
    """What makes ``env`` (a snapshot's) another env than ``variant``'s, or None."""
    # pylint: disable=import-outside-toplevel
    from garage_promp.experiment.paper_config import ENVS, METAWORLD
    label = variant.get('env')
    inner = getattr(env, 'unwrapped', env)
    if label in ENVS:
        want = ENVS[label]['env']
        if isinstance(want, type) and type(inner) is not want:  # pylint: disable=unidiomatic-typecheck
            named = label if label == want.__name__ else f'{label} ({want.__name__})'
            return f'an env of class {type(inner).__name__}, its variant.json {named}'
    elif label in METAWORLD:
        if not type(inner).__module__.startswith('metaworld'):
            return f'an env of class {type(inner).__name__}, its variant.json Meta-World {label}'
        task, have = variant.get('task'), getattr(env, 'task_name', None)
        if label == 'ML1' and task is not None and have is not None and have != task:
            return f'Meta-World {have}, its variant.json ML1 {task}'
    return None


def _paper_defaults(variant: dict) -> dict:
    """The hidden sizes and horizon a launcher run of ``variant`` had where it left them
    at their defaults (``null`` in ``variant.json``): its env's row of the paper's table
    (``paper_config.env_config``); empty for an env the table does not know."""
    from garage_promp.experiment.paper_config import env_config  # pylint: disable=import-outside-toplevel
    env = variant.get('env')
    if not isinstance(env, str):
        return {}
    try:
        row = env_config(env.partition(':')[0])
    except ValueError:
        return {}
    return {'hidden_sizes': list(row['hidden_sizes']), 'max_episode_length': row['H']}


#: The launcher's options that say how a run is executed, not what it computes: a
#: run continues with other values of these (another machine's workers or device),
#: so ``variant.json`` may be edited there; every other recorded option is the run's.
EXECUTION_OPTIONS = frozenset({'sampler', 'n_workers', 'envs_per_task', 'worker_timeout',
                               'device'})


def execution_options(log_dir: str) -> dict:
    """The :data:`EXECUTION_OPTIONS` of the run's ``variant.json`` (those it holds), checked
    as ``launchers/train.py`` checks them: a value the launcher would refuse (a sampler
    kind not spelt as one, ``n_workers`` 0 or ``true``, a timeout under a second, a device
    this machine has not) is refused naming the file and the entry.

    Raises:
        ValueError: As above.

    """
    from garage_promp.sampler import SAMPLER_KINDS  # pylint: disable=import-outside-toplevel
    variant = read_variant(log_dir)
    where = f"{os.path.join(log_dir, 'variant.json')}'s"
    def sampler_kind(value, name):
        kind = check_choice(value, name, SAMPLER_KINDS)
        if kind == 'ray' and not ray_available():  # (as train.py's --sampler, while parsing)
            raise ValueError(f'{name} is {kind!r}: ' + RAY_MISSING_MESSAGE.format(name="'ray'"))
        return kind

    checks = {
        'sampler': sampler_kind,
        'n_workers': lambda v, name: check_int(v, name, 1, MAX_WORKERS),
        'envs_per_task': lambda v, name: None if v is None else check_int(v, name, 1),
        'worker_timeout': lambda v, name: None if v is None else check_float(
            v, name, 1., MAX_SECONDS),
        'device': lambda v, name: check_device(v, name),
    }
    return {key: check(variant[key], f'{where} {key}') for key, check in checks.items()
            if key in variant}


def _execute_as_recorded(trainer, algo, options: dict) -> None:
    """Continue the restored ``algo`` with the run's :func:`execution_options` (edited in
    ``variant.json`` to continue on another machine): its sampler with the recorded
    backend, workers, env copies and timeout (the same episodes: the sampler's seed and
    round are kept), its meta-update on the recorded device (another device rounds it
    otherwise)."""
    from garage_promp.sampler import DEFAULT_WORKER_TIMEOUT, MetaSampler  # pylint: disable=import-outside-toplevel
    sampler = getattr(algo, '_sampler', None)
    if isinstance(sampler, MetaSampler):
        have = dict(kind=sampler.kind, n_workers=sampler.n_workers,
                    envs_per_task=sampler._envs_per_task,  # pylint: disable=protected-access
                    worker_timeout=sampler._worker_timeout)  # pylint: disable=protected-access
        # variant.json names the backend 'sampler', and a worker_timeout of null the default.
        recorded = {'kind' if key == 'sampler' else key: value
                    for key, value in options.items() if key != 'device'}
        if 'worker_timeout' in recorded and recorded['worker_timeout'] is None:
            recorded['worker_timeout'] = DEFAULT_WORKER_TIMEOUT
        wanted = {**have, **recorded}
        if wanted != have:
            algo._sampler = sampler.executed_otherwise(**wanted)  # pylint: disable=protected-access
            trainer._sampler = algo._sampler  # pylint: disable=protected-access
    if 'device' in options and hasattr(algo, '_device'):
        algo._device = options['device']  # pylint: disable=protected-access


def run_record(options: dict) -> dict:
    """What a snapshot keeps of the launcher options its run was built from
    (``MetaPolicySearch.run_options``): ``options`` as ``variant.json`` records them (JSON
    values), without :data:`EXECUTION_OPTIONS`."""
    return {key: json.loads(json.dumps(value, default=repr))
            for key, value in options.items() if key not in EXECUTION_OPTIONS}


def _check_run_options(log_dir: str, variant: dict, recorded: Any) -> None:
    """Refuse a snapshot whose recorded launcher options (:func:`run_record`, kept in the
    algorithm by ``launchers/train.py``) differ from ``variant.json``'s: another run's
    ``--set`` options, evaluation schedule or any other option the checks above do not
    name. Snapshots from before the record carry none (nothing to compare)."""
    if not isinstance(recorded, dict):
        return
    for key in sorted(recorded):
        have, want = recorded[key], variant.get(key, '(none)')
        if have != want:
            raise ValueError(f'the snapshot in {log_dir} was made with {key}={have!r}, its '
                             f"variant.json has {key}={want!r}: not this run's snapshot")


def _check_snapshot_names(log_dir: str) -> None:
    """Refuse a run directory where a snapshot's name (``params.pkl``, ``itr_N.pkl``) is
    taken by something that is not a file (a directory, a pipe): the run would train an
    epoch and then fail to write its snapshot there."""
    for name in sorted(os.listdir(log_dir)):
        if name != 'params.pkl' and not re.fullmatch(r'itr_\d+\.pkl', name):
            continue
        path = os.path.join(log_dir, name)
        mode = os.lstat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            kind = 'directory' if stat.S_ISDIR(mode) else 'special file'
            raise DamagedRunFile(f'{path} is a {kind}, not a snapshot: the run could not write '
                                 'its snapshot there; move it out of the run directory')


def _check_variant_entries(log_dir: str, variant: dict) -> None:
    """Refuse a launcher's ``variant.json`` whose env, hidden sizes or baseline solver are
    not what a run records (an env name; hidden sizes null or a list of whole numbers; a
    solver's name, where given): damage, named, not a check skipped."""
    path = os.path.join(log_dir, 'variant.json')
    env = variant.get('env')
    if not isinstance(env, str):
        raise DamagedRunFile(f'{path}: its env is {env!r}, not the env name a run records')
    hidden = variant.get('hidden_sizes')
    if hidden is not None and not (isinstance(hidden, list) and all(
            isinstance(size, int) and not isinstance(size, bool) for size in hidden)):
        raise DamagedRunFile(f'{path}: its hidden_sizes is {hidden!r}, not the list of whole '
                             'numbers (or null) a run records')
    from garage_promp.baselines import BASELINE_SOLVERS  # pylint: disable=import-outside-toplevel
    solver = variant.get('baseline_solver', 'lstsq')
    if not isinstance(solver, str) or solver not in BASELINE_SOLVERS:
        raise DamagedRunFile(f'{path}: its baseline_solver is {solver!r}, not one of '
                             f'{BASELINE_SOLVERS} a run records')


def _check_baseline_solver(log_dir: str, variant: dict, algo) -> None:
    """Refuse a snapshot whose linear baselines solve otherwise than ``variant.json``'s
    ``baseline_solver`` says (absent: the default, ``'lstsq'``, as runs made before the
    option); a baseline of another class (``ZeroBaseline``, a researcher's own) is not
    checked."""
    from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline  # pylint: disable=import-outside-toplevel
    want = variant.get('baseline_solver', 'lstsq')
    processing = getattr(algo, '_processing', None)
    for name in ('baseline', 'dice_baseline'):
        baseline = getattr(processing, name, None)
        if isinstance(baseline, (LinearFeatureBaseline, LinearTimeBaseline)) and \
                baseline.solver != want:
            raise ValueError(f'the snapshot in {log_dir} has a {name} solving with '
                             f'{baseline.solver!r}, its variant.json baseline_solver={want!r}: '
                             "not this run's snapshot")


def check_snapshot_matches_variant(log_dir: str, algo, env=None, seed=None) -> None:
    """Refuse a snapshot that is not the run that ``variant.json`` describes.

    ``launchers/train.py`` records its options in ``variant.json``; a
    snapshot copied in from another run (another algorithm, batch, env or
    seed) would otherwise be trained on and appended to this run's log.

    Args:
        log_dir (str): The run's directory.
        algo: The snapshot's algorithm.
        env: The snapshot's env (None: not checked).
        seed: The snapshot's seed (None: not checked).

    Raises:
        ValueError: Naming the first option that differs.
    """
    variant = read_variant(log_dir)
    from garage_promp.experiment.paper_config import ALGOS  # pylint: disable=import-outside-toplevel
    label = variant.get('algo')
    if label in ALGOS and type(algo) is not ALGOS[label][0]:  # pylint: disable=unidiomatic-typecheck
        raise ValueError(f'the snapshot in {log_dir} holds a {type(algo).__name__}, but its '
                         f'variant.json is a {label} run ({ALGOS[label][0].__name__}): not this '
                         "run's snapshot")
    # The env and seed only where the package's launcher wrote variant.json (a researcher's
    # own experiment function may name its arguments 'env' and 'seed' otherwise).
    ours = label in ALGOS
    if ours:
        _check_variant_entries(log_dir, variant)
    if ours and env is not None:
        differs = _env_differs(variant, env)
        if differs:
            raise ValueError(f'the snapshot in {log_dir} holds {differs}: not this run\'s snapshot')
    want_seed = variant.get('seed')
    if ours and 'seed' in variant and (not isinstance(want_seed, int)
                                       or isinstance(want_seed, bool) or want_seed < 0):
        raise DamagedRunFile(f'{os.path.join(log_dir, "variant.json")}: its seed is '
                             f'{want_seed!r}, not the whole number >= 0 a run records')
    if ours and seed is not None and 'seed' in variant and seed != want_seed:
        raise ValueError(f'the snapshot in {log_dir} has seed {seed}, its variant.json '
                         f"{want_seed}: not this run's snapshot")
    for option, attribute in (('meta_batch_size', '_meta_batch_size'),
                              ('episodes_per_task', '_episodes_per_task')):
        want, have = variant.get(option), getattr(algo, attribute, None)
        if want is not None and have is not None and want != have:
            raise ValueError(f"the snapshot in {log_dir} has {option}={have!r}, its "
                             f"variant.json {want!r}: not this run's snapshot")
    log_std = variant.get('log_std', 'shared')  # runs before the option: garage's shared one
    module = getattr(getattr(algo, 'policy', None), '_module', None)
    have = getattr(module, '_init_std', None)
    action_dim = getattr(module, '_action_dim', None)  # garage keeps a numpy integer there
    if isinstance(have, torch.nn.Parameter) and isinstance(action_dim, numbers.Integral):
        want = (1, ) if log_std == 'shared' else (int(action_dim), )
        if tuple(have.shape) != want:
            raise ValueError(f'the snapshot in {log_dir} has a log-std of shape '
                             f"{tuple(have.shape)}, its variant.json log_std={log_std!r}: not "
                             "this run's snapshot")
    if ours:
        _check_baseline_solver(log_dir, variant, algo)
    defaults = _paper_defaults(variant) if ours else {}
    hidden = variant.get('hidden_sizes')
    if hidden is None:  # left at the env's paper value
        hidden = defaults.get('hidden_sizes')
    have = getattr(module, '_hidden_sizes', None)
    if ours and isinstance(hidden, list) and have is not None and list(have) != hidden:
        raise ValueError(f'the snapshot in {log_dir} has hidden_sizes={list(have)}, its '
                         f"variant.json {hidden}: not this run's snapshot")
    horizon = variant.get('max_episode_length')
    if horizon is None:  # left at the env's paper value
        horizon = defaults.get('max_episode_length')
    if horizon is not None and getattr(algo, '_horizon', horizon) != horizon:
        raise ValueError(f'the snapshot in {log_dir} has max_episode_length='
                         f"{algo._horizon!r}, its variant.json {horizon!r} ({variant.get('env')}): "  # pylint: disable=protected-access
                         "not this run's snapshot")
    if ours:
        _check_run_options(log_dir, variant, getattr(algo, 'run_options', None))


def install_checked_restore():
    """``Trainer.restore`` gets the launcher's snapshot checks; idempotent.

    Called by ``import garage_promp``, so the Python API refuses what
    ``launchers/train.py --resume`` refuses: a pickle that is not a training
    snapshot (:class:`NotASnapshotError`, where garage raised a bare
    ``KeyError``) and a snapshot that is not the run its directory's
    ``variant.json`` describes (:func:`check_snapshot_matches_variant`).
    Which snapshot is loaded (the newest intact one by the epoch it holds)
    is the patched ``Snapshotter.load``'s work.
    """
    if getattr(Trainer.restore, '_garage_promp_checked', False):
        return
    original = Trainer.restore

    def restore(self, from_dir, from_epoch='last'):
        # The checks run on the loaded snapshot before garage uses or logs any of it.
        snapshotter = self._snapshotter  # pylint: disable=protected-access
        load = snapshotter.load

        def checked_load(load_dir, itr='last'):
            snapshot = load(load_dir, itr)
            check_training_snapshot(snapshot, from_dir)
            check_snapshot_matches_variant(from_dir, snapshot['algo'], snapshot['env'],
                                           snapshot['seed'])
            return snapshot

        snapshotter.load = checked_load
        try:
            return original(self, from_dir, from_epoch)
        finally:
            del snapshotter.load

    restore.__doc__ = original.__doc__
    restore._garage_promp_checked = True  # pylint: disable=protected-access
    Trainer.restore = restore


#: garage's snapshot modes.
SNAPSHOT_MODES = ('last', 'all', 'gap', 'gap_and_last', 'none')


def resume_run(log_dir: str, n_epochs: int | None = None,
               snapshot_mode: str | None = None, full_table: bool = False,
               max_env_steps: int | None = None) -> float:
    """Restore the snapshot in ``log_dir`` and train on to ``n_epochs``.

    Args:
        log_dir (str): The run's directory (``params.pkl`` / ``itr_N.pkl``
            and ``progress.csv``).
        n_epochs (int or None): Total epochs to reach (default: the run's;
            with a budget of env steps, as many as the budget takes).
        snapshot_mode (str or None): garage snapshot mode for the continued epochs
            (default: the run's, ``snapshot_mode`` in its ``variant.json``, else
            ``'last'``); one given is recorded there for the next resume.
        full_table (bool): Print garage's full table each epoch.
        max_env_steps (int or None): A new budget of env steps (default: the
            run's own, if it had one; see ``MetaPolicySearch.max_env_steps``).

    Returns:
        float: The last epoch's average return.

    Raises:
        ValueError: If ``log_dir`` is not a directory holding a snapshot
            (``params.pkl`` or ``itr_N.pkl``) and the run's ``variant.json``,
            naming it; nothing is written there (not even the lock file).
        TypeError, ValueError: For a bad ``n_epochs``, ``max_env_steps``,
            ``snapshot_mode`` or ``full_table``, naming it, also before the lock.
        RunDirBusy: If another process is writing to ``log_dir``
            (:func:`~garage_promp.experiment.run_dir.owned_run_dir`).

    """
    # Before the lock: owned_run_dir creates the directory and its .lock file.
    log_dir = check_run_dir(log_dir)
    if n_epochs is not None:
        n_epochs = check_int(n_epochs, 'n_epochs', 1, MAX_COUNT)
    if max_env_steps is not None:
        max_env_steps = check_int(max_env_steps, 'max_env_steps', 1, MAX_ENV_STEPS)
    if snapshot_mode is not None:
        snapshot_mode = check_choice(snapshot_mode, 'snapshot_mode', SNAPSHOT_MODES)
    full_table = check_bool(full_table, 'full_table')
    if not os.path.isfile(os.path.join(log_dir, 'variant.json')):
        # The run's options: without them no check can tell this run's snapshot from another's.
        raise ValueError(f'{log_dir} has no variant.json (the options launchers/train.py records '
                         'for the run): the snapshot cannot be checked against the run, so it is '
                         'not resumed; restore variant.json from a copy of the run')
    with owned_run_dir(log_dir):
        return _resume(log_dir, n_epochs, snapshot_mode, full_table, max_env_steps)


def _run_snapshot_mode(log_dir: str, given: str | None) -> str:
    """The snapshot mode to continue with: ``given``, else the run's (``variant.json``;
    ``'last'`` where it has none)."""
    recorded = read_variant(log_dir).get('snapshot_mode', 'last')
    if given is None:
        return check_choice(recorded, f"{os.path.join(log_dir, 'variant.json')}'s "
                            'snapshot_mode', SNAPSHOT_MODES)
    return given


def _record_snapshot_mode(log_dir: str, mode: str) -> None:
    """``mode`` recorded in the run's ``variant.json`` for the next resume where it differs
    from the recorded one (atomically, in garage's layout of the file); called only once
    every check has accepted the resume, so that a refused resume leaves the file as it was."""
    path = os.path.join(log_dir, 'variant.json')
    variant = read_variant(log_dir)
    if mode == variant.get('snapshot_mode', 'last'):
        return
    if mode == 'last':
        variant.pop('snapshot_mode', None)
    else:
        variant['snapshot_mode'] = mode
    replace_atomically(path, lambda f: json.dump(variant, f, indent=2))


def _resume(log_dir, n_epochs, snapshot_mode, full_table, max_env_steps):
    snapshot_mode = _run_snapshot_mode(log_dir, snapshot_mode)
    execution = execution_options(log_dir)  # (refused before the snapshot is read)
    progress = os.path.join(log_dir, 'progress.csv')
    trainer = Trainer(ExperimentContext(snapshot_dir=log_dir,
                                        snapshot_mode=snapshot_mode,
                                        snapshot_gap=1))
    # garage's restore logs a table of the snapshot's counters: discarded, so that a refusal
    # below is the only thing printed; one line of it follows the checks instead.
    logger.add_output(_Discard())
    try:
        _check_snapshot_names(log_dir)
        install_checked_restore()
        args = trainer.restore(log_dir)  # refuses a foreign or non-training snapshot
        logger.remove_output_type(_Discard)
        # garage's stats hold the index of the last epoch done; train args
        # the epoch to start from.
        done = args.start_epoch
        algo = trainer._algo  # pylint: disable=protected-access
        logged = _logged_rows(progress)
        rows = None if logged is None else len(logged)
        if rows is None and done >= 1:  # dowel creates it as the run starts: deleted
            raise ValueError(
                f'{progress} is missing but the snapshot in {log_dir} is at epoch {done}: '
                f'a new log would lack rows 1..{done}. Restore the run\'s progress.csv, or '
                'start the run again')
        # Interrupted between garage's snapshot and its log row of that epoch: said once the
        # run is sure to continue (below), not before a refusal of its options.
        row_lost = rows is not None and rows == done - 1
        if rows is not None and rows < done and not row_lost:
            raise ValueError(
                f'{progress} has {rows} epoch rows but the snapshot in {log_dir} is at epoch '
                f'{done}: rows {rows + 1}..{done} are missing, so the log would skip them. '
                'Continue from a copy of the run whose progress.csv is complete, or start '
                'the run again')
        if rows is not None and rows >= done >= 1:
            _check_logged_steps(progress, logged, done, trainer.total_env_steps)
        if max_env_steps is not None:
            algo.max_env_steps = max_env_steps
        budget = getattr(algo, 'max_env_steps', None)
        if budget is not None:
            steps = trainer.total_env_steps
            if algo.budget_reached(steps):
                raise ValueError(f'the run in {log_dir} has taken {steps} env steps, its '
                                 f'budget is {budget}: --max-env-steps must be more')
            if n_epochs is None:
                n_epochs = done + algo.epochs_for_budget(budget - steps)
        if n_epochs is None and args.n_epochs <= done:  # none given: the run's own
            raise ValueError(f'the run in {log_dir} has done all its {done} epochs: give '
                             f'--epochs more than {done} to train on')
        n_epochs = n_epochs or args.n_epochs
        if n_epochs <= done:
            raise ValueError(f'the run in {log_dir} has done {done} epochs; '
                             f'--epochs must be more, got {n_epochs}')
        if row_lost:
            warnings.warn(f'{progress} lacks the row of epoch {done - 1}, whose snapshot was '
                          'saved just before the run stopped: that row stays missing')
        _execute_as_recorded(trainer, algo, execution)
        with run_files_written(log_dir):
            _record_snapshot_mode(log_dir, snapshot_mode)
            logger.add_output(dowel.StdOutput())
            logger.log(f'Resuming {log_dir}: {done} epochs and {trainer.total_env_steps} env '
                       f'steps done, training to {n_epochs} epochs')
            # A log without a complete header line (its first write met a full disk) is
            # begun again: it holds no row to keep (the warning above names the lost ones).
            if os.path.exists(progress) and complete_lines(progress):
                _keep_rows(progress, done)
                logger.add_output(AppendingCsvOutput(progress))
            else:
                logger.add_output(CsvOutput(progress))
            logger.remove_output_type(dowel.StdOutput)
            logger.add_output(ProgressOutput(n_epochs, start_epoch=done,
                                             full_table=full_table, max_env_steps=budget))
            return trainer.resume(n_epochs=n_epochs)
    finally:
        logger.remove_all()
