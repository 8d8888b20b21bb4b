"""Meta-World's step for a whole wave (``_metaworld_batch.step_batch``) is each env's own
``step``, bit for bit: observations, rewards, infos and the simulations' state."""
from garage_promp.envs import _cstep, _metaworld_batch, _metaworld_speedups
from garage_promp.envs._metaworld_batch import (
    quats_from_matrices,
    rect_prism_tolerance,
    row_norms,
    step_batch,
    tolerance_rows,
)

import numpy as np
import pytest
from scipy.spatial.transform import Rotation


def _env(name, seed, max_path_length=60, reward_function_version='v2'):
    """A Meta-World env of class ``name`` with the goal in its observation (for the
    scripted policies), reset with goals drawn from ``seed``."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    env = ALL_V3_ENVIRONMENTS[name](reward_function_version=reward_function_version)
    env._partially_observable = False  # pylint: disable=protected-access
    env._set_task_called = True  # pylint: disable=protected-access
    env._freeze_rand_vec = False  # pylint: disable=protected-access
    env.max_path_length = max_path_length
    env.seed(seed)
    np.random.seed(seed)  # Meta-World draws an unseeded env's goal from numpy's global generator
    obs, _ = env.reset()
    return env, obs


def _state(env):
    data = env.data
    return [data.qpos.copy(), data.qvel.copy(), data.qacc_warmstart.copy(),
            data.mocap_pos.copy(), data.mocap_quat.copy(), data.ctrl.copy(),
            data.site_xpos.copy(), data.xpos.copy(), np.array(data.time), data.qacc.copy(),
            data.cacc.copy(), data.cfrc_ext.copy(), data.efc_force.copy(),
            env._prev_obs.copy(), np.array(env._last_stable_obs),  # pylint: disable=protected-access
            np.array(env.curr_path_length)]


def _move_object(env, point, where):
    """Move the object (its free joint, ``qpos[9:12]``) so that ``point``, a point on it
    now, comes to ``where``."""
    env._set_obj_xyz(env.data.qpos[9:12] + (np.asarray(where) - point))  # pylint: disable=protected-access


#: Per class: the point of the object its success test measures, and where that point
#: succeeds (default: the object's position, at the target).
_SUCCESS = {
    'SawyerBasketballEnvV3': lambda env: (  # the ball just above the hoop, z = 0.3
        env._get_pos_objects(), np.append(env._target_pos[:2], 0.3)),  # pylint: disable=protected-access
    'SawyerPegInsertionSideEnvV3': lambda env: (  # the peg's head, inside the box
        env._get_site_pos('pegHead'), env._target_pos),  # pylint: disable=protected-access
}


def _teleport(t, env):
    """Hold the object between the fingertips from step 5 to 19 (the gripper closes on it,
    above its start), and put it on the target at step 40: the rewards' grasp and success
    branches."""
    if 5 <= t < 20:
        _move_object(env, env._get_pos_objects(), env.tcp_center)  # pylint: disable=protected-access
    elif t == 30 and type(env).__name__ == 'SawyerPegInsertionSideEnvV3':
        # the peg's head into its first collision box (the reward's in-the-box branch)
        corners = [env._get_site_pos(f'{c}_corner_collision_box_1')  # pylint: disable=protected-access
                   for c in ('bottom_right', 'top_left')]
        _move_object(env, env._get_site_pos('pegHead'), (corners[0] + corners[1]) / 2)  # pylint: disable=protected-access
    elif t == 40:
        success = _SUCCESS.get(type(env).__name__, lambda env: (
            env._get_pos_objects(), env._target_pos))  # pylint: disable=protected-access
        _move_object(env, *success(env))


def _rollout(names, steps, batched, seed=5, random_every=3, hook=None, version='v2',
             types=False):
    """Meta-World's scripted policies (which grasp, push and open, so the rewards' late
    branches are reached), every third step random actions beyond the action space, in
    float32 and float64 by turns; one env per entry of ``names``, stepped together by
    :func:`step_batch` or one by one by their own ``step``; with ``types``, each info
    value's type is recorded too (a mixed wave's infos are each env's own dict)."""
    from metaworld.policies import ENV_POLICY_MAP  # pylint: disable=import-outside-toplevel
    made = [_env(name, seed + k, max(60, steps), version) for k, name in enumerate(names)]
    envs = [env for env, _ in made]
    obs = np.stack([o for _, o in made])
    policies = [ENV_POLICY_MAP[name]() for name in names]
    rng = np.random.default_rng(seed)
    record = []
    for t in range(steps):
        if hook is not None:
            for env in envs:
                hook(t, env)
        actions = np.stack([np.clip(p.get_action(o), -1, 1) for p, o in zip(policies, obs)])
        if hook is not None and 5 <= t < 40:
            actions[:, :3], actions[:, 3] = 0., 1.  # hold still, close the gripper
        if random_every and t % random_every == random_every - 1:
            actions = rng.uniform(-2, 2, actions.shape)
        actions = actions.astype(np.float32 if t % 2 else np.float64)
        if batched:
            got = step_batch(envs, actions)
            assert got is not None
            obs, rewards, truncated, infos = got
            if isinstance(infos, dict):
                infos = [{k: v[n] for k, v in infos.items()} for n in range(len(envs))]
        else:
            outs = [env.step(a) for env, a in zip(envs, actions)]
            obs = np.stack([out[0] for out in outs])
            rewards = [out[1] for out in outs]
            truncated = [out[3] for out in outs]
            infos = [out[4] for out in outs]
        record.append((obs.copy(), [float(r) for r in rewards], [bool(x) for x in truncated],
                       [sorted((k, float(v)) + ((type(v).__name__, ) if types else ())
                               for k, v in info.items()) for info in infos],
                       [_state(env) for env in envs]))
        if any(truncated):
            break
    return record


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for t, ((obs_a, rew_a, tr_a, inf_a, st_a), (obs_b, rew_b, tr_b, inf_b, st_b)) in enumerate(
            zip(got, expected)):
        assert obs_a.dtype == obs_b.dtype and np.array_equal(obs_a, obs_b), t
        assert rew_a == rew_b and tr_a == tr_b and inf_a == inf_b, t
        for a, b in zip(st_a, st_b):
            for x, y in zip(a, b):
                assert np.array_equal(x, y), t


