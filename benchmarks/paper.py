#!/usr/bin/env python3
"""The paper's experiments, figure by figure: run them, see what is left, report.

    python benchmarks/paper.py run fig2 --parallel 2 --time-limit 2h
    python benchmarks/paper.py status    # every figure: done, running, partial, missing, ETA
    python benchmarks/paper.py report            # figures, tables and the claims table
                                                 # (also README.md's copy of the paper's claims)

What each figure runs (ProMP paper, arXiv:1810.06784, Section 7; settings of
the original code's ``experiments/all_envs_eval/*_run_all.py`` through
``garage_promp.experiment.paper_config``, at 20 tasks x 10 episodes per task,
a quarter of the paper's 40 x 20):

- ``fig2``: ProMP vs MAML-TRPO on the six environments of Fig. 2, 3 seeds x 1e7
  env steps each, E-MAML-TRPO on HalfCheetahFwdBack and WalkerFwdBack; plus on
  HalfCheetahFwdBack ProMP and MAML-TRPO with 6 seeds x 2e7 steps.
- ``fig3``: LVC-, DiCE-, MAML- and E-MAML-VPG (Fig. 3's estimators), 3 seeds x
  5e6 steps on HalfCheetahFwdBack and HopperRandParams.
- ``fig5``: LVC-, MAML- and E-MAML-TRPO on PointEnvMomentum (sparse reward, K = 3
  inner steps, H = 100), 3 seeds x 150 iterations: the learning curves.
  Then, once their seed-1 runs are done, the figure the paper draws: for each
  algorithm's learned policy, the pre-update trajectories and those after
  each inner step on the four corner tasks (``benchmarks/fig5_trajectories.py``).
- ``fig6``: formulation I (DiCE-VPG) against formulation II (E-MAML-VPG) on the
  1-D env with the paper's two-parameter policy, from θ = (0.09, 0.05): the θ
  trajectories over the return landscape (``benchmarks/fig6.py``).
- ``fig8``: seconds per iteration on HumanoidRandDirec for ProMP, LVC-VPG and
  MAML-TRPO at the paper batch, split into sampling and update
  (``benchmarks/throughput.py``), as stacked bars.
- ``stepsize`` (not in the paper): ProMP with learned inner step sizes
  (``trainable_inner_step_size``, one per parameter entry, Meta-SGD) against
  ProMP with the fixed step, on HalfCheetahFwdBack at Fig. 2's budget: the
  fixed-step arm is Fig. 2's own three ProMP runs, so only the three learned
  runs are new.
- ``logstd`` (not in the paper): ProMP and MAML-TRPO with one learned log-std per
  action dimension (``train.py --log-std per-dimension``, the reference's policy
  structure; garage's ``GaussianMLPPolicy`` shares one) on HalfCheetahFwdBack at
  Fig. 2's budget and seeds: the shared-std arms are Fig. 2's own runs, so only the
  six per-dimension runs are new.
- ``ml10`` (not in the paper): Meta-World ML10, ProMP vs MAML-TRPO at the
  maintained Meta-World baselines' budget (2e7 env steps, 20 tasks x 10
  episodes, their MAML-TRPO settings), 2 seeds, meta-tested every 10 epochs on
  held-out classes; the claims compare held-out and training-class success.
  Each finished run then gets the baselines' final evaluation
  (``launchers/meta_test.py RUN --protocol metaworld-algorithms``: 40 goals of
  every held-out class, before and after adaptation), on the next ``run ml10``,
  written next to its ``progress.csv`` as ``final_evaluation.csv``; the report
  puts the runs' per-class tables side by side.

Every training run is a ``launchers/train.py`` process started by
``benchmarks/learning.py``'s runner, one core each, ``--parallel`` at a time,
in the order that makes partial results useful first (three 2e7-step
HalfCheetahFwdBack seeds of each, then one seed of every env, then two more of
every env, then HalfCheetahFwdBack's seeds 4 to 6). A run's
budget is env steps actually taken (``train.py --max-env-steps``, every
sampling round counted), so runs on envs that end episodes early (Walker,
Hopper, Humanoid) get the same budget as the others, and curves are compared
at equal env steps.

Runs live in ``--runs-dir`` (default ``$GARAGE_PROMP_RUNS`` or
``~/garage_promp_runs``, outside the work tree: snapshots are large). A run
that is stopped (``--time-limit``, Ctrl-C, SIGTERM) keeps its last snapshot
and continues from it on the next ``run``. As each run reaches its budget its
``progress.csv`` and ``variant.json`` are copied to
``benchmarks/results/paper/<figure>/<env>/<algo>_seed=<s>/``, to be
committed: ``status`` on a fresh clone counts those as done.

A run that ``run`` stops part-way is *parked*: its last snapshot
(``params.pkl``, xz-compressed, about 0.2-1 MB), ``progress.csv`` and
``variant.json`` are copied to ``parked/`` in its results directory, to be
committed with the rest. On another machine (a fresh clone, an empty runs
dir) the next ``run`` continues from the parked snapshot instead of starting
again, and ``status`` and ``report`` count its steps; a runs dir that holds
the run further along is used instead, and one behind it is set aside. When
the run reaches its budget its parked copy is removed. ``park`` does the same
for runs stopped some other way (a runner killed outright).
"""
import csv
import dataclasses
import functools
import json
import lzma
import math
import os
import pathlib
import pickletools
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, Sequence, Tuple
import warnings

import click

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from garage_promp._files import file_kind  # noqa: E402
from garage_promp.experiment.plotting import mean_std, read_progress  # noqa: E402
from garage_promp.experiment.run_dir import (  # noqa: E402
    DamagedRunFile,
    RunDirBusy,
    lock_holder,
    owned_run_dir,
    variant_mismatch,
)
from garage_promp.validation import (  # noqa: E402
    INPUT_DIR,
    OUTPUT_DIR,
    WORKERS,
    StrictGroup,
    check_input_dir,
    check_output_path,
    distinct,
)

import learning  # noqa: E402  pylint: disable=wrong-import-position

RESULTS = HERE / 'results' / 'paper'
#: A stopped run's snapshot, in its results directory (``Campaign.park``).
PARKED = 'parked'
PARKED_SNAPSHOT = 'params.pkl.xz'
PARKED_LOGS = ('progress.csv', 'variant.json')
PARKED_FILES = (*PARKED_LOGS, PARKED_SNAPSHOT)
#: What ``Campaign.unpark`` writes beside a run dir before renaming it into place.
UNPARKING_FILES = (*PARKED_LOGS, 'params.pkl')
#: Fig. 2's six environments (the paper's text, Section 7.3), in the campaign's order.
FIG2_ENVS = ('HalfCheetahFwdBack', 'WalkerFwdBack', 'AntRandDirec', 'HopperRandParams',
             'WalkerRandParams', 'HumanoidRandDirec')
FIG3_ALGOS = ('LVC-VPG', 'DiCE-VPG', 'MAML-VPG', 'E-MAML-VPG')
FIG5_ALGOS = ('LVC-TRPO', 'MAML-TRPO', 'E-MAML-TRPO')
FIG8_ALGOS = ('ProMP', 'LVC-VPG', 'MAML-TRPO')
FIGURES = ('fig2', 'fig3', 'fig5', 'fig6', 'fig8', 'ml10', 'stepsize', 'logstd')
#: Figures that are one script's output rather than training runs.
SCRIPTED = {'fig6': 'fig6.json', 'fig8': 'throughput.json'}
#: Tasks per iteration and episodes per task (a quarter of the paper's 40 x 20).
BATCH = (20, 10)


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run of a figure."""

    fig: str
    env: str
    algo: str
    seed: int
    steps: int
    options: Tuple[str, ...] = ()
    """Further ``train.py`` options (e.g. ``--set reward_type=sparse``)."""
    batch: Tuple[int, int] = BATCH
    label: str = ''
    """What the run is called in names, tables and figures (default: the algorithm),
    for a variant of an algorithm set by ``options``."""

    @property
    def tag(self) -> str:
        return self.label or self.algo

    @property
    def name(self) -> str:
        return f'{self.fig}/{self.env}/{self.tag}_seed={self.seed}'

    @property
    def variant(self) -> dict:
        """What the run's ``variant.json`` (``launchers/train.py``'s options) must hold."""
        return learning.run_variant(self.algo, self.env, self.seed, self.batch)


def fig2_runs() -> List[Run]:
    """Fig. 2 in the order that makes partial results useful first."""
    def long_cheetah(seeds):
        return [Run('fig2', 'HalfCheetahFwdBack', algo, seed, 20_000_000)
                for seed in seeds for algo in ('ProMP', 'MAML-TRPO')]

    runs = long_cheetah((1, 2, 3))
    emaml = ('HalfCheetahFwdBack', 'WalkerFwdBack')
    for seeds in ((1, ), (2, 3)):
        for env in FIG2_ENVS:
            algos = (('E-MAML-TRPO', ) if env == 'HalfCheetahFwdBack' else
                     ('ProMP', 'MAML-TRPO') + (('E-MAML-TRPO', ) if env in emaml else ()))
            runs += [Run('fig2', env, algo, seed, 10_000_000) for seed in seeds for algo in algos]
    return runs + long_cheetah((4, 5, 6))


def fig3_runs() -> List[Run]:
    """Fig. 3: the four meta-gradient estimators with VPG."""
    return [Run('fig3', env, algo, seed, 5_000_000)
            for seed in (1, 2, 3) for env in ('HalfCheetahFwdBack', 'HopperRandParams')
            for algo in FIG3_ALGOS]


def fig5_runs() -> List[Run]:
    """Fig. 5: exploration on the momentum point env (sparse reward, K = 3, H = 100)."""
    # 20 x 10 episodes x 100 steps x 4 sampling rounds = 80k env steps an iteration.
    return [Run('fig5', 'PointEnvMomentum', algo, seed, 150 * 80_000,
                ('--set', 'reward_type=sparse'))
            for seed in (1, 2, 3) for algo in FIG5_ALGOS]


#: ML10 at the maintained Meta-World baselines' budget (metaworld-algorithms: MAML-TRPO,
#: 2e7 env steps, 20 tasks x 10 episodes, inner lr 0.1, TRPO delta 0.01, GAE lambda 1; the
#: package's ML10 defaults), ProMP with its own outer settings. Meta-tested every 10
#: epochs (2e6 steps) on 2 goals of each held-out class; the final protocol evaluation is
#: ``launchers/meta_test.py RUN --protocol metaworld-algorithms``.
ML10_EVAL = ('--evaluate-every', '10', '--n-test-tasks', '10')
#: The final evaluation of a finished ML10 run, and the file it writes in the run's results.
FINAL_EVALUATION = ('--protocol', 'metaworld-algorithms')
FINAL_EVALUATION_CSV = 'final_evaluation.csv'


def ml10_runs() -> List[Run]:
    """Meta-World ML10: ProMP vs MAML-TRPO (not a paper figure; the campaign tooling)."""
    return [Run('ml10', 'ML10', algo, seed, 20_000_000, ML10_EVAL)
            for seed in (1, 2) for algo in ('ProMP', 'MAML-TRPO')]


#: The learned-step-size variant of ProMP (the reference's ``trainable_inner_step_size``).
LEARNED_STEP = 'ProMP-learned-step'


def stepsize_runs() -> List[Run]:
    """ProMP with and without learned inner step sizes on HalfCheetahFwdBack: Fig. 2's
    three 2e7-step ProMP runs, and the same three seeds with the step sizes trained."""
    fixed = [r for r in fig2_runs() if r.env == 'HalfCheetahFwdBack' and r.algo == 'ProMP'
             and r.seed in (1, 2, 3)]
    return fixed + [dataclasses.replace(r, fig='stepsize', label=LEARNED_STEP,
                                        options=('--set', 'trainable_inner_step_size=true'))
                    for r in fixed]


#: The per-dimension log-std variant of an algorithm (``logstd``), by algorithm.
PER_DIM_STD = {'ProMP': 'ProMP-std-per-dim', 'MAML-TRPO': 'MAML-TRPO-std-per-dim'}


def logstd_runs() -> List[Run]:
    """ProMP and MAML-TRPO on HalfCheetahFwdBack with garage's one shared log-std (Fig. 2's
    2e7-step runs, seeds 1-3) and with one per action dimension (the reference's policy
    structure): the same runs but for ``--log-std per-dimension``."""
    shared = [r for r in fig2_runs() if r.env == 'HalfCheetahFwdBack' and r.seed in (1, 2, 3)
              and r.algo in PER_DIM_STD]
    return shared + [dataclasses.replace(r, fig='logstd', label=PER_DIM_STD[r.algo],
                                         options=('--log-std', 'per-dimension'))
                     for r in shared]


TRAINING_FIGURES = {'fig2': fig2_runs, 'fig3': fig3_runs, 'fig5': fig5_runs, 'ml10': ml10_runs,
                    'stepsize': stepsize_runs, 'logstd': logstd_runs}


def quick_runs(fig: str) -> List[Run]:
    """A tiny version of a figure's runs (the pipeline end to end, in seconds)."""
    full = TRAINING_FIGURES[fig]()
    seen, runs = set(), []
    for run in full:
        key = (run.env, run.tag)
        if run.seed == 1 and key not in seen and len({e for e, _ in seen} | {run.env}) <= 2:
            seen.add(key)
            horizon = 10
            # ML10: every train class in a meta-batch, every test class in the meta-test.
            batch, test = ((10, 1), ('--n-test-tasks', '5')) if run.env == 'ML10' else ((2, 2), ())
            per_epoch = batch[0] * batch[1] * horizon * (
                learning._env_config(run.env)['K'] + 1)  # pylint: disable=protected-access
            runs.append(dataclasses.replace(
                run, steps=2 * per_epoch, batch=batch,
                options=run.options + test + ('--max-episode-length', str(horizon),
                                              '--hidden-sizes', '8,8')))
    return runs


