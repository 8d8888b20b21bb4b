"""Meta-World 3 (ML1, ML10, ML45) as garage task samplers.

garage 2021.3's ``MetaWorldTaskSampler`` and ``MetaWorldSetTaskEnv`` cannot
drive Meta-World 3: they wrap every env in garage's ``GymEnv``, which only
accepts old-``gym`` envs. This module is their counterpart for Meta-World 3.1:

* :func:`make_benchmark` builds ``ML1(task)``, ``ML10`` or ``ML45`` with a
  seed, so the 50 goals per env class are reproducible.
* :class:`MetaWorldTaskSampler` is a garage ``TaskSampler`` over the train or
  test split. Like garage's, every env class appears equally often in a
  meta-batch (Meta-World's protocol), and the goals of each class are drawn
  without replacement from a seeded numpy ``Generator``.
* :class:`MetaWorldTaskUpdate` is the garage ``EnvUpdate`` it returns: it
  reuses an env of the same class (``set_task``) and otherwise builds one.
* :class:`MetaWorldEnv` is one Meta-World env as a garage ``Environment``
  (a :class:`~garage_promp.envs.gymnasium_env.GymnasiumEnv` with float32
  observations and TIMEOUT at ``max_episode_length``) that adds the env name
  (``'reach-v3'``) as the ``task_name`` env info of every step, so garage's
  ``log_multitask_performance`` logs ``MetaTest/<name>/SuccessRate``.

The reward function version ('v1' or 'v2', Meta-World+'s naming) changes the
reward scale and shape a lot, so it is an explicit argument everywhere and is
readable from every sampler and env (``reward_function_version``).

Meta-World is an optional dependency (``pip install garage_promp[metaworld]``)
and is imported on first use, so importing this module (or
:mod:`garage_promp.envs`) costs nothing on a MuJoCo-only install.
"""
from __future__ import annotations

import copy
import difflib
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence

from garage_promp.envs.base import (
    DEFAULT_SEED,
    check_seed,
    default_seed_sequence,
    stack_step_infos,
)
from garage_promp.envs.gymnasium_env import GymnasiumEnv, check_max_episode_length
from garage_promp.validation import check_bool

from dowel import tabular
from garage import EnvStep, EpisodeBatch, StepType
from garage.experiment import deterministic
from garage.experiment.task_sampler import TaskSampler
from garage.sampler.env_update import EnvUpdate
import numpy as np

if TYPE_CHECKING:  # annotations only; the package is imported on first use
    import metaworld

BENCHMARKS = ('ML1', 'ML10', 'ML45')
"""The meta-learning benchmarks :func:`make_benchmark` builds."""

REWARD_FUNCTION_VERSIONS = ('v1', 'v2')
"""Meta-World's reward functions; 'v2' is Meta-World 3's default."""

DEFAULT_MAX_EPISODE_LENGTH = 500
"""Meta-World 3's ``max_path_length``: the horizon of its own evaluation."""

EnvWrapper = Callable[[Any, Any], Any]
"""``wrapper(env, task)``: applied to every env a sampler builds."""


def _metaworld():
    """The ``metaworld`` package, imported on first use."""
    try:
        import metaworld  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise ImportError(
            'Meta-World environments need the metaworld package (version 3.1.1): '
            'pip install "garage_promp[metaworld]"') from error
    from garage_promp.envs import _metaworld_speedups  # pylint: disable=import-outside-toplevel

    import metaworld.env_dict  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    _metaworld_speedups.ensure_installed()  # exact, faster equivalents of per-step costs
    return metaworld


def _all_envs() -> dict:
    """Meta-World 3's environment classes by name ('reach-v3', ...)."""
    _metaworld()
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    return ALL_V3_ENVIRONMENTS


