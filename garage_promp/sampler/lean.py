"""The lean stepping path: a worker's envs stepped together, without per-step wrapper layers.

Where the package owns the env, a sampler worker does not need garage's and
gymnasium's per-step machinery: for each env and step, today's path goes through
garage's ``NormalizedEnv.step`` (action scaling, an ``EnvStep`` with its space
checks), :class:`~garage_promp.envs.gymnasium_env.GymnasiumEnv.step` (step
count, finiteness checks, a second ``EnvStep``) and then the MuJoCo env's own
``step``. On HalfCheetahFwdBack those layers cost more than the physics.

:class:`LeanStepper` does what those layers do, once per step for all of a
wave's envs: garage's ``normalize`` action mapping
``lb + (a + s) (ub - lb) / (2 s)``, clipped, on the ``(n, A)`` action batch;
the finiteness checks of ``GymnasiumEnv`` with its messages; the step types
of ``GymnasiumEnv.step``; and it hands the scaled actions to the env class's
``batch_step`` (:meth:`garage_promp.envs._mujoco.MujocoMetaEnv.batch_step`),
which advances every simulation and computes observations, rewards,
terminations and env infos for all of them at once from their ``MjData``.

The episodes are the same as on the wrapped path, bit for bit (same float
operations in the same order, elementwise or row by row), which
``tests/test_lean_stepping.py`` checks for every paper env, with early
termination and reset noise, and the determinism tests run on this path.

Which envs take it: garage's ``normalize`` (action scaling only: no
observation or reward normalisation, reward scale 1) around a
:class:`~garage_promp.envs.gymnasium_env.GymnasiumEnv` (not visualising) of
a gymnasium env with ``batch_step``, or such a ``GymnasiumEnv`` alone, all of
one class. A ``GymnasiumEnv`` subclass with a ``step`` of its own takes it
too if the subclass has a ``batch_step`` classmethod marked as reproducing
that ``step`` (``batch_step.reproduces = step``): then the stepper hands the
garage envs themselves to it, whatever gymnasium env each wraps
(:class:`~garage_promp.envs.metaworld.MetaWorldEnv`: a Meta-World wave mixes
ML10's classes). Any other env (a user's garage env or subclass, other
wrappers) keeps the wrapped path.
"""
from typing import Any, Dict, Sequence, Tuple

from garage_promp.envs._mujoco import identical_models, stepping_with_models
from garage_promp.envs.gymnasium_env import GymnasiumEnv

import akro
from garage import StepType
from garage.envs.normalized_env import NormalizedEnv
import numpy as np

_FIRST, _MID = int(StepType.FIRST), int(StepType.MID)
_TERMINAL, _TIMEOUT = int(StepType.TERMINAL), int(StepType.TIMEOUT)


def _reproduces_step(cls) -> bool:
    """Whether garage env class ``cls`` has a ``batch_step`` written for its own ``step``."""
    batch = getattr(cls, 'batch_step', None)
    return callable(batch) and getattr(batch, 'reproduces', None) is cls.step


def _layers(env) -> Tuple[Any, GymnasiumEnv, Any] | None:
    """(normalize wrapper or None, GymnasiumEnv, gymnasium env) if ``env`` can go lean; the
    gymnasium env is None where the ``GymnasiumEnv`` class steps a batch itself."""
    outer = None
    if type(env) is NormalizedEnv:  # pylint: disable=unidiomatic-typecheck
        if (env._normalize_obs or env._normalize_reward  # pylint: disable=protected-access
                or env._scale_reward != 1):  # pylint: disable=protected-access
            return None
        outer, env = env, env._env  # pylint: disable=protected-access
    if not isinstance(env, GymnasiumEnv) or env._visualize:  # pylint: disable=protected-access
        return None
    if _reproduces_step(type(env)):
        return outer, env, None
    if type(env).step is not GymnasiumEnv.step:  # a subclass's own step must run
        return None
    inner = env._env  # pylint: disable=protected-access
    if not callable(getattr(type(inner), 'batch_step', None)):
        return None
    return outer, env, inner