def runs_of(fig: str, quick: bool = False) -> List[Run]:
    """The training runs of ``fig`` (none for the scripted figures)."""
    if fig in SCRIPTED:
        return []
    return quick_runs(fig) if quick else TRAINING_FIGURES[fig]()


class Campaign:
    """Where a campaign's runs and results live, and what state each run is in."""

    def __init__(self, runs_dir, results_dir):
        self.runs_dir = pathlib.Path(runs_dir).expanduser()
        self.results_dir = pathlib.Path(results_dir)
        #: Run name -> why its log cannot be read (the runs that ``state`` calls damaged).
        self.damage: Dict[str, str] = {}

    def run_dir(self, run: Run) -> pathlib.Path:
        return self.runs_dir / run.name

    def pid_file(self, run: Run) -> pathlib.Path:
        """Holds the pid of the run's ``train.py`` while it runs."""
        return self.runs_dir / f'{run.name}.pid'

    def log_file(self, run: Run) -> pathlib.Path:
        """The output of the run's ``train.py`` (appended to by each start)."""
        return self.runs_dir / f'{run.name}.log'

    def result_dir(self, run: Run) -> pathlib.Path:
        return self.results_dir / run.name

    def parked_dir(self, run: Run) -> pathlib.Path:
        """A stopped run's last snapshot, kept with the results (:meth:`park`)."""
        return self.result_dir(run) / PARKED

    def parked_steps(self, run: Run) -> int:
        """Env steps of the run's parked copy (0 if there is none).

        Raises:
            DamagedRunFile: If the parked copy is not a directory, lacks one of its three
                files, or its log cannot be read, naming it.

        """
        parked = self.parked_dir(run)
        if not (parked.exists() or parked.is_symlink()):
            return 0
        if parked.is_symlink() or not parked.is_dir():
            raise DamagedRunFile(f'{parked} is not a directory: not a parked run (move it away)')
        missing = [name for name in PARKED_FILES
                   if not (parked / name).is_file()]
        if missing:
            raise DamagedRunFile(f'{parked} lacks {", ".join(missing)}: not a whole parked run '
                                 '(restore it from git, or move it away)')
        return learning.steps_done(parked)

    def log_dir(self, run: Run) -> pathlib.Path:
        """The directory of the run's furthest log: its results, its run dir or its
        parked copy (the first of them on a tie)."""
        steps = {self.result_dir(run): learning.steps_done(self.result_dir(run)),
                 self.run_dir(run): learning.steps_done(self.run_dir(run)),
                 self.parked_dir(run): self.parked_steps(run)}
        return max(steps, key=steps.get)

    def variant_mismatch(self, run: Run, directory: pathlib.Path) -> str | None:
        """Why ``directory``'s ``variant.json`` is not ``run``'s (None if it is).

        Raises:
            DamagedRunFile: If it is not a JSON object.

        """
        return variant_mismatch(directory, run.variant)

    def check_variant(self, run: Run, directory: pathlib.Path) -> None:
        """Refuse a finished log whose ``variant.json`` is missing, damaged or another run's:
        its numbers would be counted, copied and reported as ``run``'s.

        Raises:
            DamagedRunFile: Naming the directory and what is wrong.

        """
        why = self.variant_mismatch(run, directory)
        if why:
            raise DamagedRunFile(f'{directory}: {why}')

    def park(self, run: Run) -> int:
        """Copy a stopped run's last snapshot (xz-compressed), ``progress.csv`` and
        ``variant.json`` to :meth:`parked_dir`, where they are committed with the results
        so that a clone on another machine continues the run (:meth:`unpark`).

        Returns the env steps parked; 0 if the run dir holds no whole stopped run (a
        ``params.pkl``, the campaign's snapshot mode, with its log and options), or
        nothing further along than what is parked, or a finished run. The run must not be
        running. The copy is assembled beside the parked one, then its files replace the
        parked ones one by one, the snapshot last (a log ahead of its snapshot is what a
        resume expects after a kill: it drops the rows after the snapshot).

        Raises:
            click.ClickException: If the run dir's ``variant.json`` is not the run's, or
                the parked directory holds files this method does not write (named).

        """
        run_dir, target = self.run_dir(run), self.parked_dir(run)
        if not all((run_dir / name).is_file() for name in ('params.pkl', *PARKED_LOGS)):
            return 0
        done = learning.steps_done(run_dir)
        try:
            parked = self.parked_steps(run)
        except DamagedRunFile:  # replaced by a whole copy
            parked = 0
        if done >= run.steps or done <= parked:
            return 0
        why = self.variant_mismatch(run, run_dir)
        if why:
            raise click.ClickException(f'{run_dir} holds a snapshot, but {why}: not parked')
        why = _not_whole_pickle(run_dir / 'params.pkl')
        if why:  # another machine would continue from it, and fail
            raise click.ClickException(f'{run_dir / "params.pkl"} is not a whole snapshot '
                                       f'({why}): not parked')
        staging = target.with_name(target.name + '.new')
        _check_own(target, PARKED_FILES)  # before anything is written
        _remove_own(staging, PARKED_FILES)  # a park cut short
        staging.mkdir(parents=True)
        for name in PARKED_LOGS:
            shutil.copyfile(run_dir / name, staging / name)
        with open(run_dir / 'params.pkl', 'rb') as src, \
                lzma.open(staging / PARKED_SNAPSHOT, 'wb') as dst:
            shutil.copyfileobj(src, dst)
        target.mkdir(exist_ok=True)
        for name in PARKED_FILES:  # the snapshot last
            os.replace(staging / name, target / name)
        staging.rmdir()
        return done

    def unpark(self, run: Run) -> bool:
        """Make the parked snapshot the run's run dir, where it is further along than the
        run dir's own snapshot (or the run dir has none); True if it did.

        The parked copy is checked whole (its options are the run's, its snapshot
        decompresses) before the run dir is touched. Then a run dir with a snapshot
        behind it is set aside (``<dir>.set-aside-<time>``), not deleted; one without a
        snapshot is cleared as :func:`learning.prepare_run_dir` clears it; and the restored
        run dir, assembled beside it, is renamed into place.

        Raises:
            click.ClickException: If the parked copy is not the run's or its snapshot is
                not whole, naming it.
            DamagedRunFile: If the parked copy lacks a file or its log cannot be read.

        """
        parked, run_dir = self.parked_dir(run), self.run_dir(run)
        steps = self.parked_steps(run)
        if not steps or (learning.has_snapshot(run_dir)
                         and learning.steps_done(run_dir) >= steps):
            return False
        why = self.variant_mismatch(run, parked)
        if why:
            raise click.ClickException(f'{parked} is a parked snapshot, but {why}: move it away '
                                       'to start the run again')
        staging = run_dir.with_name(run_dir.name + '.unparking')
        _remove_own(staging, UNPARKING_FILES)  # a restore cut short
        staging.mkdir(parents=True)
        for name in PARKED_LOGS:
            shutil.copyfile(parked / name, staging / name)
        try:
            with lzma.open(parked / PARKED_SNAPSHOT, 'rb') as src, \
                    open(staging / 'params.pkl', 'wb') as dst:
                shutil.copyfileobj(src, dst)
        except (lzma.LZMAError, EOFError) as error:
            why = str(error)
        else:
            why = _not_whole_pickle(staging / 'params.pkl')
        if why:
            _remove_own(staging, UNPARKING_FILES)
            raise click.ClickException(
                f'{parked / PARKED_SNAPSHOT} is not a whole xz-compressed snapshot ({why}): '
                'restore it from git, or move the parked directory away (the run then '
                'continues from its run dir here, if any, or starts again)')
        if learning.has_snapshot(run_dir):
            learning.set_aside(run_dir, f'is behind the parked snapshot in {parked} '
                               f'({steps:,} env steps)', 'the run continues from that')
        else:
            learning.prepare_run_dir(run_dir)
        staging.rename(run_dir)
        click.echo(f'{run.name}: continues from its parked snapshot ({steps:,} env steps, '
                   f'{parked})', err=True)
        return True

    def state(self, run: Run) -> Tuple[str, int]:
        """``(state, env steps done)``: done, running, finished, partial, missing, or damaged
        (a ``progress.csv`` that is not a run's log; :attr:`damage` says why)."""
        try:
            return self._state(run)
        except DamagedRunFile as error:
            self.damage[run.name] = str(error)
            return 'damaged', 0

    def _state(self, run: Run) -> Tuple[str, int]:
        done = learning.steps_done(self.result_dir(run))
        if done >= run.steps:
            self.check_variant(run, self.result_dir(run))
            return 'done', done
        run_dir = self.run_dir(run)
        done = learning.steps_done(run_dir)
        # A runner's pid file (until its train.py takes the lock), or a lock held there.
        if _alive(self.pid_file(run), run_dir) or lock_holder(str(run_dir)) is not None:
            return 'running', done
        if done or learning.has_snapshot(run_dir):  # another run's would be continued as this
            self.check_variant(run, run_dir)           # run's (``command`` refuses it)
        if done >= run.steps:  # finished, but its results were not copied yet
            return 'finished', done
        done = max(done, self.parked_steps(run))
        return ('partial', done) if done else ('missing', 0)

    def collect(self, run: Run) -> bool:
        """Copy a finished run's progress.csv and variant.json to the results (and drop
        its parked snapshot, which they supersede)."""
        if learning.steps_done(self.run_dir(run)) < run.steps:
            return False
        target = self.result_dir(run)
        target.mkdir(parents=True, exist_ok=True)
        # Each whole or not at all, the variant first: a stop between the two never
        # leaves a log counted done without the variant it is checked against.
        for name in ('variant.json', 'progress.csv'):
            if (self.run_dir(run) / name).exists():
                shutil.copyfile(self.run_dir(run) / name, target / f'{name}.tmp')
                os.replace(target / f'{name}.tmp', target / name)
        try:
            _remove_own(self.parked_dir(run), PARKED_FILES)
        except click.ClickException as error:
            click.echo(f'{error.message}: the parked copy stays (the run is done)', err=True)
        return True

    def command(self, run: Run) -> List[str]:
        run_dir = self.run_dir(run)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        self.unpark(run)
        resume = learning.prepare_run_dir(run_dir)
        why = resume and self.variant_mismatch(run, run_dir)
        if why:  # train.py --resume can check a snapshot only against the run's own variant
            raise click.ClickException(f'{run_dir} holds a snapshot, but {why}: move the '
                                       'directory away to start the run again')
        return learning._run_command(  # pylint: disable=protected-access
            run.algo, run.env, run.seed, run.steps, run.batch, run_dir, resume,
            list(run.options))


