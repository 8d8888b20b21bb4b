"""A garage ``Environment`` for gymnasium environments.

garage 2021.3's ``GymEnv`` only accepts old-``gym`` envs (and expects the old
4-tuple ``step``), so garage_promp brings this adapter. It also forwards the
meta-environment interface (``sample_tasks``, ``set_task``, ``get_task``,
``task``, ``log_diagnostics``, ``seed``) so garage's ``SetTaskSampler`` and
wrappers such as ``garage.envs.normalize`` reach it.
"""
import contextlib
import functools
import inspect
import math
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

from garage_promp.envs.base import MetaEnv, check_seed, real_array
from garage_promp.validation import MAX_EPISODE_LENGTH, check_bool

import akro
from garage import Environment, EnvSpec, EnvStep, StepType
import gymnasium
import numpy as np


def check_max_episode_length(max_episode_length: Any) -> int | None:
    """Return ``max_episode_length`` as an int in [1, MAX_EPISODE_LENGTH] (or None).

    The bound is the samplers' (an episode's arrays are allocated whole).

    Raises:
        ValueError: If it is neither None nor such an int.

    """
    if max_episode_length is None:
        return None
    if isinstance(max_episode_length, bool) or not isinstance(
            max_episode_length, (int, np.integer)) or not \
            1 <= max_episode_length <= MAX_EPISODE_LENGTH:
        raise ValueError(f'max_episode_length must be an int in [1, {MAX_EPISODE_LENGTH}] or '
                         f'None, got {max_episode_length!r}')
    return int(max_episode_length)


def _checked_layer(env) -> 'GymnasiumEnv | None':
    """The ``GymnasiumEnv`` whose every step's output the caller of ``env.step`` receives:
    ``env`` itself, or one under garage's ``normalize`` wrappers (they pass observations
    and rewards through or rescale them elementwise, so NaN / inf stay non-finite).
    None under any other wrapper: one that steps its env more than once per step (an
    action repeat) could drop a non-finite value the caller never sees."""
    from garage.envs import normalize  # pylint: disable=import-outside-toplevel
    for _ in range(16):
        if isinstance(env, GymnasiumEnv):
            return env
        if type(env) is not normalize:  # pylint: disable=unidiomatic-typecheck
            return None
        env = env._env  # pylint: disable=protected-access
    return None


@contextlib.contextmanager
def finiteness_checked_by_caller(envs):
    """Inside, the ``GymnasiumEnv`` of each of ``envs`` leaves its per-step NaN / inf
    checks to the caller.

    For a caller that checks the same values itself, at the same step and
    before they are used: the package's sampler checks every wave's actions
    before it steps the envs, and their rewards and observations (after the
    float32 cast, where an overflow shows) right after, for all envs at once
    and with an error naming the env, task, episode and step. The env's own
    per-step checks would repeat that work for every env, one small array at a
    time (a few microseconds a step, several per cent of a cheap env's step).
    Only envs whose outputs reach the caller are affected (:func:`_checked_layer`);
    resets are still checked.
    """
    layers = [layer for layer in map(_checked_layer, envs) if layer is not None]
    for layer in layers:
        layer._checked_outside += 1  # pylint: disable=protected-access
    try:
        yield
    finally:
        for layer in layers:
            layer._checked_outside -= 1  # pylint: disable=protected-access


