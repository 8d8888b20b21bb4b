"""Every env class: seeding, copies, and garage's task samplers and sampler."""
import copy
import pickle
import sys
import warnings

import garage_promp  # noqa: F401
from garage_promp import envs
from garage_promp.envs import GymnasiumEnv, GymnasiumMetaEnv, PointCornerGym

from garage.envs import normalize
from garage.experiment.task_sampler import SetTaskSampler
from garage.np.policies import FixedPolicy
from garage.sampler import LocalSampler
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
import mujoco
import numpy as np
import pytest

ENV_CLASSES = [
    getattr(envs, name) for name in envs.__all__
    if isinstance(getattr(envs, name), type)
    and issubclass(getattr(envs, name), GymnasiumMetaEnv)
    and getattr(envs, name) is not GymnasiumMetaEnv
]
ALL_ENVS = [
    pytest.param(cls, id=cls.__name__,
                 marks=[pytest.mark.mujoco]
                 if issubclass(cls.gym_env_cls, MujocoEnv) else [])
    for cls in ENV_CLASSES
]


def test_all_twelve_envs_are_covered():
    assert len(ENV_CLASSES) == 12


def _actions(env, n, seed=0):
    # Policy-space actions in [-10, 10] for normalize(expected scale 10).
    rng = np.random.default_rng(seed)
    return rng.uniform(-10, 10, size=(n, ) + env.action_space.shape).astype(
        np.float32)


def _rollout(env, actions):
    obs, _ = env.reset()
    observations, rewards = [obs], []
    for action in actions:
        es = env.step(action)
        observations.append(es.observation)
        rewards.append(es.reward)
        if es.last:
            break
    return np.array(observations), np.array(rewards)


