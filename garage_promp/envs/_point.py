"""Shared base of the 2-D point meta-envs (no MuJoCo)."""
from typing import Any, List

from garage_promp.envs import _tasks
from garage_promp.envs.base import MetaEnv
from garage_promp.validation import check_float

import gymnasium
import numpy as np

REWARD_TYPES = ('sparse', 'dense', 'dense_squared')


class CornerGoalEnv(MetaEnv, gymnasium.Env):
    """A point in the plane whose task is one of the four corners (+-2, +-2).

    Tasks are drawn uniformly with replacement from
    :data:`~garage_promp.envs._tasks.CORNERS`. Rewards 'dense' and
    'dense_squared' are -|p' - g| and -|p' - g|^2 for the new position p';
    'sparse' is defined by the subclass. Never terminates.

    Args:
        reward_type (str): 'sparse', 'dense' or 'dense_squared'.
        sparse_reward_radius (float): Radius of the sparse reward (> 0).
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    Raises:
        ValueError: If reward_type or sparse_reward_radius is invalid.

    """

    metadata = {'render_modes': []}
    diagnostic_keys = {'goal_dist': 'GoalDist'}

    def __init__(self, reward_type: str, sparse_reward_radius: float,
                 seed: int | None):
        if reward_type not in REWARD_TYPES:
            raise ValueError(f'reward_type must be one of {REWARD_TYPES}, '
                             f'got {reward_type!r}')
        self.reward_type = reward_type
        # numpy scalars too; not inf (every step would be rewarded 0), not a bool
        self.sparse_reward_radius = check_float(sparse_reward_radius, 'sparse_reward_radius', 0.,
                                                low_open=True)
        self._init_meta_env(seed, _tasks.CORNERS[3])

    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[np.ndarray]:
        return _tasks.sample_corners(rng, n_tasks)

    def _check_task(self, task: Any) -> np.ndarray:
        return _tasks.check_corner(task)

    def _apply_task(self) -> None:
        self._goal_index = int(
            np.flatnonzero((_tasks.CORNERS == self._task).all(axis=1))[0])

    def _corner_dists(self, position: np.ndarray) -> np.ndarray:
        """Euclidean distances of ``position`` to the four corners."""
        return np.sqrt(np.square(_tasks.CORNERS - position).sum(axis=1))

    def _reward(self, prev_position: np.ndarray,
                position: np.ndarray) -> float:
        dists = self._corner_dists(position)
        goal_dist = dists[self._goal_index]
        if self.reward_type == 'dense':
            return -float(goal_dist)
        if self.reward_type == 'dense_squared':
            return -float(goal_dist)**2
        return self._sparse_reward(prev_position, position, dists)

    def _sparse_reward(self, prev_position: np.ndarray, position: np.ndarray,
                       dists: np.ndarray) -> float:
        raise NotImplementedError

    def _info(self, position: np.ndarray) -> dict:
        return dict(goal_dist=float(np.linalg.norm(position - self._task)),
                    task=self._task_vector)
