#!/usr/bin/env python3
"""Sampling against the physics: how close an env step comes to MuJoCo's own ``mj_step``.

For each environment, in one process and one thread (``--workers 1``, the
default), side by side, interleaved so that a noisy machine hits every column
alike:

* ``physics``: bare ``mujoco.mj_step(model, data, nstep=frame_skip)`` on the
  env's own model (a fresh ``MjData``, random controls in the control range):
  the cost of the physics of one env step, and nothing else;
* ``physics, lockstep``: the same bare ``mj_step``, over as many ``MjData``
  as the sampler steps in lockstep in one process (``M x R / workers``), each
  advanced once per round: the physics in the sampler's memory access
  pattern, where a step's working set is every episode's simulation;
* ``wrapped``: random actions through the garage env the sampler steps
  (garage's ``normalize``, ``GymnasiumEnv``, the env's ``step``), one env:
  ``throughput.py``'s "raw" column;
* ``sampler (wrapped)`` and ``sampler (lean)``: a ProMP meta-batch (``-M``
  tasks x ``-R`` episodes, every sampling round and the inner steps between
  them, the policy forward included) through the in-process sampler, with the
  lean stepping path off and on (``garage_promp.sampler.lean``); in one process,
  also the lean path with its per-env stepping loop in Python rather than the
  compiled loop (``garage_promp.envs._cstep``), side by side;
* ``MuJoCo in the sampler``: of the lean sampler's time, what MuJoCo's own
  functions took (``mj_step``, ``mj_forward``, ``mj_rnePostConstraint``,
  timed in a second lean pass by wrapping them; the wrapper adds a fraction
  of a microsecond a call), and ``the sampler's steps replayed``: every
  recorded ``mj_step`` again from the state it started from, alone on one
  ``MjData`` (the physics of the sampler's own steps: a policy's actions and
  the states they lead to cost more or less than random controls). MuJoCo
  in the sampler above the replay is memory traffic (many simulations, and
  the Python, numpy and torch work between their steps).
  ``sampler lean - MuJoCo in the sampler`` is
  what the package's own code costs a step;
* ``the learner's work`` and ``policy forward`` (the same timed pass): the
  algorithm's per-task processing and inner steps between the rounds, and the
  sampler's batched policy forward; with MuJoCo in the sampler they are what the
  same episodes need, and ``physics / (their sum)``, the ``ceiling``, is the
  ratio the sampler would reach if everything else cost nothing;

and prints microseconds per env step and ``physics / sampler``, the fraction
of the physics limit the sampler reaches. With ``--workers N``, N processes
run the physics loop at once against the sampler with N worker processes
(N processes of physics, the machine's limit for N cores).

    python benchmarks/physics.py                      # the paper envs and ML1 reach/push
    python benchmarks/physics.py --env HalfCheetahFwdBack --repeats 3
    python benchmarks/physics.py --workers 2 --out benchmarks/results
    python benchmarks/physics.py --env HumanoidRandDirec --baseline-solver cholesky
    python benchmarks/physics.py --summarize benchmarks/results/physics.json   # the README's table
"""
import contextlib
import os
import pathlib
import statistics
import sys
import time

from garage_promp.baselines import BASELINE_SOLVERS
from garage_promp.experiment.env_names import EnvName
from garage_promp.validation import (
    OUTPUT_DIR,
    WORKERS,
    StrictCommand,
    count,
    given_flags,
)

import click

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_io import (  # noqa: E402  pylint: disable=wrong-import-position
    check_env_batches,
    env_setup,
    promp_experiment,
    read_saved_results,
    write_results,
)
from throughput import at_barrier  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_ENVS = ('HalfCheetahFwdBack', 'HopperRandParams', 'WalkerFwdBack', 'AntRandDirec',
                'HumanoidRandDirec', 'WalkerRandParams', 'ML1:reach-v3', 'ML1:push-v3')


def _mujoco_env(env):
    """The gymnasium MuJoCo env under the garage wrappers (model, data, frame_skip)."""
    inner = env
    for _ in range(10):
        if hasattr(inner, 'model') and hasattr(inner, 'frame_skip'):
            return inner
        inner = getattr(inner, '_env', None) or getattr(inner, 'env', None) or \
            getattr(inner, 'unwrapped', None)
    raise ValueError(f'no MuJoCo model found under {type(env).__name__}')