class _MetaWorldsOwn:
    """Inside, Meta-World's own code (every replacement uninstalled)."""

    def __enter__(self):
        _metaworld_speedups.uninstall()

    def __exit__(self, *exc_info):
        _metaworld_speedups.install()


def _ml45_names():
    from metaworld.env_dict import ML45_V3  # pylint: disable=import-outside-toplevel
    names = list(ML45_V3['train']) + list(ML45_V3['test'])
    assert len(names) == 50
    return names


@pytest.mark.metaworld
@pytest.mark.slow
def test_every_ml45_class_steps_in_a_wave_as_with_meta_worlds_own_code():
    """Two envs of each of the 50 ML45 classes (ML10's among them), each class's wave by
    :func:`step_batch` against Meta-World's own ``step`` env by env: observations,
    rewards, truncations, infos, and the simulations' state (positions, velocities, the
    solver's warm start, mocap, controls, every site and body, time) with each env's
    previous frame and step count, equal bit for bit, through the end of the episode."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    for name in _ml45_names():
        batched = _rollout([name, name], 60, True)
        with _MetaWorldsOwn():
            own = _rollout([name, name], 60, False)
        assert len(own) == 60, name
        _assert_same(batched, own)


#: Classes whose object is a joint (a door, a drawer, a window, a button): Meta-World's
#: scripted policy reaches their rewards' late branches without the object moved by hand.
_ARTICULATED = frozenset({'SawyerDoorEnvV3', 'SawyerDrawerCloseEnvV3', 'SawyerWindowOpenEnvV3',
                          'SawyerButtonPressTopdownEnvV3'})
#: Classes whose reward has no success override (10), or whose success is the hand's.
_NO_TEN = frozenset({'SawyerReachEnvV3', 'SawyerWindowOpenEnvV3',
                     'SawyerButtonPressTopdownEnvV3'})


@pytest.mark.metaworld
@pytest.mark.parametrize('class_name', sorted(
    name for (_, name), kernel in _metaworld_batch.KERNELS.items() if kernel.reward))
def test_each_kernel_through_its_late_branches_as_meta_worlds_own_code(class_name):
    """Each class with an array reward, its object put into the closing gripper and later
    onto the target (:func:`_teleport`), or for a joint's class its scripted policy run
    to success: every branch of the reward and info is reached (a grasp, a reward between
    1 and 10, a success and its reward of 10), and everything equals Meta-World's own
    code."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS  # pylint: disable=import-outside-toplevel
    name, = [n for n, cls in ALL_V3_ENVIRONMENTS.items() if cls.__name__ == class_name]
    steps, hook = (150, None) if class_name in _ARTICULATED else (60, _teleport)
    batched = _rollout([name, name], steps, True, random_every=0, hook=hook)
    with _MetaWorldsOwn():
        own = _rollout([name, name], steps, False, random_every=0, hook=hook)
    _assert_same(batched, own)
    infos = [dict(info) for step in batched for info in step[3]]
    rewards = np.array([step[1] for step in batched])
    assert ((rewards > 1) & (rewards < 10)).any(), name
    assert any(info['grasp_success'] for info in infos), name
    if class_name != 'SawyerReachEnvV3':  # reach's success is the hand's, not the object's
        assert any(info['success'] for info in infos), name
    if class_name not in _NO_TEN:
        assert (rewards == 10).any(), name  # the success override


