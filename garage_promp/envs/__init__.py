"""The meta-environments of the ProMP paper, as garage environments.

Each ``<Robot><Task>Env`` is a garage ``Environment`` that can be built
without arguments and driven by garage's ``SetTaskSampler``; its gymnasium
implementation is the matching ``...Gym`` class. Meta-World 3's ML1, ML10 and
ML45 come through :class:`MetaWorldTaskSampler` (see :mod:`.metaworld`).
"""
from garage_promp.envs.ant_fwd_back import AntFwdBackEnv, AntFwdBackGym
from garage_promp.envs.ant_rand_direc import AntRandDirecEnv, AntRandDirecGym
from garage_promp.envs.ant_rand_goal import AntRandGoalEnv, AntRandGoalGym
from garage_promp.envs.base import DEFAULT_SEED, MetaEnv
from garage_promp.envs.gymnasium_env import GymnasiumEnv, GymnasiumMetaEnv
from garage_promp.envs.half_cheetah_fwd_back import (
    HalfCheetahFwdBackEnv,
    HalfCheetahFwdBackGym,
)
from garage_promp.envs.hopper_rand_params import (
    HopperRandParamsEnv,
    HopperRandParamsGym,
)
from garage_promp.envs.humanoid_fwd_back import HumanoidFwdBackEnv, HumanoidFwdBackGym
from garage_promp.envs.humanoid_rand_direc import (
    HumanoidRandDirecEnv,
    HumanoidRandDirecGym,
)
from garage_promp.envs.metaworld import (
    MetaWorldEnv,
    MetaWorldTaskSampler,
    MetaWorldTaskUpdate,
    check_env_name,
    make_benchmark,
)
from garage_promp.envs.point_env_1d import Point1DGym, PointEnv1D
from garage_promp.envs.point_env_corner import PointCornerGym, PointEnvCorner
from garage_promp.envs.point_env_momentum import PointEnvMomentum, PointMomentumGym
from garage_promp.envs.walker_fwd_back import WalkerFwdBackEnv, WalkerFwdBackGym
from garage_promp.envs.walker_rand_params import (
    WalkerRandParamsEnv,
    WalkerRandParamsGym,
)

__all__ = [
    'AntFwdBackEnv', 'AntFwdBackGym', 'AntRandDirecEnv', 'AntRandDirecGym',
    'AntRandGoalEnv', 'AntRandGoalGym', 'DEFAULT_SEED', 'GymnasiumEnv',
    'GymnasiumMetaEnv', 'HalfCheetahFwdBackEnv', 'HalfCheetahFwdBackGym',
    'HopperRandParamsEnv', 'HopperRandParamsGym', 'HumanoidFwdBackEnv',
    'HumanoidFwdBackGym', 'HumanoidRandDirecEnv', 'HumanoidRandDirecGym',
    'MetaEnv', 'MetaWorldEnv', 'MetaWorldTaskSampler', 'MetaWorldTaskUpdate',
    'Point1DGym', 'PointCornerGym', 'PointEnv1D', 'PointEnvCorner',
    'PointEnvMomentum', 'PointMomentumGym', 'WalkerFwdBackEnv',
    'WalkerFwdBackGym', 'WalkerRandParamsEnv', 'WalkerRandParamsGym', 'check_env_name',
    'make_benchmark'
]
