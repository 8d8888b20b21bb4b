"""PointEnvCorner: a 2-D point that must find its corner (``MetaPointEnvCorner``)."""
from typing import Any, Dict, Tuple

from garage_promp.envs._point import CornerGoalEnv
from garage_promp.envs.base import check_action
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

from gymnasium.spaces import Box
import numpy as np


class PointCornerGym(CornerGoalEnv):
    """gymnasium env of :class:`PointEnvCorner`.

    State and observation: the position s in R^2; reset s ~ U(-0.2, 0.2)^2.
    Action Box(-0.2, 0.2)^2 (a = 0.02 x policy action after
    ``normalize(env, expected_action_scale=10.)``); s' = s + clip(a, +-0.2).
    Goal g: one of the corners (+-2, +-2). Reward 'sparse' (default): 0 while
    |s'|_1 < 0.5; else the progress |s - g| - |s' - g| if g is the corner
    nearest to s', else 0. 'dense': -|s' - g|, 'dense_squared': -|s' - g|^2.
    Never terminates.

    Args:
        reward_type (str): 'sparse', 'dense' or 'dense_squared'.
        sparse_reward_radius (float): L1 radius around the start without
            reward (sparse only).
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    Raises:
        ValueError: If reward_type or sparse_reward_radius is invalid.

    """

    def __init__(self,
                 reward_type: str = 'sparse',
                 sparse_reward_radius: float = 0.5,
                 seed: int | None = None):
        self.observation_space = Box(-np.inf, np.inf, (2, ), np.float32)
        self.action_space = Box(-0.2, 0.2, (2, ), np.float32)
        self._state = np.zeros(2)
        super().__init__(reward_type, sparse_reward_radius, seed)

    def reset(self,
              *,
              seed: int | None = None,
              options: Dict | None = None) -> Tuple[np.ndarray, Dict]:
        """Draw s ~ U(-0.2, 0.2)^2 from ``np_random``."""
        super().reset(seed=seed)
        self._state = self.np_random.uniform(-0.2, 0.2, size=2)
        return self._state.astype(np.float32), {}

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool,
                                                bool, Dict[str, Any]]:
        """Move by clip(action, +-0.2); reward as the class doc."""
        if not self._action_checked:  # (stepped directly, not by garage's wrapper)
            check_action(self, action, self.action_space.shape)
        prev_state = self._state
        self._state = prev_state + np.clip(action, -0.2, 0.2)
        reward = self._reward(prev_state, self._state)
        return self._state.astype(np.float32), reward, False, False, self._info(
            self._state)

    def _sparse_reward(self, prev_position: np.ndarray, position: np.ndarray,
                       dists: np.ndarray) -> float:
        if np.abs(position).sum() < self.sparse_reward_radius:
            return 0.
        goal_dist = dists[self._goal_index]
        if goal_dist != dists.min():
            return 0.
        return float(self._corner_dists(prev_position)[self._goal_index] -
                     goal_dist)


class PointEnvCorner(GymnasiumMetaEnv):
    """2-D point corner-goal meta-env (obs 2, act 2, H = 100).

    Keyword arguments ``reward_type`` and ``sparse_reward_radius`` go to
    :class:`PointCornerGym`.
    """

    gym_env_cls = PointCornerGym
    default_max_episode_length = 100