def _target_beside_the_hand(t, env):
    """The reach target put 0.045 from the tool centre at step 10 and 0.055 at step 20 (the
    hand held still from step 5: the distance drifts by under 0.004)."""
    if t in (10, 20):
        env._target_pos = env.tcp_center + np.array([0.045 if t == 10 else 0.055, 0., 0.])  # pylint: disable=protected-access


@pytest.mark.metaworld
def test_reach_success_on_either_side_of_its_threshold_as_meta_worlds_own_code():
    """reach-v3's success is a tool centre within 0.05 of the target: distances of
    0.045-0.049 and 0.054-0.056, with the batch and with Meta-World's own code."""
    batched = _rollout(['reach-v3'] * 2, 30, True, random_every=0, hook=_target_beside_the_hand)
    with _MetaWorldsOwn():
        own = _rollout(['reach-v3'] * 2, 30, False, random_every=0, hook=_target_beside_the_hand)
    _assert_same(batched, own)
    infos = [[dict(info) for info in step[3]] for step in batched]
    for steps, low, high, success in ((range(10, 20), 0.045, 0.049, 1.),
                                      (range(20, 30), 0.054, 0.056, 0.)):
        for t in steps:
            for info in infos[t]:
                assert low < info['near_object'] < high and info['success'] == success, t


@pytest.mark.metaworld
def test_a_mixed_wave_and_the_python_loop_step_as_meta_worlds_own_code(monkeypatch):
    """A wave mixing classes (each with an array reward, and one without), with the compiled
    loop and without it (the Python loop), equals Meta-World's own code, each info value
    of the type Meta-World gives it."""
    names = ['reach-v3', 'pick-place-v3', 'push-v3', 'reach-v3', 'door-open-v3', 'push-v3',
             'drawer-close-v3', 'button-press-topdown-v3', 'peg-insert-side-v3',
             'window-open-v3', 'sweep-v3', 'basketball-v3', 'drawer-open-v3']
    batched = _rollout(names, 40, True, types=True)
    with _MetaWorldsOwn():
        own = _rollout(names, 40, False, types=True)
    _assert_same(batched, own)
    monkeypatch.setattr(_cstep, 'library', lambda: None)
    _assert_same(_rollout(names, 40, True, types=True), own)