def seeders(envs: Sequence[Any], seeds: Sequence[int]) -> List[Callable[[], None] | None]:
    """For each of ``envs`` (garage envs) the call that does ``env.seed(seed)`` (None
    where the env has no ``seed``), to be made where the caller would seed it.

    Where every env is a package meta-env (:class:`~garage_promp.envs.base.MetaEnv`,
    its own ``seed``) under a :class:`GymnasiumEnv` (its own ``seed``), alone or
    under garage's ``normalize`` (which has no ``seed`` of its own), the reset
    generators' states are computed for all seeds at once
    (:meth:`~garage_promp.envs.base.MetaEnv.reset_generator_states`) and each call
    sets its env's: the sampler seeds every episode's env, and one by one that is
    three ``SeedSequence`` objects and a ``PCG64`` an episode. The same streams.
    """
    from garage.envs import normalize  # pylint: disable=import-outside-toplevel
    inner = []
    for env in envs:
        layer = env._env if type(env) is normalize else env  # pylint: disable=protected-access,unidiomatic-typecheck
        meta = getattr(layer, '_env', None) if isinstance(layer, GymnasiumEnv) else None
        if getattr(type(layer), 'seed', None) is not GymnasiumEnv.seed \
                or not isinstance(meta, MetaEnv) \
                or not meta.seeded_by_state():
            inner = None
            break
        inner.append(meta)
    # One generator object re-seeded in place per env: never two envs sharing one.
    states = None
    if inner is not None and len({id(getattr(m, '_np_random', None)) for m in inner}) == len(inner):
        states = MetaEnv.reset_generator_states(seeds)
    if states is None:
        return [functools.partial(env.seed, seed) if callable(getattr(env, 'seed', None))
                else None for env, seed in zip(envs, seeds)]
    return [functools.partial(meta.seed_with_state, seed, state)
            for meta, seed, state in zip(inner, seeds, states)]


def _to_akro_box(space: gymnasium.Space, name: str) -> akro.Box:
    if not isinstance(space, gymnasium.spaces.Box):
        raise ValueError(f'{name} must be a gymnasium.spaces.Box, got '
                         f'{type(space).__name__} ({space!r})')
    return akro.Box(low=space.low.astype(np.float32),
                    high=space.high.astype(np.float32),
                    dtype=np.float32)