def _not_whole_pickle(path: pathlib.Path) -> str | None:
    """Why the file at ``path`` is not one whole pickle (a snapshot is one
    ``cloudpickle.dump``), or None. Its opcodes are read to the end, nothing is
    executed: a file cut short or overwritten is caught without loading torch."""
    try:
        with open(path, 'rb') as file:
            for opcode, _, _ in pickletools.genops(file):
                if opcode.name == 'STOP':
                    return None
    except (ValueError, EOFError, MemoryError, OverflowError) as error:
        # (a damaged length field asks to read more than there is, or than fits)
        return f'not a pickle: {error!r}'
    return 'not a pickle: it ends before its STOP opcode'


def _check_own(path: pathlib.Path, names) -> bool:
    """Whether directory ``path`` exists, checked to hold nothing but the files ``names``
    (those this module writes there).

    Raises:
        click.ClickException: If ``path`` is a link or not a directory, or holds anything
            else (named).

    """
    if not (path.exists() or path.is_symlink()):
        return False
    if path.is_symlink() or not path.is_dir():
        raise click.ClickException(f'{path} is in the way (not a directory this tool wrote): '
                                   'move it away')
    foreign = sorted(e.name for e in path.iterdir() if e.name not in names or not e.is_file()
                     or e.is_symlink())
    if foreign:
        raise click.ClickException(f'{path} holds {", ".join(foreign)}, which this tool did not '
                                   'write: move them away')
    return True


def _remove_own(path: pathlib.Path, names):
    """Remove directory ``path`` and its files ``names``, after :func:`_check_own`: nothing
    is deleted that this module did not write."""
    if _check_own(path, names):
        for name in names:
            (path / name).unlink(missing_ok=True)
        path.rmdir()


def _check_plain_file(path: pathlib.Path):
    """Refuse, naming it, a ``path`` the runner writes that is something other than a
    plain file or nothing: a named pipe would block the runner (or the run's shell) for
    ever, a link be written through, a directory fail the run's end after hours."""
    if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
        raise click.ClickException(f'{path} is in the way ({file_kind(str(path))}, where the '
                                   'runner writes a plain file): move it away')


def _script(fig: str, command: List[str], deadline: float | None,
            marker: pathlib.Path | None = None):
    """Run a scripted figure's ``command`` within the time limit; its failure, or the time
    limit reached, is one ``Error:`` line (and no training starts after it). ``marker``:
    the file whose presence says the figure is done (the script rewrites it as it goes),
    removed if the script does not end well, so that the next ``run`` computes it again."""
    click.echo(' '.join(command), err=True)
    timeout = None if deadline is None else max(deadline - time.time(), 1.)
    try:  # (stopped with the runner, whatever stops it)
        subprocess.run(command, check=True, timeout=timeout,
                       preexec_fn=learning._die_with_parent)  # pylint: disable=protected-access
    except BaseException as error:
        if marker is not None:
            marker.unlink(missing_ok=True)
        if isinstance(error, subprocess.TimeoutExpired):
            raise click.ClickException(f'{fig}: the time limit was reached while computing it '
                                       '(its partial numbers removed); give it more time') from None
        if isinstance(error, subprocess.CalledProcessError):
            raise click.ClickException(f'{fig}: {pathlib.Path(command[1]).name} ended with '
                                       f'exit {error.returncode} (its output is above)') from None
        raise


def _partial(target: pathlib.Path) -> pathlib.Path:
    """Where a final evaluation writes until it has succeeded (then renamed to ``target``)."""
    return target.with_name(target.name + '.partial')


def final_evaluations(campaign: Campaign, runs: Sequence[Run], quick: bool = False):
    """``(name, command, log, target)`` of the final evaluation of every finished ML10 run
    that has none yet, and the names of finished runs that cannot have one here (their
    snapshots are on another machine). The command writes ``target``'s ``.partial``
    sibling; the caller renames it when the command succeeds, so a stopped evaluation
    leaves nothing that looks finished and runs again next time."""
    specs, elsewhere = [], []
    for r in runs:
        if r.env != 'ML10' or campaign.state(r)[0] != 'done':
            continue
        target = campaign.result_dir(r) / FINAL_EVALUATION_CSV
        if target.exists():
            continue
        if not (campaign.run_dir(r) / 'params.pkl').exists():
            elsewhere.append(r.name)
            continue
        command = [sys.executable, str(HERE.parent / 'launchers' / 'meta_test.py'),
                   str(campaign.run_dir(r)), *FINAL_EVALUATION,
                   '--csv', str(_partial(target))]
        if quick:  # the pipeline, not the numbers: 1 goal a class, 1 adaptation episode
            command += ['--goals-per-class', '1', '--n-exploration-eps', '1']
        specs.append((f'{r.name} final evaluation', command,
                      campaign.runs_dir / f'{r.name}.final_evaluation.log', target))
    return specs, elsewhere


def final_evaluation_table(campaign: Campaign, runs: Sequence[Run]) -> List[str]:
    """The finished runs' final evaluations side by side: success before and after
    adaptation per held-out class, and the overall row."""
    tables = {}
    for r in runs:
        path = campaign.result_dir(r) / FINAL_EVALUATION_CSV
        if path.exists():
            with open(path, newline='') as f:
                tables[r] = list(csv.DictReader(f))
    if not tables:
        return []
    protocol = next(iter(tables.values()))[0].get('protocol', '')
    tasks = list(dict.fromkeys(row['task'] for rows in tables.values() for row in rows))
    names = [f'{r.tag} seed {r.seed}' for r in tables]
    lines = ['Final evaluation of each finished run (`launchers/meta_test.py RUN '
             f'{" ".join(FINAL_EVALUATION)}`; {protocol}): success rate before → after '
             "adaptation, over every evaluation episode of every goal. In brackets, what "
             "Meta-World 3.1.1's own evaluator would count on the same episodes (an upper "
             'bound, see docs/environments.md).', '',
             '| held-out class | ' + ' | '.join(names) + ' |',
             '|---|' + '---|' * len(names)]
    for task in tasks:
        cells = []
        for rows in tables.values():
            row = next((x for x in rows if x['task'] == task), None)
            cells.append('-' if row is None else
                         f"{float(row['success_before']):.2f} → {float(row['success_rate']):.2f} "
                         f"({float(row['metaworld_evaluator_success']):.2f})")
        lines.append(f'| {task} | ' + ' | '.join(cells) + ' |')
    return lines + ['']


def _alive(pid_file: pathlib.Path, run_dir: pathlib.Path) -> bool:
    """Whether the pid in ``pid_file`` is a live process running ``run_dir``'s run: its
    command line names a training script and the run dir (a stale pid reused by any
    other process, another run's ``train.py`` included, is not it)."""
    try:
        if not pid_file.is_file():  # a named pipe would block the read, a device never end it
            return False
        with open(pid_file, 'rb') as f:
            pid = int(f.read(32))
        arguments = pathlib.Path(f'/proc/{pid}/cmdline').read_bytes().split(b'\0')
        cwd = os.readlink(f'/proc/{pid}/cwd')  # (its relative paths are relative to it)
    except (OSError, ValueError):
        return False
    target = os.path.realpath(run_dir)
    return (any(a.endswith(b'.py') for a in arguments)
            and any(os.path.realpath(os.path.join(cwd, os.fsdecode(a))) == target
                    for a in arguments if a))