@pytest.mark.metaworld
def test_a_reach_wave_uses_its_kernel_and_returns_arrays(monkeypatch):
    """``reach-v3``, ``push-v3`` and ``door-open-v3`` waves take the array reward (infos as
    arrays); a class without a reward kernel, a class with a patched method its kernel
    stands for (the door's grab effort) and Meta-World's own code do not (infos per env,
    or no batch); an env with that method on the instance takes the env-by-env loop."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    from metaworld.envs.sawyer_door_v3 import SawyerDoorEnvV3  # pylint: disable=import-outside-toplevel
    envs = [_env('reach-v3', s)[0] for s in (1, 2)]
    got = step_batch(envs, np.zeros((2, 4)))
    assert isinstance(got[3], dict) and got[3]['success'].shape == (2, )
    for name in ('push-v3', 'door-open-v3'):
        wave = [_env(name, s)[0] for s in (1, 2)]
        assert isinstance(step_batch(wave, np.zeros((2, 4)))[3], dict), name
    others = [_env('drawer-open-v3', s)[0] for s in (1, 2)]
    assert isinstance(step_batch(others, np.zeros((2, 4)))[3], list)
    doors = [_env('door-open-v3', s)[0] for s in (1, 2)]
    doors[1]._reward_grab_effort = lambda actions: 0.25  # pylint: disable=protected-access
    assert step_batch(doors, np.zeros((2, 4))) is None
    monkeypatch.setattr(SawyerDoorEnvV3, '_reward_grab_effort', staticmethod(lambda a: 0.75))
    got = step_batch([_env('door-open-v3', s)[0] for s in (1, 2)], np.zeros((2, 4)))
    assert isinstance(got[3], list) and [info['grasp_reward'] for info in got[3]] == [0.75] * 2
    with _MetaWorldsOwn():
        assert step_batch(envs, np.zeros((2, 4))) is None


@pytest.mark.metaworld
def test_what_the_batch_does_not_reproduce_is_left_to_each_env():
    """None (and nothing changed) for: an episode at its end (Meta-World's own step raises),
    actions of the wrong width, an env with its own ``step`` or reward on the instance, a
    subclass with its own observation, the unstable-simulation branch, a bad goal site."""
    from metaworld.envs.sawyer_reach_v3 import SawyerReachEnvV3  # pylint: disable=import-outside-toplevel

    envs = [_env('reach-v3', s)[0] for s in (1, 2)]
    before = [_state(env) for env in envs]
    envs[1].curr_path_length = envs[1].max_path_length
    assert step_batch(envs, np.zeros((2, 4))) is None
    envs[1].curr_path_length = 0
    assert step_batch(envs, np.zeros((2, 3))) is None
    for name in ('step', 'evaluate_state', 'compute_reward'):
        setattr(envs[1], name, lambda *args: None)
        assert step_batch(envs, np.zeros((2, 4))) is None, name
        delattr(envs[1], name)
    envs[1]._did_see_sim_exception = True  # pylint: disable=protected-access
    assert step_batch(envs, np.zeros((2, 4))) is None
    envs[1]._did_see_sim_exception = False  # pylint: disable=protected-access
    envs[1]._target_pos = envs[1]._target_pos[:2]  # pylint: disable=protected-access
    assert step_batch(envs, np.zeros((2, 4))) is None
    after = [_state(env) for env in envs]
    for a, b in zip(before, after):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)

    class OwnObservation(SawyerReachEnvV3):
        def _get_obs(self):
            return super()._get_obs()

    assert not _metaworld_batch._class_ok(OwnObservation)  # pylint: disable=protected-access
    assert _metaworld_batch._class_ok(SawyerReachEnvV3)  # pylint: disable=protected-access


@pytest.mark.metaworld
def test_partially_observable_envs_see_a_zero_goal():
    """ML1's envs hide the goal: zeros in the batch as in their own step."""
    names = ['reach-v3', 'reach-v3']
    envs_a = [_env(name, 3 + k)[0] for k, name in enumerate(names)]
    envs_b = [_env(name, 3 + k)[0] for k, name in enumerate(names)]
    for env in envs_a + envs_b:
        env._partially_observable = True  # pylint: disable=protected-access
        del env.sawyer_observation_space  # Meta-World's cached space, as set_task does it
    actions = np.full((2, 4), 0.3, dtype=np.float32)
    obs = step_batch(envs_a, actions)[0]
    with _MetaWorldsOwn():
        own = np.stack([env.step(a)[0] for env, a in zip(envs_b, actions)])
    assert np.array_equal(obs, own) and not obs[:, -3:].any()


def test_the_array_forms_equal_numpys_and_meta_worlds_scalar_forms():
    """``row_norms`` is ``np.linalg.norm`` of each row (NumPy's dot: the BLAS's sum, which
    a sequential or fused sum does not always give), ``tolerance_rows`` Meta-World's
    ``tolerance`` of each number (its square by ``pow``, which NumPy's array square is not
    always; the long tail and the Gaussian), in and out of bounds, with a zero margin and
    NaN; ``rect_prism_tolerance`` Meta-World's, inside and outside the box."""
    from garage_promp.envs.metaworld import _metaworld  # pylint: disable=import-outside-toplevel
    _metaworld()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((20000, 3)) * rng.choice([1e-3, 1., 1e3], (20000, 1))
    assert np.array_equal(row_norms(vectors), [np.linalg.norm(v) for v in vectors])
    x = np.abs(rng.standard_normal(20000)) * rng.choice([1e-3, 0.1, 1., 1e3], 20000)
    x[:10] = [0., 0.05, 0.05 + 1e-17, np.nan, 0.02, 0.3, 1e300, 0.06, 0.049, 7.]
    margin = np.abs(rng.standard_normal(20000)) + 1e-3
    margin[[1, 5, 9]] = 0.
    tolerance = _metaworld_speedups.ORIGINALS['tolerance']
    expected = [tolerance(float(a), bounds=(0, 0.05), margin=float(m), sigmoid='long_tail')
                for a, m in zip(x, margin)]
    got = tolerance_rows(x, 0.05, margin)
    assert np.array_equal(got, expected, equal_nan=True)
    expected = [tolerance(float(a), bounds=(0.01, 0.05), margin=float(m), sigmoid='gaussian')
                for a, m in zip(x, margin)]
    assert np.array_equal(tolerance_rows(x, 0.05, margin, lower=0.01, sigmoid='gaussian'),
                          expected, equal_nan=True)
    from metaworld.utils.reward_utils import rect_prism_tolerance as own_prism  # pylint: disable=import-outside-toplevel
    zero, one = rng.uniform(-1, 1, (2, 20000, 3))
    one[:5] = zero[:5]  # a flat box: 0/0 inside it
    points = zero + rng.uniform(-0.2, 1.2, (20000, 3)) * (one - zero)  # inside and out
    points[5:8] = [np.nan, 0., 0.], zero[6], one[7]  # NaN, the corners themselves
    with np.errstate(invalid='ignore'):
        expected = [own_prism(c, z, o) for c, z, o in zip(points, zero, one)]
        got = rect_prism_tolerance(points, zero, one)
    assert np.array_equal(got, expected, equal_nan=True)
    assert [type(v) for v in got] == [type(v) for v in expected]  # float64 inside, float out
    assert 0.2 < np.mean(np.array(got) < 1) < 0.8  # both branches, often
    for args in ((x, 0.05, margin, 0.1, 0.06), (x, 0.05, margin - 2.)):  # Meta-World's errors
        with pytest.raises(ValueError) as ours:
            tolerance_rows(*args)
        with pytest.raises(ValueError) as theirs:
            tolerance(float(x[0]), bounds=(args[4] if len(args) > 4 else 0., 0.05),
                      margin=float(args[2][0]), sigmoid='long_tail')
        assert str(ours.value).split(':')[0] == str(theirs.value).split(':')[0]


def test_quaternions_equal_the_row_by_row_function_with_and_without_the_library():
    """Every branch of SciPy's algorithm, and rows that are no rotation (SciPy's own
    projection), with the compiled ``gp_quats`` and without the library."""
    rotations = Rotation.random(8000, random_state=1).as_matrix().reshape(-1, 9)
    near_half_turns = np.array([Rotation.from_rotvec(np.pi * 0.999 * axis).as_matrix().ravel()
                                for axis in np.eye(3)])
    matrices = np.concatenate([rotations, near_half_turns, (np.eye(3) * 1.1).reshape(1, 9),
                               rotations[:5] * (1 + 1e-9)])
    branches = np.argmax(np.stack([matrices[:, 0], matrices[:, 4], matrices[:, 8],
                                   matrices[:, [0, 4, 8]].sum(axis=1)], axis=1), axis=1)
    assert set(branches.tolist()) == {0, 1, 2, 3}
    expected = np.array([_metaworld_speedups.quat_from_matrix(m) for m in matrices])
    lib = _cstep.library()
    for library in ([lib] if lib is not None else []) + [None]:
        assert np.array_equal(quats_from_matrices(matrices, library), expected)


def test_quaternions_at_ties_and_at_each_single_failed_rotation_check_equal_scipy():
    """Exact ties in SciPy's choice of branch (a quarter turn: two diagonal entries equal;
    SciPy takes the first maximum) and matrices that fail exactly one of the six checks of
    a rotation (one row's norm, or one pair's dot product), each with the compiled
    gp_quats and without the library, against SciPy itself."""
    ties = [np.round(Rotation.from_euler(axis, angle, degrees=True).as_matrix())  # exact
            for axis in 'xyz' for angle in (90, -90, 180)] + [np.eye(3)]
    base = Rotation.random(3, random_state=5).as_matrix()
    failing_one = []
    for m in base:
        for row in range(3):  # one norm off by about 2e-5 (the tolerance is 1e-5)
            scaled = m.copy()
            scaled[row] *= 1 + 1e-5
            failing_one.append(scaled)
        for i, j in ((0, 1), (0, 2), (1, 2)):  # one dot product 1e-7 from 0 (tolerance 1e-12)
            skewed = m.copy()
            skewed[j] += 1e-7 * skewed[i]
            failing_one.append(skewed)
    matrices = np.array(ties + failing_one)
    expected = np.array([Rotation.from_matrix(m).as_quat() for m in matrices])
    lib = _cstep.library()
    for library in ([lib] if lib is not None else []) + [None]:
        assert np.array_equal(quats_from_matrices(matrices.reshape(-1, 9), library), expected)


def test_gather_checks_its_spec():
    lib = _cstep.library()
    if lib is None:
        pytest.skip(f'no compiled library: {_cstep.reason}')
    import mujoco  # pylint: disable=import-outside-toplevel
    model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body name="b" pos="1 2 3">'
                                           '<geom size="1"/></body></worldbody></mujoco>')
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    _, ptrs = _cstep.pointers([model], [data])
    spec = np.array([[0], [3], [3]], dtype=np.int32)
    assert np.array_equal(_cstep.gather(lib, ptrs, spec, 3), [[1., 2., 3.]])
    with pytest.raises(ValueError, match='unknown field'):
        _cstep.gather(lib, ptrs, np.array([[99], [0], [3]], dtype=np.int32), 3)
    with pytest.raises(ValueError, match='C-contiguous'):
        _cstep.gather(lib, ptrs, spec.astype(np.int64), 3)
    with pytest.raises(ValueError, match='sum to 2'):
        _cstep.gather(lib, ptrs, spec, 2)
    with pytest.raises(ValueError, match='non-negative'):
        _cstep.gather(lib, ptrs, np.array([[0], [-3], [3]], dtype=np.int32), 3)


