"""PointEnvMomentum: a 2-D point mass (``MetaPointEnvMomentum``, paper Fig. 5)."""
from typing import Any, Dict, Tuple

from garage_promp.envs._point import CornerGoalEnv
from garage_promp.envs.base import check_action
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

from gymnasium.spaces import Box
import numpy as np


class PointMomentumGym(CornerGoalEnv):
    """gymnasium env of :class:`PointEnvMomentum`.

    Observation [position p, velocity v] (4). Reset p ~ U(-0.2, 0.2)^2, then
    v ~ U(-0.1, 0.1)^2. Action Box(-0.1, 0.1)^2 (a = 0.01 x policy action
    after ``normalize(env, expected_action_scale=10.)``); v <- v +
    clip(a, +-0.1), p <- p + v. Goal g: one of the corners (+-2, +-2). Reward
    'sparse' (default): max(2 - |p' - g|, 0) (radius
    ``sparse_reward_radius``); 'dense': -|p' - g|; 'dense_squared':
    -|p' - g|^2. Never terminates. This is the env of the paper's exploration
    study (H = 100, 3 adaptation steps, D.2).

    Args:
        reward_type (str): 'sparse', 'dense' or 'dense_squared'.
        sparse_reward_radius (float): Radius of the sparse reward.
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    Raises:
        ValueError: If reward_type or sparse_reward_radius is invalid.

    """

    def __init__(self,
                 reward_type: str = 'sparse',
                 sparse_reward_radius: float = 2.,
                 seed: int | None = None):
        self.observation_space = Box(-np.inf, np.inf, (4, ), np.float32)
        self.action_space = Box(-0.1, 0.1, (2, ), np.float32)
        self._position = np.zeros(2)
        self._velocity = np.zeros(2)
        super().__init__(reward_type, sparse_reward_radius, seed)

    def reset(self,
              *,
              seed: int | None = None,
              options: Dict | None = None) -> Tuple[np.ndarray, Dict]:
        """Draw the position, then the velocity, from ``np_random``."""
        super().reset(seed=seed)
        self._position = self.np_random.uniform(-0.2, 0.2, size=2)
        self._velocity = self.np_random.uniform(-0.1, 0.1, size=2)
        return np.concatenate([self._position, self._velocity],
                              dtype=np.float32), {}

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool,
                                                bool, Dict[str, Any]]:
        """Accelerate by clip(action, +-0.1); reward as the class doc."""
        if not self._action_checked:  # (stepped directly, not by garage's wrapper)
            check_action(self, action, self.action_space.shape)
        prev_position = self._position
        self._velocity = self._velocity + np.clip(action, -0.1, 0.1)
        self._position = prev_position + self._velocity
        reward = self._reward(prev_position, self._position)
        obs = np.concatenate([self._position, self._velocity],
                              dtype=np.float32)
        return obs, reward, False, False, self._info(self._position)

    def _sparse_reward(self, prev_position: np.ndarray, position: np.ndarray,
                       dists: np.ndarray) -> float:
        return max(self.sparse_reward_radius - float(dists[self._goal_index]),
                   0.)


class PointEnvMomentum(GymnasiumMetaEnv):
    """2-D point-mass corner-goal meta-env (obs 4, act 2, H = 100).

    Keyword arguments ``reward_type`` and ``sparse_reward_radius`` go to
    :class:`PointMomentumGym`. The paper's ProMP sweeps ran it with H = 200
    (original ProMP code, experiments/all_envs_eval/ppo_run_all.py); pass
    ``max_episode_length=200`` for those.
    """

    gym_env_cls = PointMomentumGym
    default_max_episode_length = 100
