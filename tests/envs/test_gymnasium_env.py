"""The gymnasium -> garage adapter."""
import copy
import pickle

import garage_promp  # noqa: F401
from garage_promp.envs import GymnasiumEnv, PointCornerGym, PointEnv1D
from garage_promp.envs.gymnasium_env import finiteness_checked_by_caller
from garage_promp.policies import check_env_and_policy

import akro
from garage import StepType, Wrapper
from garage.envs import normalize
from garage.torch.policies import GaussianMLPPolicy
import gymnasium
from gymnasium.spaces import Box, Discrete
import mujoco
import numpy as np
import pytest


class ToyEnv(gymnasium.Env):
    """Counts steps; obs = [t, noise]; reward = t; ends where told to."""

    metadata = {'render_modes': ['rgb_array']}

    def __init__(self, terminate_at=None, truncate_at=None, bad=None,
                 bad_at=2):
        self.observation_space = Box(-5., np.array([5., 6.]),
                                     dtype=np.float64)
        self.action_space = Box(-1., 1., (3, ), dtype=np.float64)
        self.render_mode = None
        self.terminate_at = terminate_at
        self.truncate_at = truncate_at
        self.bad = bad  # 'observation', 'reward' or 'reset'
        self.bad_at = bad_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        obs = np.array([0., self.np_random.uniform()])
        if self.bad == 'reset':
            obs[0] = np.nan
        return obs, {'episode': 1}

    def step(self, action):
        self.t += 1
        obs = np.array([self.t, 0.])
        reward = float(self.t)
        if self.t == self.bad_at and self.bad == 'observation':
            obs[1] = np.inf
        if self.t == self.bad_at and self.bad == 'reward':
            reward = np.nan
        return (obs, reward, self.t == self.terminate_at,
                self.t == self.truncate_at, {'t': self.t})

    def render(self):
        return np.full((2, 2, 3), self.render_mode == 'rgb_array')


def _episode(env, n_steps=None):
    env.reset()
    step_types = []
    for _ in range(n_steps or 1000):
        es = env.step(np.zeros(3))
        step_types.append(es.step_type)
        if es.last:
            break
    return step_types


def test_spaces_are_float32_akro_boxes_with_the_gymnasium_bounds():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=4)
    for space in (env.observation_space, env.action_space):
        assert isinstance(space, akro.Box) and space.dtype == np.float32
    np.testing.assert_array_equal(env.observation_space.high, [5., 6.])
    np.testing.assert_array_equal(env.action_space.low, -np.ones(3))
    assert env.spec.max_episode_length == 4
    assert env.spec.observation_space is env.observation_space


def test_observations_are_float32():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=4)
    obs, episode_info = env.reset()
    assert obs.dtype == np.float32 and episode_info == {'episode': 1}
    es = env.step(np.zeros(3))
    assert es.observation.dtype == np.float32
    np.testing.assert_array_equal(es.observation, [1., 0.])
    assert es.reward == 1. and es.env_info == {'t': 1}


def test_max_episode_length_gives_timeout():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=3)
    assert _episode(env) == [StepType.FIRST, StepType.MID, StepType.TIMEOUT]


def test_truncation_gives_timeout():
    env = GymnasiumEnv(ToyEnv(truncate_at=2), max_episode_length=10)
    assert _episode(env) == [StepType.FIRST, StepType.TIMEOUT]


def test_termination_gives_terminal_even_on_the_last_step():
    env = GymnasiumEnv(ToyEnv(terminate_at=2), max_episode_length=10)
    assert _episode(env) == [StepType.FIRST, StepType.TERMINAL]
    env = GymnasiumEnv(ToyEnv(terminate_at=3, truncate_at=3),
                       max_episode_length=3)
    assert _episode(env)[-1] == StepType.TERMINAL


def test_step_needs_reset_before_and_after_an_episode():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=2)
    with pytest.raises(RuntimeError, match='reset'):
        env.step(np.zeros(3))
    _episode(env)
    with pytest.raises(RuntimeError, match='reset'):
        env.step(np.zeros(3))
    assert len(_episode(env)) == 2


def test_max_episode_length_defaults_to_the_gymnasium_spec():
    toy = ToyEnv()
    toy.spec = gymnasium.envs.registration.EnvSpec('Toy-v0',
                                                   max_episode_steps=7)
    assert GymnasiumEnv(toy).spec.max_episode_length == 7
    assert GymnasiumEnv(ToyEnv()).spec.max_episode_length is None


