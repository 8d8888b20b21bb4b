"""Point meta-envs of the original ProMP code: dynamics and rewards worked out by hand."""
import garage_promp  # noqa: F401
from garage_promp.envs import PointEnv1D, PointEnvCorner, PointEnvMomentum

from garage import StepType
from garage.envs import normalize
import numpy as np
import pytest


def _place(env, **state):
    """Overwrite the gymnasium env's state (after a reset)."""
    env.reset()
    for name, value in state.items():
        setattr(env.gym_env, name, np.array(value, dtype=np.float64))


@pytest.mark.parametrize('cls,obs_dim,bound,horizon', [
    (PointEnvCorner, 2, 0.2, 100),
    (PointEnvMomentum, 4, 0.1, 100),
    (PointEnv1D, 1, 2., 5),
])
def test_dimensions(cls, obs_dim, bound, horizon):
    env = cls(seed=0)
    assert env.observation_space.shape == (obs_dim, )
    np.testing.assert_array_equal(env.action_space.high,
                                  np.float32(bound))
    assert env.spec.max_episode_length == horizon


@pytest.mark.parametrize('goal,action,reward', [
    # s = (1, 1) -> s' = (1.2, 1.2): nearest corner (2, 2);
    # progress |s - g| - |s' - g| = sqrt(2) - 0.8 sqrt(2) = 0.2 sqrt(2).
    ((2., 2.), (0.2, 0.2), 0.2 * np.sqrt(2)),
    ((-2., -2.), (0.2, 0.2), 0.),  # not the nearest corner
    # Action clipped to 0.2: s' = (1.2, 1), still nearest (2, 2).
    ((2., 2.), (5., 0.), np.sqrt(2) - np.hypot(0.8, 1.)),
    ((2., 2.), (-0.2, -0.2), np.sqrt(2) - np.sqrt(2 * 1.2**2)),
])
def test_corner_sparse_reward(goal, action, reward):
    env = PointEnvCorner(seed=0)
    env.set_task(goal)
    _place(env, _state=(1., 1.))
    es = env.step(np.array(action))
    assert es.reward == pytest.approx(reward, abs=1e-12)


def test_corner_sparse_reward_is_zero_near_the_start():
    env = PointEnvCorner(seed=0)
    env.set_task((2., 2.))
    _place(env, _state=(0.1, 0.1))
    # s' = (0.2, 0.15): |s'|_1 = 0.35 < 0.5.
    assert env.step(np.array([0.1, 0.05])).reward == 0.
    # s' = (0.3, 0.25): |s'|_1 = 0.55, progress towards (2, 2).
    assert env.step(np.array([0.1, 0.1])).reward > 0.


@pytest.mark.parametrize('reward_type,reward', [
    ('dense', -np.hypot(2.5, 0.5)),  # s' = (-0.5, 1.5), g = (2, 2)
    ('dense_squared', -(2.5**2 + 0.5**2)),
])
def test_corner_dense_rewards(reward_type, reward):
    env = PointEnvCorner(reward_type=reward_type, seed=0)
    env.set_task((2., 2.))
    _place(env, _state=(-0.6, 1.4))
    es = env.step(np.array([0.1, 0.1]))
    np.testing.assert_allclose(es.observation, [-0.5, 1.5], rtol=1e-6)
    assert es.reward == pytest.approx(reward, rel=1e-12)
    assert es.env_info['goal_dist'] == pytest.approx(np.hypot(2.5, 0.5))


def test_momentum_dynamics_and_sparse_reward():
    env = PointEnvMomentum(seed=0)
    env.set_task((2., 2.))
    _place(env, _position=(1., 1.), _velocity=(0.05, 0.))
    # v' = (0.05, 0) + clip((0.3, 0.1), +-0.1) = (0.15, 0.1); p' = (1.15, 1.1)
    es = env.step(np.array([0.3, 0.1]))
    np.testing.assert_allclose(es.observation, [1.15, 1.1, 0.15, 0.1],
                               rtol=1e-6)
    assert es.reward == pytest.approx(2. - np.hypot(0.85, 0.9), rel=1e-12)
    # Momentum: with no action the point keeps moving.
    es = env.step(np.zeros(2))
    np.testing.assert_allclose(es.observation[:2], [1.3, 1.2], rtol=1e-6)
    env.set_task((-2., -2.))
    assert env.step(np.zeros(2)).reward == 0.  # max(2 - |p - g|, 0)