@pytest.mark.metaworld
def test_the_contact_test_equals_meta_worlds_while_pushing():
    """The compiled pad-force sums (``gp_pad_forces``) give ``touching_main_object`` of
    every env of a ``push-v3`` wave driven by Meta-World's scripted policy, through steps
    where the pads hold the puck and steps where they do not."""
    from metaworld.policies import ENV_POLICY_MAP  # pylint: disable=import-outside-toplevel
    lib = _cstep.library()
    if lib is None:
        pytest.skip(f'no compiled library: {_cstep.reason}')
    made = [_env('push-v3', s) for s in (1, 2, 3)]
    envs = [env for env, _ in made]
    obs = np.stack([o for _, o in made])
    policy = ENV_POLICY_MAP['push-v3']()
    seen = set()
    for _ in range(59):
        actions = np.stack([np.clip(policy.get_action(o), -1, 1) for o in obs])
        obs = step_batch(envs, actions)[0]
        _, ptrs = _cstep.pointers([e.model for e in envs], [e.data for e in envs])
        got = _metaworld_batch._touching(lib, envs, ptrs, 'objGeom')  # pylint: disable=protected-access
        expected = [_metaworld_speedups.ORIGINALS['touching_object'](
            env, env.data.geom('objGeom').id) for env in envs]
        assert got.tolist() == expected
        seen.update(expected)
        # The sums themselves, as Meta-World's touching_object forms them: every contact
        # between a pad and the object, its efc_force, in the contacts' order.
        pads = [envs[0].data.geom(f'{side}pad_geom').id for side in ('left', 'right')]
        sums = []
        for env in envs:
            obj = env.data.geom('objGeom').id
            pairs = [[c for c in env.data.contact if pad in (c.geom1, c.geom2)
                      and obj in (c.geom1, c.geom2)] for pad in pads]
            sums.append([sum(env.data.efc_force[c.efc_address] for c in pair) for pair in pairs])
        forces = _cstep.pad_forces(lib, ptrs, np.full(len(envs), envs[0].data.geom('objGeom').id),
                                   *pads)
        assert np.array_equal(forces, np.array(sums, dtype=float))
    assert seen == {True, False}


