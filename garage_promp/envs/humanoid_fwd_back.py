"""HumanoidFwdBack: walk forward or backward (ProMP ``HumanoidRandDirecEnv``)."""
from garage_promp.envs._robots import HumanoidDirectionBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class HumanoidFwdBackGym(HumanoidDirectionBase):
    """gymnasium env of :class:`HumanoidFwdBackEnv`.

    Task d in {-1, +1}, progress of the mass centre along x. Observation 376,
    17 actuators in [-0.4, 0.4], dt 0.015; reward, termination and reset
    noise as :class:`~garage_promp.envs._robots.HumanoidDirectionBase`.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    direction_dims = 1


class HumanoidFwdBackEnv(GymnasiumMetaEnv):
    """Humanoid forward/backward meta-env (obs 376, act 17, H = 200)."""

    gym_env_cls = HumanoidFwdBackGym
    default_max_episode_length = 200