def n_train_classes(name: str) -> int:
    """The train classes of benchmark ``name`` ('ML1', 'ML10', 'ML45'), from Meta-World's own
    class lists, without building the benchmark: a meta-batch holds each equally often."""
    if name == 'ML1':
        return 1
    if name not in BENCHMARKS:
        raise ValueError(f'benchmark must be one of {BENCHMARKS}, got {name!r}')
    return len(getattr(_metaworld().env_dict, f'{name}_V3')['train'])


def check_env_name(name: Any) -> str:
    """Return ``name`` if it is a Meta-World 3 environment name.

    Raises:
        ValueError: If it is not; for a garage-era ``*-v1`` / ``*-v2`` name
            the message names the v3 environment to use, otherwise it lists
            the valid names.

    """
    all_envs = _all_envs()
    if isinstance(name, str) and name in all_envs:
        return name
    valid = sorted(all_envs)
    if isinstance(name, str) and name[-3:] in ('-v1', '-v2'):
        renamed = name[:-3] + '-v3'
        if renamed in all_envs:
            raise ValueError(
                f'{name!r} is a Meta-World {name[-2:]} name; Meta-World 3 '
                f'names its environments *-v3: use {renamed!r}')
    close = difflib.get_close_matches(str(name), valid, n=3)
    hint = f' (did you mean {" or ".join(map(repr, close))}?)' if close else ''
    raise ValueError(f'unknown Meta-World environment {name!r}{hint}; the '
                     f'Meta-World 3 environments are: {", ".join(valid)}')


def check_reward_function_version(version: Any) -> str:
    """Return ``version`` if it is 'v1' or 'v2', else raise ValueError."""
    if version not in REWARD_FUNCTION_VERSIONS:
        raise ValueError('reward_function_version must be one of '
                         f'{REWARD_FUNCTION_VERSIONS}, got {version!r}')
    return version


def make_benchmark(name: str,
                   task: str | None = None,
                   seed: int | None = None) -> metaworld.Benchmark:
    """Build a Meta-World 3 meta-learning benchmark with reproducible goals.

    Args:
        name (str): 'ML1', 'ML10' or 'ML45'.
        task (str or None): The environment of ML1, e.g. 'reach-v3'; must be
            None for ML10 and ML45, whose classes are fixed.
        seed (int or None): Seed of the goal positions (Meta-World draws
            ML1's test goals with ``seed + 1``). None takes garage's
            process-wide seed (``set_seed``), else
            :data:`~garage_promp.envs.base.DEFAULT_SEED`.

    Returns:
        metaworld.Benchmark: The benchmark (50 goals per class and split).

    Raises:
        ValueError: If name is not a benchmark of :data:`BENCHMARKS`, ML1 gets
            no valid task, ML10/ML45 get a task, or seed is not an int >= 0.

    """
    if name not in BENCHMARKS:
        raise ValueError(f'benchmark must be one of {BENCHMARKS}, got {name!r}')
    if name == 'ML1':
        if task is None:
            raise ValueError("ML1 needs a task (one Meta-World environment), "
                             "e.g. task='reach-v3'")
        try:
            check_env_name(task)
        except ValueError as error:  # the argument named, for the launchers' --task
            raise ValueError(f'task={task!r}: {error}') from None
    elif task is not None:
        raise ValueError(f'{name} has fixed train and test classes and takes '
                         f'no task, got task={task!r}')
    if seed is None:
        seed = deterministic.get_seed()
        seed = DEFAULT_SEED if seed is None else seed
    seed = check_seed(seed)
    key = (name, task, seed)
    if key not in _BENCHMARKS:
        # Meta-World draws each class's 50 goals by resetting an env 50 times (its hand's
        # reset is 100 simulation steps): 1 s for ML1, 7 for ML10, 40 for ML45 on the
        # 2-core machine. The goals are a function of (name, task, seed) alone (Meta-World
        # seeds numpy's global generator for them and puts its state back), so a process
        # that builds a benchmark again (train, then meta-test) takes the first one's.
        _BENCHMARKS[key] = (_metaworld().ML1(task, seed=seed) if name == 'ML1'
                            else getattr(_metaworld(), name)(seed=seed))
    return _copy_of(_BENCHMARKS[key])