@pytest.mark.parametrize('value', [0, -3, 2.5, True, '10'])
def test_invalid_max_episode_length(value):
    with pytest.raises(ValueError, match='max_episode_length'):
        GymnasiumEnv(ToyEnv(), max_episode_length=value)


@pytest.mark.parametrize('space_name', ['observation_space', 'action_space'])
def test_non_box_space_is_rejected(space_name):
    toy = ToyEnv()
    setattr(toy, space_name, Discrete(3))
    with pytest.raises(ValueError, match=f'{space_name} must be a .*Box'):
        GymnasiumEnv(toy)


def test_non_gymnasium_env_is_rejected():
    with pytest.raises(ValueError, match='env must be a gymnasium.Env'):
        GymnasiumEnv(object())


@pytest.mark.parametrize('bad,match', [
    ('observation', r'observation is not finite .*at step 2'),
    ('reward', r'reward is not finite .*at step 2'),
    ('reset', r'observation is not finite .*at reset'),
])
def test_non_finite_values_raise_naming_the_field(bad, match):
    env = GymnasiumEnv(ToyEnv(bad=bad), max_episode_length=5)
    with pytest.raises(ValueError, match=match):
        _episode(env)
    unchecked = GymnasiumEnv(ToyEnv(bad=bad), max_episode_length=5,
                             check_finite=False)
    _episode(unchecked)


class _TwiceAStep(Wrapper):
    """A wrapper that steps its env twice per step and keeps the second step (an action
    repeat): the first step's output never reaches the caller."""

    def step(self, action):
        self._env.step(action)
        return self._env.step(action)


def test_steps_checked_by_the_caller_skip_the_envs_own_checks():
    """Inside finiteness_checked_by_caller(envs), the given envs' steps are not checked
    (directly or under garage's normalize); other envs, resets, and envs under a wrapper
    that could drop a step's output still are, and the checks are back after the block."""
    env = GymnasiumEnv(ToyEnv(bad='observation'), max_episode_length=5)
    normalized = normalize(GymnasiumEnv(ToyEnv(bad='observation'), max_episode_length=5))
    other = GymnasiumEnv(ToyEnv(bad='observation'), max_episode_length=5)
    resetting = GymnasiumEnv(ToyEnv(bad='reset'), max_episode_length=5)
    repeated = _TwiceAStep(GymnasiumEnv(ToyEnv(bad='observation', bad_at=1),
                                        max_episode_length=10))
    with finiteness_checked_by_caller([env, normalized, resetting, repeated]):
        assert len(_episode(env)) == 5  # the inf observation passes: the caller checks
        assert len(_episode(normalized)) == 5
        with pytest.raises(ValueError, match=r'observation is not finite .*at step 2'):
            _episode(other)
        with pytest.raises(ValueError, match='observation is not finite .*at reset'):
            resetting.reset()
        repeated.reset()
        with pytest.raises(ValueError, match=r'observation is not finite .*at step 1'):
            repeated.step(np.zeros(3))  # step 1 is dropped by the wrapper: checked inside
    with pytest.raises(ValueError, match=r'observation is not finite .*at step 2'):
        _episode(env)
    with pytest.raises(ValueError, match=r'observation is not finite .*at step 2'):
        _episode(normalized)


@pytest.mark.parametrize('bad', ['observation', 'reward'])
def test_the_sampler_checks_what_the_env_leaves_to_it(bad):
    """Sampled, a GymnasiumEnv's NaN / inf is reported by the sampler's own check (which
    names the task slot, episode and step), not by the env's skipped one."""
    from garage.sampler.env_update import EnvUpdate  # pylint: disable=import-outside-toplevel
    from garage.torch.policies import GaussianMLPPolicy  # pylint: disable=import-outside-toplevel
    env = GymnasiumEnv(ToyEnv(bad=bad), max_episode_length=5)
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
    sampler = garage_promp.make_sampler(policy, env, seed=1, lean=False)
    try:
        with pytest.raises(ValueError, match=rf'the environment returned a non-finite {bad} '
                                             r'.*episode 0, step 2'):
            sampler.obtain_meta_batch([EnvUpdate()], [dict(policy.named_parameters())], 1)
    finally:
        sampler.shutdown_worker()


def test_non_finite_action_raises():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=5)
    env.reset()
    with pytest.raises(ValueError, match='action is not finite'):
        env.step(np.array([0., np.nan, 0.]))


