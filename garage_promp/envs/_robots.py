"""Robot bases shared by several meta-envs: Ant, Humanoid, planar walkers.

Each base fixes the robot's XML, frame skip, observation, reset noise and
reward terms of the original ProMP code's meta_policy_search/envs/mujoco_envs/;
the env modules only add the task.
"""
from typing import Any, Dict, Tuple

from garage_promp.envs._mujoco import (
    DirectionTasks,
    MujocoMetaEnv,
    take_rows,
    take_whole,
    wave_constant,
)

import numpy as np

StepResult = Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]


class AntBase(MujocoMetaEnv):
    """gym-v2 Ant: ``ant.xml``, frame skip 5, dt 0.05.

    Observation: qpos[2:] (13) | qvel (14) | clip(cfrc_ext, -1, 1) (84) = 111
    (``full_qpos_obs``: full qpos, 113). Reset noise: qpos U(+-0.1), qvel
    0.1 N(0, 1). ``cfrc_ext`` is filled by gymnasium's ``mj_rnePostConstraint``
    call after each step, as MuJoCo 1.50 did inside ``mj_step``.
    """

    xml_file = 'ant.xml'
    frame_skip = 5
    obs_dim = 111
    qpos_noise = 0.1
    qvel_noise = 0.1
    qvel_noise_normal = True
    full_qpos_obs = False

    def __init__(self, seed: Any = None):
        super().__init__(seed)
        self._torso = self.model.body('torso').id

    def _get_obs(self) -> np.ndarray:
        qpos = self.data.qpos if self.full_qpos_obs else self.data.qpos[2:]
        return np.concatenate(
            [qpos, self.data.qvel,
             np.clip(self.data.cfrc_ext, -1, 1).ravel()],
            dtype=np.float32)

    def _torso_xy(self) -> np.ndarray:
        # get_body_com('torso')[:2]; copied, data.xpos changes in place.
        return self.data.xpos[self._torso, :2].copy()

    def _contact_cost(self) -> float:
        return 0.5e-3 * float(
            np.square(np.clip(self.data.cfrc_ext, -1, 1)).sum())

    @classmethod
    def _torso_rows(cls, envs) -> np.ndarray:
        """:meth:`_torso_xy` of every env, one row each (``_rows``: one call into the
        compiled library where every env's torso is the same body)."""
        torsos = wave_constant(envs, 'torso', lambda es: {env._torso for env in es}, take_whole)  # pylint: disable=protected-access
        if len(torsos) == 1:
            return cls._rows(envs, 'xpos', 3 * next(iter(torsos)), 2)
        return np.array([env.data.xpos[env._torso, :2] for env in envs])  # pylint: disable=protected-access


