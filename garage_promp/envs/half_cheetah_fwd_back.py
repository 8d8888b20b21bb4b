"""HalfCheetahFwdBack: run forward or backward (ProMP ``HalfCheetahRandDirecEnv``)."""
from garage_promp.envs._mujoco import DirectionTasks, MujocoMetaEnv
from garage_promp.envs._robots import StepResult
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

import numpy as np


class HalfCheetahFwdBackGym(DirectionTasks, MujocoMetaEnv):
    """gymnasium env of :class:`HalfCheetahFwdBackEnv`.

    ``half_cheetah.xml`` (timestep 0.01), frame skip 5, dt 0.05; 6 actuators
    in [-1, 1]. Observation: qpos[1:] (8) | qvel (9) = 17. Task: d in
    {-1, +1}. Reward: d (x_after - x_before) / dt - 0.05 sum(a^2), x = qpos[0]
    (the reference writes 0.5 * 0.1; gym's HalfCheetah uses 0.1). Never
    terminates. Reset noise: qpos U(+-0.1), qvel 0.1 N(0, 1).

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    xml_file = 'half_cheetah.xml'
    frame_skip = 5
    obs_dim = 17
    qpos_noise = 0.1
    qvel_noise = 0.1
    qvel_noise_normal = True

    def _get_obs(self) -> np.ndarray:
        return np.concatenate([self.data.qpos[1:], self.data.qvel],
                              dtype=np.float32)

    def step(self, action: np.ndarray) -> StepResult:
        """Advance 5 physics steps; reward as the class doc."""
        x_before = self.data.qpos[:1].copy()
        self.do_simulation(action, self.frame_skip)
        forward_vel = self._progress(x_before, self.data.qpos[:1]) / self.dt
        ctrl_cost = 0.05 * float(np.square(action).sum())
        return (self._get_obs(), forward_vel - ctrl_cost, False, False,
                self._info(forward_vel, ctrl_cost))

    @classmethod
    def batch_step(cls, envs, actions):
        """``step`` of every env, the rows computed together (see ``MujocoMetaEnv.batch_step``);
        a subclass that replaces a part of ``step`` steps env by env."""
        if (cls._overrides_any(HalfCheetahFwdBackGym, ('step', '_get_obs', '_progress', '_info',
                                                       '_simulate', '_batch_advance'))
                or not cls._vectorised(envs)):
            return MujocoMetaEnv.batch_step.__func__(cls, envs, actions)
        qpos, qvel, forward_vel = cls._batch_advance(envs, actions)
        ctrl_cost = 0.05 * np.square(actions).sum(axis=1).astype(np.float64)
        obs = np.concatenate([qpos[:, 1:], qvel], axis=1, dtype=np.float32)
        info = dict(forward_vel=forward_vel, ctrl_cost=ctrl_cost,
                    task=cls._task_rows(envs))
        return (obs, forward_vel - ctrl_cost, np.zeros(len(envs), dtype=bool),
                np.zeros(len(envs), dtype=bool), info)


class HalfCheetahFwdBackEnv(GymnasiumMetaEnv):
    """HalfCheetah forward/backward meta-env (obs 17, act 6, H = 100)."""

    gym_env_cls = HalfCheetahFwdBackGym
    default_max_episode_length = 100
