"""AntRandDirec: run in a random 2-D direction (ProMP ``AntRandDirec2DEnv``)."""
from garage_promp.envs._robots import AntDirectionBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class AntRandDirecGym(AntDirectionBase):
    """gymnasium env of :class:`AntRandDirecEnv`.

    Task d uniform on the unit circle (v / |v|, v ~ N(0, I)); reward
    d . (xy_after - xy_before) / dt - 0.5 sum(a^2)
    - 0.5e-3 sum(clip(cfrc_ext, -1, 1)^2) + 1 (torso xy). Observation 111,
    8 actuators in [-1, 1], dt 0.05; termination and reset noise as
    :class:`~garage_promp.envs._robots.AntDirectionBase`.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    direction_dims = 2


class AntRandDirecEnv(GymnasiumMetaEnv):
    """Ant random-2-D-direction meta-env (obs 111, act 8, H = 100)."""

    gym_env_cls = AntRandDirecGym
    default_max_episode_length = 100