class GymnasiumEnv(Environment):
    """Adapts a gymnasium env (``reset -> (obs, info)``, 5-tuple ``step``).

    * ``terminated`` gives ``StepType.TERMINAL`` (even on the last allowed
      step, where garage's ``StepType.get_step_type`` would say TIMEOUT: the
      state is terminal, so no value should be bootstrapped from it);
      ``truncated`` or reaching ``max_episode_length`` gives
      ``StepType.TIMEOUT``; the rest is ``StepType.get_step_type``.
    * Spaces are float32 ``akro.Box`` built from the gymnasium Box bounds,
      and observations are float32 to match them (garage's ``EpisodeBatch``
      warns about observations outside the space, dtype included). The
      cast copies nothing when the env already returns float32, as
      garage_promp's envs do.
    * ``env_info`` is the gymnasium ``info`` dict, passed through.
    * With ``check_finite`` (default), a non-finite observation, reward or
      action raises ValueError naming the field, the task and the last action
      (MuJoCo would otherwise silently reset a simulation fed a NaN control).
      Inside :func:`finiteness_checked_by_caller` for this env the steps leave
      that to the caller (the package's sampler checks the same values for a
      whole wave).

    Args:
        env (gymnasium.Env): The env to adapt. Its observation and action
            spaces must be ``gymnasium.spaces.Box``.
        max_episode_length (int or None): Episode length limit; None takes
            ``env.spec.max_episode_steps`` when the env has a spec.
        check_finite (bool): Check observations, rewards and actions for
            NaN / inf each step.

    Raises:
        ValueError: If env is not a gymnasium env, a space is not a Box, or
            max_episode_length is not an int >= 1.

    """

    #: How many callers checking this env's steps themselves are active
    #: (:func:`finiteness_checked_by_caller`); a class default, so that objects
    #: pickled before it existed read 0.
    _checked_outside = 0

    def __init__(self,
                 env: gymnasium.Env,
                 max_episode_length: int | None = None,
                 check_finite: bool = True):
        max_episode_length = check_max_episode_length(max_episode_length)
        if not isinstance(env, gymnasium.Env):
            raise ValueError(
                f'env must be a gymnasium.Env, got {type(env).__name__}')
        if max_episode_length is None and env.spec is not None:
            max_episode_length = env.spec.max_episode_steps
        self._env = env
        self._spec = EnvSpec(
            observation_space=_to_akro_box(env.observation_space,
                                           'observation_space'),
            action_space=_to_akro_box(env.action_space, 'action_space'),
            max_episode_length=max_episode_length)
        self._max_episode_length = max_episode_length
        self._check_finite = check_bool(check_finite, 'check_finite')
        self._step_cnt = None
        self._visualize = False
        self._reset_seed = None

    @property
    def action_space(self) -> akro.Box:
        """akro.Box: The action space (float32)."""
        return self._spec.action_space

    @property
    def observation_space(self) -> akro.Box:
        """akro.Box: The observation space (float32)."""
        return self._spec.observation_space

    @property
    def spec(self) -> EnvSpec:
        """EnvSpec: Spaces and max_episode_length."""
        return self._spec

    @property
    def render_modes(self) -> list:
        """list[str]: The gymnasium env's ``metadata['render_modes']``."""
        return list(self._env.metadata.get('render_modes', []))

    @property
    def gym_env(self) -> gymnasium.Env:
        """gymnasium.Env: The adapted gymnasium env."""
        return self._env

    @property
    def unwrapped(self) -> Any:
        """The gymnasium env's ``unwrapped`` (as garage's ``GymEnv``).

        ``SetTaskUpdate`` reuses an env when ``env.unwrapped`` is an instance
        of the env type it was given; this makes
        ``SetTaskSampler(<gymnasium class>, wrapper=<builds GymnasiumEnv>)``
        reuse envs. Subclasses that are themselves the env type override it.
        """
        return self._env.unwrapped

    def reset(self) -> Tuple[np.ndarray, Dict]:
        """Reset the env.

        Returns:
            numpy.ndarray: First observation.
            dict: Episode-level info (the gymnasium reset info).

        Raises:
            ValueError: If the first observation is not finite.

        """
        obs, info = self._env.reset(seed=self._reset_seed)
        obs = np.asarray(obs, dtype=np.float32)
        self._reset_seed = None
        self._step_cnt = 0
        if self._check_finite and not np.isfinite(obs).all():
            self._raise_not_finite('observation', obs, None, 'at reset')
        return obs, info

    def step(self, action: np.ndarray) -> EnvStep:
        """Step the env.

        Args:
            action (numpy.ndarray): Action, shape :math:`(A^*, )`.

        Returns:
            EnvStep: The step; ``env_info`` is the gymnasium info dict.

        Raises:
            RuntimeError: If reset() was not called after the last episode.
            ValueError: If the action is not numbers of the action space's
                shape (checked before the env is touched: a refused action
                leaves the episode as it was), or if the action, observation
                or reward is not finite.

        """
        if self._step_cnt is None:
            raise RuntimeError('reset() must be called before step()!')
        check = self._check_finite and not self._checked_outside
        if not self._checked_outside:  # the package's sampler makes its actions itself
            action = self._check_action(action, check)
        raw = self._env.unwrapped
        checked = isinstance(raw, MetaEnv)  # the package's env: its own check not repeated
        if checked:
            raw._action_checked = True  # pylint: disable=protected-access
        try:
            obs, reward, terminated, truncated, info = self._env.step(action)
        finally:
            if checked:
                raw._action_checked = False  # pylint: disable=protected-access
        self._step_cnt += 1  # (a step the env refused or failed in is not counted)
        obs = np.asarray(obs, dtype=np.float32)
        reward = float(reward)
        if check:
            if not math.isfinite(reward):
                self._raise_not_finite('reward', reward, action)
            if not np.isfinite(obs).all():
                self._raise_not_finite('observation', obs, action)
        if terminated:
            step_type = StepType.TERMINAL
        elif truncated:
            step_type = StepType.TIMEOUT
        else:
            step_type = StepType.get_step_type(self._step_cnt,
                                               self._max_episode_length, False)
        if step_type in (StepType.TERMINAL, StepType.TIMEOUT):
            self._step_cnt = None
        if self._visualize:
            self.render('human')
        return EnvStep(env_spec=self._spec,
                       action=action,
                       reward=reward,
                       observation=obs,
                       env_info=info,
                       step_type=step_type)

    def _task_label(self) -> str:
        """The current task as error messages show it (the repr of ``get_task``; 'None'
        where the env is not a meta-environment)."""
        try:
            return repr(self.get_task())
        except AttributeError:
            return 'None'

    def _check_action(self, action: Any, finite: bool) -> np.ndarray:
        """``action`` as the array it reads as (its dtype kept: an array is itself; a list
        or a torch tensor its numbers), refused if it is not numbers of the action space's
        shape (a (1,) or a bare float would be broadcast into a (2,) env's state, a (2, 2)
        would reshape it) or, with ``finite``, is not finite; nothing of the env has
        changed yet."""
        shape = self._spec.action_space.shape
        values = real_array(action, shape)  # (complex numbers are not numbers here)
        if values is None:
            raise ValueError(f'action must be numbers of the action space\'s shape {shape}, got '
                             f'{action!r} (at step {self._step_cnt + 1} of '
                             f'{type(self._env.unwrapped).__name__})')
        if finite and not np.isfinite(values).all():
            self._raise_not_finite('action', action, action, f'at step {self._step_cnt + 1}')
        return values

    def _raise_not_finite(self,
                          field: str,
                          value: Any,
                          action: Any,
                          where: str | None = None) -> None:
        where = where or f'at step {self._step_cnt}'
        task = self._task_label()
        if field == 'observation':  # (cast to float32 before the check)
            field_ = ('observation is not finite (NaN or inf, or beyond float32\'s ±3.4e38, '
                      'its dtype)')
        else:
            field_ = f'{field} is not finite (NaN or inf)'
        raise ValueError(f'{field_} {where} of '
                         f'{type(self._env.unwrapped).__name__}, task={task}'
                         f', last action={action!r}: {field}={value!r}')

    def render(self, mode: str) -> Any:
        """Render the env in ``mode`` (one of :attr:`render_modes`).

        gymnasium fixes the render mode at construction; the mode is switched
        on the unwrapped env for this call (MuJoCo envs render any mode).

        Raises:
            ValueError: If mode is not in :attr:`render_modes`.

        """
        self._validate_render_mode(mode)
        env = self._env.unwrapped
        previous, env.render_mode = env.render_mode, mode
        try:
            return self._env.render()
        finally:
            env.render_mode = previous

    def visualize(self) -> None:
        """Render each step in 'human' mode from now on."""
        self._validate_render_mode('human')
        self._visualize = True

    def close(self) -> None:
        """Close the gymnasium env."""
        env = self.__dict__.get('_env')
        if env is not None:
            env.close()

    # The meta-environment interface, forwarded to the gymnasium env.

    def sample_tasks(self, n_tasks: int) -> list:
        """Sample ``n_tasks`` tasks (forwarded)."""
        return self._forward('sample_tasks')(n_tasks)

    def set_task(self, task: Any) -> None:
        """Set the task (forwarded). Does not reset the env."""
        self._forward('set_task')(task)

    def get_task(self) -> Any:
        """Return the current task (forwarded)."""
        return self._forward('get_task')()

    @property
    def task(self) -> Any:
        """object: The current task (forwarded)."""
        return self._forward('get_task')()

    def log_diagnostics(self, episodes: Any, prefix: str = '') -> None:
        """Log env diagnostics of ``episodes`` to dowel (forwarded).

        Diagnostics are optional (a meta-env needs only ``sample_tasks`` and
        ``set_task``): a gymnasium env without ``log_diagnostics`` logs none,
        rather than ending a run after its first epoch's sampling and update.
        """
        if self._has('log_diagnostics'):
            self._forward('log_diagnostics')(episodes, prefix)

    def unstable_simulation(self) -> str | None:
        """What the simulator found unstable and reset in this episode, or None.

        Read from MuJoCo's warning counters for a gymnasium env with an ``MjData`` as
        ``data`` (``garage_promp``'s MuJoCo envs, gymnasium's ``MujocoEnv``): where a step
        meets a NaN, an inf or a huge value in ``qpos``, ``qvel`` or ``qacc`` (a task whose
        physical parameters are extreme, e.g. a friction of 1e300), MuJoCo resets the
        simulation to the model's initial state in the middle of the step, prints a
        warning and steps on, so the episode's later steps come from a state the task
        never reached, often with finite numbers; the counters keep the event until the
        next reset, so the sampler asks after each wave of episodes. Forwarded to a
        gymnasium env that reports it itself (``unstable_simulation``, e.g. for another
        simulator); None for the rest.
        """
        env = self._env.unwrapped
        report = getattr(env, 'unstable_simulation', None)
        if callable(report):
            return report()
        mujoco = sys.modules.get('mujoco')  # (an env with an MjData has imported it)
        if mujoco is not None and isinstance(getattr(env, 'data', None), mujoco.MjData):
            from garage_promp.envs._mujoco import simulation_reset  # pylint: disable=import-outside-toplevel
            return simulation_reset(env.data)
        return None

    def seed(self, seed: int) -> None:
        """Seed the env.

        A :class:`~garage_promp.envs.base.MetaEnv` reseeds its task and
        reset-noise generators; another gymnasium env is seeded through
        ``reset(seed=seed)`` at the next :meth:`reset` (and its action space
        now).

        Raises:
            ValueError: If seed is not a non-negative int.

        """
        seed = check_seed(seed)
        if self._has('seed'):
            self._forward('seed')(seed)
        else:
            self._reset_seed = seed
            self._env.action_space.seed(seed)

    def _has(self, name: str) -> bool:
        return self._env.has_wrapper_attr(name)

    def _forward(self, name: str) -> Any:
        if not self._has(name):
            raise AttributeError(
                f'{type(self._env.unwrapped).__name__} has no {name!r}; it is '
                'not a meta-environment (see garage_promp.envs.base.MetaEnv)')
        return self._env.get_wrapper_attr(name)