#: The benchmarks this process has built (:func:`make_benchmark`).
_BENCHMARKS = {}


def _copy_of(benchmark):
    """A copy of a cached benchmark whose task lists and class dicts are its own (a caller
    that edits them does not edit the next caller's); the tasks are immutable."""
    other = copy.copy(benchmark)
    for attribute in ('_train_classes', '_test_classes', '_train_tasks', '_test_tasks'):
        value = getattr(benchmark, attribute, None)
        if value is not None:
            setattr(other, attribute, copy.copy(value))
    return other


class MetaWorldEnv(GymnasiumEnv):
    """One Meta-World 3 environment with a task (goal) set, as a garage env.

    The env class is the one named by ``task.env_name``; ``set_task`` accepts
    only tasks of that class (use :class:`MetaWorldTaskUpdate` to switch
    class). Every step's ``env_info`` is Meta-World's info dict (``success``,
    ``near_object``, ``grasp_success``, ``grasp_reward``,
    ``in_place_reward``, ``obj_to_target``, ``unscaled_reward``) plus
    ``task_name``, the env name. The env survives ``pickle`` and
    ``copy.deepcopy`` with its task (Meta-World rebuilds the MuJoCo model).

    Args:
        task (metaworld.Task): The task, e.g. an entry of a benchmark's
            ``train_tasks``.
        max_episode_length (int): Episode length, at most the env's
            ``max_path_length`` (500): Meta-World raises on a step after it.
        reward_function_version (str): 'v1' or 'v2'.
        seed (int or None): Seeds the env (``env.seed``; Meta-World ignores
            ``reset(seed=...)``). Set-task envs reset deterministically, so
            this only seeds the spaces' ``sample``.
        check_finite (bool): Check each step for NaN / inf.
        terminate_on_success (bool): End an episode at its first step with
            ``info['success']`` (a terminal step), as the evaluation
            protocol of the maintained Meta-World baselines does; off for
            training (the reference trains on full-length episodes).

    Raises:
        ValueError: If task is not a Meta-World 3 task, max_episode_length
            is out of range, reward_function_version is not 'v1'/'v2', or
            seed is not an int >= 0.

    """

    def unstable_simulation(self) -> None:
        """None: Meta-World's steps are kept as Meta-World 3 gives them.

        Where MuJoCo resets a simulation it finds unstable, Meta-World 3 steps on (it
        reads no warning counter); with mujoco-py, which raised on them, such events
        ended runs (Meta-World issue #25). They can come from ordinary actions on its
        mocap-driven arm, and a seeded run would meet the same one again on resume, so
        the sampler's check of the package's own MuJoCo envs
        (:meth:`garage_promp.envs.gymnasium_env.GymnasiumEnv.unstable_simulation`) is
        not applied here.
        """
        return None

    diagnostic_keys: Dict[str, str] = {
        'grasp_success': 'GraspSuccess',
        'near_object': 'NearObject',
        'obj_to_target': 'ObjToTarget',
    }
    """Info entries whose mean over all steps :meth:`log_diagnostics` logs."""

    #: Class default: objects pickled before the option existed run to the horizon.
    _terminate_on_success = False

    def __init__(self,
                 task: metaworld.Task,
                 *,
                 max_episode_length: int = DEFAULT_MAX_EPISODE_LENGTH,
                 reward_function_version: str = 'v2',
                 seed: int | None = None,
                 check_finite: bool = True,
                 terminate_on_success: bool = False):
        env_cls = _task_env_class(task)
        terminate_on_success = check_bool(terminate_on_success, 'terminate_on_success')
        max_episode_length = _check_episode_length(max_episode_length,
                                                   [env_cls])
        check_reward_function_version(reward_function_version)
        if seed is not None:
            seed = check_seed(seed)
        env = env_cls(reward_function_version=reward_function_version)
        env.set_task(task)
        if seed is not None:
            env.seed(seed)
        super().__init__(env, max_episode_length, check_finite)
        self._task = task
        self._terminate_on_success = terminate_on_success

    @property
    def terminate_on_success(self) -> bool:
        """bool: Whether an episode ends at its first success."""
        return self._terminate_on_success

    @property
    def task_name(self) -> str:
        """str: The Meta-World env name, e.g. 'reach-v3'."""
        return self._task.env_name

    @property
    def reward_function_version(self) -> str:
        """str: 'v1' or 'v2'."""
        return self.gym_env.reward_function_version

    def set_task(self, task: metaworld.Task) -> None:
        """Set a goal of this env's class; the next :meth:`reset` applies it.

        Raises:
            ValueError: If the task is of another env class.

        """
        if _task_env_class(task) is not type(self.gym_env):
            raise ValueError(
                f'this is a {self.task_name} env; a {task.env_name!r} task '
                'needs a new env (MetaWorldTaskUpdate builds one)')
        self.gym_env.set_task(task)
        self._task = task
        self._step_cnt = None  # a step before reset would use the old goal

    def get_task(self) -> metaworld.Task:
        """Return the current task."""
        return self._task

    def _task_label(self) -> str:
        """The task's class name (its ``data`` is pickled bytes, hundreds of characters)."""
        return repr(self._task.env_name) if self._task is not None else 'None'

    def __reduce__(self):
        """Pickle the recipe (task and settings), not MuJoCo's model and data.

        A pickled Meta-World env would hold its compiled MuJoCo model and
        data, about 40 MB for one Sawyer env, and every snapshot and every
        worker start would carry it. Unpickling instead builds a fresh env
        on the same task and carries over the little state that outlives an
        episode (the env's random generator and a pending reset seed).

        Building fresh also sidesteps Meta-World 3.1.1's own unpickling, which
        re-runs ``MujocoEnv.__init__`` and so replaces the 4-dim action space
        by the 2-dim one of the gripper actuators (Metaworld#477), drops the
        mocap welds (Metaworld#426) and freezes the pad positions the grasp
        rewards read. A copy steps exactly like the original after a reset;
        like any env it must be reset before it steps.
        """
        inner = self._env.unwrapped
        state = dict(reset_seed=self._reset_seed, visualize=self._visualize,
                     np_random=inner.np_random.bit_generator.state)
        return (_rebuild_env, (type(self), self._task,
                               dict(max_episode_length=self._max_episode_length,
                                    reward_function_version=inner.reward_function_version,
                                    check_finite=self._check_finite,
                                    terminate_on_success=self.terminate_on_success),
                               state))

    def step(self, action: np.ndarray) -> EnvStep:
        """Step the env; ``env_info`` gains ``task_name``."""
        env_step = super().step(action)
        env_step.env_info['task_name'] = self._task.env_name
        if (self.terminate_on_success and not env_step.last
                and env_step.env_info.get('success')):
            env_step = EnvStep(env_spec=env_step.env_spec, action=env_step.action,
                               reward=env_step.reward, observation=env_step.observation,
                               env_info=env_step.env_info, step_type=StepType.TERMINAL)
            self._step_cnt = None  # like any ended episode: reset before the next step
        return env_step

    @classmethod
    def batch_step(cls, envs: Sequence[MetaWorldEnv], actions: np.ndarray):
        """:meth:`step` of every env, for the sampler's lean path (``garage_promp.sampler.lean``).

        Each env's Meta-World ``step`` as :meth:`step` calls it, without the two
        ``EnvStep`` objects and the per-step dict bookkeeping around it: rows of
        observations (float32, as ``GymnasiumEnv`` casts them), rewards (``float``),
        terminated (Meta-World's flag, or a success ending the episode with
        ``terminate_on_success`` where the step is not already its last), truncated, and
        env infos stacked key by key, ``task_name`` included. The stepper keeps the
        step counts and the finiteness checks. An error from an env's ``step`` carries
        ``lean_index``, its position in ``envs``.
        """
        from garage_promp.envs import _metaworld_batch  # pylint: disable=import-outside-toplevel
        batch = _metaworld_batch.step_batch([env._env for env in envs], actions)
        if batch is not None:
            return cls._finish_batch(envs, *batch)
        observations, infos = [], []
        rewards = np.empty(len(envs))
        terminated = np.zeros(len(envs), dtype=bool)
        truncated = np.zeros(len(envs), dtype=bool)
        for n, (env, action) in enumerate(zip(envs, actions)):
            try:
                obs, reward, ended, cut, info = env._env.step(action)
            except Exception as error:
                error.lean_index = n
                raise
            info['task_name'] = env._task.env_name
            if env._ends_at_success(ended, cut, info.get('success')):
                ended = True
            observations.append(obs)
            rewards[n] = float(reward)
            terminated[n], truncated[n] = ended, cut
            infos.append(info)
        return (np.asarray(observations, dtype=np.float32), rewards, terminated, truncated,
                stack_step_infos(infos))

    def _ends_at_success(self, ended, cut, success) -> bool:
        """Whether a lean step with Meta-World's ``ended`` / ``cut`` flags and ``success``
        ends the episode at the success (``terminate_on_success``): where the step is not
        already its last (the stepper counts the step after the call)."""
        length = self._max_episode_length
        last = ended or cut or (length is not None and self._step_cnt + 1 >= length)
        return bool(self.terminate_on_success and not last and success)

    @classmethod
    def _finish_batch(cls, envs, observations, rewards, truncated, infos):
        """:meth:`batch_step`'s results from :func:`_metaworld_batch.step_batch`'s."""
        names = [env._task.env_name for env in envs]
        if isinstance(infos, dict):
            infos['task_name'] = np.asarray(names)
            success = infos['success']
        else:
            for info, name in zip(infos, names):
                info['task_name'] = name
            success = [info.get('success') for info in infos]
            infos = stack_step_infos(infos)
        terminated = np.array([env._ends_at_success(False, cut, ok)  # Meta-World never ends
                               for env, cut, ok in zip(envs, truncated, success)], dtype=bool)
        return (np.asarray(observations, dtype=np.float32), rewards, terminated,
                np.asarray(truncated, dtype=bool), infos)

    def log_diagnostics(self, episodes: EpisodeBatch, prefix: str = '') -> None:
        """Record the mean of :attr:`diagnostic_keys` over all steps.

        The meaning of these entries differs between env classes (e.g.
        ``near_object`` is a distance in reach-v3 and a flag elsewhere), so
        on ML10 / ML45 they are only a coarse signal; the success rate is
        logged by the algorithm.
        """
        for key, name in self.diagnostic_keys.items():
            values = episodes.env_infos.get(key)
            tabular.record(prefix + name,
                           np.nan if values is None else float(np.mean(values)))


