"""HopperRandParams: Hopper with random physics (rand_param_envs)."""
from garage_promp.envs._mujoco import RandParamsTasks
from garage_promp.envs._robots import PlanarBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

import numpy as np


class HopperRandParamsGym(RandParamsTasks, PlanarBase):
    """gymnasium env of :class:`HopperRandParamsEnv`.

    ``hopper.xml`` with the timestep set to 0.004 and frame skip 4, so
    dt = 0.016 as in rand_param_envs (XML timestep 0.004 since 2018-08-30,
    frame skip hard-coded to 4; gymnasium's XML says 0.002). Task: random
    body masses, inertias, joint damping and geom frictions
    (:class:`~garage_promp.envs._mujoco.RandParamsTasks`). Reward
    (x_after - x_before) / dt + 1 - 1e-3 sum(a^2); observation qpos[1:] (5) |
    clip(qvel, -10, 10) (6) = 11, 3 actuators in [-1, 1]. Terminates unless
    the state is finite, all |state[2:]| < 100, height > 0.7 and
    |angle| < 0.2. Reset noise U(+-0.005) on qpos and qvel.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    xml_file = 'hopper.xml'
    frame_skip = 4
    sim_timestep = 0.004
    obs_dim = 11

    def _healthy(self) -> bool:
        state = self.state_vector()
        height, angle = state[1:3]
        return bool(
            np.isfinite(state).all() and (np.abs(state[2:]) < 100).all()
            and height > 0.7 and abs(angle) < 0.2)

    @classmethod
    def _batch_healthy(cls, qpos, qvel):
        state = np.concatenate([qpos, qvel], axis=1)
        height, angle = state[:, 1], state[:, 2]
        return (np.isfinite(state).all(axis=1) & (np.abs(state[:, 2:]) < 100).all(axis=1)
                & (height > 0.7) & (np.abs(angle) < 0.2))


class HopperRandParamsEnv(GymnasiumMetaEnv):
    """Hopper random-parameters meta-env (obs 11, act 3, H = 200)."""

    gym_env_cls = HopperRandParamsGym
    default_max_episode_length = 200
