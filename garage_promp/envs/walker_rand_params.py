"""WalkerRandParams: Walker2d with random physics (rand_param_envs)."""
from garage_promp.envs._mujoco import RandParamsTasks
from garage_promp.envs._robots import WalkerBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class WalkerRandParamsGym(RandParamsTasks, WalkerBase):
    """gymnasium env of :class:`WalkerRandParamsEnv`.

    ``walker2d.xml`` with the timestep set to 0.004 and frame skip 4, so
    dt = 0.016 as in rand_param_envs (whose XML timestep is 0.004 and whose
    ``RandomEnv`` hard-codes frame skip 4; gymnasium's XML says 0.002).
    Task: random body masses, inertias, joint damping and geom frictions
    (:class:`~garage_promp.envs._mujoco.RandParamsTasks`). Reward
    (x_after - x_before) / dt + 1 - 1e-3 sum(a^2); observation 17, 6
    actuators; terminates unless 0.8 < height < 2 and -1 < angle < 1. Reset
    noise U(+-0.005) on qpos and qvel.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    frame_skip = 4
    sim_timestep = 0.004


class WalkerRandParamsEnv(GymnasiumMetaEnv):
    """Walker2d random-parameters meta-env (obs 17, act 6, H = 200)."""

    gym_env_cls = WalkerRandParamsGym
    default_max_episode_length = 200
