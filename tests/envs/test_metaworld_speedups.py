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


@pytest.mark.metaworld
def test_tolerance_equals_meta_worlds_bit_for_bit():
    """The fast tolerance against Meta-World's own on random arguments of every type the
    rewards pass (float and float64 x, int / float / float64 bounds and margins, margin 0,
    both sigmoids, NaN), and on what it hands back (other types, other sigmoids, bad
    arguments: the same result or the same error)."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    from metaworld.utils import reward_utils  # pylint: disable=import-outside-toplevel
    original = _metaworld_speedups.ORIGINALS['tolerance']
    fast = _metaworld_speedups.tolerance
    assert reward_utils.tolerance is fast
    rng = np.random.default_rng(0)

    def pick(options):  # by index: rng.choice would turn a mixed list into float64s
        return options[rng.integers(len(options))]

    def bits(value):
        return np.float64(value).tobytes()

    seen = set()
    for _ in range(20000):
        x = pick([float, np.float64])(rng.normal() * pick([1e-3, 0.1, 1., 10.]))
        if rng.random() < 0.01:
            x = pick([float, np.float64])(pick([np.nan, -0., np.inf, -np.inf]))
        lower = pick([0, 0.01, np.float64(0.02), 0.05, -0.])
        upper = lower + pick([0, 0.05, np.float64(0.1)])
        margin = pick([0, 0., 0.3, np.float64(0.1234567), 1, np.float64(rng.random())])
        value_at_margin = pick([0.1, 0.5, np.float64(0.1)])
        args = dict(bounds=(lower, upper), margin=margin,
                    sigmoid=pick(_metaworld_speedups.TOLERANCE_SIGMOIDS),
                    value_at_margin=value_at_margin)
        with np.errstate(all='ignore'):  # the original's unused np.where branch may overflow
            expected, got = original(x, **args), fast(x, **args)
        assert type(got) is type(expected) and bits(got) == bits(expected), (x, args)
        seen.add((type(x), type(lower), type(margin)))
    # Every combination of argument types the rewards pass was drawn.
    assert len(seen) == 2 * 3 * 3
    # Handed back: an int x, an array x, a float32 margin, another sigmoid.
    for x, args in ((1, {}), (np.array([0.1, 0.5]), dict(margin=0.2)),
                    (0.3, dict(margin=np.float32(0.2), sigmoid='long_tail')),
                    (0.3, dict(margin=0.2, sigmoid='linear'))):
        assert np.array_equal(fast(x, **args), original(x, **args))
    for args, message in ((dict(bounds=(1., 0.)), 'Lower bound'),
                          (dict(margin=-1.), 'non-negative'),
                          (dict(margin=0.5, value_at_margin=1.5), 'strictly between')):
        with pytest.raises(ValueError, match=message):
            original(0.3, **args)
        with pytest.raises(ValueError, match=message):
            fast(0.3, **args)


def _scripted_rollout(name, steps):
    """Observations and rewards of Meta-World's scripted policy for ``name`` (it grasps,
    pushes and opens, so the reward's branches are reached), one fixed goal."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    from metaworld.policies import ENV_POLICY_MAP  # pylint: disable=import-outside-toplevel
    env = ALL_V3_ENVIRONMENTS[name]()
    env._partially_observable = False  # pylint: disable=protected-access
    env._set_task_called = True  # pylint: disable=protected-access
    env._freeze_rand_vec = False  # pylint: disable=protected-access
    env.seed(5)
    np.random.seed(5)  # Meta-World draws an unseeded env's goal from numpy's global generator
    obs, _ = env.reset()
    policy = ENV_POLICY_MAP[name]()
    observations, rewards, infos = [obs], [], []
    for _ in range(steps):
        obs, reward, _, truncated, info = env.step(np.clip(policy.get_action(obs), -1, 1))
        observations.append(obs)
        rewards.append(reward)
        infos.append(sorted((k, float(v)) for k, v in info.items()))
        if truncated:
            break
    env.close()
    return np.stack(observations), np.array(rewards), infos