@pytest.mark.parametrize('action, message', [
    (np.array([0., np.nan]), 'action is not finite'),
    (np.zeros((2, 2)), r"action space's shape \(2,\), got array"),
    (np.zeros(1), r"action space's shape \(2,\), got array\(\[0\.\]\)"),
    (0.1, r"shape \(2,\), got 0\.1"),
    ('ab', "shape \\(2,\\), got 'ab'"),
    (None, r'shape \(2,\), got None'),
])
def test_a_refused_action_leaves_the_episode_as_it_was(action, message):
    """Refused before the env is touched: a (1,) or a float is not broadcast into the
    state, a (2, 2) does not reshape it, and no step is used up."""
    env = GymnasiumEnv(PointCornerGym(), max_episode_length=3)
    env.reset()
    state = env.gym_env.unwrapped._state.copy()
    with pytest.raises(ValueError, match=message):
        env.step(action)
    assert np.array_equal(env.gym_env.unwrapped._state, state)
    steps = [env.step(np.zeros(2)) for _ in range(3)]
    assert [s.last for s in steps] == [False, False, True]  # still 3 steps to the time limit


def test_an_action_of_another_type_is_stepped_as_the_numbers_it_was_checked_as():
    """A torch tensor or a list is read as its numbers: the env is stepped with the array
    that was checked (the point env would fail on a tensor, after the wrapper had counted
    the step), and a step the env fails in uses up no step."""
    import torch  # pylint: disable=import-outside-toplevel
    env = GymnasiumEnv(PointCornerGym(), max_episode_length=3)
    env.reset()
    state = env.gym_env.unwrapped._state.copy()
    step = env.step(torch.tensor([0.1, -0.1], dtype=torch.float64))
    assert isinstance(step.action, np.ndarray)
    np.testing.assert_array_equal(env.gym_env.unwrapped._state, state + [0.1, -0.1])
    env.step([0.1, 0.1])
    # (the two steps' sums in the env's order: state + 0.2 can differ in its last bit)
    np.testing.assert_array_equal(env.gym_env.unwrapped._state,
                                  state + [0.1, -0.1] + [0.1, 0.1])

    class Failing(ToyEnv):
        def step(self, action):
            if self.t == 0 and self.bad == 'once':
                self.bad = None
                raise RuntimeError('the env failed')
            return super().step(action)

    env = GymnasiumEnv(Failing(bad='once'), max_episode_length=2)
    env.reset()
    with pytest.raises(RuntimeError, match='the env failed'):
        env.step(np.zeros(3))
    assert [env.step(np.zeros(3)).last for _ in range(2)] == [False, True]


def test_non_finite_error_names_task_and_last_action():
    env = PointEnv1D(seed=0)
    env.set_task(-1.)
    env.reset()
    action = np.array([0.25])
    env.step(action)
    env.gym_env.step = lambda a: (np.array([np.nan]), 0., False, False, {})
    with pytest.raises(ValueError,
                       match=r'task=-1\.0, last action=array\(\[0\.25\]\)'):
        env.step(action)


def test_render_modes_and_render():
    env = GymnasiumEnv(ToyEnv(), max_episode_length=5)
    assert env.render_modes == ['rgb_array']
    assert env.render('rgb_array').all()
    assert env.gym_env.render_mode is None
    with pytest.raises(ValueError):
        env.render('human')
    with pytest.raises(ValueError):
        env.visualize()


def test_unwrapped_is_the_gymnasium_env_for_the_plain_adapter():
    toy = ToyEnv()
    env = GymnasiumEnv(toy)
    assert env.unwrapped is toy and env.gym_env is toy
    assert normalize(env).unwrapped is toy


def test_meta_interface_is_forwarded_through_normalize():
    gym_env = PointCornerGym(seed=3)
    env = normalize(GymnasiumEnv(gym_env, max_episode_length=5))
    tasks = env.sample_tasks(3)
    env.set_task(tasks[2])
    np.testing.assert_array_equal(env.task, tasks[2])
    np.testing.assert_array_equal(env.get_task(), gym_env.get_task())
    env.seed(3)
    assert np.array_equal(env.sample_tasks(3), tasks)


def test_non_meta_env_has_no_tasks():
    env = GymnasiumEnv(ToyEnv())
    with pytest.raises(AttributeError, match='not a meta-environment'):
        env.set_task(1.)