@pytest.mark.metaworld
def test_v1_rewards_and_non_finite_actions_step_as_meta_worlds_own_code(tmp_path, monkeypatch):
    """The kernels' classes with Meta-World's v1 rewards (their own ``evaluate_state`` row
    by row), and actions with NaN and inf, equal Meta-World's own code."""
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to MUJOCO_LOG.TXT here
    names = ['reach-v3', 'push-v3', 'pick-place-v3']
    batched = _rollout(names, 20, True, version='v1')
    with _MetaWorldsOwn():
        own = _rollout(names, 20, False, version='v1')
    _assert_same(batched, own)
    envs_a = [_env(name, 3)[0] for name in names]
    envs_b = [_env(name, 3)[0] for name in names]
    actions = np.array([[np.nan, 0., 0., 1.], [np.inf, -np.inf, 0., np.nan],
                        [0.5, np.nan, 0.2, -np.inf]], dtype=np.float32)
    with np.errstate(invalid='ignore'):
        obs, rewards, _, _ = step_batch(envs_a, actions)
        with _MetaWorldsOwn():
            own_steps = [env.step(a) for env, a in zip(envs_b, actions)]
    assert np.array_equal(obs, np.stack([o[0] for o in own_steps]), equal_nan=True)
    assert np.array_equal(rewards, [float(o[1]) for o in own_steps], equal_nan=True)