#: MetaWorldEnv.batch_step is written for MetaWorldEnv.step (a subclass with a step of its
#: own keeps the wrapped path).
MetaWorldEnv.batch_step.__func__.reproduces = MetaWorldEnv.step


def _rebuild_env(cls, task, kwargs, state) -> MetaWorldEnv:
    """Unpickle a :class:`MetaWorldEnv` (see ``MetaWorldEnv.__reduce__``)."""
    env = cls(task, **kwargs)
    env._reset_seed = state['reset_seed']  # pylint: disable=protected-access
    env._visualize = state['visualize']  # pylint: disable=protected-access
    env.unwrapped.np_random.bit_generator.state = state['np_random']
    return env


def _check_wrapper(wrapper: Any) -> Any:
    """``wrapper`` if it is None or a callable ``wrapper(env, task)``."""
    if wrapper is not None and not callable(wrapper):
        raise ValueError(f'wrapper must be None or a callable wrapper(env, task), got {wrapper!r}')
    return wrapper


class MetaWorldTaskUpdate(EnvUpdate):
    """A garage ``EnvUpdate`` that puts an env on one Meta-World task.

    Called with an env whose Meta-World env (``env.unwrapped``) is of the
    task's class, with the same reward version and episode length, it calls
    ``set_task`` on it and returns it (as garage's ``SetTaskUpdate``);
    called with None or any other env (which it closes), it builds a
    :class:`MetaWorldEnv` seeded with ``seed`` and applies ``wrapper``.

    Args:
        task (metaworld.Task): The task.
        max_episode_length (int): Episode length of built envs.
        reward_function_version (str): 'v1' or 'v2'.
        seed (int or None): Seed of a built env.
        wrapper (callable or None): ``wrapper(env, task)`` wraps a built env;
            it must pickle (a module-level function, not a lambda) for
            process-based samplers.
        terminate_on_success (bool): See :class:`MetaWorldEnv`.

    """

    #: Class default: objects pickled before the option existed run to the horizon.
    _terminate_on_success = False

    def __init__(self,
                 task: metaworld.Task,
                 *,
                 max_episode_length: int = DEFAULT_MAX_EPISODE_LENGTH,
                 reward_function_version: str = 'v2',
                 seed: int | None = None,
                 wrapper: EnvWrapper | None = None,
                 terminate_on_success: bool = False):
        self._env_cls = _task_env_class(task)
        self._task = task
        self._max_episode_length = _check_episode_length(
            max_episode_length, [self._env_cls])
        self._reward_function_version = check_reward_function_version(
            reward_function_version)
        self._seed = None if seed is None else check_seed(seed)
        self._wrapper = _check_wrapper(wrapper)
        self._terminate_on_success = check_bool(terminate_on_success, 'terminate_on_success')

    @property
    def task(self) -> metaworld.Task:
        """metaworld.Task: The task this update sets."""
        return self._task

    def _reusable(self, env: Any) -> bool:
        inner = getattr(env, 'unwrapped', None)
        spec = getattr(env, 'spec', None)
        return (type(inner) is self._env_cls
                and getattr(inner, 'reward_function_version', None) ==
                self._reward_function_version
                and getattr(spec, 'max_episode_length', None) ==
                self._max_episode_length
                and getattr(inner, 'terminate_on_success', False) ==
                self._terminate_on_success)

    def __call__(self, old_env: Any = None) -> Any:
        """Return ``old_env`` set to the task, or a new env.

        Args:
            old_env (garage.Environment or None): The previous env; do not
                use it afterwards.

        Returns:
            garage.Environment: An env on the task (reset it before stepping).

        """
        if old_env is not None:
            if self._reusable(old_env):
                old_env.set_task(self._task)
                return old_env
            old_env.close()
        env = MetaWorldEnv(self._task,
                           max_episode_length=self._max_episode_length,
                           reward_function_version=self._reward_function_version,
                           seed=self._seed,
                           terminate_on_success=self._terminate_on_success)
        if self._wrapper is not None:
            env = self._wrapper(env, self._task)
        return env