class AntDirectionBase(DirectionTasks, AntBase):
    """Ant running in a task direction (AntRandDirecEnv / AntRandDirec2DEnv).

    r = d . (xy_after - xy_before) / dt - 0.5 sum(a^2)
    - 0.5e-3 sum(clip(cfrc_ext, -1, 1)^2) + 1.0 (only the first
    ``direction_dims`` coordinates count). Terminates when the state is not
    finite or the torso height qpos[2] leaves [0, 1] (gym's Ant-v2 uses
    [0.2, 1]; the original ProMP code's
    meta_policy_search/envs/mujoco_envs/ant_rand_direc.py uses [0, 1]).
    """

    def step(self, action: np.ndarray) -> StepResult:
        """Advance ``frame_skip`` physics steps; reward as the class doc."""
        xy_before = self._torso_xy()
        self.do_simulation(action, self.frame_skip)
        forward_vel = self._progress(xy_before, self._torso_xy()) / self.dt
        ctrl_cost = 0.5 * float(np.square(action).sum())
        contact_cost = self._contact_cost()
        reward = forward_vel - ctrl_cost - contact_cost + 1.0
        height = self.data.qpos[2]
        healthy = np.isfinite(self.state_vector()).all() and \
            0. <= height <= 1.
        return (self._get_obs(), reward, not healthy, False,
                self._info(forward_vel, ctrl_cost, contact_cost=contact_cost))

    @classmethod
    def batch_step(cls, envs, actions):
        """``step`` of every env, the rows computed together (see ``MujocoMetaEnv.batch_step``).

        Every term is the float operation of ``step``, on rows; the torso
        progress of a 2-D direction row by row
        (:meth:`~garage_promp.envs._mujoco.DirectionTasks._batch_progress`). A
        subclass that replaces a part of ``step`` steps env by env.
        """
        if cls._overrides_any(AntDirectionBase, ('step', '_get_obs', '_progress', '_info',
                                                 '_torso_xy', '_contact_cost', '_simulate')):
            return MujocoMetaEnv.batch_step.__func__(cls, envs, actions)
        torsos = wave_constant(envs, 'torso', lambda es: {env._torso for env in es}, take_whole)  # pylint: disable=protected-access
        if len(torsos) == 1:  # every row read next to its step (MujocoMetaEnv._step_all)
            torso = ('xpos', 3 * next(iter(torsos)), 2)
            before, rows = MujocoMetaEnv._step_all(
                envs, actions, True, before=(torso,),
                after=(torso, ('cfrc_ext', 0, None), ('qpos', 0, None), ('qvel', 0, None)))
            data = envs[0].data
            ends = np.cumsum([2, data.cfrc_ext.size, data.qpos.size])
            after, contacts, qpos, qvel = np.split(rows, ends, axis=1)
        else:
            before = cls._torso_rows(envs)
            cls._simulate(envs, actions, contact_forces=True)
            after = cls._torso_rows(envs)
            contacts = cls._stack(envs, 'cfrc_ext')
            qpos, qvel = cls._stack(envs, 'qpos'), cls._stack(envs, 'qvel')
        forward_vel = cls._batch_progress(envs, before, after) / envs[0].dt
        ctrl_cost = 0.5 * np.square(actions).sum(axis=1).astype(np.float64)
        contacts = np.clip(contacts, -1, 1)
        contact_cost = 0.5e-3 * np.square(contacts).sum(axis=1)
        reward = forward_vel - ctrl_cost - contact_cost + 1.0
        height = qpos[:, 2]
        healthy = (np.isfinite(np.concatenate([qpos, qvel], axis=1)).all(axis=1)
                   & (0. <= height) & (height <= 1.))
        obs = np.concatenate([qpos if cls.full_qpos_obs else qpos[:, 2:], qvel, contacts],
                             axis=1, dtype=np.float32)
        info = dict(forward_vel=forward_vel, ctrl_cost=ctrl_cost,
                    task=cls._task_rows(envs),
                    contact_cost=contact_cost)
        return obs, reward, ~healthy, np.zeros(len(envs), dtype=bool), info


