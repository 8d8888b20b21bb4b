"""MuJoCo meta-envs against the original ProMP envs: dims, dt, rewards, termination, noise."""
import re

import garage_promp  # noqa: F401
from garage_promp.envs import (
    AntFwdBackEnv,
    AntRandDirecEnv,
    AntRandGoalEnv,
    HalfCheetahFwdBackEnv,
    HopperRandParamsEnv,
    HumanoidFwdBackEnv,
    HumanoidRandDirecEnv,
    WalkerFwdBackEnv,
    WalkerRandParamsEnv,
)
from garage_promp.envs._mujoco import MujocoMetaEnv

from garage import StepType
from garage.envs import normalize
import mujoco
import numpy as np
import pytest

pytestmark = pytest.mark.mujoco

# cls: (obs dim, action dim, ctrl bound, H, dt = timestep x frame skip)
SPEC = {
    HalfCheetahFwdBackEnv: (17, 6, 1., 100, 0.01 * 5),
    AntFwdBackEnv: (111, 8, 1., 100, 0.01 * 5),
    AntRandDirecEnv: (111, 8, 1., 100, 0.01 * 5),
    AntRandGoalEnv: (113, 8, 1., 200, 0.01 * 5),
    WalkerFwdBackEnv: (17, 6, 1., 200, 0.002 * 8),
    HumanoidFwdBackEnv: (376, 17, 0.4, 200, 0.003 * 5),
    HumanoidRandDirecEnv: (376, 17, 0.4, 200, 0.003 * 5),
    HopperRandParamsEnv: (11, 3, 1., 200, 0.004 * 4),
    WalkerRandParamsEnv: (17, 6, 1., 200, 0.004 * 4),
}
ENVS = list(SPEC)


@pytest.mark.parametrize('cls', ENVS)
def test_dimensions_horizon_and_dt(cls):
    obs_dim, act_dim, bound, horizon, dt = SPEC[cls]
    env = cls(seed=0)
    assert env.observation_space.shape == (obs_dim, )
    assert env.action_space.shape == (act_dim, )
    np.testing.assert_array_equal(env.action_space.high, bound)
    np.testing.assert_array_equal(env.action_space.low, -bound)
    assert env.spec.max_episode_length == horizon
    assert env.gym_env.dt == pytest.approx(dt)
    obs, _ = env.reset()
    assert obs.shape == (obs_dim, ) and obs.dtype == np.float32


def _state(gym):
    """Positions the rewards are made of, read straight from MuJoCo."""
    model, data = gym.model, gym.data
    mass = model.body_mass
    return dict(x=data.qpos[0],
                torso=data.xpos[model.body('torso').id, :2].copy(),
                com=(mass[:, None] * data.xipos).sum(axis=0)[:2] / mass.sum())


def _contact(gym):
    return 0.5e-3 * np.square(np.clip(gym.data.cfrc_ext, -1, 1)).sum()


def _humanoid(d, gym, before, after, a):
    # The velocity term divides by opt.timestep = 0.003, not dt, as in the original ProMP
    # code's meta_policy_search/envs/mujoco_envs/humanoid_rand_direc.py.
    progress = np.dot(d, (after['com'] - before['com'])[:np.size(d)])
    impact = min(0.5e-6 * np.square(gym.data.cfrc_ext).sum(), 10.)
    return 0.25 * progress / 0.003 - 0.1 * np.square(a).sum() - impact + 5.


def _planar(d, dt):
    return lambda gym, b, e, a: (d * (e['x'] - b['x']) / dt + 1. -
                                 1e-3 * np.square(a).sum())


