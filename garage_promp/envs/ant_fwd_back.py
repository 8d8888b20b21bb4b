"""AntFwdBack: run forward or backward along x (ProMP ``AntRandDirecEnv``)."""
from garage_promp.envs._robots import AntDirectionBase
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv


class AntFwdBackGym(AntDirectionBase):
    """gymnasium env of :class:`AntFwdBackEnv`.

    Task d in {-1, +1}; reward d (x_after - x_before) / dt - 0.5 sum(a^2)
    - 0.5e-3 sum(clip(cfrc_ext, -1, 1)^2) + 1, torso x. Observation 111,
    8 actuators in [-1, 1], dt 0.05; termination and reset noise as
    :class:`~garage_promp.envs._robots.AntDirectionBase`.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    direction_dims = 1


class AntFwdBackEnv(GymnasiumMetaEnv):
    """Ant forward/backward meta-env (obs 111, act 8, H = 100)."""

    gym_env_cls = AntFwdBackGym
    default_max_episode_length = 100