@pytest.mark.metaworld
@pytest.mark.slow
def test_every_ml45_class_steps_as_meta_worlds_own_code():
    """All four speed-ups together against Meta-World's own code, for all 50 classes of ML45
    (45 train, 5 held out), driven by Meta-World's scripted policies: every observation,
    reward and info entry equal bit for bit."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.env_dict import ML45_V3  # pylint: disable=import-outside-toplevel
    _metaworld()
    names = list(ML45_V3['train']) + list(ML45_V3['test'])
    assert len(names) == 50
    fast = {name: _scripted_rollout(name, 120) for name in names}
    successes = sum(any(dict(info)['success'] for info in fast[name][2]) for name in names)
    assert successes >= 25  # the scripted policies do reach the rewards' late branches
    try:
        _metaworld_speedups.uninstall()
        for name in names:
            slow = _scripted_rollout(name, 120)
            assert np.array_equal(fast[name][0], slow[0]), name
            assert np.array_equal(fast[name][1], slow[1]), name
            assert fast[name][2] == slow[2], name
    finally:
        _metaworld_speedups.install()


class _MetaWorldsOwn:
    """Inside, Meta-World's own code (every replacement uninstalled)."""

    def __enter__(self):
        _metaworld_speedups.uninstall()

    def __exit__(self, *exc_info):
        _metaworld_speedups.install()


def _step_record(name, steps, max_path_length=40, seed=4):
    """Everything a step returns and leaves in MuJoCo's data, for random actions beyond
    the action space (clipped by the mocap move), through a truncation, the error after
    it, and the unstable-simulation branch."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    env = ALL_V3_ENVIRONMENTS[name]()
    env._set_task_called = True  # pylint: disable=protected-access
    env._freeze_rand_vec = False  # pylint: disable=protected-access
    env.max_path_length = max_path_length
    env.seed(seed)
    np.random.seed(seed)
    record = [env.reset()[0]]
    rng = np.random.default_rng(seed)
    for t in range(steps):
        action = rng.uniform(-2, 2, 4).astype(np.float32 if t % 2 else np.float64)
        obs, reward, terminated, truncated, info = env.step(action)
        record += [obs, obs.dtype, reward, type(reward), terminated, truncated,
                   sorted(info.items()), env.data.mocap_pos.copy(), env.data.mocap_quat.copy(),
                   env.data.ctrl.copy(),
                   env.data.site_xpos.copy(), env.tcp_center, env._prev_obs.copy()]  # pylint: disable=protected-access
        if truncated:
            with pytest.raises(ValueError) as error:
                env.step(action)
            record.append(str(error.value))
            record.append(env.reset()[0])
    with pytest.raises(AssertionError) as error:
        env.step(np.zeros(3))
    record.append(str(error.value))
    env._did_see_sim_exception = True  # pylint: disable=protected-access
    unstable = env.step(np.zeros(4))
    record += [unstable[0], unstable[1:4], sorted(unstable[4].items())]
    env.close()
    return record


def _same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a == b and type(a) is type(b)


@pytest.mark.metaworld
@pytest.mark.parametrize('name', ['reach-v3', 'pick-place-v3', 'assembly-v3', 'bin-picking-v3'])
def test_step_and_its_pieces_equal_meta_worlds_own(name):
    """The fast ``step``, mocap move, goal sites and lookups against Meta-World's own code
    (one goal site, none, another site), step by step: observations (their dtype), rewards
    (their type), flags, infos, the mocap pose, controls and every site position, through a
    truncation, the errors and the unstable-simulation branch."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    _metaworld()
    assert SawyerXYZEnv.step is _metaworld_speedups.step
    fast = _step_record(name, 90)
    with _MetaWorldsOwn():
        assert SawyerXYZEnv.step is not _metaworld_speedups.step
        expected = _step_record(name, 90)
    _same(fast, expected)