# cls: (task, reward(gym, state before, state after, action)), as in the original ProMP
# code's meta_policy_search/envs/mujoco_envs/ and in dennisl88/rand_param_envs.
REWARD = {
    HalfCheetahFwdBackEnv: (-1., lambda gym, b, e, a: -(e['x'] - b['x']) /
                            0.05 - 0.05 * np.square(a).sum()),
    AntFwdBackEnv: (-1., lambda gym, b, e, a: -(e['torso'][0] - b['torso'][
        0]) / 0.05 - 0.5 * np.square(a).sum() - _contact(gym) + 1.),
    AntRandDirecEnv: (np.array([0.6, -0.8]), lambda gym, b, e, a: np.dot(
        [0.6, -0.8], e['torso'] - b['torso']) / 0.05 - 0.5 * np.square(
            a).sum() - _contact(gym) + 1.),
    AntRandGoalEnv: (np.array([1., -2.]), lambda gym, b, e, a: -np.abs(
        e['torso'] - [1., -2.]).sum() - 0.1 * np.square(a).sum() -
                     _contact(gym)),
    WalkerFwdBackEnv: (-1., _planar(-1., 0.016)),
    HumanoidFwdBackEnv: (-1., lambda *args: _humanoid(-1., *args)),
    HumanoidRandDirecEnv: (np.array([0.8, 0.6]),
                           lambda *args: _humanoid([0.8, 0.6], *args)),
    HopperRandParamsEnv: (None, _planar(1., 0.016)),
    WalkerRandParamsEnv: (None, _planar(1., 0.016)),
}


@pytest.mark.parametrize('zero_action', [True, False])
@pytest.mark.parametrize('cls', ENVS)
def test_reward_of_a_controlled_step(cls, zero_action):
    task, reward = REWARD[cls]
    env = cls(seed=1)
    if task is not None:
        env.set_task(task)
    _, act_dim, bound, _, _ = SPEC[cls]
    action = np.zeros(act_dim) if zero_action else 0.5 * bound * np.sin(
        np.arange(act_dim) + 1.)
    env.reset()
    env.step(action)  # moving, so that the velocity terms are not zero
    gym = env.gym_env
    before = _state(gym)
    es = env.step(action)
    expected = reward(gym, before, _state(gym), action)
    assert es.reward == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert abs(expected - reward(gym, before, before, action)) > 1e-5
    assert set(es.env_info) >= {'forward_vel', 'ctrl_cost', 'task'}
    np.testing.assert_array_equal(es.env_info['task'],
                                  gym._make_task_vector())


def _into_the_floor(gym):
    """Put the torso at a height of 0.3, into the floor: the next step's contact forces
    make 0.5e-6 sum(cfrc_ext^2) about 50, far above the cap of 10."""
    qpos = gym.data.qpos.copy()
    qpos[2] = 0.3
    gym.set_state(qpos, gym.data.qvel.copy())


def _refuse_fallback(cls, envs, actions):
    raise AssertionError(f'{cls.__name__}.batch_step stepped env by env')


@pytest.mark.parametrize('cls', [HumanoidFwdBackEnv, HumanoidRandDirecEnv])
def test_humanoid_impact_cost_is_capped_at_10_in_step_and_batch_step(cls, monkeypatch):
    """impact_cost = min(0.5e-6 sum(cfrc_ext^2), 10), as the original ProMP code's
    meta_policy_search/envs/mujoco_envs/humanoid_rand_direc.py: the reward and the
    ``impact_cost`` info by hand from the MjData, a sunk torso (capped) beside a standing
    one (not), in ``step`` and in the lean path's vectorised ``batch_step`` (its
    env-by-env fallback refused)."""
    task, reward = REWARD[cls]
    gym_cls = cls.gym_env_cls
    action = 0.2 * np.sin(np.arange(17) + 1.)
    actions = np.stack([action, action])

    def pair():
        envs = [gym_cls(seed=1), gym_cls(seed=1)]
        for env in envs:
            env.set_task(task)
            env.reset(seed=1)
        _into_the_floor(envs[0].unwrapped)
        return envs

    def check(env, before, impact_cost, step_reward, capped):
        uncapped = 0.5e-6 * float(np.square(env.data.cfrc_ext).sum())
        assert (uncapped > 20.) if capped else (uncapped < 10.), uncapped
        assert impact_cost == pytest.approx(min(uncapped, 10.), rel=1e-12)
        assert step_reward == pytest.approx(reward(env, before, _state(env), action),
                                            rel=1e-9, abs=1e-9)

    envs = pair()
    for n, env in enumerate(envs):
        before = _state(env)
        _, step_reward, _, _, info = env.step(action)
        check(env, before, info['impact_cost'], step_reward, capped=n == 0)
    envs = pair()
    before = [_state(env) for env in envs]
    monkeypatch.setattr(MujocoMetaEnv, 'batch_step', classmethod(_refuse_fallback))
    _, rewards, _, _, infos = gym_cls.batch_step(envs, actions)
    for n, env in enumerate(envs):
        check(env, before[n], infos['impact_cost'][n], rewards[n], capped=n == 0)