def parse_duration(text: str | None) -> float | None:
    """Seconds of '90', '90s', '30m', '2h' or '1h30m'."""
    if text is None:
        return None
    match = re.fullmatch(r'\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*'
                         r'(?:(\d+(?:\.\d+)?)s?)?\s*', text)
    if not match or not any(match.groups()):
        raise click.BadParameter(f'expected a duration such as 2h, 45m, 1h30m or 600, got {text!r}',
                                 param_hint='--time-limit')
    if match.group(3) and not text.strip().endswith('s') and (match.group(1) or match.group(2)):
        # '1h30' reads as 1 h 30 s to a parser and as 1 h 30 min to most people
        raise click.BadParameter(f'{text!r} ends in a number without its unit (minutes or '
                                 'seconds?): give each number its unit, e.g. 1h30m',
                                 param_hint='--time-limit')
    hours, minutes, seconds = (float(g) if g else 0. for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise click.BadParameter(f'must be positive, got {text!r}', param_hint='--time-limit')
    return total


#: Core-seconds per 1,000 env steps where no run of the (env, algo) has timed
#: any yet (2-core development machine, 2026-11-24, update included).
DEFAULT_COST = {'HalfCheetahFwdBack': 0.09, 'WalkerFwdBack': 0.2, 'AntRandDirec': 0.22,
                'HopperRandParams': 0.12, 'WalkerRandParams': 0.2, 'HumanoidRandDirec': 0.3,
                'PointEnvMomentum': 0.05}


def cost_per_step(campaign: Campaign, runs: Sequence[Run]) -> Dict[Tuple[str, str], float]:
    """Core-seconds per env step of every (env, algo), from the epochs' logged times."""
    seconds, steps = {}, {}
    for run in runs:
        try:
            directory = campaign.log_dir(run)
            rows = read_progress(directory)
            done = learning.steps_done(directory)
        except DamagedRunFile:  # status names it; no cost from it
            continue
        if rows:
            total = sum(sum(float(r.get(f'Time/{k}') or 0) for k in
                            ('Sampling', 'Update', 'MetaTest')) for r in rows)
            key = (run.env, run.algo)
            seconds[key] = seconds.get(key, 0.) + total
            steps[key] = steps.get(key, 0) + done
    return {key: seconds[key] / steps[key] for key in seconds if steps[key] > 0}


def status_table(campaign: Campaign, figs: Sequence[str], quick: bool = False,
                 parallel: int = 2) -> Tuple[str, Dict[str, int]]:
    """The status text and the count of runs in each state."""
    lines, counts, left = [], {}, 0.
    for fig in figs:
        runs = runs_of(fig, quick)
        if fig in SCRIPTED:
            there = (campaign.results_dir / fig / SCRIPTED[fig]).exists()
            lines.append(f'{fig}: {"done" if there else "missing"}')
            counts['done' if there else 'missing'] = counts.get(
                'done' if there else 'missing', 0) + 1
            continue
        costs = cost_per_step(campaign, runs)
        lines.append(f'{fig}: {len(runs)} runs')
        for run in runs:
            state, done = campaign.state(run)
            counts[state] = counts.get(state, 0) + 1
            if state != 'done':
                cost = costs.get((run.env, run.algo), DEFAULT_COST.get(run.env, 0.2) / 1000)
                left += (run.steps - min(done, run.steps)) * cost
            where = ('  (parked)' if state == 'partial'
                     and campaign.log_dir(run) == campaign.parked_dir(run) else '')
            lines.append(f'  {state:8s} {run.name:48s} {done:>11,} / {run.steps:,} env steps'
                         + where)
            if state == 'damaged':
                lines.append(f'           {campaign.damage[run.name]}')
    summary = ', '.join(f'{n} {s}' for s, n in sorted(counts.items()))
    lines.append(f'{summary}; about {left / 3600:.1f} core-hours left '
                 f'({left / 3600 / parallel:.1f} h at {parallel} runs at a time)')
    return '\n'.join(lines), counts


# --------------------------------------------------------------------- report
def _logged_rows(rows: Sequence[dict], key: str):
    """(row, value) of the rows that logged ``key``: blank and NaN entries left out."""
    for row in rows:
        value = row.get(key)
        if value not in (None, '') and not math.isnan(float(value)):
            yield row, float(value)


def _mean_of_last(values: Sequence[float], window: int) -> float:
    """Mean of the last ``window`` of ``values`` (NaN for none)."""
    return sum(values[-window:]) / len(values[-window:]) if values else math.nan


def curve(rows: Sequence[dict], key: str) -> Tuple[List[float], List[float]]:
    """(env steps, values) of one column, blank and NaN entries left out."""
    logged = list(_logged_rows(rows, key))
    return [float(row['TotalEnvSteps']) for row, _ in logged], [y for _, y in logged]


def value_at(rows: Sequence[dict], key: str, steps: float, window: int = 3) -> float:
    """Mean of the last ``window`` values logged at or before ``steps`` env steps."""
    xs, ys = curve(rows, key)
    return _mean_of_last([y for x, y in zip(xs, ys) if x <= steps], window)


def window_steps(rows: Sequence[dict], key: str, steps: float,
                 window: int = 3) -> Tuple[float, ...]:
    """The env steps of the values :func:`value_at` averages."""
    return tuple(x for x in curve(rows, key)[0] if x <= steps)[-window:]


def sparse_window(data, env: str, algos: Sequence[str], key: str | None,
                  steps: float) -> str:
    """Where a column is logged less often than every epoch (the periodic meta-test),
    what the values compared are: '' where each seed's last values are its last epochs'
    (the report's stated rule), else the span of env steps they were logged at, so a
    claim "at 20,000,000 env steps" does not hide meta-tests logged at 14-18 million."""
    spans = []
    for algo in algos:
        for rows in data.get((env, algo), {}).values():
            logged = window_steps(rows, key or post_key(rows), steps)
            epochs = window_steps(rows, 'TotalEnvSteps', steps)
            if logged and logged != epochs:
                spans += [logged[0], logged[-1]]
    if not spans:
        return ''
    return (f' (each seed\'s last 3 logged values, at {min(spans):,.0f}-'
            f'{max(spans):,.0f} env steps)')


def post_key(rows: Sequence[dict]) -> str:
    ks = [int(m.group(1)) for k in rows[0] for m in [re.fullmatch(r'Step_(\d+)-AverageReturn', k)]
          if m]
    return f'Step_{max(ks)}-AverageReturn'


def _logged(values: Sequence[float]) -> List[float]:
    """The values of the seeds that had logged an epoch by the steps asked (:func:`value_at`
    is NaN for a seed whose first epoch came later)."""
    return [v for v in values if not math.isnan(v)]


def welch(a: Sequence[float], b: Sequence[float]) -> Tuple[float, float]:
    """Welch's t of a - b and its one-sided p-value (a > b); NaN with fewer than 2 each."""
    a, b = _logged(a), _logged(b)
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    from scipy import stats  # pylint: disable=import-outside-toplevel
    result = stats.ttest_ind(a, b, equal_var=False, alternative='greater')
    return float(result.statistic), float(result.pvalue)


def seeds_needed(a: Sequence[float], b: Sequence[float], alpha: float = 0.05,
                 power: float = 0.8, most: int = 100_000) -> float:
    """Seeds per algorithm for Welch's one-sided test at ``alpha`` to find today's
    difference with probability about ``power``, were the means and standard deviations
    to stay today's.

    The usual rule, n ≈ 2 ((z_{1-α} + z_power) / d)² with d the difference over the pooled
    standard deviation, with Student's quantiles at the Welch–Satterthwaite degrees of
    freedom of n seeds each in place of the normal's: the smallest n with
    ``|Δ| / sqrt((s_a² + s_b²) / n) ≥ t_{1-α}(ν) + t_power(ν)``. At many seeds the two
    agree; at a few they do not (two seeds each of t = 3 leave about one degree of freedom
    and p ≈ 0.1), and the normal rule would name the seeds already run. Infinite where
    the difference or both spreads are 0, or more than ``most`` seeds would be needed.
    """
    from scipy import stats  # pylint: disable=import-outside-toplevel
    a, b = _logged(a), _logged(b)
    if not a or not b:
        return math.inf
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    var = sa ** 2 + sb ** 2
    if var == 0 or ma == mb or not math.isfinite(var):
        return math.inf
    ratio = var ** 2 / (sa ** 4 + sb ** 4)  # ν = (n - 1) · ratio for n seeds each

    def enough(n: int) -> bool:
        nu = (n - 1) * ratio
        return abs(ma - mb) / math.sqrt(var / n) >= (stats.t.ppf(1 - alpha, nu)
                                                      + stats.t.ppf(power, nu))

    if not enough(most):
        return math.inf
    low, high = 1, most  # enough(high), not enough(low): the left side grows with n and
    while high - low > 1:  # the right falls, so bisect
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def load(campaign: Campaign, runs: Sequence[Run]):
    """The runs' progress rows: ``(counted, extra, unfinished)``; the first two map
    (env, algo) -> seed -> rows, the third is the set of (env, algo) counted from runs in
    progress alone.

    ``counted`` holds what the tables, the claims and the mean curves use: for each
    (env, algorithm), its finished runs; where it has none yet, its runs in progress (the
    only evidence there is, compared at the steps they reached). ``extra`` holds the runs
    in progress of an (env, algorithm) that has finished runs: they are drawn, one line each,
    but do not count, or a seed just started would pull every comparison of its algorithm
    back to its first few steps.

    Each run is read from its furthest log (``Campaign.log_dir``): the results of a finished
    run, else the runs dir or the parked copy. A run whose log is damaged is left out
    (``Campaign.state`` says why).
    """
    finished, going = {}, {}
    for run in runs:
        state = campaign.state(run)[0]
        if state == 'damaged':
            continue
        rows = read_progress(campaign.log_dir(run))
        if rows:
            into = finished if state in ('done', 'finished') else going
            into.setdefault((run.env, run.tag), {})[run.seed] = rows
    counted, extra = dict(finished), {}
    for key, seeds in going.items():
        (extra if key in finished else counted)[key] = seeds
    return counted, extra, set(going) - set(finished)


def compare(data, env: str, algos: Sequence[str],
            key: str | None = None) -> Tuple[float, Dict[str, List[float]]]:
    """Each algorithm's seeds' value of ``key`` (default: the post-update return) at the
    env steps all of them reached."""
    present = [a for a in algos if (env, a) in data]
    if not present:
        return math.nan, {}
    matched = min(float(rows[-1]['TotalEnvSteps']) for a in present
                  for rows in data[(env, a)].values())
    return matched, {a: [value_at(rows, key or post_key(rows), matched)
                         for rows in data[(env, a)].values()] for a in present}


def _seeds(count: int) -> str:
    """'1 seed', '3 seeds'."""
    return f'{count} seed{"" if count == 1 else "s"}'


def draw_panels(path, data, envs: Sequence[str], algos: Sequence[str], title: str,
                pre: bool = False, grid: int = 60, extra=None, unfinished=()):
    """One panel per env: each algorithm's post-update return, mean ± std over seeds.

    Seeds are interpolated onto a common grid of env steps up to the fewest
    steps any of the algorithm's seeds has reached (seeds of envs that end
    episodes early log at different steps). The runs in ``extra`` (in progress,
    not counted: :func:`load`) are thin lines of their own; the (env, algo) pairs in
    ``unfinished`` say "in progress" in the legend. A panel with no run says so.
    """
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    cols = min(3, len(envs))
    rows_n = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.6 * cols, 3.4 * rows_n), squeeze=False)
    colors = dict(zip(algos, plt.rcParams['axes.prop_cycle'].by_key()['color']))
    for ax, env in zip(axes.flat, envs):
        ax.set_title(env, fontsize=10)
        drawn = False
        for algo in algos:
            seeds = data.get((env, algo), {})
            if not seeds:
                continue
            end = min(float(r[-1]['TotalEnvSteps']) for r in seeds.values())
            xs = np.linspace(0, end, grid)[1:]
            for key, style in ((None, '-'), ('Step_0-AverageReturn', '--'))[:2 if pre else 1]:
                curves = []
                for rows in seeds.values():
                    cx, cy = curve(rows, key or post_key(rows))
                    if cx:
                        curves.append(np.interp(xs, cx, cy, left=np.nan))
                if not curves:
                    continue
                with np.errstate(all='ignore'), warnings.catch_warnings():
                    warnings.simplefilter('ignore', RuntimeWarning)  # all-NaN grid columns
                    mean = np.nanmean(curves, axis=0)
                    std = np.nanstd(curves, axis=0, ddof=1) if len(curves) > 1 else 0 * mean
                suffix = ', in progress' if (env, algo) in unfinished else ''
                label = f'{algo} ({_seeds(len(curves))}{suffix})' if key is None else None
                ax.plot(xs, mean, style, color=colors[algo], label=label)
                ax.fill_between(xs, mean - std, mean + std, color=colors[algo], alpha=0.15)
                drawn = True
            going = (extra or {}).get((env, algo), {})
            for i, rows in enumerate(going.values()):
                cx, cy = curve(rows, post_key(rows))
                label = f'{algo}, in progress ({_seeds(len(going))})' if i == 0 else None
                ax.plot(cx, cy, ':', color=colors[algo], linewidth=0.9, label=label)
        if drawn:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, 'not run yet', ha='center', va='center', transform=ax.transAxes,
                    color='grey')
        ax.set_xlabel('env steps', fontsize=8)
        ax.set_ylabel('average return', fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(envs):]:
        ax.axis('off')
    # Wrapped to the figure's width (about 9 characters an inch at this size).
    fig.suptitle(textwrap.fill(title, int(9 * 4.6 * cols)), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _decimals(scale: float) -> int:
    """Decimals for a number of this scale: one at 1 and above (returns), more below, to
    two significant digits of it, at most four (a success rate of 0.178 ± 0.047 is not
    0.2 ± 0.0)."""
    if not math.isfinite(scale) or scale == 0 or abs(scale) >= 1:
        return 1
    return min(4, 1 - math.floor(math.log10(abs(scale))))


def _pm(values: Sequence[float]) -> str:
    """'mean ± std' over seeds (the mean alone for one seed; '-' for none), to the
    standard deviation's second significant digit below 1 (:func:`_decimals`)."""
    values = _logged(values)
    if not values:
        return '-'
    mean, std = mean_std(values)
    if len(values) == 1:
        return f'{mean:.{_decimals(mean)}f}'
    d = _decimals(std if std > 0 else mean)
    return f'{mean:.{d}f} ± {std:.{d}f}'


def _verdict(t: float, p: float, n_more: float, paper: bool = True) -> str:
    """The verdict on "a > b" from Welch's t and its one-sided p-value; ``paper``: the
    claim is the paper's (reproduced or not), else a measurement of this package's (holds
    or not)."""
    if math.isnan(t):
        return 'not measured yet (needs ≥ 2 seeds of each)'
    if p < 0.05:
        return ('reproduced' if paper else 'holds') + ' (one-sided p < 0.05)'
    if 1 - p < 0.05:  # the other direction's one-sided test; two-sided is twice its p
        return (('not reproduced: ' if paper else 'does not hold: ')
                + f'the opposite is significant (its one-sided p = {1 - p:.3f} < 0.05; '
                f'two-sided p = {2 * (1 - p):.3f})')
    if not math.isfinite(n_more):
        more = 'no difference'
    elif t < 0:  # the measured difference runs against the claim: the seeds to show that
        more = (f'the difference so far runs the other way; ≈ {n_more:.0f} seeds each would '
                'make the other way significant')
    else:
        more = f'≈ {n_more:.0f} seeds each would decide it'
    return f'not significant at this budget ({more})'


def along_the_way(data, envs: Sequence[str], first: str, second: str,
                  fractions=(0.125, 0.25, 0.5, 1.)) -> List[str]:
    """How a comparison develops: ``first`` vs ``second`` post-update at fractions of the
    steps both reached, on every env with at least 2 seeds of each (the paper's Fig. 2 is
    about learning speed as much as the final return)."""
    lines = []
    for env in envs:
        matched, finals = compare(data, env, (first, second))
        if len(finals.get(first, ())) < 2 or len(finals.get(second, ())) < 2:
            continue
        if not lines:
            lines = [f'{first} vs {second} along the way (post-update return, mean ± std over '
                     "seeds; Welch's t of the difference):", '',
                     f'| env | env steps | {first} | {second} | t |', '|---|---|---|---|---|']
        for fraction in fractions:
            steps = matched * fraction
            a, b = ([value_at(rows, post_key(rows), steps) for rows in data[(env, algo)].values()]
                    for algo in (first, second))
            if any(math.isnan(v) for v in a + b):
                continue  # before some seed's first logged epoch
            t, _ = welch(a, b)
            lines.append(f'| {env} | {steps:,.0f} | {_pm(a)} | {_pm(b)} | {t:+.2f} |')
    return lines + [''] if lines else []


def value_at_iteration(rows: Sequence[dict], key: str, iterations: int,
                       window: int = 3) -> float:
    """Mean of the last ``window`` values of ``key`` logged in the first ``iterations``
    epochs (a run's ``progress.csv`` has one row an epoch, in order)."""
    return _mean_of_last([y for _, y in _logged_rows(rows[:iterations], key)], window)


def at_equal_iterations(data, envs: Sequence[str], first: str, second: str,
                        unfinished=()) -> List[str]:
    """``first`` vs ``second`` post-update at the number of iterations every seed of both
    reached, with each one's env steps per iteration, on every env with a run of each.

    The reference's x-axis (``n_timesteps``) advances by the nominal batch
    M·R·H·(K+1) an iteration, so the paper's curves compare algorithms at equal
    iterations. This package's batch is a fixed number of episodes per task, so where
    episodes end early an iteration has fewer env steps than nominal, and fewer for a
    policy that falls sooner: at equal env steps (the claims) the two algorithms have
    then had different numbers of updates, each on a batch of a different size. This
    table shows the comparison the paper's x-axis makes. Each algorithm's seeds are
    counted as in the other tables (:func:`load`); a pair in ``unfinished``
    (counted from runs in progress alone) says so.
    """
    lines = []
    for env in envs:
        if (env, first) not in data or (env, second) not in data:
            continue
        seeds = {algo: list(data[(env, algo)].values()) for algo in (first, second)}
        # (load keeps only runs that logged an epoch, so every seed has a row)
        reached = min(len(rows) for runs in seeds.values() for rows in runs)
        if not lines:
            lines = [f'{first} vs {second} at equal iterations (the reference\'s x-axis counts '
                     'the nominal batch, M·R·H·(K+1) env steps, an iteration; here an '
                     'iteration is a fixed number of episodes, so where episodes end early it '
                     'has fewer env steps, and the claims\' equal env steps are unequal '
                     'iterations). Post-update return, mean ± std over seeds, at the '
                     'iterations every seed of both reached; env steps per iteration up to '
                     'there, mean over seeds:', '',
                     f'| env | iterations | seeds, {first} / {second} | '
                     f'env steps per iteration, {first} | '
                     f'env steps per iteration, {second} | {first} | {second} | t |',
                     '|---|---|---|---|---|---|---|---|']
        values = {algo: [value_at_iteration(rows, post_key(rows), reached) for rows in runs]
                  for algo, runs in seeds.items()}
        per_iteration = {algo: sum(float(rows[reached - 1]['TotalEnvSteps']) / reached
                                   for rows in runs) / len(runs)
                         for algo, runs in seeds.items()}
        t, _ = welch(values[first], values[second])
        counts = ' / '.join(f'{len(seeds[a])}{" (in progress)" if (env, a) in unfinished else ""}'
                            for a in (first, second))
        lines.append(f'| {env} | {reached} | {counts} | {per_iteration[first]:,.0f} | '
                     f'{per_iteration[second]:,.0f} | {_pm(values[first])} | '
                     f'{_pm(values[second])} | {"-" if math.isnan(t) else f"{t:+.2f}"} |')
    return lines + [''] if lines else []


def comparison_rows(data, fig: str, env: str, winner: str, losers: Sequence[str],
                    key: str | None = None, what: str = '', paper: bool = True,
                    damaged: frozenset = frozenset(), tested: list | None = None):
    """Claims-table rows ``(claim, the paper's evidence, measured, verdict)``: ``winner``
    beats each loser on ``env`` in ``key`` (default: the post-update return; ``what``
    names another key in the claim); ``paper``: whether the claim is the paper's (see
    :func:`_verdict`; the evidence is then ``EVIDENCE[fig]``). Each paper claim's
    ``(claim, p)`` is appended to ``tested`` (:func:`family_note`)."""
    rows = []
    evidence = EVIDENCE.get(fig, '') if paper else 'not in the paper'
    for loser in losers:
        # Each pair at the env steps all runs of both reached.
        matched, finals = compare(data, env, (winner, loser), key)
        claim = f'{fig} {env}{what}: {winner} > {loser}'
        if winner not in finals or loser not in finals:
            # Without numbers: for a damaged log where every side that lacks them has a run
            # left out for one (``damaged``: this figure's (env, algorithm) of such runs).
            lacking = [a for a in (winner, loser) if a not in finals]
            why = ('left out: a damaged log (see its figure)'
                   if all((env, a) in damaged for a in lacking) else 'not run yet')
            rows.append((claim, evidence, why, '-'))
            continue
        a, b = _logged(finals[winner]), _logged(finals[loser])
        if not a or not b:
            rows.append((claim, evidence,
                         f'no epoch of {winner if not a else loser} logged by '
                         f'{matched:,.0f} env steps, where the other\'s runs stand',
                         'not measured yet'))
            continue
        t, p = welch(a, b)
        if paper and tested is not None and not math.isnan(p):
            tested.append((claim, p))
        stats = f'; t = {t:+.2f}, p = {p:.3f}' if not math.isnan(t) else ''
        where = sparse_window(data, env, (winner, loser), key, matched)
        measured = (f'{_pm(a)} ({_seeds(len(a))}) vs {_pm(b)} ({len(b)}) '
                    f'at {matched:,.0f} env steps{where}{stats}')
        rows.append((claim, evidence, measured,
                     _verdict(t, p, seeds_needed(a, b), paper)))
    return rows


#: What the paper shows for each of its Section 7 claims (and Fig. 8 of its appendix):
#: its figures, with the seeds and batch of the original code's run scripts.
EVIDENCE = {
    'Fig. 2': 'learning curves (post-update return against env steps, to 1e8), '
              '40 tasks × 20 episodes, 3 seeds',
    'Fig. 3': 'learning curves of the estimators with VPG, 40 tasks × 20 episodes, 3 seeds',
    'Fig. 4': 'relative std of the meta-gradient over 10 estimates at the same θ, '
              'HalfCheetah, 40 episodes on each of 20 tasks, 4 seeds',
    'Fig. 5': 'pre-update and adapted trajectories of one policy of each algorithm on the '
              'four corner tasks (K = 3), and learning curves; 40 tasks × 20 episodes, '
              '5 seeds in the original sweep',
    'Fig. 6': 'the θ paths of both formulations drawn over the 1-D env\'s return landscape',
    'Fig. 8': 'seconds per iteration on HumanoidRandDirec, sampling and update stacked',
}
#: The claims-table prefixes of the paper's claims (the others are this package's own).
PAPER_FIGS = tuple(EVIDENCE)
#: Fig. 4's measurement (``launchers/gradient_variance.py --preset short``), beside the
#: campaign's results directory.
FIG4_CSV = pathlib.Path('gradient_variance') / 'short_HalfCheetahFwdBack_seed35.csv'


def sign_test(wins: int, n: int) -> float:
    """One-sided p of ``wins`` or more of ``n`` under a fair coin (a sign test)."""
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n


def read_result(path: pathlib.Path, what: str, read):
    """``read(json of path)``, a file a figure's script wrote (``what`` names the script);
    a file that is not JSON, or lacks what ``read`` looks up, is :class:`DamagedRunFile`
    naming it (one ``Error:`` line from the command, not a traceback)."""
    try:
        return read(json.loads(path.read_text()))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise DamagedRunFile(f'{path}: not the output of {what} '
                             f'({type(error).__name__}: {error})') from None


def _claim_source(path: pathlib.Path, fig: str, claim: str, script: str, read,
                  missing: str = 'not run yet'):
    """``(None, read_result(path, script, read))``; ``(rows, None)``, the claim's row saying
    ``missing``, where ``path`` does not exist yet."""
    if not path.exists():
        return [(claim, EVIDENCE[fig], missing, '-')], None
    return None, read_result(path, script, read)


def fig4_claims(results_dir: pathlib.Path,
                tested: list | None = None) -> List[Tuple[str, str, str, str]]:
    """Fig. 4's claim, LVC's meta-gradient varies less than DiCE's, from the committed
    run of ``launchers/gradient_variance.py`` (its ``RStdRatio``, DiCE's relative std
    over LVC's, one value an epoch; a sign test over the epochs, which are epochs of one
    run, not independent trials); its ``(claim, p)`` is appended to ``tested``."""
    claim = 'Fig. 4 HalfCheetahFwdBack: relative std of the meta-gradient, LVC < DiCE'
    path = results_dir.parent / FIG4_CSV
    if not path.exists():
        return [(claim, EVIDENCE['Fig. 4'], 'not measured yet '
                 '(`launchers/gradient_variance.py --preset short`)', '-')]
    try:
        with path.open(newline='') as f:
            ratios = [float(row['RStdRatio']) for row in csv.DictReader(f)]
    except (KeyError, TypeError, ValueError) as error:  # a column missing, a field not a number
        raise DamagedRunFile(f'{path}: not the log of launchers/gradient_variance.py '
                             f'(its RStdRatio column: {error})') from None
    ratios = [r for r in ratios if math.isfinite(r)]
    if not ratios:
        return [(claim, EVIDENCE['Fig. 4'], 'no epoch with a finite ratio', 'not measured yet')]
    wins, n = sum(r > 1 for r in ratios), len(ratios)
    p, p_opposite = sign_test(wins, n), sign_test(sum(r < 1 for r in ratios), n)
    if tested is not None:
        tested.append((claim, p))
    ordered = sorted(ratios)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    measured = (f'DiCE\'s above LVC\'s in {wins} of {n} epochs (ratio median '
                f'{median:.2f}, {min(ratios):.2f}-{max(ratios):.2f}); one run of '
                f'`launchers/gradient_variance.py --preset short` (`{FIG4_CSV.as_posix()}`)')
    test = 'one-sided sign test over the epochs of one run, p = {:.3f}'
    if p < 0.05:
        verdict = (f'reproduced in direction ({test.format(p)}); its size is not pinned down by '
                   'one run')
    elif p_opposite < 0.05:
        verdict = (f'not reproduced: DiCE\'s relative std is the lower ('
                   f'{test.format(p_opposite)})')
    else:
        verdict = f'not significant at this budget ({test.format(p)})'
    return [(claim, EVIDENCE['Fig. 4'], measured, verdict)]


def _goal_regions_entered(runs: dict) -> Tuple[Dict[str, List[int]], set]:
    """For each algorithm of ``fig5_trajectories.json``'s ``algos``: how many goal regions
    some episode enters before adaptation and after the last inner step; and the
    (seed, episodes, inner steps) of the runs drawn."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    counts, drawn = {}, set()
    for name, run in runs.items():
        counts[name] = [sum(
            bool((np.linalg.norm(np.asarray(run['trajectories'][task][step], dtype=float)
                                 - np.asarray(goal, dtype=float), axis=-1)
                  <= run['goal_radius']).any())
            for task, goal in run['goals'].items()) for step in (0, -1)]
        drawn.add((run['seed'], run['n_episodes'], run['num_inner_grad_steps']))
    return counts, drawn


def fig5_goal_claims(directory: pathlib.Path) -> List[Tuple[str, str, str, str]]:
    """Fig. 5's picture from ``fig5_trajectories.json``: how many of the four corner goal
    regions some episode of each algorithm's policy enters, before adaptation and after
    its last inner step (one policy each: a description, not a test)."""
    claim = ('Fig. 5 PointEnvMomentum: LVC-TRPO\'s pre-update policy explores and its '
             'adapted policies reach every goal; MAML-TRPO\'s do not')
    rows, found = _claim_source(directory / 'fig5_trajectories.json', 'Fig. 5', claim,
                                'benchmarks/fig5_trajectories.py',
                                lambda data: _goal_regions_entered(data['algos']), 'not drawn yet')
    if rows:
        return rows
    counts, drawn = found
    lvc, maml = counts.get('LVC-TRPO'), counts.get('MAML-TRPO')
    if lvc is None or maml is None:
        return [(claim, EVIDENCE['Fig. 5'], 'not drawn for both LVC-TRPO and MAML-TRPO', '-')]
    described = ', '.join(f'{name} {pre}/{post}' for name, (pre, post) in counts.items())
    runs = '; '.join(f'seed {seed}, {episodes} episodes a corner'
                     for seed, episodes, _ in sorted(drawn))
    steps = '/'.join(sorted({str(k) for _, _, k in drawn}))
    measured = (f'goal regions (of 4) entered by some episode, pre-update / after step '
                f'{steps}: {described} ({runs})')
    if lvc[1] == 4 and maml[1] < 4 and lvc[0] > maml[0]:
        verdict = 'seen in the one policy drawn of each (not a test across seeds)'
    else:
        verdict = 'not seen in the one policy drawn of each'
    return [(claim, EVIDENCE['Fig. 5'], measured, verdict)]


def _landscape_at(panel: dict, theta: Sequence[float]) -> float:
    """The post-update landscape of a Fig. 6 panel at ``theta``, bilinear between the
    grid's points (the grid's rows are θ₁, its columns θ₀, as ``benchmarks/fig6.py``
    writes it)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    grid = np.asarray(panel['post_update_return'], dtype=float)
    t0, t1 = (np.asarray(panel[k], dtype=float) for k in ('theta0', 'theta1'))
    i = int(np.clip(np.searchsorted(t0, theta[0]) - 1, 0, len(t0) - 2))
    j = int(np.clip(np.searchsorted(t1, theta[1]) - 1, 0, len(t1) - 2))
    u = (theta[0] - t0[i]) / (t0[i + 1] - t0[i])
    v = (theta[1] - t1[j]) / (t1[j + 1] - t1[j])
    return float((1 - u) * (1 - v) * grid[j, i] + u * (1 - v) * grid[j, i + 1]
                 + (1 - u) * v * grid[j + 1, i] + u * v * grid[j + 1, i + 1])