class LeanStepper:
    """Steps a wave's envs in one call; see the module docstring.

    Build it with :meth:`of`, which returns None for envs that keep the
    wrapped path.
    """

    def __init__(self, layers: Sequence[Tuple[Any, GymnasiumEnv, Any]]):
        self._outer = [o for o, _, _ in layers]
        self._wrappers = [w for _, w, _ in layers]
        # What batch_step steps: the gymnasium envs, or the garage envs that step a batch.
        self._targets = [w if i is None else i for _, w, i in layers]
        self._batch_step = type(self._targets[0]).batch_step
        # A garage env's batch_step may read its own step count (Meta-World's success
        # ending does); a gymnasium env's cannot see its wrapper's.
        self._counted = layers[0][2] is None
        first = self._outer[0]
        self._scale = None
        if first is not None and isinstance(first.action_space, akro.Box):
            lb, ub = first.action_space.low, first.action_space.high
            # As garage's NormalizedEnv.step (its test: both bounds != -inf).
            if np.all(lb != -np.inf) and np.all(ub != -np.inf):
                self._scale = (lb, ub, first._expected_action_scale)  # pylint: disable=protected-access
        self._models = None
        self._all = np.arange(len(self._targets))
        self._rows, self._envs = self._all, self._targets  # the last step's, and its envs
        self._check = self._wrappers[0]._check_finite  # pylint: disable=protected-access
        self._max_length = self._wrappers[0]._max_episode_length  # pylint: disable=protected-access

    @classmethod
    def of(cls, envs: Sequence[Any]) -> 'LeanStepper | None':
        """A stepper for ``envs`` (garage envs), or None if any must keep the wrapped path."""
        layers = [_layers(env) for env in envs]
        if not layers or any(layer is None for layer in layers):
            return None
        kinds = {(type(o), type(w), type(i)) for o, w, i in layers}
        if len(kinds) != 1:
            return None
        if layers[0][0] is not None:
            scales = {(o._expected_action_scale, o.action_space.low.tobytes(),  # pylint: disable=protected-access
                       o.action_space.high.tobytes()) for o, _, _ in layers}
            if len(scales) != 1:
                return None
        if len({(w._check_finite, w._max_episode_length)  # pylint: disable=protected-access
                for _, w, _ in layers}) != 1:
            return None
        return cls(layers)

    def start(self, rows: Sequence[int]):
        """The episodes on the envs of ``rows`` have just been reset.

        Until the next ``start``, the MuJoCo envs with identical models are
        stepped with one of them (:func:`~garage_promp.envs._mujoco.identical_models`;
        nothing changes a model within a wave, and the results are the same), and
        what the envs' classes keep once a wave
        (:func:`~garage_promp.envs._mujoco.wave_constant`) is kept for these envs, a
        step's part of them taken out of it.
        """
        for row in rows:
            self._wrappers[row]._step_cnt = 0  # pylint: disable=protected-access
        self._rows, self._envs = self._all, self._targets
        models = identical_models(self._targets)
        models.wave = self._targets  # a step's envs are some of these, in this order
        self._models = models or None

    def step(self, rows: np.ndarray, actions: np.ndarray, counts: np.ndarray
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Dict[str, np.ndarray]]:
        """Step the envs of ``rows`` with the policy's ``actions``.

        Args:
            rows (numpy.ndarray): Indices of the envs to step.
            actions (numpy.ndarray): ``(len(rows), A)`` actions, as the
                policy emitted them (before garage's ``normalize`` scaling).
            counts (numpy.ndarray): Each row's step count after this step.

        Returns:
            tuple: Observations ``(n, O)`` float32, rewards ``(n,)``
            float64, step types ``(n,)`` int, and env infos (key -> ``(n, ...)``).

        """
        scaled = actions
        if self._scale is not None:
            lb, ub, s = self._scale
            scaled = np.clip(lb + (actions + s) * (0.5 * (ub - lb) / s), lb, ub)
        if self._check and not np.isfinite(scaled).all():
            self._count(rows, counts)
            self._raise(rows, 'action', scaled, scaled)
        envs = self._envs_of(rows)
        try:
            with stepping_with_models(self._models):
                obs, rewards, terminated, truncated, infos = self._batch_step(envs, scaled)
        except Exception as error:
            self._count(rows, counts)
            index = getattr(error, 'lean_index', None)  # the env of the batch it is about
            if index is not None:
                error.lean_row = int(rows[index])
            raise
        obs = np.asarray(obs, dtype=np.float32)
        rewards = np.asarray(rewards, dtype=np.float64)
        if self._check and not (np.isfinite(rewards).all() and np.isfinite(obs).all()):
            self._count(rows, counts)
            for n in range(len(rows)):  # env by env, reward before observation, as wrapped
                for field, values in (('reward', rewards), ('observation', obs)):
                    if not np.isfinite(values[n]).all():
                        self._raise(rows[n:n + 1], field, values[n:n + 1], scaled[n:n + 1])
        types = np.where(counts == 1, _FIRST, _MID)
        if self._max_length is not None:
            types[counts >= self._max_length] = _TIMEOUT
        types[np.asarray(truncated, dtype=bool)] = _TIMEOUT
        types[np.asarray(terminated, dtype=bool)] = _TERMINAL
        ended = (types == _TERMINAL) | (types == _TIMEOUT)
        wrappers = self._wrappers
        if self._counted:
            for row, count, end in zip(rows.tolist(), counts.tolist(), ended.tolist()):
                wrappers[row]._step_cnt = None if end else count  # pylint: disable=protected-access
        else:  # the counts are written only where a step stops on an error (:meth:`_count`)
            for row in rows[ended].tolist():  # an ended episode refuses a step before a reset
                wrappers[row]._step_cnt = None  # pylint: disable=protected-access
        return obs, rewards, types, infos

    def _envs_of(self, rows: np.ndarray) -> Sequence[Any]:
        """What ``batch_step`` steps for ``rows``: one list object while the rows stay
        (the whole wave's own list for all rows), so the wave's constants of these envs
        (:func:`~garage_promp.envs._mujoco.wave_constant`) are found without reading
        every env's identity at every step."""
        if not np.array_equal(rows, self._rows):
            targets = self._targets
            self._envs = targets if np.array_equal(rows, self._all) else [
                targets[r] for r in rows.tolist()]
            self._rows = rows.copy()
        return self._envs

    def _count(self, rows: np.ndarray, counts: np.ndarray):
        """Each wrapper of ``rows`` at this step's count, as ``GymnasiumEnv.step``
        counts a step before it runs, where the step stops on an error."""
        for row, count in zip(rows.tolist(), counts.tolist()):
            self._wrappers[row]._step_cnt = count  # pylint: disable=protected-access

    def _raise(self, rows, field, values, scaled):
        """The wrapped path's error for the first row whose ``field`` is not finite (the
        wrappers counted by the caller, :meth:`_count`).

        The error carries ``lean_row``, the row it is about (for the worker's context).
        """
        for n, row in enumerate(rows):
            if not np.isfinite(values[n]).all():
                wrapper = self._wrappers[row]
                value = float(values[n]) if field == 'reward' else values[n]
                try:
                    wrapper._raise_not_finite(field, value, scaled[n])  # pylint: disable=protected-access
                except ValueError as error:
                    error.lean_row = int(row)
                    raise
