"""The faster Meta-World code gives the same observations and rewards, bit for bit."""
import sys

from garage_promp.envs import _metaworld_speedups
from garage_promp.envs._metaworld_speedups import ROTATION, quat_from_matrix

import numpy as np
import pytest
from scipy.spatial.transform import Rotation


def _special_matrices():
    yield np.eye(3)
    for axis in np.eye(3):  # half turns: the trace is the smallest, a diagonal entry wins
        yield Rotation.from_rotvec(np.pi * axis).as_matrix()
    yield Rotation.from_euler('xyz', [1e-9, -2e-9, 3e-9]).as_matrix()  # near identity
    yield Rotation.from_euler('z', 90, degrees=True).as_matrix()  # ties in the decision


def test_equal_to_scipy_bit_for_bit():
    matrices = list(Rotation.random(20000, random_state=7).as_matrix()) + list(
        _special_matrices())
    for m in matrices:
        assert np.array_equal(quat_from_matrix(m), Rotation.from_matrix(m).as_quat()), m
        assert np.array_equal(ROTATION.from_matrix(m).as_quat(),
                              Rotation.from_matrix(m).as_quat())
    # float32 input (as MuJoCo would never give, but a caller might) and a flat view
    m = matrices[0].astype(np.float32)
    assert np.array_equal(quat_from_matrix(m.reshape(9)), Rotation.from_matrix(
        m.astype(float)).as_quat())


def test_what_is_not_a_rotation_is_scipys_to_handle():
    reflection = np.diag([1., 1., -1.])
    with pytest.raises(ValueError, match='determinant'):
        Rotation.from_matrix(reflection)
    with pytest.raises(ValueError, match='determinant'):
        quat_from_matrix(reflection)
    skewed = Rotation.random(random_state=1).as_matrix() + 1e-6  # projected by SciPy
    assert np.array_equal(quat_from_matrix(skewed), Rotation.from_matrix(skewed).as_quat())
    # Anything but from_matrix(...).as_quat() is SciPy's own.
    assert ROTATION.from_euler is Rotation.from_euler
    m = Rotation.random(random_state=2).as_matrix()
    assert np.array_equal(ROTATION.from_matrix(m).as_matrix(), Rotation.from_matrix(m).as_matrix())
    assert np.array_equal(ROTATION.from_matrix(m).as_quat(canonical=True),
                          Rotation.from_matrix(m).as_quat(canonical=True))


def _rollout(env_name, seed=3, steps=15):
    """Observations and rewards of random actions on one goal of ``env_name``."""
    from garage_promp.envs import MetaWorldTaskSampler, make_benchmark  # pylint: disable=import-outside-toplevel
    sampler = MetaWorldTaskSampler(make_benchmark('ML1', env_name, seed=1), 'train',
                                   max_episode_length=steps + 1, seed=seed)
    env = sampler.sample(1)[0]()
    rng = np.random.default_rng(seed)
    observations, rewards = [env.reset()[0]], []
    for _ in range(steps):
        step = env.step(rng.uniform(-1, 1, env.action_space.shape))
        observations.append(step.observation)
        rewards.append(step.reward)
    env.close()
    return np.stack(observations), np.array(rewards)


@pytest.mark.metaworld
def test_meta_world_observations_and_rewards_are_unchanged():
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.env_dict import ML10_V3  # pylint: disable=import-outside-toplevel
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    _metaworld()
    modules = [m for n, m in sys.modules.items() if n.startswith('metaworld.envs.')
               and getattr(m, 'Rotation', None) is not None]
    assert len(modules) > 20 and all(m.Rotation is ROTATION for m in modules)
    assert SawyerXYZEnv.touching_object is _metaworld_speedups.touching_object
    names = list(ML10_V3['train']) + list(ML10_V3['test'])
    fast = {name: _rollout(name) for name in names}
    try:
        _metaworld_speedups.uninstall()
        assert SawyerXYZEnv.touching_object is not _metaworld_speedups.touching_object
        for name in names:
            slow = _rollout(name)
            assert np.array_equal(fast[name][0], slow[0]), name
            assert np.array_equal(fast[name][1], slow[1]), name
    finally:
        assert _metaworld_speedups.install() == len(modules)


@pytest.mark.metaworld
def test_touching_object_equals_meta_worlds_while_grasping():
    """Meta-World's scripted pick-and-place policy grasps the puck: at every step the contact
    test (and the forces behind it) equals Meta-World's own, and it is True for a while."""
    from garage_promp.envs import MetaWorldTaskSampler, make_benchmark  # pylint: disable=import-outside-toplevel
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.policies import SawyerPickPlaceV3Policy  # pylint: disable=import-outside-toplevel
    _metaworld()
    original = _metaworld_speedups.ORIGINALS['touching_object']
    sampler = MetaWorldTaskSampler(make_benchmark('ML1', 'pick-place-v3', seed=1), 'train',
                                   max_episode_length=200, seed=1)
    env = sampler.sample(1)[0]()
    obs, _ = env.reset()
    inner = env.unwrapped
    policy = SawyerPickPlaceV3Policy()
    touching, ids = [], [inner._get_id_main_object(), inner.data.geom('leftpad_geom').id]
    for _ in range(150):
        step = env.step(np.clip(policy.get_action(obs), -1, 1))
        obs = step.observation
        for geom in ids:
            fast = _metaworld_speedups.touching_object(inner, geom)
            assert fast == original(inner, geom)
        touching.append(_metaworld_speedups.touching_object(inner, ids[0]))
        if step.last:
            break
    assert any(touching) and not all(touching)


@pytest.mark.metaworld
@pytest.mark.slow
def test_observation_layout_equals_meta_worlds_for_every_ml45_class():
    """The fast observation layout against Meta-World's own, on the same states, for all 50
    classes of ML45 (45 train, 5 held out): at reset and after each of a few random steps,
    equal bit for bit, dtype included."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.env_dict import ALL_V3_ENVIRONMENTS, ML45_V3  # pylint: disable=import-outside-toplevel
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    _metaworld()
    fast = _metaworld_speedups.curr_obs_combined_no_goal
    assert SawyerXYZEnv._get_curr_obs_combined_no_goal is fast
    original = _metaworld_speedups.ORIGINALS['_get_curr_obs_combined_no_goal']
    names = list(ML45_V3['train']) + list(ML45_V3['test'])
    assert len(names) == 50
    rng = np.random.default_rng(0)
    for name in names:
        env = ALL_V3_ENVIRONMENTS[name]()
        env._partially_observable = False  # pylint: disable=protected-access
        env._set_task_called = True  # pylint: disable=protected-access
        env._freeze_rand_vec = False  # a random goal, as Meta-World's own env tests do  # pylint: disable=protected-access
        env.reset(seed=1)
        for _ in range(4):
            got, expected = fast(env), original(env)
            assert got.dtype == expected.dtype and np.array_equal(got, expected), name
            env.step(rng.uniform(-1, 1, env.action_space.shape))
        env.close()