def _theta_moves(panel: dict) -> Tuple[Tuple[float, float], Dict[str, Tuple[float, ...]]]:
    """The landscape's maximum (on the grid), and each run's (distance to it, landscape
    value) at its first and last θ."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    grid = np.asarray(panel['post_update_return'], dtype=float)
    j, i = np.unravel_index(int(np.argmax(grid)), grid.shape)
    best = np.array([panel['theta0'][i], panel['theta1'][j]], dtype=float)
    moves = {}
    for run in panel['runs']:
        start, end = (np.asarray(run['theta'][k], dtype=float) for k in (0, -1))
        moves[run['label']] = (float(np.linalg.norm(start - best)),
                               float(np.linalg.norm(end - best)),
                               _landscape_at(panel, start), _landscape_at(panel, end),
                               len(run['theta']) - 1)
    return (float(best[0]), float(best[1])), moves


def fig6_claims(directory: pathlib.Path) -> List[Tuple[str, str, str, str]]:
    """Fig. 6's claim from ``fig6.json``: formulation I's updates lead towards the
    post-update optimum, formulation II's away from it. Towards: θ ends nearer the
    landscape's maximum (estimated on the grid) and higher on the landscape; away: further
    and lower (the landscape is flat near its maximum, so both are required)."""
    claim = ('Fig. 6 PointEnv1D: formulation I (DiCE-VPG) moves θ towards the post-update '
             'optimum, formulation II (E-MAML-VPG) does not')
    rows, found = _claim_source(directory / 'fig6.json', 'Fig. 6', claim, 'benchmarks/fig6.py',
                                lambda data: _theta_moves(data['panels'][0]))
    if rows:
        return rows
    best, moves = found
    if 'DiCE-VPG' not in moves or 'E-MAML-VPG' not in moves:
        return [(claim, EVIDENCE['Fig. 6'], 'not run for both formulations', '-')]
    iterations = max(m[4] for m in moves.values())
    measured = (f'θ\'s distance to the landscape\'s maximum ({best[0]:.2f}, {best[1]:.2f}) and '
                f'the landscape at θ, first → last of {iterations} iterations: '
                + '; '.join(f'{label} {d0:.3f} → {d1:.3f} (landscape {v0:.3f} → {v1:.3f})'
                            for label, (d0, d1, v0, v1, _) in moves.items()))
    d0, d1, v0, v1, _ = moves['DiCE-VPG']
    towards = d1 < d0 and v1 >= v0
    d0, d1, v0, v1, _ = moves['E-MAML-VPG']
    away = d1 > d0 and v1 < v0
    verdict = ('reproduced in direction (one run each, no statistics)' if towards and away else
               'not reproduced (one run each)')
    return [(claim, EVIDENCE['Fig. 6'], measured, verdict)]


def fig8_claims(directory: pathlib.Path) -> List[Tuple[str, str, str, str]]:
    """Fig. 8's claim from ``throughput.json``: ProMP's iteration, and its update, cost
    less than MAML-TRPO's (one measurement of each: ratios, no statistics)."""
    claim = ('Fig. 8 HumanoidRandDirec: ProMP\'s iteration costs less than MAML-TRPO\'s '
             '(its update avoids TRPO\'s Hessian-vector products)')
    path = directory / 'throughput.json'
    results = read_result(path, 'benchmarks/throughput.py', _fig8_results) if path.exists() else []
    times = {}
    for r in results:  # the first measurement of each, as the report's table lists them
        times.setdefault(r['what'], r)
    if 'ProMP' not in times or 'MAML-TRPO' not in times:
        return [(claim, EVIDENCE['Fig. 8'], 'not measured yet', '-')]
    promp, trpo = times['ProMP'], times['MAML-TRPO']
    update = promp['update_s'] / trpo['update_s']
    whole = promp['iter_s'] / trpo['iter_s']
    measured = (f'update {promp["update_s"]:.2f} s vs {trpo["update_s"]:.2f} s ({update:.2f}×), '
                f'iteration {promp["iter_s"]:.2f} s vs {trpo["iter_s"]:.2f} s ({whole:.2f}×; '
                f'sampling {promp["sample_s"] / promp["iter_s"]:.0%} and '
                f'{trpo["sample_s"] / trpo["iter_s"]:.0%} of them), one measurement each at the '
                f'{promp.get("batch", "")} batch')
    verdict = ('reproduced for the update' if update < 1 else 'not reproduced for the update')
    verdict += ('; and for the whole iteration' if whole < 1 else
                '; not for the whole iteration, where sampling dominates here')
    return [(claim, EVIDENCE['Fig. 8'], measured, verdict + ' (one measurement each)')]