def test_diagnostics_are_optional():
    """A meta-env without log_diagnostics logs none (the epoch loop calls it after
    every update); one with it is forwarded to."""
    logged = []

    class Diagnosed(ToyEnv):
        def log_diagnostics(self, episodes, prefix=''):
            logged.append((episodes, prefix))

    GymnasiumEnv(ToyEnv()).log_diagnostics(['episodes'], prefix='PostUpdate/')
    normalize(GymnasiumEnv(ToyEnv())).log_diagnostics([], prefix='PostUpdate/')
    GymnasiumEnv(Diagnosed()).log_diagnostics(['episodes'], prefix='PostUpdate/')
    assert logged == [(['episodes'], 'PostUpdate/')]


@pytest.mark.mujoco
def test_any_mujoco_gymnasium_env_reports_a_simulation_mujoco_reset():
    """gymnasium's own MuJoCo envs too: MuJoCo's warning counters, kept until the next
    reset (here set as MuJoCo's mj_checkAcc sets them when it resets a simulation)."""
    env = GymnasiumEnv(gymnasium.make('HalfCheetah-v5'), max_episode_length=5)
    env.reset()
    env.step(np.zeros(6, np.float32))
    assert env.unstable_simulation() is None
    data = env.gym_env.unwrapped.data
    data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number = 1
    data.warning[mujoco.mjtWarning.mjWARN_BADQACC].lastinfo = 3
    assert env.unstable_simulation() == (
        'a NaN, inf or huge value in qacc (at DOF 3) made MuJoCo reset the simulation to its '
        'initial state in the middle of the episode')
    assert normalize(env).unstable_simulation() == env.unstable_simulation()
    env.reset()
    assert env.unstable_simulation() is None
    assert GymnasiumEnv(ToyEnv()).unstable_simulation() is None  # no simulator to ask


def test_action_bounds_beyond_float32_are_named_as_the_env_declared_them():
    """The refusal showed only the adapter's float32 space, Box(-inf, inf), as if the env
    had declared no bounds."""
    class Wide(ToyEnv):
        def __init__(self):
            super().__init__()
            self.action_space = Box(-1e300, 1e300, (3, ), dtype=np.float64)

    env = normalize(GymnasiumEnv(Wide(), max_episode_length=3))
    with pytest.raises(ValueError, match=r'bounded action space .*got Box\(-inf, inf, \(3,\), '
                                         r'float32\) \(the gymnasium env declares finite bounds, '
                                         r'array\(\[-1.e\+300'):
        check_env_and_policy(env, GaussianMLPPolicy(env.spec, hidden_sizes=(4, )))


def test_seed_of_a_plain_env_seeds_the_next_reset():
    env = GymnasiumEnv(ToyEnv())
    env.seed(5)
    first, _ = env.reset()
    second, _ = env.reset()
    env.seed(5)
    again, _ = env.reset()
    assert first[1] == again[1] != second[1]
    with pytest.raises(ValueError, match='seed'):
        env.seed(-1)


@pytest.mark.parametrize('clone', [copy.deepcopy,
                                   lambda e: pickle.loads(pickle.dumps(e))])
def test_adapter_copies_keep_task_and_state(clone):
    env = GymnasiumEnv(PointCornerGym(seed=1), max_episode_length=5)
    env.set_task((-2., 2.))
    env.reset()
    env.step(np.array([0.1, 0.1]))
    twin = clone(env)
    np.testing.assert_array_equal(twin.task, [-2., 2.])
    for _ in range(3):
        a, b = env.step(np.array([0.1, -0.2])), twin.step(np.array([0.1,
                                                                   -0.2]))
        np.testing.assert_array_equal(a.observation, b.observation)
        assert a.reward == b.reward and a.step_type == b.step_type
    np.testing.assert_array_equal(env.reset()[0], twin.reset()[0])


def test_a_package_env_refuses_an_argument_its_gymnasium_env_does_not_take():
    from garage_promp.envs import HalfCheetahFwdBackEnv, PointEnvCorner
    assert PointEnvCorner(reward_type='dense').unwrapped is not None  # one it takes
    with pytest.raises(ValueError, match="HalfCheetahFwdBackEnv takes no argument 'reward_type'"):
        HalfCheetahFwdBackEnv(reward_type="dense")
    with pytest.raises(ValueError, match="PointEnvCorner takes no argument 'rewardtype'.*"
                                         'reward_type'):
        PointEnvCorner(rewardtype='dense')