def _same_task(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(
            np.array_equal(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_same_seed_gives_identical_episodes(cls):
    env_a, env_b = cls(seed=4), cls(seed=4)
    tasks_a, tasks_b = env_a.sample_tasks(2), env_b.sample_tasks(2)
    assert all(map(_same_task, tasks_a, tasks_b))
    env_a.set_task(tasks_a[1])
    env_b.set_task(tasks_b[1])
    env_a, env_b = (normalize(e, expected_action_scale=10.)
                    for e in (env_a, env_b))
    actions = _actions(env_a, 5)
    for _ in range(2):
        obs_a, rew_a = _rollout(env_a, actions)
        obs_b, rew_b = _rollout(env_b, actions)
        np.testing.assert_array_equal(obs_a, obs_b)
        np.testing.assert_array_equal(rew_a, rew_b)


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_different_seeds_give_different_reset_noise(cls):
    assert not np.array_equal(cls(seed=4).reset()[0], cls(seed=5).reset()[0])


@pytest.mark.parametrize('clone', [
    copy.deepcopy,
    lambda env: pickle.loads(pickle.dumps(env)),
], ids=['deepcopy', 'pickle'])
@pytest.mark.parametrize('cls', ALL_ENVS)
def test_copies_keep_task_and_state(cls, clone):
    env = cls(seed=1)
    task = env.sample_tasks(3)[2]
    env.set_task(task)
    env = normalize(env, expected_action_scale=10.)
    actions = _actions(env, 4, seed=1)
    env.reset()
    env.step(actions[0])
    twin = clone(env)
    assert type(twin.unwrapped) is cls
    assert _same_task(twin.task, task)
    for action in actions[1:3]:
        a, b = env.step(action), twin.step(action)
        np.testing.assert_array_equal(a.observation, b.observation)
        assert a.reward == b.reward and a.step_type == b.step_type
    # The RNG state travels too: the next episodes start alike.
    np.testing.assert_array_equal(env.reset()[0], twin.reset()[0])
    # ... and the copy is independent of the original.
    twin.set_task(twin.sample_tasks(1)[0])
    assert _same_task(env.task, task)


def _wrapper(env, task):
    del task
    return normalize(env, expected_action_scale=10.)


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_set_task_sampler_constructs_and_reuses(cls):
    sampler = SetTaskSampler(cls, env=cls(seed=2), wrapper=_wrapper)
    first, second = sampler.sample(2)
    env = first()
    assert isinstance(env.unwrapped, cls)
    assert _same_task(env.task, first._task)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # 'SetTaskEnvUpdate is closing ...'
        reused = second(env)
    assert reused is env
    assert _same_task(env.task, second._task)


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_local_sampler_collects_an_episode_per_task(cls):
    sampler = SetTaskSampler(cls, env=cls(seed=2), wrapper=_wrapper)
    updates = sampler.sample(2)
    env = updates[0]()
    policy = FixedPolicy(env.spec, list(_actions(env, 100)))
    local = LocalSampler(policy, env, max_episode_length=3, n_workers=1)
    for update in updates:
        policy.reset()
        episodes = local.obtain_samples(0, 3, policy, update)
        assert episodes.lengths.sum() >= 1
        task_info = episodes.env_infos['task']
        assert task_info.shape[0] == episodes.lengths.sum()
        worker_env = local._workers[0].env
        np.testing.assert_array_equal(
            task_info[0], worker_env.unwrapped.gym_env._make_task_vector())
        assert _same_task(worker_env.task, update._task)
    local.shutdown_worker()


def test_set_task_sampler_with_a_gymnasium_env_type():
    # The plain adapter forwards `unwrapped`, so garage's other pattern
    # (env type = the gymnasium class, wrapper builds the adapter) reuses too.
    sampler = SetTaskSampler(
        PointCornerGym,
        env=PointCornerGym(seed=0),
        wrapper=lambda env, _: GymnasiumEnv(env, max_episode_length=10))
    first, second = sampler.sample(2)
    env = first()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert second(env) is env
    np.testing.assert_array_equal(env.task, second._task)


@pytest.mark.parametrize('value', [0, 2.5])
def test_invalid_constructor_arguments(value):
    with pytest.raises(ValueError, match='max_episode_length'):
        envs.PointEnvCorner(max_episode_length=value)
    with pytest.raises(ValueError, match='seed'):
        envs.PointEnvCorner(seed=-1)


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_the_raw_env_refuses_an_action_that_is_not_finite_real_numbers(cls):
    """Outside garage's wrapper (which checks the same), each raw gymnasium env refuses a
    NaN, infinite, complex or misshapen action before anything changes (MuJoCo would
    step on with a NaN control zeroed or an infinite one clamped; a point env would carry
    the NaN on)."""
    env = cls(seed=3)
    raw = env.gym_env.unwrapped
    raw.reset(seed=3)
    shape = raw.action_space.shape
    good = np.full(shape, 0.01, dtype=np.float32)
    before = copy.deepcopy(raw)
    for bad, message in ((np.full(shape, np.nan), 'not finite'),
                         (np.full(shape, -np.inf), 'not finite'),
                         (np.full(shape, 0.01 + 0.5j), 'real numbers'),
                         (np.zeros(shape[0] + 1), 'real numbers'),
                         (['a'] * shape[0], 'real numbers')):
        with pytest.raises(ValueError, match=message) as error:
            raw.step(bad)
        assert type(raw).__name__ in str(error.value)
    if isinstance(raw, MujocoEnv):  # no bad control reached MuJoCo
        assert raw.data.warning[mujoco.mjtWarning.mjWARN_BADCTRL].number == 0
    # Nothing changed: the next good step is the step the untouched copy takes.
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # (no ComplexWarning either)
        stepped, expected = raw.step(good), before.step(good)
    np.testing.assert_array_equal(stepped[0], expected[0])
    assert stepped[1] == expected[1]


@pytest.mark.parametrize('cls', ALL_ENVS)
def test_through_garages_wrapper_the_action_is_checked_once(cls, monkeypatch):
    """``GymnasiumEnv`` checks the action (a complex one too) and the raw env does not check
    it again (the sampler's path tests nothing twice); stepped directly, it does."""
    from garage_promp.envs import base
    env = cls(seed=3)
    env.reset()
    shape = env.action_space.shape
    with pytest.raises(ValueError, match="numbers of the action space's shape"):
        env.step(np.full(shape, 0.01 + 0.5j))
    calls = []
    real = base.check_action
    monkeypatch.setattr(base, 'check_action', lambda *a: calls.append(a) or real(*a))
    for module in {type(env.gym_env.unwrapped).__module__, 'garage_promp.envs._mujoco'}:
        if hasattr(sys.modules[module], 'check_action'):
            monkeypatch.setattr(sys.modules[module], 'check_action', base.check_action)
    env.step(np.full(shape, 0.01, dtype=np.float32))
    assert not calls and env.gym_env.unwrapped._action_checked is False
    env.gym_env.unwrapped.step(np.full(env.gym_env.unwrapped.action_space.shape, 0.01))
    assert len(calls) == 1