def report(campaign: Campaign, figs: Sequence[str], quick: bool = False,
           write: bool = True) -> str:
    """Draw every figure from what is done and write ``report.md``; return its text.
    ``write=False``: only the text (nothing drawn or written)."""
    out = campaign.results_dir
    if write:
        out.mkdir(parents=True, exist_ok=True)
    text = ['# ProMP paper reproduction: results so far', '',
            '(written by `benchmarks/paper.py report`; mean ± std over seeds of the post-update '
            'return, the mean of the last 3 iterations up to the env steps every seed reached: '
            'in the tables, every seed of the algorithm; in the claims, every seed of both '
            'compared algorithms. Welch\'s t, one-sided p. Runs in progress count, with the '
            'steps they have reached, only where their algorithm has no finished run on the env '
            'yet; otherwise they are drawn as dotted lines and counted beside the seeds as '
            '"in progress".)', '']
    claims, tested = [], []  # tested: each paper claim's (claim, p), for family_note
    for fig in figs:
        if fig == 'fig8':
            text += fig8_report(out / 'fig8', draw=write)
            claims += fig8_claims(out / 'fig8')
            continue
        if fig == 'fig6':
            text += fig6_report(out / 'fig6')
            claims += fig6_claims(out / 'fig6')
            continue
        runs = runs_of(fig, quick)
        data, going, unfinished = load(campaign, runs)
        envs = list(dict.fromkeys(r.env for r in runs))
        algos = list(dict.fromkeys(r.tag for r in runs))
        states = {r.name: campaign.state(r) for r in runs}
        missing = [name for name, (state, _) in states.items() if state != 'done']
        # Not done yet: under way (running, or stopped part-way, its steps so far), or not begun.
        begun = [f'{name} ({done:,.0f} steps)' for name, (state, done) in states.items()
                 if state not in ('done', 'damaged') and done > 0]
        unbegun = [name for name, (state, done) in states.items()
                   if state not in ('done', 'damaged') and done == 0]  # (damaged: named below)
        compare_rows = functools.partial(comparison_rows, damaged=frozenset(
            (r.env, r.tag) for r in runs if r.name in campaign.damage), tested=tested)
        title = {'fig2': 'Fig. 2: post-update return (ProMP vs MAML-TRPO vs E-MAML-TRPO)',
                 'fig3': "Fig. 3: VPG with each meta-gradient estimator",
                 'fig5': 'Fig. 5 (learning curves): PointEnvMomentum, K = 3, sparse reward',
                 'ml10': 'Meta-World ML10 (not in the paper): ProMP vs MAML-TRPO',
                 'logstd': 'One log-std per action dimension (not in the paper): ProMP and '
                           'MAML-TRPO, HalfCheetahFwdBack',
                 'stepsize': 'Learned inner step sizes (not in the paper): ProMP with and '
                             'without, HalfCheetahFwdBack'}[fig]
        batches = sorted({r.batch for r in runs})
        batch = '; '.join(f'{m} tasks × {r} episodes' for m, r in batches)
        if fig in ('fig2', 'fig3', 'fig5') and batches == [BATCH]:
            batch += ' an iteration, a quarter of the paper\'s 40 × 20'
        if write:
            (out / fig).mkdir(parents=True, exist_ok=True)
            draw_panels(out / fig / f'{fig}.png', data, envs, algos,
                        f'{title} — {len(runs) - len(missing)}/{len(runs)} runs done; {batch}',
                        pre=fig == 'fig5', extra=going, unfinished=unfinished)
        text += [f'## {title}', '', f'![{fig}]({fig}/{fig}.png)', '',
                 f'{len(runs) - len(missing)} of {len(runs)} runs done.', '',
                 '| env | algorithm | seeds | env steps (fewest) | pre-update | post-update |',
                 '|---|---|---|---|---|---|']
        for env in envs:
            for algo in algos:
                seeds = data.get((env, algo))
                if not seeds:
                    text.append(f'| {env} | {algo} | 0 | - | - | - |')
                    continue
                # Each algorithm at the env steps all of its counted seeds reached.
                fewest, finals = compare(data, env, (algo, ))
                pre = [value_at(rows, 'Step_0-AverageReturn', fewest) for rows in seeds.values()]
                more = len(going.get((env, algo), ()))
                count = (f'{len(seeds)} (+{more} in progress)' if more else
                         f'{len(seeds)} (in progress)' if (env, algo) in unfinished else
                         f'{len(seeds)}')
                text.append(f'| {env} | {algo} | {count} | {fewest:,.0f} | '
                            f'{_pm(pre)} | {_pm(finals[algo])} |')
        text.append('')
        if begun:
            text += ['Under way: ' + ', '.join(begun), '']
        if unbegun:
            text += ['Missing: ' + ', '.join(unbegun), '']
        damaged = [r.name for r in runs if r.name in campaign.damage]
        if damaged:
            text += ['Left out, their logs damaged: '
                     + '; '.join(campaign.damage[name] for name in damaged), '']
        if fig == 'fig2':
            text += along_the_way(data, envs, 'ProMP', 'MAML-TRPO')
            text += at_equal_iterations(data, envs, 'ProMP', 'MAML-TRPO', unfinished)
            for env in envs:
                claims += compare_rows(data, 'Fig. 2', env, 'ProMP',
                                          [a for a in ('MAML-TRPO', 'E-MAML-TRPO')
                                           if any(r.env == env and r.algo == a for r in runs)])
        elif fig == 'fig3':
            for env in envs:
                claims += compare_rows(data, 'Fig. 3', env, 'LVC-VPG',
                                          ['DiCE-VPG', 'MAML-VPG', 'E-MAML-VPG'])
            if not quick:
                claims += fig4_claims(out, tested)
        elif fig == 'ml10':
            text += final_evaluation_table(campaign, runs)
            for key, what in (('MetaTest/Average/SuccessRate',
                               ' held-out success (the periodic meta-test)'),
                              ('Step_1-SuccessRate', ' training-class success, post-update')):
                claims += compare_rows(data, 'Meta-World', 'ML10', 'ProMP', ['MAML-TRPO'],
                                          key, what, paper=False)
        elif fig == 'stepsize':
            claims += compare_rows(data, 'Learned step sizes', 'HalfCheetahFwdBack',
                                      LEARNED_STEP, ['ProMP'], paper=False)
        elif fig == 'logstd':  # Fig. 2's comparison with the reference's policy structure,
            # and what that structure does to each algorithm
            claims += compare_rows(data, 'Log-std per dimension', 'HalfCheetahFwdBack',
                                      PER_DIM_STD['ProMP'], [PER_DIM_STD['MAML-TRPO'], 'ProMP'],
                                      paper=False)
            claims += compare_rows(data, 'Log-std per dimension', 'HalfCheetahFwdBack',
                                      PER_DIM_STD['MAML-TRPO'], ['MAML-TRPO'], paper=False)
        elif fig == 'fig5':
            claims += fig5_goal_claims(out / 'fig5')
            claims += compare_rows(data, 'Fig. 5', 'PointEnvMomentum', 'LVC-TRPO',
                                      ['MAML-TRPO', 'E-MAML-TRPO'], 'Step_0-AverageReturn',
                                      ' pre-update return (how well the pre-update policy '
                                      'explores, with the sparse reward)')
            claims += compare_rows(data, 'Fig. 5', 'PointEnvMomentum', 'LVC-TRPO',
                                      ['MAML-TRPO', 'E-MAML-TRPO'])
            if (out / 'fig5' / 'fig5_trajectories.png').exists():
                text += ['Trajectories of each algorithm\'s seed-1 policy, pre-update and after '
                         'each inner step, on the four corner tasks (goal regions shaded):', '',
                         '![fig5 trajectories](fig5/fig5_trajectories.png)', '']
    paper = [c for c in claims if c[0].startswith(PAPER_FIGS)]
    own = [c for c in claims if not c[0].startswith(PAPER_FIGS)]
    text += claims_table(paper) + family_note(tested)
    if own:
        text += ['## This package\'s own comparisons (not in the paper)', '',
                 '| comparison | measured | verdict |', '|---|---|---|']
        text += [f'| {c} | {m} | {v} |' for c, _, m, v in own] + ['']
    body = '\n'.join(text).rstrip('\n') + '\n'
    if write:
        (out / 'report.md').write_text(body)
    return body


