"""Env bounds, diagnostics and task draws against the reference's definitions (gaps a
mutation probe found: the lean and wrapped paths agree with each other, which does not
check either against the definition)."""
from garage_promp.envs import AntRandGoalEnv, HumanoidRandDirecEnv, _tasks

import numpy as np
import pytest

pytestmark = pytest.mark.mujoco


def test_ant_rand_goal_forward_vel_is_the_approach_to_the_goal_per_second():
    goal = np.array([1., -2.])
    env = AntRandGoalEnv(seed=1)
    env.set_task(goal)
    env.reset()
    gym = env.gym_env
    action = 0.5 * np.sin(np.arange(8) + 1.)
    env.step(action)
    torso = gym.model.body('torso').id
    before = gym.data.xpos[torso, :2].copy()
    es = env.step(action)
    after = gym.data.xpos[torso, :2].copy()
    expected = (np.linalg.norm(before - goal) - np.linalg.norm(after - goal)) / gym.dt
    assert abs(expected) > 1e-3
    assert es.env_info['forward_vel'] == pytest.approx(expected, rel=1e-6)
    env.close()


def test_humanoid_rand_direc_forward_vel_is_the_centre_of_mass_progress_per_second():
    direction = np.array([0.8, 0.6])
    env = HumanoidRandDirecEnv(seed=1)
    env.set_task(direction)
    env.reset()
    gym = env.gym_env

    def centre_of_mass():
        mass = gym.model.body_mass
        return (mass[:, None] * gym.data.xipos).sum(0)[:2] / mass.sum()

    env.step(np.zeros(17))
    before = centre_of_mass()
    es = env.step(np.zeros(17))
    expected = float(direction @ (centre_of_mass() - before)) / gym.dt
    assert abs(expected) > 1e-4
    assert es.env_info['forward_vel'] == pytest.approx(expected, rel=1e-6)
    env.close()


def test_rand_params_multiply_each_element_independently():
    rng = np.random.default_rng(0)
    tasks = _tasks.sample_rand_params(rng, 2000, {'body_mass': np.ones(5)})
    exponents = np.log(np.stack([t['body_mass'] for t in tasks])) / np.log(1.5)
    assert abs(np.corrcoef(exponents[:, 0], exponents[:, 1])[0, 1]) < 0.1


def test_directions_are_uniform_in_angle_at_a_fine_resolution():
    # 16 sectors: a direction normalised from a uniform square (not a Gaussian) crowds
    # the diagonals, which an 8-sector histogram cannot see.
    rng = np.random.default_rng(0)
    directions = np.array(_tasks.sample_unit_vectors(rng, 20000))
    counts, _ = np.histogram(np.arctan2(directions[:, 1], directions[:, 0]), bins=16,
                             range=(-np.pi, np.pi))
    np.testing.assert_allclose(counts, 1250, atol=150)