class MetaWorldTaskSampler(TaskSampler):
    """Samples the train or test tasks of a Meta-World benchmark.

    ``sample(n)`` returns ``n / n_classes`` goals of every class, grouped by
    class in the benchmark's order (which keeps env reuse high in samplers
    that keep their envs). Each class's 50 goals are drawn without
    replacement in a random order and reshuffled when used up, from a numpy
    ``Generator`` seeded with ``seed``, so a seed gives one task sequence.

    Args:
        benchmark (metaworld.Benchmark): e.g. from :func:`make_benchmark`.
        kind (str): 'train' or 'test': which split to sample.
        max_episode_length (int): Episode length, at most 500 (Meta-World's
            ``max_path_length``).
        reward_function_version (str): 'v1' or 'v2'.
        seed (int or None): Seed of the goal order and of the envs' seeds;
            None derives one from garage's ``set_seed`` (see
            :mod:`garage_promp.envs.base`).
        wrapper (callable or None): ``wrapper(env, task)`` applied to each
            built env (see :class:`MetaWorldTaskUpdate`).
        terminate_on_success (bool): Episodes end at their first success
            (see :class:`MetaWorldEnv`); for evaluation protocols.

    Raises:
        ValueError: If kind is not 'train'/'test', the split is empty,
            max_episode_length exceeds an env's ``max_path_length``,
            reward_function_version is not 'v1'/'v2', or seed is invalid.

    """

    #: Class default: objects pickled before the option existed run to the horizon.
    _terminate_on_success = False

    def __init__(self,
                 benchmark: metaworld.Benchmark,
                 kind: str = 'train',
                 *,
                 max_episode_length: int = DEFAULT_MAX_EPISODE_LENGTH,
                 reward_function_version: str = 'v2',
                 seed: int | None = None,
                 wrapper: EnvWrapper | None = None,
                 terminate_on_success: bool = False):
        if kind not in ('train', 'test'):
            raise ValueError(f"kind must be 'train' or 'test', got {kind!r}")
        classes = getattr(benchmark, f'{kind}_classes')
        tasks = getattr(benchmark, f'{kind}_tasks')
        self._benchmark_name = type(benchmark).__name__
        self._kind = kind
        self._classes = dict(classes)
        self._tasks = {name: [t for t in tasks if t.env_name == name]
                       for name in self._classes}
        empty = [name for name, goals in self._tasks.items() if not goals]
        if not self._classes or empty:
            raise ValueError(f'the {kind} split of {self._benchmark_name} has '
                             f'classes without tasks: {empty or "no classes"}')
        self._max_episode_length = _check_episode_length(
            max_episode_length, self._classes.values())
        self._reward_function_version = check_reward_function_version(
            reward_function_version)
        self._rng = np.random.default_rng(
            default_seed_sequence() if seed is None else check_seed(seed))
        self._wrapper = _check_wrapper(wrapper)
        self._terminate_on_success = check_bool(terminate_on_success, 'terminate_on_success')
        self._queues = {name: [] for name in self._classes}

    @property
    def n_tasks(self) -> int:
        """int: The number of tasks (goals) in the split."""
        return sum(len(goals) for goals in self._tasks.values())

    @property
    def class_names(self) -> List[str]:
        """list[str]: The env classes of the split, in benchmark order."""
        return list(self._classes)

    @property
    def kind(self) -> str:
        """str: 'train' or 'test'."""
        return self._kind

    @property
    def benchmark_name(self) -> str:
        """str: 'ML1', 'ML10', 'ML45', ..."""
        return self._benchmark_name

    @property
    def max_episode_length(self) -> int:
        """int: Episode length of the envs."""
        return self._max_episode_length

    @property
    def reward_function_version(self) -> str:
        """str: 'v1' or 'v2'."""
        return self._reward_function_version

    def check_n_tasks(self, n_tasks: Any, name: str = 'n_tasks') -> int:
        """Return ``n_tasks`` if it is a positive multiple of the class count.

        Args:
            n_tasks (int): Number of tasks per meta-batch.
            name (str): The parameter name for the error message (e.g.
                'meta_batch_size').

        Raises:
            ValueError: If it is not.

        """
        n_classes = len(self._classes)
        if isinstance(n_tasks, bool) or not isinstance(
                n_tasks, (int, np.integer)) or n_tasks < 1 or \
                n_tasks % n_classes:
            raise ValueError(
                f'{name} must be a positive multiple of {n_classes}, the '
                f'number of {self._kind} classes of {self._benchmark_name} '
                f'(every class appears equally often in a meta-batch), got '
                f'{n_tasks!r}')
        return int(n_tasks)

    @property
    def goals_per_class(self) -> int:
        """The goals of the class that has the fewest (Meta-World's 50 each)."""
        return min(len(self._tasks[c]) for c in self._classes)

    def check_distinct_goals(self, n_tasks: int, name: str = 'n_tasks') -> int:
        """Return ``n_tasks`` if a draw of that many gives each class distinct goals: no
        more per class than the benchmark has (Meta-World's 50). A meta-test of more
        would draw a goal twice and count it twice in its averages, as if distinct.

        Raises:
            ValueError: If it asks for more, naming ``name``.

        """
        per_class = self.check_n_tasks(n_tasks, name) // len(self._classes)
        fewest = self.goals_per_class
        if per_class > fewest:
            raise ValueError(
                f'{name}={n_tasks} asks {per_class} goals of each of the {len(self._classes)} '
                f'{self._kind} classes of {self._benchmark_name}, which has {fewest} goals a '
                f'class: a goal would be drawn and counted twice; at most '
                f'{fewest * len(self._classes)}')
        return int(n_tasks)

    def make_env(self) -> MetaWorldEnv:
        """A new env on the first goal of the first class (e.g. a template)."""
        return MetaWorldTaskUpdate(
            self._tasks[self.class_names[0]][0],
            max_episode_length=self._max_episode_length,
            reward_function_version=self._reward_function_version,
            seed=int(self._rng.integers(2**31)),
            wrapper=self._wrapper)()

    def sample(self, n_tasks: int,
               with_replacement: bool = False) -> List[MetaWorldTaskUpdate]:
        """Sample ``n_tasks`` tasks, the same number of every class.

        Args:
            n_tasks (int): A multiple of the number of classes.
            with_replacement (bool): Draw each class's goals with replacement
                (else without, until all 50 have been used).

        Returns:
            list[MetaWorldTaskUpdate]: Class-major updates (all goals of the
                first class first).

        Raises:
            ValueError: If n_tasks is not a positive multiple of the number
                of classes.

        """
        per_class = self.check_n_tasks(n_tasks) // len(self._classes)
        with_replacement = check_bool(with_replacement, 'with_replacement')
        updates = []
        for name, goals in self._tasks.items():
            for goal in self._next_goals(name, per_class, with_replacement):
                updates.append(
                    MetaWorldTaskUpdate(
                        goals[goal],
                        max_episode_length=self._max_episode_length,
                        reward_function_version=self._reward_function_version,
                        seed=int(self._rng.integers(2**31)),
                        wrapper=self._wrapper,
                        terminate_on_success=self._terminate_on_success))
        return updates

    def _next_goals(self, name: str, count: int,
                    with_replacement: bool) -> Sequence[int]:
        n_goals = len(self._tasks[name])
        if with_replacement:
            return self._rng.integers(n_goals, size=count).tolist()
        queue = self._queues[name]
        while len(queue) < count:
            cycle = self._rng.permutation(n_goals).tolist()
            if self._kind == 'test' and count <= n_goals:
                # A meta-test's draw must not hold a goal twice (its averages would count
                # it twice, as if distinct): the goals left of the last cycle come first,
                # and the new cycle's copies of them go to its end. Where the draws divide
                # the goals (ML10's 2 and ML1's 10 of 50 a class) nothing is left over and
                # this is the cycle as drawn.
                left = set(queue)
                cycle = [g for g in cycle if g not in left] + [g for g in cycle if g in left]
            queue.extend(cycle)
        picked, self._queues[name] = queue[:count], queue[count:]
        return picked


def _task_env_class(task: Any) -> type:
    if not isinstance(task, _metaworld().Task):
        raise ValueError('task must be a metaworld.Task (an entry of a '
                         f"benchmark's train_tasks/test_tasks), got {task!r}")
    return _all_envs()[check_env_name(task.env_name)]


def _check_episode_length(max_episode_length: Any, env_classes) -> int:
    max_episode_length = check_max_episode_length(max_episode_length)
    if max_episode_length is None:
        raise ValueError('max_episode_length must be an int >= 1, got None')
    limit = min(cls.max_path_length for cls in env_classes)
    if max_episode_length > limit:
        raise ValueError(
            f'max_episode_length must be <= {limit} (Meta-World\'s '
            'max_path_length: it raises on any step after it), got '
            f'{max_episode_length}')
    return max_episode_length