@pytest.mark.metaworld
def test_overridden_reward_parts_keep_meta_worlds_path(monkeypatch):
    """An env whose instance replaces a part of the reward a kernel stands for (the caging
    reward, the target radius) takes the env-by-env loop; a class whose reward is patched
    loses its kernel (its own ``evaluate_state`` row by row), with the patched values."""
    from metaworld.envs.sawyer_reach_v3 import SawyerReachEnvV3  # pylint: disable=import-outside-toplevel
    envs = [_env('push-v3', s)[0] for s in (1, 2)]
    for name, value in (('_gripper_caging_reward', lambda *a, **k: 0.5), ('TARGET_RADIUS', 1.)):
        setattr(envs[1], name, value)
        assert step_batch(envs, np.zeros((2, 4))) is None, name
        delattr(envs[1], name)
    original = SawyerReachEnvV3.compute_reward

    def patched(self, actions, obs):
        reward, *rest = original(self, actions, obs)
        return (reward + 1., *rest)

    monkeypatch.setattr(SawyerReachEnvV3, 'compute_reward', patched)
    reaches = [_env('reach-v3', s)[0] for s in (1, 2)]
    twins = [_env('reach-v3', s)[0] for s in (1, 2)]
    _, rewards, _, infos = step_batch(reaches, np.zeros((2, 4)))
    assert isinstance(infos, list)
    assert rewards.tolist() == [float(env.step(np.zeros(4))[1]) for env in twins]


@pytest.mark.metaworld
def test_a_reward_error_names_its_env():
    """Meta-World's error from one env's reward (a negative ``tolerance`` margin) is raised
    with ``lean_index``, the env's row, as the env-by-env loop raises it."""
    envs = [_env('push-v3', s)[0] for s in (1, 2, 3)]
    envs[1].init_tcp = envs[1].obj_init_pos.copy()
    with pytest.raises(ValueError, match='margin') as error:
        step_batch(envs, np.zeros((3, 4)))
    assert error.value.lean_index == 1


@pytest.mark.metaworld
def test_meta_world_env_batch_step_equals_its_env_by_env_loop(monkeypatch):
    """``MetaWorldEnv.batch_step`` of a wave mixing classes (kernels and not), then of one
    class with a kernel: observations, rewards, ends and every env info (values and
    dtypes) equal the env-by-env loop's."""
    from garage_promp.envs.metaworld import MetaWorldEnv  # pylint: disable=import-outside-toplevel

    import metaworld  # pylint: disable=import-outside-toplevel
    benchmark = metaworld.ML10(seed=1)
    by_class = {}
    for task in benchmark.train_tasks:
        by_class.setdefault(task.env_name, task)
    for names in (['push-v3', 'pick-place-v3', 'door-open-v3', 'reach-v3'], ['push-v3'] * 3):
        tasks = [by_class[name] for name in names]
        runs = []
        for batched in (True, False):
            envs = [MetaWorldEnv(task, seed=k) for k, task in enumerate(tasks)]
            for env in envs:
                env.reset()
                env._step_cnt = 0  # pylint: disable=protected-access
            with monkeypatch.context() as patch:
                if not batched:
                    patch.setattr(_metaworld_batch, 'step_batch', lambda *args: None)
                rng = np.random.default_rng(0)
                runs.append([MetaWorldEnv.batch_step(
                    envs, rng.uniform(-1, 1, (len(envs), 4)).astype(np.float32))
                    for _ in range(15)])
        for got, expected in zip(*runs):
            for a, b in zip(got[:4], expected[:4]):
                assert a.dtype == b.dtype and np.array_equal(a, b)
            assert got[4].keys() == expected[4].keys()
            for key in got[4]:
                assert got[4][key].dtype == expected[4][key].dtype, key
                assert np.array_equal(got[4][key], expected[4][key]), key


