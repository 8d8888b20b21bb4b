"""PointEnv1D: the 1-D environment of the paper's Fig. 6.

As hand-coded in the original ProMP code's experiments/env_1d/point_1d_hand_grads.py
(removed from its master in commit b9e0064).
"""
from typing import Any, Dict, List, Tuple

from garage_promp.envs import _tasks
from garage_promp.envs.base import MetaEnv, check_action
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

import gymnasium
from gymnasium.spaces import Box
import numpy as np


class Point1DGym(MetaEnv, gymnasium.Env):
    """gymnasium env of :class:`PointEnv1D`.

    s_0 ~ U(-2, 2); the action is clipped, a = clip(action, -2, 2); the
    reward is exp(-0.1 (a - g)^2) and the next state s' = a. Goal
    g in {-1, +1}. Observation s (1), action Box(-2, 2) (1). Never
    terminates; the paper's horizon is 5. In the reference this env is
    hand-coded inside the Fig. 6 script rather than a MetaEnv; here it has
    the meta-env interface (tasks: goals +-1). Use it without
    ``normalize``: the paper's policy acts in env units.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    metadata = {'render_modes': []}
    diagnostic_keys = {'goal_dist': 'GoalDist'}

    def __init__(self, seed: int | None = None):
        self.observation_space = Box(-2., 2., (1, ), np.float32)
        self.action_space = Box(-2., 2., (1, ), np.float32)
        self._state = np.zeros(1)
        self._init_meta_env(seed, 1.)

    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[float]:
        return _tasks.sample_signs(rng, n_tasks)

    def _check_task(self, task: Any) -> float:
        return _tasks.check_sign(task, 'goal')

    def reset(self,
              *,
              seed: int | None = None,
              options: Dict | None = None) -> Tuple[np.ndarray, Dict]:
        """Draw s_0 ~ U(-2, 2) from ``np_random``."""
        super().reset(seed=seed)
        self._state = self.np_random.uniform(-2., 2., size=1)
        return self._state.astype(np.float32), {}

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool,
                                                bool, Dict[str, Any]]:
        """s' = clip(action, -2, 2); reward exp(-0.1 (s' - g)^2)."""
        action = (np.asarray(action, dtype=np.float64) if self._action_checked  # (by the wrapper)
                  else check_action(self, action, (1, )))
        self._state = np.clip(action, -2., 2.)
        goal_dist = float(abs(self._state[0] - self._task))
        reward = float(np.exp(-0.1 * goal_dist**2))
        return self._state.astype(np.float32), reward, False, False, dict(
            goal_dist=goal_dist, task=self._task_vector)


class PointEnv1D(GymnasiumMetaEnv):
    """1-D goal env of the paper's Fig. 6 (obs 1, act 1, H = 5)."""

    gym_env_cls = Point1DGym
    default_max_episode_length = 5
