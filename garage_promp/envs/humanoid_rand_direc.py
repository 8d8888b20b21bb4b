"""HumanoidRandDirec: walk in a random 2-D direction (``HumanoidRandDirec2DEnv``)."""
from garage_promp.envs._robots import HumanoidDirectionBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class HumanoidRandDirecGym(HumanoidDirectionBase):
    """gymnasium env of :class:`HumanoidRandDirecEnv`.

    Task d uniform on the unit circle, progress d . (com_after - com_before)
    of the mass centre in xy. Observation 376, 17 actuators in [-0.4, 0.4],
    dt 0.015; reward, termination and reset noise as
    :class:`~garage_promp.envs._robots.HumanoidDirectionBase`.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    direction_dims = 2


class HumanoidRandDirecEnv(GymnasiumMetaEnv):
    """Humanoid random-2-D-direction meta-env (obs 376, act 17, H = 200)."""

    gym_env_cls = HumanoidRandDirecGym
    default_max_episode_length = 200