def test_half_cheetah_backward_zero_action_reward_is_minus_velocity():
    env = HalfCheetahFwdBackEnv(seed=2)
    env.set_task(-1.)
    env.reset()
    x_before = env.gym_env.data.qpos[0]
    es = env.step(np.zeros(6))
    velocity = (env.gym_env.data.qpos[0] - x_before) / 0.05
    assert es.reward == pytest.approx(-velocity, rel=1e-12)
    assert es.env_info['forward_vel'] == pytest.approx(-velocity, rel=1e-12)
    assert es.env_info['ctrl_cost'] == 0.


def test_observation_layout():
    env = HalfCheetahFwdBackEnv(seed=0)
    obs, _ = env.reset()
    data = env.gym_env.data
    np.testing.assert_allclose(obs, np.r_[data.qpos[1:], data.qvel],
                               rtol=1e-6)
    env = AntRandGoalEnv(seed=0)
    obs = env.reset()[0]
    data = env.gym_env.data
    np.testing.assert_allclose(
        obs, np.r_[data.qpos, data.qvel,
                   np.clip(data.cfrc_ext, -1, 1).ravel()], rtol=1e-6)
    env = AntFwdBackEnv(seed=0)
    obs = env.reset()[0]
    np.testing.assert_allclose(obs[:13], env.gym_env.data.qpos[2:], rtol=1e-6)
    env = WalkerFwdBackEnv(seed=0)
    env.reset()
    gym = env.gym_env
    gym.set_state(gym.data.qpos, np.full(9, 30.))
    np.testing.assert_array_equal(gym._get_obs()[8:], 10.)  # clipped qvel


# cls, {(qpos or qvel, index): value} set before a zero-action step, terminal?
TERMINATION = [
    (AntFwdBackEnv, {}, False),
    (AntFwdBackEnv, {('qpos', 2): 1.5}, True),  # torso z above 1
    (AntRandDirecEnv, {('qpos', 2): 1.5}, True),
    (AntRandGoalEnv, {('qpos', 2): 1.5}, False),  # never terminates
    (HalfCheetahFwdBackEnv, {('qpos', 2): 3.}, False),  # never terminates
    (HumanoidFwdBackEnv, {}, False),
    (HumanoidFwdBackEnv, {('qpos', 2): 2.5}, True),  # torso z above 2
    (HumanoidFwdBackEnv, {('qpos', 2): 0.9}, True),  # below 1 (0.96 after the step), not 0.8
    (HumanoidRandDirecEnv, {('qpos', 2): 2.5}, True),
    (WalkerFwdBackEnv, {}, False),
    (WalkerFwdBackEnv, {('qpos', 1): 2.5}, True),  # height above 2
    (WalkerFwdBackEnv, {('qpos', 2): 1.2}, True),  # angle above 1
    (WalkerRandParamsEnv, {('qpos', 2): -1.2}, True),
    (HopperRandParamsEnv, {}, False),
    (HopperRandParamsEnv, {('qpos', 2): 0.3}, True),  # |angle| above 0.2
    (HopperRandParamsEnv, {('qpos', 1): 0.3}, True),  # height below 0.7
    (HopperRandParamsEnv, {('qvel', 1): 300.}, True),  # |state| above 100
]


@pytest.mark.parametrize('cls,change,terminal', TERMINATION)
def test_termination(cls, change, terminal):
    env = cls(seed=0)
    env.reset()
    gym = env.gym_env
    state = dict(qpos=gym.data.qpos.copy(), qvel=gym.data.qvel.copy())
    for (field, index), value in change.items():
        state[field][index] = value
    gym.set_state(state['qpos'], state['qvel'])
    es = env.step(np.zeros(env.action_space.shape))
    assert (es.step_type == StepType.TERMINAL) == terminal