@pytest.mark.metaworld
def test_lookups_equal_meta_worlds_own_for_every_body_and_site():
    """``get_body_com`` for every body, ``_get_site_pos`` for every site, the hand and the
    fingertips, on one state: equal values, and views of MuJoCo's data where the originals
    return views. Installing twice changes nothing, and uninstalling restores the
    originals (gymnasium's ``get_body_com`` inherited again)."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv  # pylint: disable=import-outside-toplevel
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    _metaworld()
    _metaworld_speedups.install()
    originals = _metaworld_speedups.ORIGINALS
    env = ALL_V3_ENVIRONMENTS['push-v3']()
    env._set_task_called = True  # pylint: disable=protected-access
    env._freeze_rand_vec = False  # pylint: disable=protected-access
    env.reset()
    env.step(np.array([0.3, -0.2, 0.1, 0.5]))
    model, data = env.model, env.data
    for body in range(model.nbody):
        name = model.body(body).name
        got = env.get_body_com(name)
        assert np.array_equal(got, originals['get_body_com'](env, name))
        assert np.shares_memory(got, data.xpos)
    for site in range(model.nsite):
        name = model.site(site).name
        got = env._get_site_pos(name)  # pylint: disable=protected-access
        assert np.array_equal(got, originals['_get_site_pos'](env, name))
        assert not np.shares_memory(got, data.site_xpos)
    assert np.shares_memory(env.get_endeff_pos(), data.xpos)
    assert np.array_equal(env.get_endeff_pos(), originals['get_endeff_pos'](env))
    assert np.array_equal(env.tcp_center, originals['tcp_center'].fget(env))
    with pytest.raises(KeyError):
        env.get_body_com('no-such-body')
    with _MetaWorldsOwn():
        assert SawyerXYZEnv.get_body_com is MujocoEnv.get_body_com
        assert 'get_body_com' not in vars(SawyerXYZEnv)
    assert SawyerXYZEnv.get_body_com is _metaworld_speedups.get_body_com
    env.close()


@pytest.mark.metaworld
def test_overridden_simulation_and_odd_arguments_take_meta_worlds_own_path():
    """A subclass's own ``do_simulation`` is called by the fast step; a list action and a
    two-entry site position go to Meta-World's own code (the same result, the same error)."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    _metaworld()
    calls = []

    class Counted(ALL_V3_ENVIRONMENTS['reach-v3']):
        def do_simulation(self, ctrl, n_frames):
            calls.append((list(ctrl), n_frames))
            super().do_simulation(ctrl, n_frames)

    env = Counted()
    env._set_task_called = True  # pylint: disable=protected-access
    env._freeze_rand_vec = False  # pylint: disable=protected-access
    env.reset()
    calls.clear()
    env.step(np.array([0., 0., 0., 0.25]))
    assert calls == [([0.25, -0.25], env.frame_skip)]
    before = env.data.mocap_pos.copy()
    env.set_xyz_action([0.5, -3.0, 0.0])
    moved = env.data.mocap_pos.copy()
    env.data.mocap_pos = before
    _metaworld_speedups.ORIGINALS['set_xyz_action'](env, [0.5, -3.0, 0.0])
    assert np.array_equal(moved, env.data.mocap_pos)
    with pytest.raises(ValueError):
        env._set_pos_site('goal', np.zeros(2))  # pylint: disable=protected-access
    env.close()


@pytest.mark.metaworld
def test_an_uninstall_stays_while_envs_are_built_and_stepped(monkeypatch):
    """Comparisons with Meta-World's own code hold: after ``uninstall``
    the package's env lookups do not put the replacements back (they did until 2026-11-25,
    and the ML10 rollout test compared the replacements with themselves); and lookups do not
    scan the loaded modules again once installed."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel

    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    _metaworld()
    try:
        _metaworld_speedups.uninstall()
        _rollout('reach-v3', steps=2)
        assert not getattr(SawyerXYZEnv.step, 'fast', False)
        assert ROTATION not in {getattr(m, 'Rotation', None) for n, m in sys.modules.items()
                                if n.startswith('metaworld.envs.')}
    finally:
        _metaworld_speedups.install()
    assert SawyerXYZEnv.step is _metaworld_speedups.step
    scans = []
    monkeypatch.setattr(_metaworld_speedups, 'install', lambda: scans.append(1))
    _rollout('reach-v3', steps=2)
    assert not scans