class GymnasiumMetaEnv(GymnasiumEnv):
    """A garage env class that builds its own gymnasium meta-env.

    The base of garage_promp's environment classes (``HalfCheetahFwdBackEnv``
    etc.): a subclass names its gymnasium class and the paper's episode
    length, so that it can be constructed without arguments and passed as the
    env type to garage's ``SetTaskSampler``::

        SetTaskSampler(HalfCheetahFwdBackEnv,
                       wrapper=lambda env, _: normalize(
                           env, expected_action_scale=10.))

    It is its own :attr:`unwrapped`, so ``SetTaskUpdate`` recognises it
    (also through garage wrappers) and reuses it with ``set_task``.

    Args:
        max_episode_length (int or None): Episode length; None takes the
            class's :attr:`default_max_episode_length` (the paper's H).
        seed (int or None): Seed of the env's task and reset-noise generators
            (see :mod:`garage_promp.envs.base`).
        check_finite (bool): Check each step for NaN / inf.
        **env_kwargs: Further arguments of :attr:`gym_env_cls`.

    Raises:
        ValueError: If max_episode_length is not an int >= 1, seed is not a
            non-negative int, or an env argument is invalid.

    """

    gym_env_cls: type = None
    """The gymnasium :class:`~garage_promp.envs.base.MetaEnv` class."""
    default_max_episode_length: int = None
    """The paper's horizon H for this env (paper App. D.2)."""

    def __init__(self,
                 max_episode_length: int | None = None,
                 *,
                 seed: int | None = None,
                 check_finite: bool = True,
                 **env_kwargs: Any):
        max_episode_length = check_max_episode_length(max_episode_length)
        if seed is not None:
            check_seed(seed)
        takes = inspect.signature(self.gym_env_cls).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes.values()):
            own = sorted(set(takes) - {'seed'})
            for key in env_kwargs:
                if key not in takes or key == 'seed':
                    raise ValueError(f'{type(self).__name__} takes no argument {key!r} (its '
                                     f'arguments: max_episode_length, seed, check_finite'
                                     f'{"".join(", " + name for name in own)})')
        super().__init__(self.gym_env_cls(seed=seed, **env_kwargs),
                         max_episode_length or self.default_max_episode_length,
                         check_finite)

    @property
    def unwrapped(self) -> 'GymnasiumMetaEnv':
        """GymnasiumMetaEnv: This env (the env type SetTaskUpdate checks)."""
        return self