def test_the_mocap_step_checks_its_arrays():
    """``step_mocap_batch`` refuses rows that do not match the simulations (before the
    compiled loop could read past them), naming the shapes."""
    lib = _cstep.library()
    if lib is None:
        pytest.skip(f'no compiled library: {_cstep.reason}')
    import mujoco  # pylint: disable=import-outside-toplevel
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body name="m" mocap="true"/><body><freejoint/>'
        '<geom size="0.1"/></body></worldbody></mujoco>')
    datas = [mujoco.MjData(model) for _ in range(2)]
    quat = np.array([1., 0., 0., 0.])
    with pytest.raises(ValueError, match=r'mocap positions \(1, 3\)'):
        _cstep.step_mocap_batch(lib, [model] * 2, datas, np.zeros((1, 3)), quat,
                                np.zeros((2, 0)), 1, False, False)
    with pytest.raises(ValueError, match=r'controls \(1, 0\)'):
        _cstep.step_mocap_batch(lib, [model] * 2, datas, np.zeros((2, 3)), quat,
                                np.zeros((1, 0)), 1, False, False)
    _cstep.step_mocap_batch(lib, [model] * 2, datas, np.ones((2, 3)), quat, np.zeros((2, 0)),
                            2, False, True)
    for data in datas:
        assert np.array_equal(data.mocap_pos, [[1., 1., 1.]]) and data.time > 0


@pytest.mark.metaworld
def test_what_a_kernel_does_not_reproduce_takes_the_classs_own_reward(monkeypatch):
    """An attribute of another dtype (Meta-World's arithmetic on float32 rounds otherwise)
    and a patched reward helper of ``reward_utils`` make the class compute its reward with
    its own code (infos per env, with the patch); a class constant that Meta-World rejects
    (bounds the wrong way round) and a missing hand position raise Meta-World's own errors."""
    from metaworld.envs.sawyer_drawer_close_v3 import SawyerDrawerCloseEnvV3  # pylint: disable=import-outside-toplevel
    from metaworld.envs.sawyer_sweep_v3 import SawyerSweepEnvV3  # pylint: disable=import-outside-toplevel
    from metaworld.utils import reward_utils  # pylint: disable=import-outside-toplevel

    def twins(name):
        return ([_env(name, s)[0] for s in (1, 2)], [_env(name, s)[0] for s in (1, 2)])

    pushes, own = twins('push-v3')
    for env in (pushes[1], own[1]):
        env.obj_init_pos = env.obj_init_pos.astype(np.float32)
    _, rewards, _, infos = step_batch(pushes, np.full((2, 4), 0.3))
    assert isinstance(infos, list)
    assert rewards.tolist() == [float(env.step(np.full(4, 0.3))[1]) for env in own]

    pegs, own = twins('peg-insert-side-v3')
    original = reward_utils.rect_prism_tolerance
    monkeypatch.setattr(reward_utils, 'rect_prism_tolerance',
                        lambda curr, zero, one: 0.5 * original(curr, zero, one))
    _, rewards, _, infos = step_batch(pegs, np.zeros((2, 4)))
    assert isinstance(infos, list)
    assert rewards.tolist() == [float(env.step(np.zeros(4))[1]) for env in own]
    monkeypatch.undo()

    for cls, name, value, message in (
            (SawyerSweepEnvV3, 'OBJ_RADIUS', 0.06, 'Lower bound'),  # above the pads' bound
            (SawyerDrawerCloseEnvV3, 'TARGET_RADIUS', -0.01, 'Lower bound')):
        envs, own = twins(cls.__module__.rsplit('sawyer_', 1)[1].replace('_v3', '-v3')
                          .replace('_', '-'))
        monkeypatch.setattr(cls, name, value)
        with pytest.raises(ValueError, match=message):
            own[0].step(np.zeros(4))
        with pytest.raises(ValueError, match=message) as error:
            step_batch(envs, np.zeros((2, 4)))
        assert error.value.lean_index == 0
        monkeypatch.undo()
    drawers, _ = twins('drawer-close-v3')
    drawers[1].hand_init_pos = None
    with pytest.raises(AssertionError, match='reset_model') as error:
        step_batch(drawers, np.zeros((2, 4)))
    assert error.value.lean_index == 1


@pytest.mark.metaworld
@pytest.mark.parametrize('bad', [1, 2])
def test_a_mujoco_error_in_a_mixed_wave_names_its_row(bad, monkeypatch):
    """The compiled loop steps a wave class by class: MuJoCo's error still carries the
    row of the env it came from (``lean_index``), as the Python loop's does."""
    import mujoco  # pylint: disable=import-outside-toplevel
    names = ['reach-v3', 'push-v3', 'reach-v3', 'push-v3']
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(_cstep, 'library', lambda: None)
        elif _cstep.library() is None:
            continue
        envs = [_env(name, seed)[0] for seed, name in enumerate(names)]
        envs[bad].model.opt.integrator = 99
        with pytest.raises(mujoco.FatalError, match='invalid integrator') as error:
            step_batch(envs, np.zeros((4, 4)))
        assert error.value.lean_index == bad, compiled
