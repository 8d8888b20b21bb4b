"""AntRandGoal: walk to a random goal in a disc (ProMP ``AntRandGoalEnv``)."""
from typing import Any, List

from garage_promp.envs import _tasks
from garage_promp.envs._robots import AntBase, StepResult
from garage_promp.envs.gymnasium_env import GymnasiumMetaEnv

import numpy as np

GOAL_RADIUS = 3.


class AntRandGoalGym(AntBase):
    """gymnasium env of :class:`AntRandGoalEnv`.

    Task: goal g uniform in the disc of radius 3 (``goal_pos``). Reward
    -|xy_torso - g|_1 - 0.1 sum(a^2) - 0.5e-3 sum(clip(cfrc_ext, -1, 1)^2),
    no survive bonus, never terminates (as the original ProMP code's
    meta_policy_search/envs/mujoco_envs/ant_rand_goal.py). Observation: the
    full qpos (15) | qvel (14) | clip(cfrc_ext, -1, 1) (84) = 113; 8 actuators
    in [-1, 1], dt 0.05, reset noise as
    :class:`~garage_promp.envs._robots.AntBase`. ``env_info``:
    ``forward_vel`` is the speed towards the goal,
    (|xy_before - g|_2 - |xy_after - g|_2) / dt, and ``goal_dist`` the L1
    distance of the reward.

    Args:
        seed (int or None): Seed (see :mod:`garage_promp.envs.base`).

    """

    obs_dim = 113
    full_qpos_obs = True
    diagnostic_keys = {
        'forward_vel': 'ForwardVel',
        'ctrl_cost': 'CtrlCost',
        'goal_dist': 'GoalDist',
    }

    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[np.ndarray]:
        return _tasks.sample_disc_goals(rng, n_tasks, GOAL_RADIUS)

    def _check_task(self, task: Any) -> np.ndarray:
        goal = _tasks.check_vector(task, 'goal_pos')
        if not (np.abs(goal) < 1e154).all():  # (its squared distance, its progress: inf - inf)
            raise ValueError(f'task goal_pos should be a goal whose distance has a float64 value '
                             f'(|goal| under 1e154), got {task!r}')
        return goal

    def _default_task(self) -> np.ndarray:
        return np.zeros(2)

    def step(self, action: np.ndarray) -> StepResult:
        """Advance 5 physics steps; reward as the class doc."""
        goal = self._task
        xy_before = self._torso_xy()
        self.do_simulation(action, self.frame_skip)
        xy = self._torso_xy()
        goal_dist = float(np.abs(xy - goal).sum())
        ctrl_cost = 0.1 * float(np.square(action).sum())
        contact_cost = self._contact_cost()
        reward = -goal_dist - ctrl_cost - contact_cost
        forward_vel = (np.linalg.norm(xy_before - goal) -
                       np.linalg.norm(xy - goal)) / self.dt
        return (self._get_obs(), reward, False, False,
                self._info(float(forward_vel),
                           ctrl_cost,
                           contact_cost=contact_cost,
                           goal_dist=goal_dist))


class AntRandGoalEnv(GymnasiumMetaEnv):
    """Ant random-goal meta-env (obs 113, act 8, H = 200)."""

    gym_env_cls = AntRandGoalGym
    default_max_episode_length = 200