def _floating_step(env_class, qpos=None, qvel=None):
    """One zero-action step of ``env_class`` from its reset state with the ``qpos``/``qvel``
    entries given (``{index: value}``) and every other velocity 0, floating without gravity
    or constraints, so that nothing but the velocities moves it (a torso stays at the
    height it is put at); the step, and ``qpos`` after it."""
    env = env_class(seed=0)
    env.reset()
    gym = env.gym_env
    gym.model.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_GRAVITY
                                   | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    position, velocity = gym.data.qpos.copy(), np.zeros(gym.model.nv)
    for index, value in (qpos or {}).items():
        position[index] = value
    for index, value in (qvel or {}).items():
        velocity[index] = value
    gym.set_state(position, velocity)
    es = env.step(np.zeros(env.action_space.shape))
    after = gym.data.qpos.copy()
    env.close()
    return es, after


@pytest.mark.parametrize('height,terminal', [(0.1, False), (-0.1, True),
                                             (0.99, False), (1.01, True)])
def test_ant_healthy_range_is_zero_to_one(height, terminal):
    # Spec §10 item 17: [0, 1], not gym's [0.2, 1].
    es, after = _floating_step(AntFwdBackEnv, qpos={2: height})
    assert after[2] == pytest.approx(height, abs=1e-3)
    assert (es.step_type == StepType.TERMINAL) == terminal


@pytest.mark.parametrize('height,terminal', [(0.85, False), (0.75, True)])
def test_walker_is_unhealthy_below_a_height_of_0_8(height, terminal):
    es, after = _floating_step(WalkerFwdBackEnv, qpos={1: height})
    assert after[1] == pytest.approx(height, abs=1e-3)
    assert (es.step_type == StepType.TERMINAL) == terminal