#: The README's copy of the paper's claims table lies between these lines; ``report``
#: rewrites it when it writes the committed report.
README = HERE.parent / 'README.md'
CLAIMS_BEGIN = '<!-- claims table: written by benchmarks/paper.py report; do not edit by hand -->'
CLAIMS_END = '<!-- end of the claims table -->'


def _holm(tests: Sequence[Tuple[str, float]], alpha: float) -> set:
    """The names of ``tests`` (name, p) that Holm's step-down keeps at ``alpha``: the k-th
    smallest p (k from 0) must be under ``alpha / (m - k)``, and the first that is not ends
    the list."""
    kept, m = set(), len(tests)
    for k, (name, p) in enumerate(sorted(tests, key=lambda item: item[1])):
        if not p < alpha / (m - k):  # (strict, as each claim's own p < alpha)
            break
        kept.add(name)
    return kept


def family_note(tested: Sequence[Tuple[str, float]], alpha: float = 0.05) -> List[str]:
    """What the verdicts become held to ``alpha`` over all of the paper's tested claims at
    once: each claim above is tested on its own at ``alpha`` (one-sided), so with many
    claims some pass by chance (Holm's step-down correction, :func:`_holm`). A claim whose
    difference runs against it at one-sided ``1 - p < alpha`` is given the verdict "the
    opposite is significant": a second test, of the other direction, so the note also
    says what those verdicts become in the family of every test made (the claims' and
    theirs)."""
    if not tested:
        return []
    m = len(tested)
    kept = _holm(tested, alpha)
    passed = [(claim, p) for claim, p in tested if p < alpha]
    head = (f'Each comparison is tested on its own at one-sided p < {alpha}. Held to {alpha} '
            f'over all {m} tested together (Holm\'s correction for multiple comparisons), '
            f'{len(kept)} of the {len(passed)} with p < {alpha} stay significant')
    lost = [f'{claim} (p = {p:.3f})' for claim, p in passed if claim not in kept]
    note = head + ('; not: ' + '; '.join(lost) if lost else '') + '.'
    opposite = [(f'{claim}, the opposite', 1 - p) for claim, p in tested if 1 - p < alpha]
    if opposite:
        both = _holm(list(tested) + opposite, alpha)
        note += (f' Where the opposite is significant, that is a test of the other direction: '
                 f'with those in the family ({m + len(opposite)} tests), '
                 + '; '.join(f'{claim} (p = {q:.3f}) '
                             + ('stays significant' if claim in both else 'does not stay '
                                'significant') for claim, q in opposite) + '.')
    return [note, '']


def claims_table(claims) -> List[str]:
    """The paper's claims (Section 7 and Fig. 8), one row each: the claim, the paper's
    evidence, what was measured here and the verdict."""
    return ['## Claims of the paper (Section 7), as measured here', '',
            '| claim | the paper\'s evidence | measured here | verdict |', '|---|---|---|---|',
            *(f'| {c} | {e} | {m} | {v} |' for c, e, m, v in claims), '']


def section(text: str, title: str) -> str:
    """The lines of markdown ``text`` from the heading ``title`` to the next heading."""
    lines = text.splitlines()
    start = lines.index(title)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith('## ')),
               len(lines))
    return '\n'.join(lines[start:end]).strip('\n') + '\n'


def readme_with_claims(readme: str, report_text: str) -> str:
    """``readme`` with its claims table replaced by the report's (the table's rows, without
    the report's heading)."""
    if readme.count(CLAIMS_BEGIN) != 1 or readme.count(CLAIMS_END) != 1:
        raise click.ClickException(f'{README} must hold the lines {CLAIMS_BEGIN!r} and '
                                   f'{CLAIMS_END!r} once each (where the claims table goes)')
    table = section(report_text, claims_table([])[0]).split('\n', 2)[2]
    head, rest = readme.split(CLAIMS_BEGIN)
    _, tail = rest.split(CLAIMS_END)
    return f'{head}{CLAIMS_BEGIN}\n{table}{CLAIMS_END}{tail}'


def fig6_report(directory: pathlib.Path) -> List[str]:
    """Fig. 6 from ``fig6.json`` (written by ``run fig6``)."""
    path = directory / 'fig6.json'
    head = ['## Fig. 6: formulation I (DiCE-VPG) vs II (E-MAML-VPG) on the 1-D env', '']
    if not path.exists():
        return head + ['Not run yet (`benchmarks/paper.py run fig6`).', '']
    def rows(data):
        lines = []
        for panel in data.get('panels', []):
            for run in panel.get('runs', []):
                theta = run['theta']
                post = run.get('post_update_return') or [math.nan]
                start, end = theta[0], theta[-1]
                lines.append(f"| {panel.get('lr')} | {run['label']} | "
                             f'({start[0]:.3f}, {start[1]:.3f}) | ({end[0]:.3f}, {end[1]:.3f}) | '
                             f'{post[0]:.3f} → {post[-1]:.3f} |')
        return lines

    return head + ['![fig6](fig6/fig6.png)', '', '| outer lr | algorithm | θ start | θ end | '
                   'post-update return, first → last iteration |', '|---|---|---|---|---|',
                   *read_result(path, 'benchmarks/fig6.py', rows), '']


