"""WalkerFwdBack: walk forward or backward (ProMP ``Walker2DRandDirecEnv``)."""
from garage_promp.envs._mujoco import DirectionTasks
from garage_promp.envs._robots import WalkerBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class WalkerFwdBackGym(DirectionTasks, WalkerBase):
    """gymnasium env of :class:`WalkerFwdBackEnv`.

    ``walker2d.xml`` (timestep 0.002), frame skip 8 (the final paper runs;
    4 before 2018-09-25), dt 0.016. Task d in {-1, +1}. Reward
    d (x_after - x_before) / dt + 1 - 1e-3 sum(a^2). Observation 17,
    6 actuators in [-1, 1]; terminates unless 0.8 < height < 2 and
    -1 < angle < 1. Reset noise U(+-0.005) on qpos and qvel.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    frame_skip = 8


class WalkerFwdBackEnv(GymnasiumMetaEnv):
    """Walker2d forward/backward meta-env (obs 17, act 6, H = 200)."""

    gym_env_cls = WalkerFwdBackGym
    default_max_episode_length = 200