class HumanoidDirectionBase(DirectionTasks, MujocoMetaEnv):
    """gym-v2 Humanoid running in a task direction (HumanoidRandDirec[2D]Env).

    ``humanoid.xml`` (timestep 0.003), frame skip 5, dt 0.015, ctrlrange
    [-0.4, 0.4]. Observation: qpos[2:] (22) | qvel (23) | cinert (140) |
    cvel (84) | qfrc_actuator (23) | cfrc_ext (84) = 376 (the world body's
    rows included, as gym-v2). Reward:
    0.25 d . (com_after - com_before) / opt.timestep - 0.1 sum(ctrl^2)
    - min(0.5e-6 sum(cfrc_ext^2), 10) + 5, where com is the mass centre.
    The velocity term divides by the physics timestep, not dt, as gym's
    Humanoid-v2 of 2018 (and the original ProMP code's
    meta_policy_search/envs/mujoco_envs/humanoid_rand_direc.py); ``env_info['forward_vel']`` is
    the true velocity d . (com_after - com_before) / dt. Terminates when the
    torso height qpos[2] leaves [1, 2]. Reset noise U(+-0.01) on qpos, qvel.
    """

    xml_file = 'humanoid.xml'
    frame_skip = 5
    obs_dim = 376
    qpos_noise = 0.01
    qvel_noise = 0.01

    def _get_obs(self) -> np.ndarray:
        data = self.data
        parts = (data.qpos[2:], data.qvel, data.cinert.ravel(),
                 data.cvel.ravel(), data.qfrc_actuator, data.cfrc_ext.ravel())
        return np.concatenate(parts, dtype=np.float32)

    def _mass_center(self) -> np.ndarray:
        mass = self.model.body_mass
        return (mass @ self.data.xipos) / mass.sum()

    @staticmethod
    def _batch_mass_centers(envs, xipos: np.ndarray) -> np.ndarray:
        """:meth:`_mass_center` of every env (rows) from its ``data.xipos`` flattened (a
        row of ``xipos``): the same products and sums, one env's at a time in numpy's
        loops over the stack."""
        masses = wave_constant(envs, 'body masses',
                               lambda es: np.array([env.model.body_mass for env in es]),
                               take_rows)
        bodies = np.ascontiguousarray(xipos).reshape(len(envs), -1, 3)
        return np.matmul(masses[:, None, :], bodies)[:, 0] / masses.sum(axis=1)[:, None]

    def step(self, action: np.ndarray) -> StepResult:
        """Advance ``frame_skip`` physics steps; reward as the class doc."""
        com_before = self._mass_center()
        self.do_simulation(action, self.frame_skip)
        progress = self._progress(com_before, self._mass_center())
        forward_reward = 0.25 * progress / self.model.opt.timestep
        ctrl_cost = 0.1 * float(np.square(self.data.ctrl).sum())
        impact_cost = min(0.5e-6 * float(np.square(self.data.cfrc_ext).sum()),
                          10.)
        reward = forward_reward - ctrl_cost - impact_cost + 5.0
        height = self.data.qpos[2]
        terminated = bool(height < 1.0 or height > 2.0)
        return (self._get_obs(), reward, terminated, False,
                self._info(progress / self.dt,
                           ctrl_cost,
                           impact_cost=impact_cost))

    @classmethod
    def batch_step(cls, envs, actions):
        """``step`` of every env, the rows computed together (see ``MujocoMetaEnv.batch_step``).

        The mass centres from each env's ``xipos`` read next to its step
        (:meth:`_batch_mass_centers`, :meth:`_mass_center`'s float operations row by
        row), the rest on rows with ``step``'s float operations. A subclass that
        replaces a part of ``step`` steps env by env.
        """
        if cls._overrides_any(HumanoidDirectionBase, ('step', '_get_obs', '_progress', '_info',
                                                      '_mass_center', '_simulate')):
            return MujocoMetaEnv.batch_step.__func__(cls, envs, actions)
        # The bodies' mass centres before the step; after it, the observation's arrays,
        # the controls and the mass centres: each read next to its env's step.
        fields = ('qpos', 'qvel', 'cinert', 'cvel', 'qfrc_actuator', 'cfrc_ext', 'ctrl',
                  'xipos')
        xipos_before, rows = MujocoMetaEnv._step_all(
            envs, actions, True, before=(('xipos', 0, None), ),
            after=tuple((field, 0, None) for field in fields))
        data = envs[0].data
        ends = np.cumsum([getattr(data, field).size for field in fields[:-1]])
        qpos, qvel, cinert, cvel, actuator, contacts, ctrl, xipos_after = np.split(
            rows, ends, axis=1)
        before = cls._batch_mass_centers(envs, xipos_before)
        after = cls._batch_mass_centers(envs, xipos_after)
        progress = cls._batch_progress(envs, before, after)
        forward_reward = 0.25 * progress / envs[0].model.opt.timestep
        ctrl_cost = 0.1 * np.square(ctrl).sum(axis=1)
        impact_cost = np.minimum(0.5e-6 * np.square(contacts).sum(axis=1), 10.)
        reward = forward_reward - ctrl_cost - impact_cost + 5.0
        height = qpos[:, 2]
        obs = np.concatenate([qpos[:, 2:], qvel, cinert, cvel, actuator, contacts], axis=1,
                             dtype=np.float32)
        info = dict(forward_vel=progress / envs[0].dt, ctrl_cost=ctrl_cost,
                    task=cls._task_rows(envs),
                    impact_cost=impact_cost)
        return (obs, reward, (height < 1.0) | (height > 2.0), np.zeros(len(envs), dtype=bool),
                info)