def _draw_fig8(path: pathlib.Path, results: Sequence[dict]):
    """Fig. 8: each algorithm's sampling and update seconds, stacked."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, ax = plt.subplots(figsize=(5, 3.4))
    names = [r['what'] for r in results]
    ax.bar(names, [r['sample_s'] for r in results], label='sampling')
    ax.bar(names, [r['update_s'] for r in results], bottom=[r['sample_s'] for r in results],
           label='update')
    ax.set_ylabel('seconds per iteration')
    ax.legend(fontsize=8)
    batch = results[0]['batch'] if results else ''
    ax.set_title(f'HumanoidRandDirec, {batch} batch', fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fig8_results(data: dict) -> List[dict]:
    """The CPU timings of Fig. 8's algorithms (and garage's ``MAMLTRPO``) in
    ``throughput.json``, each with its seconds as numbers."""
    results = [r for r in data['results']
               if r.get('what') in FIG8_ALGOS + ('garage-MAMLTRPO', ) and 'iter_s' in r
               and r.get('device', 'cpu') == 'cpu']
    for r in results:
        for key in ('sample_s', 'update_s', 'iter_s'):
            if not math.isfinite(float(r[key])) or float(r[key]) <= 0:
                raise ValueError(f"{r['what']}'s {key} is {r[key]!r}, not a time")
    return results


def fig8_report(directory: pathlib.Path, draw: bool = True) -> List[str]:
    """Fig. 8's stacked bars from ``throughput.json`` (written by ``run fig8``); ``draw``:
    also draw them to ``fig8.png``."""
    path = directory / 'throughput.json'
    head = ['## Fig. 8: seconds per iteration on HumanoidRandDirec', '']
    if not path.exists():
        return head + ['Not measured yet (`benchmarks/paper.py run fig8`).', '']
    results = read_result(path, 'benchmarks/throughput.py', _fig8_results)
    if draw:
        _draw_fig8(directory / 'fig8.png', results)
    lines = head + ['![fig8](fig8/fig8.png)', '', '| algorithm | sampling (s) | update (s) | '
                    'iteration (s) |', '|---|---|---|---|']
    lines += [f"| {r['what']} | {r['sample_s']:.2f} | {r['update_s']:.2f} | {r['iter_s']:.2f} |"
              for r in results]
    return lines + ['']


# ------------------------------------------------------------------------ CLI
def _campaign(runs_dir, results_dir, quick, writes_runs: bool) -> Campaign:
    if runs_dir is None and os.environ.get('GARAGE_PROMP_RUNS'):
        # Checked as --runs-dir is (the error names the variable), before any work.
        check = check_output_path if writes_runs else check_input_dir
        try:
            runs_dir = check(os.environ['GARAGE_PROMP_RUNS'], 'GARAGE_PROMP_RUNS')
        except ValueError as error:
            raise click.UsageError(str(error)) from None
    runs_dir = pathlib.Path(runs_dir or pathlib.Path.home() / 'garage_promp_runs')
    if quick:
        runs_dir = runs_dir / 'quick'
    return Campaign(runs_dir, results_dir or (runs_dir / 'results' if quick else RESULTS))


def _figs(figs) -> List[str]:
    return list(figs) or list(FIGURES)


def figs_argument(required: bool):
    """The FIGS argument of every subcommand."""
    return click.argument('figs', nargs=-1, required=required, type=click.Choice(FIGURES),
                          callback=distinct)


def _only_text(ctx, param, text):
    if text is not None and not text.strip():
        raise click.BadParameter(f'must be some text of a run name (fig/env/algo_seed=s), got '
                                 f'{text!r}', ctx, param)
    return text


ONLY = click.option('--only', default=None, callback=_only_text,
                    help='Only runs whose name (fig/env/algo_seed=s) contains this text.')


def _selected(figs, only, quick) -> List[Run]:
    """The runs of FIGS that ``--only`` selects, each once (``stepsize`` and ``logstd`` share
    Fig. 2's runs); an ``--only`` that selects nothing (no run and no scripted figure) is a
    usage error naming a few of the names it could match."""
    runs = list({r.name: r for fig in figs for r in runs_of(fig, quick)}.values())
    chosen = [r for r in runs if only is None or only in r.name]
    if only is not None and not chosen and not any(only in fig for fig in figs
                                                     if fig in SCRIPTED):
        examples = (f'e.g. {", ".join(r.name for r in runs[:3])}' if runs else
                    'a scripted figure is selected by its own name')
        raise click.BadParameter(f'{only!r} is in no run name of {" ".join(figs)} '
                                 f'({examples})', param_hint='--only')
    return chosen


def common(writes_runs: bool, writes_results: bool = True):
    """The options every subcommand takes; ``writes_runs``: the command writes in the runs
    dir (``run``), so it is tried for writability while parsing; the others only read it.
    ``writes_results`` likewise for the results dir (all but ``status``)."""
    runs_type = OUTPUT_DIR if writes_runs else INPUT_DIR
    results_type = OUTPUT_DIR if writes_results else INPUT_DIR
    options = [
        click.option('--runs-dir', type=runs_type, default=None,
                     help='Run directories (snapshots) [default: $GARAGE_PROMP_RUNS or '
                          '~/garage_promp_runs].'),
        click.option('--results-dir', type=results_type, default=None,
                     help='Finished runs, figures and report [default: '
                          f'{RESULTS.relative_to(HERE.parent)}; with --quick, '
                          'RUNS_DIR/quick/results].'),
        click.option('--quick', is_flag=True,
                     help='Tiny budgets: each pipeline end to end in seconds.'),
    ]

    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func
    return decorate


class _Commands(StrictGroup):
    """The subcommands; a damaged run log or a file system error found on the way is one
    ``Error:`` line naming the file."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (DamagedRunFile, OSError) as error:  # a damaged log, a file in the way...
            raise click.ClickException(str(error)) from None


@click.group(cls=_Commands)
def cli():
    """Reproduce the ProMP paper's figures: run, status, report."""


@cli.command()
@figs_argument(required=True)
@click.option('--parallel', type=WORKERS, default=2, show_default=True,
              help='Runs at a time (one core each).')
@click.option('--time-limit', default=None,
              help='Stop the runs after this long (e.g. 2h, 45m, 1h30m, 600): each keeps its '
                   'last snapshot and continues on the next run.')
@ONLY
@common(writes_runs=True)
def run(figs, parallel, time_limit, only, runs_dir, results_dir, quick):
    """Run (or continue) the training runs of FIGS until done or the time limit."""
    seconds = parse_duration(time_limit)
    selected = _selected(figs, only, quick)
    campaign = _campaign(runs_dir, results_dir, quick, writes_runs=True)
    deadline = time.time() + seconds if seconds else None
    for r in (r for fig in figs for r in runs_of(fig, quick)):
        where, result = campaign.run_dir(r).resolve(), campaign.result_dir(r).resolve()
        if where == result or where in result.parents or result in where.parents:
            raise click.UsageError(f"--runs-dir and --results-dir put {r.name}'s run and its "
                                   f'results in one place ({where}): give two apart')
    # One runner per figure: a second would start the first one's next runs again (runners
    # of other figures may go beside it). A figure's runs may be another's too (stepsize and
    # logstd run Fig. 2's HalfCheetah runs): the lock is the runs' own figures'.
    for fig in sorted(set(figs) | {r.fig for r in selected}):
        try:
            click.get_current_context().with_resource(
                owned_run_dir(str(campaign.runs_dir / fig)))
        except RunDirBusy as error:
            raise click.ClickException(f'another paper.py run is running {fig} in --runs-dir '
                                       f'{campaign.runs_dir} ({error}); let it finish or stop '
                                       'it first') from None
    state = {r.name: campaign.state(r)[0] for r in selected}  # (each reads the run's logs)
    todo = [r for r in selected if state[r.name] != 'done']
    damaged = [r.name for r in todo if state[r.name] == 'damaged']
    if damaged:  # before any work
        raise click.ClickException(
            'runs whose log cannot be read (move the file away to start the run again, or '
            'restore it): ' + '; '.join(campaign.damage[name] for name in damaged))
    for r in todo:
        if state[r.name] == 'running':
            click.echo(f'{r.name}: running elsewhere (its pid file or its run dir\'s lock); '
                       'left to it', err=True)
        for path in (campaign.pid_file(r), campaign.log_file(r)):
            _check_plain_file(path)
    for r in todo:  # finished earlier but not yet copied
        if state[r.name] == 'finished':
            campaign.collect(r)
    todo = [r for r in todo if state[r.name] in ('partial', 'missing')]
    by_name = {r.name: r for r in todo}
    specs = []
    evaluations, elsewhere = final_evaluations(campaign, selected, quick)
    for name in elsewhere:
        click.echo(f'{name}: no snapshot here for its final evaluation', err=True)
    targets = {name: target for name, _, _, target in evaluations}
    specs += [(name, command, log) for name, command, log, _ in evaluations]
    for r in todo:
        command = campaign.command(r)
        # The shell writes its pid, then becomes train.py (exec keeps the pid).
        specs.append((r.name, ['/bin/sh', '-c', 'echo $$ > "$0"; exec "$@"',
                               str(campaign.pid_file(r)), *command], campaign.log_file(r)))
    # The scripted figures (benchmarks: alone on the cores) once every run's start is
    # known to be possible, within the time limit.
    for fig, script in (('fig8', run_fig8), ('fig6', run_fig6)):
        if fig in figs and (only is None or only in fig):
            if (campaign.results_dir / fig / SCRIPTED[fig]).exists():
                click.echo(f'{fig}: done ({campaign.results_dir / fig / SCRIPTED[fig]}; '
                           'remove it to compute it again)', err=True)
            else:
                script(campaign, quick, deadline)

    def on_done(name, code):
        if name in targets:  # a final evaluation: its table only once it is whole
            partial = _partial(targets[name])
            if code == 0 and partial.exists():
                partial.replace(targets[name])
                click.echo(f'evaluated {name} -> {targets[name]}', err=True)
            return
        r = by_name[name]
        try:
            campaign.pid_file(r).unlink(missing_ok=True)
            if code == 0 and campaign.collect(r):
                click.echo(f'collected {name} -> {campaign.result_dir(r)}', err=True)
            else:
                _say_parked(campaign, r)
        except (click.ClickException, DamagedRunFile, OSError) as error:
            # One run's results or parking must not stop the others' (nor their waits).
            message = error.message if isinstance(error, click.ClickException) else error
            click.echo(f'{name}: its results or parked copy were not written: {message}',
                       err=True)

    click.echo(f'{len(specs) - len(evaluations)} runs to do'
               + (f', {len(evaluations)} final evaluations' if evaluations else ''), err=True)
    outcome = learning.run_all(specs, parallel, deadline, on_done=on_done)
    try:
        if 'fig5' in figs:
            draw_fig5_trajectories(campaign, quick)
        text, _ = status_table(campaign, figs, quick, parallel)
        click.echo(text)
    finally:
        outcome.exit()  # non-zero if a run failed or the runner was stopped, whatever happened


def _say_parked(campaign: Campaign, run: Run):
    steps = campaign.park(run)
    if steps:
        click.echo(f'parked {run.name} at {steps:,} env steps -> {campaign.parked_dir(run)} '
                   '(commit it: a clone elsewhere continues from there)', err=True)


@cli.command()
@figs_argument(required=False)
@ONLY
@common(writes_runs=False)
def park(figs, only, runs_dir, results_dir, quick):
    """Park the stopped, unfinished runs of FIGS (default: all): copy each one's last
    snapshot into its results, to be committed, so that a clone on another machine
    continues it. ``run`` parks the runs it stops itself; this is for runs stopped
    another way. A running run is left alone (stop it first)."""
    selected = _selected(_figs(figs), only, quick)
    campaign = _campaign(runs_dir, results_dir, quick, writes_runs=False)
    for r in selected:
        state = campaign.state(r)[0]
        if state == 'running':
            click.echo(f'{r.name} is running: not parked (stop it first)', err=True)
        elif state == 'damaged':
            click.echo(f'{r.name}: not parked: {campaign.damage[r.name]}', err=True)
        elif state == 'partial':
            _say_parked(campaign, r)


def draw_fig5_trajectories(campaign: Campaign, quick: bool):
    """The paper's Fig. 5 picture from each algorithm's seed-1 snapshot, once all are done."""
    firsts = [r for r in runs_of('fig5', quick) if r.seed == 1]
    if not all(campaign.state(r)[0] == 'done' and (campaign.run_dir(r) / 'params.pkl').exists()
               for r in firsts):
        click.echo('fig5 trajectories: waiting for the seed-1 runs (and their snapshots)',
                   err=True)
        return
    command = [sys.executable, str(HERE / 'fig5_trajectories.py'),
               '--out', str(campaign.results_dir / 'fig5')]
    for r in firsts:
        command += ['--run', f'{r.algo}={campaign.run_dir(r)}']
    _script('fig5 trajectories', command, None)


def run_fig6(campaign: Campaign, quick: bool, deadline: float | None = None):
    """Fig. 6: ``benchmarks/fig6.py`` (both formulations, the paper's batch and start)."""
    command = [sys.executable, str(HERE / 'fig6.py'), '--out', str(campaign.results_dir / 'fig6')]
    if quick:
        command.append('--quick')
    _script('fig6', command, deadline, campaign.results_dir / 'fig6' / SCRIPTED['fig6'])


def run_fig8(campaign: Campaign, quick: bool, deadline: float | None = None):
    """Fig. 8's numbers: ``benchmarks/throughput.py`` on HumanoidRandDirec."""
    out = campaign.results_dir / 'fig8'
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(HERE / 'throughput.py'), '--env', 'HumanoidRandDirec',
               '--batch', 'quick' if quick else 'paper', '--memory-env', '', '--garage-iters', '0',
               '--out', str(out)]
    for algo in FIG8_ALGOS:
        command += ['--algo', algo]
    if quick:
        command += ['--iters', '1', '--raw-steps', '200']
    _script('fig8', command, deadline, out / SCRIPTED['fig8'])
    fig8_report(out)


@cli.command()
@figs_argument(required=False)
@click.option('--parallel', type=WORKERS, default=2, show_default=True,
              help='Runs at a time, for the time estimate.')
@common(writes_runs=False, writes_results=False)
def status(figs, parallel, runs_dir, results_dir, quick):
    """Which runs of FIGS (default: all) are done, running, partial or missing."""
    text, _ = status_table(_campaign(runs_dir, results_dir, quick, writes_runs=False),
                           _figs(figs), quick, parallel)
    click.echo(text)


@cli.command(name='report')
@figs_argument(required=False)
@common(writes_runs=True)
def report_command(figs, runs_dir, results_dir, quick):
    """Draw the figures and write report.md (with the claims table) from what is done.

    report.md covers the FIGS given (default: every figure); the committed report is
    written without FIGS.
    """
    figs = _figs(figs)
    readme = (not quick and list(figs) == list(FIGURES)
              and pathlib.Path(results_dir or RESULTS).resolve() == RESULTS.resolve())
    if readme:  # (checked before any work)
        readme_with_claims(README.read_text(), '\n'.join(claims_table([])))
    text = report(_campaign(runs_dir, results_dir, quick, writes_runs=True), figs, quick)
    if readme:  # the committed report: the README carries its claims table, from the
        # committed results alone (a run in progress here counts in report.md only)
        with tempfile.TemporaryDirectory() as empty:
            committed = report(Campaign(empty, RESULTS), figs, write=False)
        README.write_text(readme_with_claims(README.read_text(), committed))
    click.echo(text)


if __name__ == '__main__':
    cli()