def test_momentum_dense_reward():
    env = PointEnvMomentum(reward_type='dense', seed=0)
    env.set_task((2., -2.))
    _place(env, _position=(0., 0.), _velocity=(0., 0.))
    assert env.step(np.zeros(2)).reward == pytest.approx(-np.sqrt(8))


@pytest.mark.parametrize('goal,action,obs,reward', [
    (-1., 0.5, 0.5, np.exp(-0.1 * 1.5**2)),
    (1., 3., 2., np.exp(-0.1)),  # the action is clipped to 2
    (1., -2., -2., np.exp(-0.9)),
])
def test_1d_reward_and_transition(goal, action, obs, reward):
    env = PointEnv1D(seed=0)
    env.set_task(goal)
    env.reset()
    es = env.step(np.array([action]))
    assert es.observation[0] == obs
    assert es.reward == pytest.approx(reward, rel=1e-12)


def test_1d_rejects_a_wrong_action_shape():
    env = PointEnv1D(seed=0)
    env.reset()
    with pytest.raises(ValueError, match=r"action space's shape \(1,\), got array"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match=r'action must be real numbers of shape \(1,\)'):  # raw env
        env.gym_env.unwrapped.step(np.zeros(2))


def test_reset_distributions():
    corner, momentum, line = (PointEnvCorner(seed=1), PointEnvMomentum(seed=1),
                              PointEnv1D(seed=1))
    starts = np.array([corner.reset()[0] for _ in range(500)])
    assert np.abs(starts).max() <= 0.2 and np.abs(starts).max() > 0.19
    starts = np.array([momentum.reset()[0] for _ in range(500)])
    assert np.abs(starts[:, :2]).max() <= 0.2
    assert np.abs(starts[:, 2:]).max() <= 0.1
    assert np.abs(starts[:, 2:]).max() > 0.095
    starts = np.array([line.reset()[0] for _ in range(500)])
    assert np.abs(starts).max() <= 2. and starts.std() == pytest.approx(
        4 / np.sqrt(12), rel=0.1)


def test_point_envs_never_terminate():
    env = normalize(PointEnvMomentum(seed=0), expected_action_scale=10.)
    env.reset()
    types = [env.step(np.full(2, 10.)).step_type for _ in range(100)]
    assert types.count(StepType.TIMEOUT) == 1 and types[-1] == StepType.TIMEOUT
    assert StepType.TERMINAL not in types


def test_normalize_maps_to_a_hundredth_for_momentum():
    env = normalize(PointEnvMomentum(seed=0), expected_action_scale=10.)
    env.reset()
    velocity = env.unwrapped.gym_env._velocity.copy()
    env.step(np.array([3., -20.], dtype=np.float32))  # 0.01 a, clipped
    np.testing.assert_allclose(env.unwrapped.gym_env._velocity - velocity,
                               [0.03, -0.1], rtol=1e-6)


@pytest.mark.parametrize('kwargs,match', [
    ({'reward_type': 'shaped'}, 'reward_type'),
    ({'sparse_reward_radius': 0.}, 'sparse_reward_radius'),
    ({'sparse_reward_radius': '1'}, 'sparse_reward_radius'),
])
def test_invalid_point_env_arguments(kwargs, match):
    for cls in (PointEnvCorner, PointEnvMomentum):
        with pytest.raises(ValueError, match=match):
            cls(**kwargs)


@pytest.mark.parametrize('cls,task,match', [
    (PointEnvCorner, (1., 1.), 'one of the corners'),
    (PointEnvMomentum, (2., 2., 0.), r'shape \(2,\)'),
    (PointEnv1D, 0.5, r'task goal should be 1\. or -1\.'),
])
def test_bad_task(cls, task, match):
    with pytest.raises(ValueError, match=match):
        cls(seed=0).set_task(task)