class PlanarBase(MujocoMetaEnv):
    """Planar runners (Walker2d, Hopper): x = qpos[0], height, angle = qpos[1:3].

    Observation: qpos[1:] | clip(qvel, -10, 10). Reward:
    progress / dt + 1.0 - 1e-3 sum(a^2) (progress along the task direction,
    +x without a direction task). Reset noise U(+-0.005) on qpos and qvel.
    Subclasses define :meth:`_healthy`; the episode terminates when it is
    False.
    """

    qpos_noise = 0.005
    qvel_noise = 0.005

    def _get_obs(self) -> np.ndarray:
        return np.concatenate(
            [self.data.qpos[1:],
             np.clip(self.data.qvel, -10, 10)],
            dtype=np.float32)

    def _healthy(self) -> bool:
        raise NotImplementedError

    @classmethod
    def _batch_healthy(cls, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """:meth:`_healthy` of many states (rows) at once."""
        raise NotImplementedError

    @classmethod
    def batch_step(cls, envs, actions):
        """``step`` of every env, the rows computed together (see ``MujocoMetaEnv.batch_step``).

        A subclass that replaces ``step``, the observation, the progress or
        the info, or defines ``_healthy`` without ``_batch_healthy`` beside
        it, steps env by env through its own ``step``.
        """
        healthy_owner = next(k for k in cls.__mro__ if '_healthy' in vars(k))
        if (cls._overrides_any(PlanarBase, ('step', '_get_obs', '_info', '_simulate',
                                            '_batch_advance'))
                or '_batch_healthy' not in vars(healthy_owner)
                or cls._progress not in (MujocoMetaEnv._progress, DirectionTasks._progress)
                or not cls._vectorised(envs)):
            return MujocoMetaEnv.batch_step.__func__(cls, envs, actions)
        qpos, qvel, forward_vel = cls._batch_advance(envs, actions)
        ctrl_cost = 1e-3 * np.square(actions).sum(axis=1).astype(np.float64)
        reward = forward_vel + 1.0 - ctrl_cost
        obs = np.concatenate([qpos[:, 1:], np.clip(qvel, -10, 10)], axis=1, dtype=np.float32)
        terminated = ~cls._batch_healthy(qpos, qvel)
        info = dict(forward_vel=forward_vel, ctrl_cost=ctrl_cost,
                    task=cls._task_rows(envs))
        return obs, reward, terminated, np.zeros(len(envs), dtype=bool), info

    def step(self, action: np.ndarray) -> StepResult:
        """Advance ``frame_skip`` physics steps; reward as the class doc."""
        x_before = self.data.qpos[:1].copy()
        self.do_simulation(action, self.frame_skip)
        forward_vel = self._progress(x_before, self.data.qpos[:1]) / self.dt
        ctrl_cost = 1e-3 * float(np.square(action).sum())
        reward = forward_vel + 1.0 - ctrl_cost
        return (self._get_obs(), reward, not self._healthy(), False,
                self._info(forward_vel, ctrl_cost))


class WalkerBase(PlanarBase):
    """gym-v2 Walker2d: ``walker2d.xml`` (left foot friction 1.9, timestep
    0.002), 6 actuators in [-1, 1], observation 17. Healthy while
    0.8 < height < 2.0 and -1 < angle < 1."""

    xml_file = 'walker2d.xml'
    obs_dim = 17

    def _healthy(self) -> bool:
        height, angle = self.data.qpos[1:3]
        return bool(0.8 < height < 2.0 and -1.0 < angle < 1.0)

    @classmethod
    def _batch_healthy(cls, qpos, qvel):
        height, angle = qpos[:, 1], qpos[:, 2]
        return (0.8 < height) & (height < 2.0) & (-1.0 < angle) & (angle < 1.0)