def physics_us(env_name, n_steps, seed=0):
    """Microseconds of bare ``mj_step`` per env step on the env's own model (one ``MjData``)."""
    return lockstep_physics_us(env_name, 1, n_steps, seed)


def lockstep_physics_us(env_name, n_envs, n_steps, seed=0):
    """Microseconds of bare ``mj_step`` per env step over ``n_envs`` simulations in turn.

    The sampler's access pattern: each lockstep step advances every episode's
    own ``MjData`` once, so a step's working set is ``n_envs`` simulations
    rather than one that stays in the cache. Every ``MjData`` starts fresh
    and is reset every 100 rounds, as episodes would be; controls are random in
    the control range.
    """
    import mujoco  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    inner = _mujoco_env(env_setup(env_name).train_tasks.sample(1)[0]())
    model, skip = inner.model, int(inner.frame_skip)
    datas = [mujoco.MjData(model) for _ in range(n_envs)]
    for data in datas:
        mujoco.mj_forward(model, data)
    rng = np.random.default_rng(seed)
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    rounds = max(1, n_steps // n_envs)
    controls = rng.uniform(low, high, (rounds, n_envs, model.nu))  # drawn before the clock
    start = time.perf_counter()
    for t in range(rounds):
        for data, control in zip(datas, controls[t]):
            data.ctrl[:] = control
            mujoco.mj_step(model, data, nstep=skip)
        if t % 100 == 99:
            for data in datas:
                mujoco.mj_resetData(model, data)
    return (time.perf_counter() - start) / (rounds * n_envs) * 1e6


def wrapped_us(env_name, n_steps, seed=0):
    """Microseconds per random-action step through the garage env the sampler steps."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    env = env_setup(env_name).train_tasks.sample(1)[0]()
    low, high = env.action_space.low, env.action_space.high
    rng = np.random.default_rng(seed)
    env.reset()
    start = time.perf_counter()
    for _ in range(n_steps):
        if env.step(rng.uniform(low, high).astype(np.float32)).last:
            env.reset()
    return (time.perf_counter() - start) / n_steps * 1e6


#: MuJoCo's functions that the envs call during a step or a reset: the physics.
MUJOCO_FUNCTIONS = ('mj_step', 'mj_forward', 'mj_rnePostConstraint')


def _timed(function, clock, before=None):
    """``function``, adding its time to ``clock.seconds`` and one to ``clock.calls`` at each
    call; ``before(*args, **kwargs)``, if given, runs first, untimed."""
    def call(*args, **kwargs):
        if before is not None:
            before(*args, **kwargs)
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            clock.seconds += time.perf_counter() - start
            clock.calls += 1
    return call


class MujocoClock:
    """Within ``with``, MuJoCo's :data:`MUJOCO_FUNCTIONS` are timed (``seconds``, ``calls``).

    They are wrapped on the ``mujoco`` module, where gymnasium's ``MujocoEnv``,
    Meta-World and the package's envs all look them up at every call, so only
    an in-process sampler is seen; so is the package's compiled stepping loop
    (``garage_promp.envs._cstep.step_batch``, and ``step_mocap_batch`` for Meta-World,
    timed whole: MuJoCo's calls and a few copies around them), counted as one call per
    simulation it steps. ``steps``
    holds, per model, ``nstep`` and the state before each ``mj_step`` call
    (MuJoCo's integration state: positions, velocities, controls, warm start...,
    taken before the clock starts), for :func:`replay_us`.
    """

    def __init__(self):
        self.seconds, self.calls = 0., 0
        self.steps: dict = {}

    def __enter__(self):
        import mujoco  # pylint: disable=import-outside-toplevel
        import numpy as np  # pylint: disable=import-outside-toplevel
        SPEC = mujoco.mjtState.mjSTATE_INTEGRATION  # pylint: disable=invalid-name
        self._saved = {name: getattr(mujoco, name) for name in MUJOCO_FUNCTIONS}

        def record(model, data, *args, nstep=1, **kwargs):
            del args, kwargs
            state = np.empty(mujoco.mj_stateSize(model, SPEC))
            mujoco.mj_getState(model, data, state, SPEC)
            self.steps.setdefault((id(model), nstep), (model, nstep, []))[2].append(state)

        for name, function in self._saved.items():
            setattr(mujoco, name, _timed(function, self, record if name == 'mj_step' else None))
        from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel

        def timed_loop(real, inputs):
            # A compiled loop of garage_promp/envs/_cstep.py: each simulation's mj_step
            # calls (and whatever else it runs) in one call, timed whole; a call per
            # simulation. The state each simulation's mj_step starts from has the inputs
            # the loop sets first (inputs(n, data, args) sets them, the loop sets the same,
            # and returns nstep).
            def call(lib, models, datas, *args, **kwargs):
                for n, (model, data) in enumerate(zip(models, datas)):
                    record(model, data, nstep=inputs(n, model, data, args))
                start = time.perf_counter()
                try:
                    return real(lib, models, datas, *args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start
                    self.calls += len(datas)
            return call

        def controls(n, model, data, args):  # step_batch(..., actions, nstep, ...)
            actions, nstep = args[0], args[1]
            if np.shape(actions)[1:] == (model.nu, ):
                data.ctrl = actions[n]
            return nstep

        def mocap_and_controls(n, model, data, args):
            # step_mocap_batch(..., mocap_pos, mocap_quat, ctrl, nstep, ...)
            del model
            mocap_pos, mocap_quat, ctrl, nstep = args[:4]
            data.mocap_pos = np.reshape(mocap_pos[n], data.mocap_pos.shape)
            data.mocap_quat = np.reshape(mocap_quat, data.mocap_quat.shape)
            data.ctrl = ctrl[n]
            return nstep

        self._step_batch, self._step_mocap_batch = _cstep.step_batch, _cstep.step_mocap_batch
        _cstep.step_batch = timed_loop(self._step_batch, controls)
        _cstep.step_mocap_batch = timed_loop(self._step_mocap_batch, mocap_and_controls)
        return self

    def __exit__(self, *exc):
        from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel

        import mujoco  # pylint: disable=import-outside-toplevel
        for name, function in self._saved.items():
            setattr(mujoco, name, function)
        _cstep.step_batch = self._step_batch
        _cstep.step_mocap_batch = self._step_mocap_batch


class LearnerClock:
    """Within ``with``, the learner's work inside ``sample_meta_batch`` is timed (``seconds``,
    ``calls``) for the algorithm ``algo`` (set before entering).

    That is each task's processing (the baseline's least-squares fit, returns and
    advantages: ``process_episodes``), its inner steps, and stacking the tasks at the end
    (``concatenate_tasks``): the algorithm's work between and after the sampling rounds,
    which the in-process sampler cannot overlap with sampling. Wrapped where
    ``sample_meta_batch`` looks them up (the ``meta_batch`` module, the algorithm).
    """

    FUNCTIONS = ('process_episodes', 'concatenate_tasks')

    def __init__(self):
        self.seconds, self.calls = 0., 0
        self.algo = None

    def _timed(self, function):
        return _timed(function, self)

    def __enter__(self):
        from garage_promp.algos import meta_batch  # pylint: disable=import-outside-toplevel
        self._saved = {name: getattr(meta_batch, name) for name in self.FUNCTIONS}
        for name, function in self._saved.items():
            setattr(meta_batch, name, self._timed(function))
        self.algo._inner_step = self._timed(self.algo._inner_step)  # pylint: disable=protected-access
        return self

    def __exit__(self, *exc):
        from garage_promp.algos import meta_batch  # pylint: disable=import-outside-toplevel
        for name, function in self._saved.items():
            setattr(meta_batch, name, function)
        del self.algo._inner_step  # the method again  # pylint: disable=protected-access


class PolicyClock:
    """Within ``with``, the sampler's policy forward is timed (``seconds``, ``calls``).

    That is ``RolloutWorker._distribution``: at every lockstep step, the batched
    forward of all the wave's rows, each at its task's parameters, in the fixed
    blocks that make a row's numbers independent of the worker count. The forward
    is part of sampling and cannot be left out without other actions; with
    MuJoCo's calls and the learner's work it bounds what the sampler can reach
    (``ceiling``). Wrapped on the class, so only an in-process sampler is seen.
    """

    def __init__(self):
        self.seconds, self.calls = 0., 0

    def __enter__(self):
        from garage_promp.sampler.rollout import RolloutWorker  # pylint: disable=import-outside-toplevel
        self._saved = RolloutWorker.__dict__['_distribution']
        RolloutWorker._distribution = _timed(self._saved, self)  # pylint: disable=protected-access
        return self

    def __exit__(self, *exc):
        from garage_promp.sampler.rollout import RolloutWorker  # pylint: disable=import-outside-toplevel
        RolloutWorker._distribution = self._saved  # pylint: disable=protected-access


def _timed_meta_batch(env_name, lean, meta_batch_size, episodes_per_task, n_workers,
                      clock=None, learner=None, policy=None, baseline_solver='lstsq'):
    """Seconds and env steps of one ProMP meta-batch (all rounds) after a start-up one,
    timed by ``clock`` (a :class:`MujocoClock`), ``learner`` (a :class:`LearnerClock`)
    and ``policy`` (a :class:`PolicyClock`) where given; the baseline solving with
    ``baseline_solver``."""
    exp = promp_experiment(env_name, meta_batch_size, episodes_per_task, n_workers,
                           baseline_solver)
    exp.algo.sampler._lean = lean  # pylint: disable=protected-access
    if learner is not None:
        learner.algo = exp.algo
    try:
        exp.algo.sample_meta_batch(0)  # start-up: workers, env copies
        with clock or contextlib.nullcontext(), learner or contextlib.nullcontext(), \
                policy or contextlib.nullcontext():
            start = time.perf_counter()
            batches = exp.algo.sample_meta_batch(1)
            elapsed = time.perf_counter() - start
    finally:
        exp.algo.sampler.shutdown_worker()
    return elapsed, sum(int(b.episodes.lengths.sum()) for b in batches)


def sampler_us(env_name, lean, meta_batch_size, episodes_per_task, n_workers=1,
               compiled=True, baseline_solver='lstsq'):
    """Microseconds per env step of one ProMP meta-batch (all rounds) through the sampler;
    ``compiled=False``: the in-process lean path with its stepping loop in Python (the
    compiled loop, ``garage_promp.envs._cstep``, switched off for the call)."""
    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel
    saved = _cstep._library  # pylint: disable=protected-access
    if not compiled:
        _cstep._library = None  # pylint: disable=protected-access
    try:
        elapsed, steps = _timed_meta_batch(env_name, lean, meta_batch_size, episodes_per_task,
                                           n_workers, baseline_solver=baseline_solver)
    finally:
        _cstep._library = saved  # pylint: disable=protected-access
    return elapsed / steps * 1e6


def sampler_mujoco_us(env_name, meta_batch_size, episodes_per_task, baseline_solver='lstsq'):
    """MuJoCo, the learner and the policy in the lean in-process sampler, and the same steps
    replayed alone.

    A meta-batch of its own, with :class:`MujocoClock` timing MuJoCo's calls,
    :class:`LearnerClock` the learner's work and :class:`PolicyClock` the policy
    forward; returns microseconds per env step of MuJoCo's functions in it, of
    :func:`replay_us` on the steps it recorded, of the learner's work and of the
    policy forward.
    """
    clock, learner, policy = MujocoClock(), LearnerClock(), PolicyClock()
    _, steps = _timed_meta_batch(env_name, True, meta_batch_size, episodes_per_task, 1, clock,
                                 learner, policy, baseline_solver)
    return (clock.seconds / steps * 1e6, replay_us(clock.steps),
            learner.seconds / steps * 1e6, policy.seconds / steps * 1e6)


def replay_us(steps):
    """Microseconds per ``mj_step`` call of bare ``mj_step`` from recorded states.

    Every recorded call again, one at a time on one ``MjData`` per model: the
    state it started from set (``mj_setState``, untimed), then ``mj_step``
    timed. The same physics as in the sampler, with nothing else between the
    steps and one simulation's memory in the caches.
    """
    import mujoco  # pylint: disable=import-outside-toplevel
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    elapsed, calls = 0., 0
    for model, nstep, states in steps.values():
        data = mujoco.MjData(model)
        for state in states:
            mujoco.mj_setState(model, data, state, spec)
            start = time.perf_counter()
            mujoco.mj_step(model, data, nstep=nstep)
            elapsed += time.perf_counter() - start
        calls += len(states)
    return elapsed / max(calls, 1) * 1e6


def _physics_process(env_name, n_steps, seed, barrier, queue):
    barrier.wait()
    queue.put(physics_us(env_name, n_steps, seed))


def parallel_physics_us(env_name, n_procs, n_steps):
    """Microseconds per env step of ``n_procs`` physics loops at once (aggregate)."""
    per_step = at_barrier(_physics_process, [(env_name, n_steps, s) for s in range(n_procs)])
    return max(per_step) / n_procs  # the slowest process bounds the aggregate rate


def measure(env_name, repeats, n_steps, meta_batch_size, episodes_per_task, n_workers,
            baseline_solver='lstsq'):
    """Every column of one env, ``repeats`` times interleaved; medians. The learner's
    linear baseline solves with ``baseline_solver`` (``build_experiment``'s; the row
    records it)."""
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    columns = {'physics': [], 'physics_lockstep': [], 'wrapped': [], 'sampler_wrapped': [],
               'sampler_lean': [], 'sampler_mujoco': [], 'physics_replayed': [], 'learner': [],
               'forward': [], 'sampler_lean_python_loop': []}
    for _ in range(repeats):
        columns['physics'].append(physics_us(env_name, n_steps) if n_workers == 1 else
                                  parallel_physics_us(env_name, n_workers, n_steps))
        columns['physics_lockstep'].append(lockstep_physics_us(
            env_name, meta_batch_size * episodes_per_task // n_workers, n_steps))
        columns['wrapped'].append(wrapped_us(env_name, n_steps))
        columns['sampler_lean'].append(sampler_us(env_name, True, meta_batch_size,
                                                  episodes_per_task, n_workers,
                                                  baseline_solver=baseline_solver))
        columns['sampler_wrapped'].append(sampler_us(env_name, False, meta_batch_size,
                                                     episodes_per_task, n_workers,
                                                     baseline_solver=baseline_solver))
        if n_workers == 1:  # MuJoCo's calls are timed in-process only
            columns['sampler_lean_python_loop'].append(sampler_us(
                env_name, True, meta_batch_size, episodes_per_task, compiled=False,
                baseline_solver=baseline_solver))
            mujoco_us, replayed_us, learner_us, forward_us = sampler_mujoco_us(
                env_name, meta_batch_size, episodes_per_task, baseline_solver)
            columns['sampler_mujoco'].append(mujoco_us)
            columns['physics_replayed'].append(replayed_us)
            columns['learner'].append(learner_us)
            columns['forward'].append(forward_us)
    result = {k: statistics.median(v) for k, v in columns.items() if v}
    result.update(env=env_name, workers=n_workers, repeats=repeats,
                  baseline_solver=baseline_solver,
                  ratio_lean=result['physics'] / result['sampler_lean'],
                  ratio_wrapped=result['physics'] / result['sampler_wrapped'],
                  ratio_raw=result['physics'] / result['wrapped'],
                  ratio_lean_lockstep=result['physics_lockstep'] / result['sampler_lean'])
    if 'sampler_mujoco' in result:
        result.update(ratio_mujoco_share=result['sampler_mujoco'] / result['sampler_lean'],
                      package_us=result['sampler_lean'] - result['sampler_mujoco'],
                      ratio_mujoco_physics=result['sampler_mujoco'] / result['physics'],
                      sampler_only=result['sampler_lean'] - result['learner'],
                      floor=result['sampler_mujoco'] + result['forward'] + result['learner'])
        result.update(ratio_sampler_only=result['physics'] / result['sampler_only'],
                      ceiling=result['physics'] / result['floor'],
                      ratio_lean_python_loop=result['physics']
                      / result['sampler_lean_python_loop'])
    return result


def row_label(row) -> str:
    """A row's env, with its baseline solver where that is not the default (a run with
    another solver is another configuration: its rows are shown, and counted, apart)."""
    solver = row.get('baseline_solver', 'lstsq')  # (rows saved before the option: lstsq)
    return row['env'] if solver == 'lstsq' else f"{row['env']} ({solver} baseline)"


def format_table(results, meta_batch_size, episodes_per_task):
    lines = [f'Microseconds per env step ({meta_batch_size} tasks x {episodes_per_task} '
             'episodes, every sampling round; medians), and physics / column:', '',
             '| env | workers | physics `mj_step` | physics, lockstep | wrapped env.step | '
             'sampler, wrapped | sampler, lean | physics / wrapped env | '
             'physics / sampler wrapped | physics / sampler lean | '
             'lockstep physics / sampler lean |', '|---|---|---|---|---|---|---|---|---|---|---|']
    for r in results:
        lines.append(f"| {row_label(r)} | {r['workers']} | {r['physics']:.1f} | "
                     f"{r['physics_lockstep']:.1f} | "
                     f"{r['wrapped']:.1f} | {r['sampler_wrapped']:.1f} | "
                     f"{r['sampler_lean']:.1f} | {r['ratio_raw']:.2f} | "
                     f"{r['ratio_wrapped']:.2f} | **{r['ratio_lean']:.2f}** | "
                     f"{r['ratio_lean_lockstep']:.2f} |")
    split = [r for r in results if 'sampler_mujoco' in r]
    if split:
        lines += ['', "Where the lean sampler's step goes (a second, timed pass; microseconds per "
                  'env step): MuJoCo\'s own functions, and the rest (the package, the env\'s '
                  'Python, the policy and the learner\'s processing between rounds); of the '
                  'rest, the learner\'s work (each task\'s processing with its baseline fit, '
                  'the inner steps, stacking the tasks), and the sampler without it:', '',
                  '| env | sampler, lean | MuJoCo in the sampler | the rest | MuJoCo / sampler '
                  '| MuJoCo in the sampler / physics `mj_step` | physics, the sampler\'s steps '
                  'replayed (per `mj_step` call) | the learner\'s work | sampler without it '
                  '| physics / sampler without it | sampler, lean, Python stepping loop | '
                  'physics / it |', '|---|---|---|---|---|---|---|---|---|---|---|---|']
        for r in split:
            lines.append(f"| {row_label(r)} | {r['sampler_lean']:.1f} | "
                         f"{r['sampler_mujoco']:.1f} | "
                         f"{r['package_us']:.1f} | {r['ratio_mujoco_share']:.2f} | "
                         f"{r['ratio_mujoco_physics']:.2f} | {r['physics_replayed']:.1f} | "
                         f"{r['learner']:.1f} | {r['sampler_only']:.1f} | "
                         f"{r['ratio_sampler_only']:.2f} | {r['sampler_lean_python_loop']:.1f} | "
                         f"{r['ratio_lean_python_loop']:.2f} |")
        lines += ['', 'What bounds the ratio: the parts of a sampled step that the same '
                  'episodes need (timed in the second pass), MuJoCo\'s calls as they run in the '
                  'sampler, the policy forward and the learner\'s work between rounds, and the '
                  'ratio the '
                  'sampler would reach if everything else (the package\'s and the env\'s '
                  'Python, the recording, the episode set-up) cost nothing:', '',
                  '| env | MuJoCo in the sampler | policy forward | the learner\'s work | '
                  'together | sampler, lean | everything else | physics / together (ceiling) | '
                  'physics / sampler lean |', '|---|---|---|---|---|---|---|---|---|']
        for r in split:
            lines.append(f"| {row_label(r)} | {r['sampler_mujoco']:.1f} | {r['forward']:.1f} | "
                         f"{r['learner']:.1f} | {r['floor']:.1f} | {r['sampler_lean']:.1f} | "
                         f"{r['sampler_lean'] - r['floor']:.1f} | {r['ceiling']:.2f} | "
                         f"{r['ratio_lean']:.2f} |")
        lines += ['', 'Summary (the README\'s table) and the goals:', '', goals_table(split)]
    return '\n'.join(lines)


#: The goals for ``physics / sampler lean`` (one process, the in-process sampler, 20 tasks
#: x 10 episodes), per env; the envs not named have none.
GOALS = {'HalfCheetahFwdBack': 0.6, 'HopperRandParams': 0.6, 'WalkerFwdBack': 0.8,
         'AntRandDirec': 0.8, 'HumanoidRandDirec': 0.85, 'ML1:reach-v3': 0.4}


def _verdict(goal, ratios) -> str:
    """The goal's verdict over every saved run of an env: the ratio itself, not its
    rounding, against the goal; "met" only where every run meets it."""
    if goal is None:
        return ''
    met = sum(ratio >= goal for ratio in ratios)
    runs = '' if len(ratios) == 1 else f' ({len(ratios)} runs)'
    if met == len(ratios):
        return f'≥ {goal}: met{runs}'
    if met == 0:
        return f'≥ {goal}: not met{runs}'
    return (f'≥ {goal}: not reliably met: met in {met} of {len(ratios)} runs '
            f'({min(ratios):.3f}-{max(ratios):.3f})')


def goals_table(results) -> str:
    """The summary the README shows: per env, the physics and the two ratios (the wrapped
    env alone, the sampler), the sampler without the learner's work, the ceiling and the
    goal with its verdict. ``results`` are :func:`measure`'s rows of one-process runs; an
    env given more than once (several saved runs) is shown with its first row's numbers and
    the verdict of all its rows (met only where every run meets the goal)."""
    lines = ['| env | physics `mj_step` (µs) | wrapped `env.step` (µs) | sampler, lean (µs) | '
             'physics / wrapped `env.step` | physics / sampler | without the learner\'s work | '
             'ceiling | goal |', '|---|---|---|---|---|---|---|---|---|']
    runs = {}
    for r in results:
        runs.setdefault(row_label(r), []).append(r)
    for env, rows in runs.items():
        r = rows[0]
        verdict = _verdict(GOALS.get(r['env']), [row['ratio_lean'] for row in rows])
        lines.append(f"| {env} | {r['physics']:.1f} | {r['wrapped']:.1f} | "
                     f"{r['sampler_lean']:.1f} | {r['ratio_raw']:.2f} | "
                     f"**{r['ratio_lean']:.2f}** | {r['ratio_sampler_only']:.2f} | "
                     f"{r['ceiling']:.2f} | {verdict} |")
    return '\n'.join(lines)


#: What :func:`goals_table` reads of each row.
SUMMARY_KEYS = ('env', 'physics', 'wrapped', 'sampler_lean', 'ratio_raw', 'ratio_lean',
                'ratio_sampler_only', 'ceiling')


#: Each value :func:`measure` derives from others: name -> (its inputs, how).
DERIVED = {
    'ratio_raw': (('physics', 'wrapped'), lambda a, b: a / b),
    'ratio_wrapped': (('physics', 'sampler_wrapped'), lambda a, b: a / b),
    'ratio_lean': (('physics', 'sampler_lean'), lambda a, b: a / b),
    'ratio_lean_lockstep': (('physics_lockstep', 'sampler_lean'), lambda a, b: a / b),
    'sampler_only': (('sampler_lean', 'learner'), lambda a, b: a - b),
    'floor': (('sampler_mujoco', 'forward', 'learner'), lambda a, b, c: a + b + c),
    'ratio_sampler_only': (('physics', 'sampler_only'), lambda a, b: a / b),
    'ceiling': (('physics', 'floor'), lambda a, b: a / b),
}
#: The times a row's ratios are made of: each must be a positive number of microseconds.
TIMINGS = ('physics', 'wrapped', 'sampler_lean', 'sampler_wrapped', 'physics_lockstep',
           'floor', 'sampler_only')


def _check_derived(row: dict) -> None:
    """Refuse a row whose ratios do not follow from its timings (a ratio is shown as saved:
    a hand-edited time would show beside a ratio it does not give), or whose time is 0 or
    below a nanosecond (no step takes that: its ratio would be inf or meaningless).

    Raises:
        ValueError: Naming the entry.

    """
    import math  # pylint: disable=import-outside-toplevel
    for key in TIMINGS:
        if key in row and not (isinstance(row[key], (int, float)) and row[key] >= 1e-3):
            raise ValueError(f'{row.get("env", "?")}: {key} is {row[key]!r} µs, not the time '
                             'of a step')
    for key, (inputs, how) in DERIVED.items():
        if key in row and all(name in row for name in inputs):
            expected = how(*(row[name] for name in inputs))
            if not math.isclose(row[key], expected, rel_tol=1e-9, abs_tol=1e-9):
                raise ValueError(f'{row.get("env", "?")}: {key} is {row[key]!r} but its '
                                 f'timings give {expected!r}')


def read_results(paths) -> list:
    """The rows of saved ``physics*.json`` files, in order; an unreadable file, a row without
    one of :data:`SUMMARY_KEYS` (the timed pass's columns) or one whose ratios do not follow
    from its timings (:func:`_check_derived`) is a usage error naming it."""
    rows = []
    for path in paths:
        try:
            found = read_saved_results(path)['results']
            if not isinstance(found, list) or not found:
                raise ValueError('no rows of results')
            for row in found:
                missing = [key for key in SUMMARY_KEYS if key not in row]
                if missing:
                    raise KeyError(', '.join(missing))
                if row.get('baseline_solver', 'lstsq') not in BASELINE_SOLVERS:
                    raise ValueError(f"{row.get('env', '?')}: baseline_solver is "
                                     f"{row['baseline_solver']!r}, not one of {BASELINE_SOLVERS}")
                goals_table([row])  # each value formats as its column's (a number, not text)
                _check_derived(row)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise click.BadParameter(f'{path}: not a one-process physics.json with the timed '
                                     f'pass\'s columns ({type(error).__name__}: {error})',
                                     param_hint='--summarize') from None
        rows += found
    return rows


def _check_mujoco_envs(envs):
    """Refuse, as a usage error, an env with no MuJoCo physics to time (the point envs) or
    none of one task (ML10 and ML45 mix classes)."""
    from garage_promp.experiment.paper_config import ENVS  # pylint: disable=import-outside-toplevel
    for name in envs:
        family = name.partition(':')[0]
        if family == 'ML1' or (family in ENVS and not family.startswith('PointEnv')):
            continue
        raise click.BadParameter(f'{name} has no MuJoCo physics of one model to time: give a '
                                 'paper MuJoCo env or ML1:<task>', param_hint='--env')


@click.command(cls=StrictCommand)
@click.option('--env', 'envs', multiple=True, type=EnvName(ml1_task=True), default=DEFAULT_ENVS,
              show_default=True, help="Paper MuJoCo env, or ML1:<task> for a Meta-World ML1 task.")
@click.option('-M', '--meta-batch-size', type=count(), default=20, show_default=True)
@click.option('-R', '--episodes-per-task', type=count(), default=10, show_default=True)
@click.option('--workers', type=WORKERS, default=1, show_default=True,
              help='Physics processes and sampler worker processes.')
@click.option('--repeats', type=count(), default=1, show_default=True)
@click.option('--baseline-solver', type=click.Choice(BASELINE_SOLVERS), default='lstsq',
              show_default=True,
              help="How the learner's linear baseline solves its normal equations (train.py's "
                   "option); a run with another solver is shown and counted apart.")
@click.option('--physics-steps', type=count(100), default=20000, show_default=True)
@click.option('--out', type=OUTPUT_DIR, default=None,
              help='Write physics.json and physics.md here.')
@click.option('--summarize', 'summaries', multiple=True, metavar='PHYSICS_JSON',
              help='Measure nothing: print the goals table (as in the README) of saved '
                   'one-process results, in the order given; an env in several files shows '
                   'the first one\'s numbers and the verdict of all.')
def main(envs, meta_batch_size, episodes_per_task, workers, repeats, baseline_solver,
         physics_steps, out, summaries):
    """Print the physics table of ENVS."""
    if summaries:
        others = given_flags(click.get_current_context(), exclude=('summaries', ))
        if others:
            raise click.UsageError(f'--summarize prints saved files and measures nothing: '
                                   f'{", ".join(others)} would not be read')
        click.echo(goals_table(read_results(summaries)))
        return
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    if workers > meta_batch_size * episodes_per_task:  # a worker with no episode to step
        raise click.UsageError(f'--workers {workers} is more than the {meta_batch_size} x '
                               f'{episodes_per_task} episodes of a round (-M x -R)')
    _check_mujoco_envs(envs)
    check_env_batches(  # a MuJoCo env, or no physics to time
        envs, meta_batch_size, episodes_per_task, env_setup,
        lambda setup: _mujoco_env(setup.train_tasks.sample(1)[0]()))
    results = []
    for env_name in envs:
        click.echo(f'measuring {env_name}', err=True)
        results.append(measure(env_name, repeats, physics_steps, meta_batch_size,
                               episodes_per_task, workers, baseline_solver))
    table = format_table(results, meta_batch_size, episodes_per_task)
    click.echo(table)
    if out:
        suffix = '' if workers == 1 else f'_{workers}workers'
        write_results(out, f'physics{suffix}', results, table, meta_batch_size=meta_batch_size,
                      episodes_per_task=episodes_per_task)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