def test_non_terminating_env_runs_to_timeout():
    env = HalfCheetahFwdBackEnv(seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    types = [env.step(rng.uniform(-1, 1, 6)).step_type for _ in range(100)]
    assert types[-1] == StepType.TIMEOUT
    assert StepType.TERMINAL not in types


# cls: (qpos bound, qvel scale, qvel normal?)
RESET_NOISE = {
    HalfCheetahFwdBackEnv: (0.1, 0.1, True),
    AntRandGoalEnv: (0.1, 0.1, True),
    WalkerFwdBackEnv: (0.005, 0.005, False),
    HumanoidFwdBackEnv: (0.01, 0.01, False),
    HopperRandParamsEnv: (0.005, 0.005, False),
    WalkerRandParamsEnv: (0.005, 0.005, False),
}


@pytest.mark.parametrize('cls', list(RESET_NOISE))
def test_reset_noise(cls):
    qpos_bound, qvel_scale, normal = RESET_NOISE[cls]
    env = cls(seed=3)
    gym = env.gym_env
    qpos_dev, qvel_dev = [], []
    for _ in range(200):
        env.reset()
        qpos_dev.append(gym.data.qpos - gym.init_qpos)
        qvel_dev.append(gym.data.qvel - gym.init_qvel)
    qpos_dev, qvel_dev = np.array(qpos_dev), np.array(qvel_dev)
    assert np.abs(qpos_dev).max() <= qpos_bound
    assert np.abs(qpos_dev).max() > 0.95 * qpos_bound
    assert qpos_dev.std() == pytest.approx(qpos_bound / np.sqrt(3), rel=0.1)
    if normal:
        assert qvel_dev.std() == pytest.approx(qvel_scale, rel=0.1)
        assert np.abs(qvel_dev).max() > 2.5 * qvel_scale
    else:
        assert np.abs(qvel_dev).max() <= qvel_scale
        assert qvel_dev.std() == pytest.approx(qvel_scale / np.sqrt(3),
                                               rel=0.1)


@pytest.mark.parametrize('cls', [HopperRandParamsEnv, WalkerRandParamsEnv])
def test_rand_params_tasks_scale_the_model(cls):
    env = cls(seed=0)
    gym = env.gym_env
    assert gym.model.opt.timestep == 0.004 and gym.frame_skip == 4
    init = {key: getattr(gym.model, key).copy()
            for key in ('body_mass', 'body_inertia', 'dof_damping',
                        'geom_friction')}
    tasks = env.sample_tasks(20)
    bases = {'body_mass': 1.5, 'body_inertia': 1.5, 'dof_damping': 1.3,
             'geom_friction': 1.5}
    for key, base in bases.items():
        nonzero = init[key] > 0
        for task in tasks:
            ratio = task[key][nonzero] / init[key][nonzero]
            assert (ratio >= base**-3 - 1e-12).all()
            assert (ratio <= base**3 + 1e-12).all()
        assert not np.allclose(tasks[0][key][nonzero], init[key][nonzero])
    env.reset()
    env.step(np.zeros(env.action_space.shape))
    qpos = gym.data.qpos.copy()
    env.set_task(tasks[3])
    for key in bases:
        np.testing.assert_array_equal(getattr(gym.model, key), tasks[3][key])
    np.testing.assert_array_equal(gym.data.qpos, qpos)  # not reset
    heavy = {key: value.copy() for key, value in init.items()}
    heavy['body_mass'] = init['body_mass'] * 3.
    env.set_task(heavy)
    assert gym.model.body_mass.sum() == pytest.approx(
        3 * init['body_mass'].sum())


def test_rand_params_change_the_dynamics():
    env = HopperRandParamsEnv(seed=0)
    tasks = env.sample_tasks(2)
    rewards = []
    for task in tasks:
        env.set_task(task)
        env.seed(5)
        env.reset()
        rewards.append([env.step(np.full(3, 0.5)).reward for _ in range(5)])
    assert not np.allclose(rewards[0], rewards[1])


@pytest.mark.parametrize('cls,action,ctrl', [
    (HumanoidFwdBackEnv, 5., 0.2),  # 0.04 a for ctrlrange [-0.4, 0.4]
    (HumanoidFwdBackEnv, 20., 0.4),  # clipped
    (HalfCheetahFwdBackEnv, -3., -0.3),  # a / 10 for [-1, 1]
    (AntRandGoalEnv, -12., -1.),
])
def test_normalize_maps_policy_actions_to_the_ctrlrange(cls, action, ctrl):
    # Spec §4: a_env = clip(lb + (a + 10)(ub - lb) / 20, lb, ub).
    env = normalize(cls(seed=0), expected_action_scale=10.)
    env.reset()
    env.step(np.full(env.action_space.shape, action, dtype=np.float32))
    np.testing.assert_allclose(env.unwrapped.gym_env.data.ctrl, ctrl,
                               rtol=1e-6)


@pytest.mark.parametrize('cls,task,match', [
    (HalfCheetahFwdBackEnv, 0.5, r'task direction should be 1\. or -1\.'),
    (WalkerFwdBackEnv, np.array([1., 0.]),
     r'task direction should be 1\. or -1\.'),
    (AntRandDirecEnv, [1., 1.], 'unit norm'),
    (AntRandGoalEnv, [1., 2., 3.], 'task goal_pos should be'),
    (HopperRandParamsEnv, {'body_mass': np.ones(5)}, 'keys'),
])
def test_bad_task(cls, task, match):
    with pytest.raises(ValueError, match=match):
        cls(seed=0).set_task(task)


@pytest.mark.mujoco
def test_a_simulation_mujoco_resets_mid_episode_is_reported_until_the_next_reset(
        tmp_path, monkeypatch):
    """A friction of 1e300 makes MuJoCo reset the hopper's simulation in the middle of a step
    (it prints a warning and steps on with finite numbers, reward about 1 a step); the env
    reports it from MuJoCo's warning counters until its next reset, and not before it
    happens (the sampler asks after every wave)."""
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning to MUJOCO_LOG.TXT here
    env = HopperRandParamsEnv(max_episode_length=20, seed=1)
    task = env.sample_tasks(1)[0]
    assert env.unstable_simulation() is None
    env.set_task(dict(task, geom_friction=np.concatenate(
        [task['geom_friction'][:1], np.full_like(task['geom_friction'][1:], 1e300)])))
    env.reset()
    reports = []
    for _ in range(20):
        step = env.step(np.zeros(env.action_space.shape, np.float32))
        assert np.isfinite(step.reward) and np.isfinite(step.observation).all()
        reports.append(env.unstable_simulation())
        if step.last:
            break
    assert reports[0] is None and reports[-1] is not None
    assert re.fullmatch(r'a NaN, inf or huge value in q(pos|vel|acc) \(at DOF \d\) made MuJoCo '
                        'reset the simulation to its initial state in the middle of the episode',
                        reports[-1])
    env.reset()
    assert env.unstable_simulation() is None
    env.set_task(task)
    env.reset()
    for _ in range(20):
        if env.step(np.zeros(env.action_space.shape, np.float32)).last:
            break
    assert env.unstable_simulation() is None


# ------------------------------------------------- what a sampled episode alone may not reach
@pytest.mark.parametrize('cls', [AntFwdBackEnv, AntRandDirecEnv, AntRandGoalEnv])
def test_ant_contact_forces_enter_the_reward_and_the_observation_clipped(cls):
    """The reward's contact cost, 0.5e-3 sum(clip(cfrc_ext, -1, 1)^2), and the observation's
    last 84 numbers, clip(cfrc_ext, -1, 1), as in the original ProMP code's ant envs: in a
    step with the torso pushed into the floor, where contact forces exceed 1 (the controlled
    step of test_reward_of_a_controlled_step has the ant still in the air, no contact)."""
    task, reward = REWARD[cls]
    env = cls(seed=1)
    env.set_task(task)
    env.reset()
    gym = env.gym_env
    _into_the_floor(gym)
    before = _state(gym)
    action = np.zeros(8)
    es = env.step(action)
    assert np.abs(gym.data.cfrc_ext).max() > 1. and _contact(gym) > 1e-3
    assert es.reward == pytest.approx(reward(gym, before, _state(gym), action), rel=1e-9,
                                      abs=1e-9)
    np.testing.assert_array_equal(es.observation[-84:],
                                  np.clip(gym.data.cfrc_ext, -1, 1).ravel().astype(np.float32))


@pytest.mark.parametrize('cls', [HumanoidFwdBackEnv, HumanoidRandDirecEnv])
def test_humanoid_observation_layout(cls):
    """gym's Humanoid-v2 _get_obs, as the original ProMP code's humanoid_rand_direc.py:
    qpos[2:], qvel, cinert, cvel, qfrc_actuator, cfrc_ext."""
    env = cls(seed=0)
    env.reset()
    action = 0.3 * np.sin(np.arange(17) + 1.)
    env.step(action)
    _into_the_floor(env.gym_env)  # (contact forces: in the air cfrc_ext is zero)
    es = env.step(action)
    data = env.gym_env.data
    expected = np.r_[data.qpos[2:], data.qvel, data.cinert.ravel(), data.cvel.ravel(),
                     data.qfrc_actuator, data.cfrc_ext.ravel()].astype(np.float32)
    assert np.abs(data.cfrc_ext).max() > 0 and np.abs(data.qfrc_actuator).max() > 0
    np.testing.assert_array_equal(es.observation, expected)


# The bounds of rand_param_envs' hopper (gym Hopper-v2: height > 0.7, |angle| < 0.2,
# |state[2:]| < 100) and of gym Humanoid-v2 (1 < z < 2), each just inside and just outside.
HEALTHY_BOUNDS = [
    (HopperRandParamsEnv, dict(qpos={1: 0.75}), False),
    (HopperRandParamsEnv, dict(qpos={1: 0.65}), True),
    (HopperRandParamsEnv, dict(qpos={2: 0.15}), False),
    (HopperRandParamsEnv, dict(qpos={2: -0.15}), False),
    (HopperRandParamsEnv, dict(qpos={2: 0.22}), True),
    (HopperRandParamsEnv, dict(qpos={2: -0.22}), True),
    (HumanoidFwdBackEnv, dict(qpos={2: 1.9}), False),
    (HumanoidFwdBackEnv, dict(qpos={2: 2.1}), True),
    # The foot's velocity, the state's last number: it moves the torso little (the
    # thigh's or leg's would turn it past 0.2 as the free body keeps its momentum).
    (HopperRandParamsEnv, dict(qvel={5: 300.}), True),
    (HopperRandParamsEnv, dict(qvel={5: 90.}), False),
] + [(HopperRandParamsEnv, dict(qpos={i: 150.}), True) for i in (3, 4, 5)]


@pytest.mark.parametrize('cls,state,terminal', HEALTHY_BOUNDS,
                         ids=[f'{c.__name__}-{s}' for c, s, _ in HEALTHY_BOUNDS])
def test_healthy_bounds_of_the_hopper_and_the_humanoid(cls, state, terminal):
    assert (_floating_step(cls, **state)[0].step_type == StepType.TERMINAL) == terminal


def test_ant_rand_goal_draws_goals_uniform_in_a_disc_of_radius_3():
    """The original ProMP code's ant_rand_goal.py: a = U(0, 2 pi), r = 3 sqrt(U(0, 1)), so
    |g| <= 3 and E|g|^2 = 4.5."""
    goals = np.array(AntRandGoalEnv(seed=0).sample_tasks(4000))
    radii = np.linalg.norm(goals, axis=1)
    assert radii.max() <= 3. and radii.max() > 2.95
    assert np.mean(radii ** 2) == pytest.approx(4.5, rel=0.05)


@pytest.mark.parametrize('cls', [HopperRandParamsEnv, WalkerRandParamsEnv])
def test_rand_params_draw_every_number_and_always_from_the_models_own(cls):
    """rand_param_envs' RandomEnv.sample_tasks draws one exponent per number (size=the
    array's shape; not one per row of body_inertia or geom_friction), always relative to the
    model's initial parameters (init_params), whatever task is set."""
    env = cls(seed=0)
    gym = env.gym_env
    init = {key: getattr(gym.model, key).copy() for key in ('body_inertia', 'geom_friction')}
    env.set_task(env.sample_tasks(1)[0])
    tasks = env.sample_tasks(400)
    for key, value in init.items():
        columns = value > 0
        exponents = np.array([np.log(task[key][columns] / value[columns]) for task in tasks])
        correlation = np.corrcoef(exponents.T)
        assert np.abs(correlation[~np.eye(len(correlation), dtype=bool)]).max() < 0.25, key
        ratio = np.array([task[key][columns] / value[columns] for task in tasks])
        assert ratio.min() >= 1.5 ** -3 - 1e-12 and ratio.max() <= 1.5 ** 3 + 1e-12, key


def test_reset_noise_spans_both_signs():
    """U(-n, n) of the original envs, not a range biased to one side."""
    for cls, (bound, scale, normal) in RESET_NOISE.items():
        env = cls(seed=3)
        gym = env.gym_env
        deviations = []
        for _ in range(100):
            env.reset()
            deviations.append(np.r_[gym.data.qpos - gym.init_qpos, gym.data.qvel - gym.init_qvel])
        deviations = np.array(deviations)
        qpos = deviations[:, :gym.model.nq]
        assert qpos.max() > 0.9 * bound and qpos.min() < -0.9 * bound, cls.__name__
        assert abs(qpos.mean()) < 0.05 * bound, cls.__name__
        if not normal:
            qvel = deviations[:, gym.model.nq:]
            assert qvel.max() > 0.9 * scale and qvel.min() < -0.9 * scale, cls.__name__


@pytest.mark.parametrize('cls,task', [
    (HalfCheetahFwdBackEnv, 1.), (AntFwdBackEnv, 1.), (WalkerFwdBackEnv, 1.),
    (HumanoidFwdBackEnv, 1.), (AntRandDirecEnv, [1., 0.]), (HumanoidRandDirecEnv, [1., 0.])])
def test_the_task_before_any_set_task_is_forward(cls, task):
    env = cls(seed=0)
    np.testing.assert_array_equal(env.get_task(), task)
    env.reset()
    np.testing.assert_array_equal(env.step(np.zeros(env.action_space.shape)).env_info['task'],
                                  np.atleast_1d(task))


def test_a_direction_off_unit_norm_by_1e_4_is_refused():
    env = AntRandDirecEnv(seed=0)
    with pytest.raises(ValueError, match='should have unit norm'):
        env.set_task(np.array([1., 0.0142]))  # norm 1.0001
    env.set_task(np.array([0.6, 0.8]))
