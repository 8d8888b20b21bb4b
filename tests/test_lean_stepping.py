"""The sampler's lean stepping path gives the episodes of the wrapped path, bit for bit."""
import csv
import pathlib
import subprocess
import sys

from garage_promp.envs._mujoco import MujocoMetaEnv
from garage_promp.experiment.builder import build_experiment
from garage_promp.experiment.paper_config import ENVS, normalize_actions
from garage_promp.sampler.lean import LeanStepper

from garage import StepType
from garage.envs import normalize
from garage.sampler.env_update import SetTaskUpdate
import mujoco
import numpy as np
import pytest

from tests.helpers import ShortPointEnv

ROOT = pathlib.Path(__file__).resolve().parents[1]
MUJOCO_ENVS = sorted(name for name in ENVS if not name.startswith('PointEnv'))
FIELDS = ('lengths', 'observations', 'last_observations', 'actions', 'rewards', 'step_types')


def _sample(env, lean, kind='local', n_workers=1, horizon=40, seed=3, rounds=1):
    exp = build_experiment('ProMP', env, seed, meta_batch_size=3, episodes_per_task=3,
                           max_episode_length=horizon, n_test_tasks=None, sampler=kind,
                           n_workers=n_workers, hidden_sizes=(16, ))
    sampler = exp.algo.sampler
    sampler._lean = lean  # pylint: disable=protected-access
    try:
        return [exp.algo.sample_meta_batch(i) for i in range(rounds)]
    finally:
        sampler.shutdown_worker()


def _assert_identical(first, second):
    for batches_a, batches_b in zip(first, second):
        for a, b in zip(batches_a, batches_b):
            ea, eb = a.episodes, b.episodes
            for field in FIELDS:
                x, y = getattr(ea, field), getattr(eb, field)
                assert x.dtype == y.dtype, field
                np.testing.assert_array_equal(x, y, err_msg=field)
            assert ea.env_infos.keys() == eb.env_infos.keys()
            for key in ea.env_infos:
                assert ea.env_infos[key].dtype == eb.env_infos[key].dtype, key
                np.testing.assert_array_equal(ea.env_infos[key], eb.env_infos[key], err_msg=key)
            for key in ea.agent_infos:
                np.testing.assert_array_equal(ea.agent_infos[key], eb.agent_infos[key])


@pytest.mark.mujoco
@pytest.mark.parametrize('env', MUJOCO_ENVS)
def test_lean_path_gives_the_wrapped_paths_episodes(env):
    """Every paper MuJoCo env, two sampling rounds (pre- and post-update)."""
    wrapped = _sample(env, lean=False, rounds=1)
    lean = _sample(env, lean=True, rounds=1)
    _assert_identical(wrapped, lean)
    lengths = np.concatenate([b.episodes.lengths for b in lean[0]])
    if env.startswith(('Walker', 'Hopper')):
        assert (lengths < 40).any(), 'the test should see early terminations'


@pytest.mark.mujoco
def test_lean_path_is_taken_for_the_package_envs_only():
    env = ENVS['HalfCheetahFwdBack']['env']()
    wrapped = normalize_actions(env)
    assert LeanStepper.of([wrapped, normalize_actions(ENVS['HalfCheetahFwdBack']['env']())])
    assert LeanStepper.of([env])  # without normalize too
    # Another env class, observation normalisation, or a third-party env: wrapped path.
    walker = normalize_actions(ENVS['WalkerFwdBack']['env']())
    assert LeanStepper.of([wrapped, walker]) is None
    assert LeanStepper.of([normalize(env, normalize_obs=True)]) is None
    assert LeanStepper.of([normalize(ShortPointEnv(), expected_action_scale=10.)]) is None
    assert LeanStepper.of([]) is None


@pytest.mark.mujoco
def test_lean_path_refuses_non_finite_actions_as_the_wrapped_path(monkeypatch):
    env = normalize_actions(ENVS['HalfCheetahFwdBack']['env']())
    env.reset()
    action = np.full(env.action_space.shape, np.nan, dtype=np.float32)
    with pytest.raises(ValueError) as wrapped:
        env.step(action)
    env.reset()
    stepper = LeanStepper.of([env])
    stepper.start([0])
    with pytest.raises(ValueError) as lean:
        stepper.step(np.array([0]), action[None], np.array([1]))
    assert str(lean.value) == str(wrapped.value)
    assert 'action is not finite' in str(lean.value)


@pytest.mark.mujoco
@pytest.mark.parametrize('lean', [True, False], ids=['lean', 'wrapped'])
def test_a_simulation_mujoco_reset_mid_episode_is_named_on_either_path(lean, monkeypatch):
    """MuJoCo resets a simulation that meets a NaN, inf or huge state and steps on (often
    with finite numbers): every wave asks each env afterwards. Here the envs of task slot
    1 report it (GymnasiumEnv.unstable_simulation forwards to the gymnasium env's own), as
    MuJoCo's counters do after a real reset (tests/envs/test_mujoco_envs.py)."""
    def report(env):
        return 'a NaN, inf or huge value in qacc' if env.get_task() < 0 else None

    monkeypatch.setattr(MujocoMetaEnv, 'unstable_simulation', report, raising=False)
    exp = build_experiment('ProMP', 'HalfCheetahFwdBack', 3, meta_batch_size=2,
                           episodes_per_task=2, max_episode_length=10, n_test_tasks=None,
                           hidden_sizes=(8, ))
    exp.algo.sampler._lean = lean  # pylint: disable=protected-access
    tasks = [1., -1.]
    monkeypatch.setattr(exp.algo._task_sampler, 'sample',  # pylint: disable=protected-access
                        lambda n: [SetTaskUpdate(type(exp.env.unwrapped), t, None)
                                   for t in tasks[:n]])
    with pytest.raises(FloatingPointError, match=r'the simulation became unstable by the end of '
                                                 r"the episode \(env HalfCheetahFwdBackEnv, "
                                                 r'task -1.0, task slot 1, '
                                                 r'episode 0, step 10\): a NaN, inf or huge '
                                                 r'value in qacc, so its later steps'):
        exp.algo.sample_meta_batch(0)


#: Every gymnasium env class with a vectorised ``batch_step``, and an action scale large
#: enough that some episodes end (the walkers fall; Ant and Humanoid leave their heights).
VECTORISED = [('HalfCheetahFwdBack', 1.), ('WalkerFwdBack', 1.), ('WalkerRandParams', 1.),
              ('HopperRandParams', 1.), ('AntFwdBack', 1.), ('AntRandDirec', 1.),
              ('HumanoidFwdBack', 0.4), ('HumanoidRandDirec', 0.4)]


@pytest.mark.mujoco
@pytest.mark.parametrize('name,scale', VECTORISED)
def test_batch_step_rows_equal_step_env_by_env(name, scale, monkeypatch):
    """The vectorised ``batch_step`` against ``step`` env by env, bit for bit, on random
    actions; the env-by-env fallback is disabled, so the test fails if it is taken."""
    gym_cls = ENVS[name]['env'].gym_env_cls
    rng = np.random.default_rng(0)
    envs_a = [gym_cls(seed=i) for i in range(4)]
    envs_b = [gym_cls(seed=i) for i in range(4)]
    for i, (a, b) in enumerate(zip(envs_a, envs_b)):
        task = a.sample_tasks(1)[0]
        a.set_task(task)
        b.set_task(task)
        a.reset(seed=i)
        b.reset(seed=i)
    monkeypatch.setattr(MujocoMetaEnv, 'batch_step', classmethod(_no_fallback))
    ended = False
    for _ in range(30):
        actions = scale * rng.uniform(-1, 1, (4, gym_cls(seed=0).action_space.shape[0]))
        obs, rewards, terminated, truncated, infos = gym_cls.batch_step(envs_b, actions)
        for n, (env, action) in enumerate(zip(envs_a, actions)):
            o, r, term, trunc, info = env.step(action)
            np.testing.assert_array_equal(o, obs[n])
            assert obs.dtype == o.dtype
            assert r == rewards[n] and term == terminated[n] and trunc == truncated[n]
            assert list(info) == list(infos)
            for key, value in info.items():
                np.testing.assert_array_equal(value, infos[key][n], err_msg=key)
        ended |= bool(terminated.any())
    if not name.startswith('HalfCheetah'):
        assert ended, 'the test should see episodes end'


def _no_fallback(cls, envs, actions):
    raise AssertionError(f'{cls.__name__}.batch_step stepped env by env')


@pytest.mark.mujoco
def test_lean_path_same_episodes_with_any_worker_count():
    in_process = _sample('HalfCheetahFwdBack', lean=True, horizon=20)
    pool = _sample('HalfCheetahFwdBack', lean=True, kind='multiprocessing', n_workers=2,
                   horizon=20)
    _assert_identical(in_process, pool)


def _rows(path):
    with open(path, newline='') as f:
        return [{k: v for k, v in r.items() if not k.startswith('Time') and 'Time' not in k}
                for r in csv.DictReader(f)]


@pytest.mark.mujoco
def test_a_resumed_run_on_the_lean_path_continues_exactly(tmp_path):
    train = [sys.executable, str(ROOT / 'launchers' / 'train.py')]
    common = ['--env', 'WalkerFwdBack', '--meta-batch-size', '2', '--episodes-per-task', '2',
              '--max-episode-length', '30', '--hidden-sizes', '8', '--n-test-tasks', '1',
              '--evaluate-every', '1000']
    run = dict(check=True, capture_output=True, cwd=ROOT, timeout=600)
    subprocess.run([*train, *common, '--max-env-steps', '600', '--log-dir',
                    str(tmp_path / 'straight')], **run)
    subprocess.run([*train, *common, '--max-env-steps', '300', '--log-dir',
                    str(tmp_path / 'resumed')], **run)
    subprocess.run([*train, '--resume', str(tmp_path / 'resumed'), '--max-env-steps', '600'],
                   **run)
    straight = _rows(tmp_path / 'straight' / 'progress.csv')
    resumed = _rows(tmp_path / 'resumed' / 'progress.csv')
    assert len(straight) >= 3
    assert resumed == straight
    assert float(straight[-1]['TotalEnvSteps']) >= 600 > float(straight[-2]['TotalEnvSteps'])


class _ShapedCheetahGym(__import__('garage_promp.envs.half_cheetah_fwd_back',
                                   fromlist=['HalfCheetahFwdBackGym']).HalfCheetahFwdBackGym):
    """A user's subclass that changes the observation: the vectorised step must not apply."""

    def _get_obs(self):
        return super()._get_obs() * 2


class _OwnStepEnv(type(ENVS['HalfCheetahFwdBack']['env']())):
    """A garage env whose ``step`` adds something: the lean path must not bypass it."""

    def step(self, action):
        return super().step(action)


@pytest.mark.mujoco
def test_user_subclasses_keep_their_own_step():
    assert LeanStepper.of([_OwnStepEnv()]) is None
    envs = [_ShapedCheetahGym(seed=i) for i in range(2)]
    twins = [_ShapedCheetahGym(seed=i) for i in range(2)]
    for env, twin in zip(envs + twins, [0, 1, 0, 1]):
        env.reset(seed=twin)
    actions = np.full((2, 6), 0.3, dtype=np.float32)
    obs = _ShapedCheetahGym.batch_step(envs, actions)[0]
    for n, twin in enumerate(twins):
        np.testing.assert_array_equal(obs[n], twin.step(actions[n])[0])


def _metaworld_sample(lean, env, task=None, seed=3):
    exp = build_experiment('ProMP', env, seed, task=task, meta_batch_size=10, episodes_per_task=2,
                           max_episode_length=60, n_test_tasks=None, sampler='local',
                           n_workers=1, hidden_sizes=(16, ), reward_function_version='v2')
    sampler = exp.algo.sampler
    sampler._lean = lean  # pylint: disable=protected-access
    taken = []
    original = LeanStepper.of.__func__

    def of(cls, envs):
        stepper = original(cls, envs)
        taken.append(stepper is not None)
        return stepper

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(LeanStepper, 'of', classmethod(of))
            return exp.algo.sample_meta_batch(0), taken
    finally:
        sampler.shutdown_worker()


@pytest.mark.metaworld
@pytest.mark.parametrize('env,task', [('ML10', None), ('ML1', 'reach-v3')])
def test_meta_world_lean_path_gives_the_wrapped_paths_episodes(env, task):
    """Meta-World steps lean (a wave of ML10 mixes its ten classes); the episodes, env infos
    (``task_name`` and their dtypes included) and agent infos equal the wrapped path's."""
    wrapped, _ = _metaworld_sample(False, env, task)
    lean, taken = _metaworld_sample(True, env, task)
    assert taken and all(taken)
    _assert_identical([wrapped], [lean])
    names = set(np.concatenate([b.episodes.env_infos['task_name'] for b in lean]))
    assert len(names) == (10 if env == 'ML10' else 1)


def _metaworld_env(terminate_on_success, max_episode_length=500, seed=0):
    from garage_promp.envs import MetaWorldTaskSampler, make_benchmark  # pylint: disable=import-outside-toplevel
    sampler = MetaWorldTaskSampler(make_benchmark('ML1', 'reach-v3', seed=1), 'train',
                                   max_episode_length=max_episode_length, seed=seed,
                                   terminate_on_success=terminate_on_success)
    return sampler.sample(1)[0]()


def _scripted_pair(terminate_on_success, max_episode_length):
    """Meta-World's scripted reach policy through ``env.step`` and through the lean stepper,
    on twin envs: every step's fields side by side."""
    from metaworld.policies import SawyerReachV3Policy  # pylint: disable=import-outside-toplevel
    envs = [_metaworld_env(terminate_on_success, max_episode_length) for _ in range(2)]
    observations = [env.reset()[0] for env in envs]
    stepper = LeanStepper.of([envs[1]])
    assert stepper is not None
    stepper.start([0])
    policy, steps = SawyerReachV3Policy(), []
    for t in range(1, max_episode_length + 1):
        seen = observations[0].copy()  # ML1 hides the goal; the scripted policy needs it
        seen[-3:] = envs[0].gym_env._target_pos  # pylint: disable=protected-access
        action = np.clip(policy.get_action(seen), -1, 1).astype(np.float32)
        wrapped = envs[0].step(action)
        obs, rewards, types, infos = stepper.step(np.array([0]), action[None], np.array([t]))
        steps.append((wrapped, obs[0], rewards[0], types[0], {k: v[0] for k, v in infos.items()}))
        observations = [wrapped.observation, obs[0]]
        if wrapped.last:
            break
    return envs, steps


@pytest.mark.metaworld
def test_meta_world_lean_step_ends_at_a_success_as_step_does():
    """With ``terminate_on_success``: the success step is terminal on both paths, the step
    counts end alike; at a success on the episode's last allowed step, both say TIMEOUT."""
    envs, steps = _scripted_pair(True, 500)
    success_at = len(steps)
    assert success_at < 500, 'the scripted policy should reach the goal'
    for wrapped, obs, reward, kind, info in steps:
        np.testing.assert_array_equal(obs, wrapped.observation)
        assert reward == wrapped.reward and kind == int(wrapped.step_type)
        assert info == wrapped.env_info
    assert steps[-1][3] == int(StepType.TERMINAL) and steps[-1][4]['success']
    assert envs[0]._step_cnt is None and envs[1]._step_cnt is None  # pylint: disable=protected-access
    _, steps = _scripted_pair(True, success_at)
    assert [s[3] for s in steps][-1] == int(steps[-1][0].step_type) == int(StepType.TIMEOUT)


@pytest.mark.metaworld
def test_meta_world_lean_path_keeps_a_subclass_step_and_names_a_failing_env():
    from garage_promp.envs.metaworld import MetaWorldEnv  # pylint: disable=import-outside-toplevel

    class OwnStep(MetaWorldEnv):
        def step(self, action):
            return super().step(action)

    envs = [_metaworld_env(False, seed=s) for s in (1, 2)]
    assert LeanStepper.of(envs) is not None
    env = envs[0]
    own = OwnStep(env.get_task(), max_episode_length=10)
    assert LeanStepper.of([own]) is None and LeanStepper.of(envs + [own]) is None
    for env in envs:
        env.reset()
    stepper = LeanStepper.of(envs)
    stepper.start([0, 1])

    def broken(action):
        raise RuntimeError('simulation failed')

    envs[1]._env.step = broken  # pylint: disable=protected-access
    with pytest.raises(RuntimeError) as error:
        stepper.step(np.array([0, 1]), np.zeros((2, 4), dtype=np.float32), np.array([1, 1]))
    assert error.value.lean_row == 1


@pytest.mark.mujoco
@pytest.mark.parametrize('name', ['HalfCheetahFwdBack', 'WalkerFwdBack'])
def test_batch_step_of_copies_steps_each_copys_own_simulation(name):
    """The lean path keeps views of each env's ``MjData`` (``MujocoMetaEnv._views``): a
    deep copy or an unpickled env made after them steps its own simulation, and an env
    given a new ``MjData`` is read from that one."""
    import copy  # pylint: disable=import-outside-toplevel
    import pickle  # pylint: disable=import-outside-toplevel
    gym_cls = ENVS[name]['env'].gym_env_cls
    original = gym_cls(seed=0)
    original.reset(seed=0)
    actions = 0.3 * np.ones((1, original.action_space.shape[0]))
    gym_cls.batch_step([original], actions)  # the views exist from here on
    qpos = original.data.qpos.copy()
    copies = [copy.deepcopy(original), pickle.loads(pickle.dumps(original))]
    for clone in copies:
        assert clone._views()[0] is clone.data
        assert not np.shares_memory(clone._views()[2], original._views()[2])
    reference = copy.deepcopy(original)
    expected = reference.step(actions[0])[0]
    for clone in copies:
        obs = gym_cls.batch_step([clone], actions)[0]
        np.testing.assert_array_equal(obs[0], expected)
    np.testing.assert_array_equal(original.data.qpos, qpos)  # the original did not move
    fresh = copy.copy(original.data)  # the same state in a new MjData
    original.data = fresh
    obs = gym_cls.batch_step([original], actions)[0]
    np.testing.assert_array_equal(obs[0], expected)
    assert original._views()[0] is fresh


@pytest.mark.mujoco
def test_envs_of_different_frame_skips_in_one_wave_step_each_its_own():
    """A user's env (a subclass, or an instance given another frame_skip) in a wave with
    the package's: the compiled loop steps one frame skip for all, so the wave is stepped
    env by env, each with its own frame skip, as its own do_simulation would."""
    import copy  # pylint: disable=import-outside-toplevel
    gym_cls = ENVS['HalfCheetahFwdBack']['env'].gym_env_cls
    envs = [gym_cls(seed=k) for k in range(3)]
    for env in envs:
        env.reset(seed=0)
    envs[1].frame_skip = 2
    reference = [copy.deepcopy(env) for env in envs]
    actions = 0.3 * np.sin(np.arange(18.).reshape(3, 6))
    for _ in range(3):
        MujocoMetaEnv._step_all(envs, actions, False)  # pylint: disable=protected-access
        for env, action in zip(reference, actions):
            env.data.ctrl[:] = action
            mujoco.mj_step(env.model, env.data, nstep=env.frame_skip)
    for env, expected in zip(envs, reference):
        np.testing.assert_array_equal(env.data.qpos, expected.data.qpos)
        np.testing.assert_array_equal(env.data.qvel, expected.data.qvel)
    assert envs[1].data.time == pytest.approx(3 * 2 * envs[1].model.opt.timestep)


@pytest.mark.mujoco
@pytest.mark.parametrize('env_name', ['HalfCheetahFwdBack', 'AntRandDirec', 'HopperRandParams'])
def test_a_waves_constants_are_its_own(env_name):
    """What a wave keeps once (each env's task direction and task row, the models and
    addresses it steps) is not carried into the next wave: the same env objects,
    re-tasked between waves, step as their own ``step`` does in both."""
    import copy  # pylint: disable=import-outside-toplevel

    from garage_promp.envs._mujoco import identical_models, stepping_with_models  # pylint: disable=import-outside-toplevel
    gym_cls = ENVS[env_name]['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(4)]
    rng = np.random.default_rng(3)
    before = None
    for wave in range(2):
        for _ in range(50):  # tasks that differ from the first wave's on some env
            tasks = envs[0].sample_tasks(len(envs))
            for env, task in zip(envs, tasks):
                env.set_task(task)
            rows = np.array([env._task_vector for env in envs])
            if before is None or not np.array_equal(rows, before):
                break
        before = rows
        for env in envs:
            env.reset(seed=wave)
        alone = copy.deepcopy(envs)
        models = identical_models(envs)
        for _ in range(3):
            actions = rng.uniform(-1, 1, (len(envs), envs[0].action_space.shape[0]))
            with stepping_with_models(models):
                obs, rewards, _, _, infos = gym_cls.batch_step(envs, actions)
            for n, (env, action) in enumerate(zip(alone, actions)):
                expected = env.step(action)
                np.testing.assert_array_equal(obs[n], expected[0])
                assert rewards[n] == expected[1]
                np.testing.assert_array_equal(infos['task'][n], expected[4]['task'])


@pytest.mark.mujoco
@pytest.mark.parametrize('env_name', ['HopperRandParams', 'WalkerFwdBack', 'AntRandDirec'])
def test_a_parts_constants_are_taken_out_of_the_waves(env_name, monkeypatch):
    """Where episodes end, each step steps a part of the wave: its constants (the models
    and addresses to step, task rows, directions) are the wave's at the part's positions,
    the wave's step plan made once, and every env steps as its own ``step`` does; envs
    that are not all of the wave (another env among them) get their own plan."""
    import copy  # pylint: disable=import-outside-toplevel

    from garage_promp.envs import _mujoco  # pylint: disable=import-outside-toplevel
    gym_cls = ENVS[env_name]['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(6)]
    for env, task in zip(envs, envs[0].sample_tasks(len(envs))):
        env.set_task(task)
        env.reset(seed=1)
    stranger = gym_cls(seed=9)
    stranger.reset(seed=1)
    alone = copy.deepcopy(envs + [stranger])
    plans = []
    real = _mujoco.MujocoMetaEnv.__dict__['_step_plan']

    def counted(envs_, lib):
        plans.append(len(envs_))
        return real.__func__(envs_, lib)
    monkeypatch.setattr(_mujoco.MujocoMetaEnv, '_step_plan', staticmethod(counted))
    models = _mujoco.identical_models(envs)
    models.wave = envs
    rng = np.random.default_rng(0)
    size = envs[0].action_space.shape[0]
    for part in ([0, 1, 2, 3, 4, 5], [0, 2, 3, 5], [2, 3], [3], [0, 2, 3, 5]):
        actions = rng.uniform(-0.2, 0.2, (len(part), size))
        with _mujoco.stepping_with_models(models):
            obs, rewards, _, _, infos = gym_cls.batch_step([envs[i] for i in part], actions)
        for n, (i, action) in enumerate(zip(part, actions)):
            expected = alone[i].step(action)
            np.testing.assert_array_equal(obs[n], expected[0])
            assert rewards[n] == expected[1]
            np.testing.assert_array_equal(infos['task'][n], expected[4]['task'])
    assert plans == [6]
    actions = rng.uniform(-0.2, 0.2, (2, size))
    with _mujoco.stepping_with_models(models):
        obs = gym_cls.batch_step([envs[1], stranger], actions)[0]
    np.testing.assert_array_equal(obs[0], alone[1].step(actions[0])[0])
    np.testing.assert_array_equal(obs[1], alone[-1].step(actions[1])[0])
    assert plans == [6, 2]


@pytest.mark.mujoco
@pytest.mark.parametrize('compiled', [True, False], ids=['compiled', 'serialised'])
def test_identical_models_group_copies_and_split_on_any_difference(compiled, monkeypatch):
    """Deep copies share one model; RandParams envs group by task; a model that differs
    in one number, or in its timestep option, is its own group; non-MuJoCo envs are left
    out: with the compiled comparison and with the serialisations (no compiled library)."""
    import copy  # pylint: disable=import-outside-toplevel

    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel
    if compiled and _cstep.library() is None:
        pytest.skip(f'no compiled stepping library: {_cstep.reason}')
    if not compiled:
        monkeypatch.setattr(_cstep, '_library', None)

    from garage_promp.envs._mujoco import identical_models  # pylint: disable=import-outside-toplevel
    cheetah = ENVS['HalfCheetahFwdBack']['env'].gym_env_cls(seed=0)
    copies = [copy.deepcopy(cheetah) for _ in range(4)]
    odd, slow, swapped = (copy.deepcopy(cheetah) for _ in range(3))
    odd.model.body_mass[1] = np.nextafter(odd.model.body_mass[1], np.inf)
    slow.model.opt.timestep *= 2
    # two masses swapped: the same bytes in another order, which a checksum may not see
    swapped.model.body_mass[[1, 2]] = swapped.model.body_mass[[2, 1]]
    models = identical_models([cheetah, *copies, odd, slow, swapped, ShortPointEnv()])
    assert all(models[id(env)] is cheetah.model for env in copies)
    for env in (odd, slow, swapped):
        assert models[id(env)] is env.model
    assert len(models) == 8
    hopper = ENVS['HopperRandParams']['env'].gym_env_cls(seed=0)
    tasks = hopper.sample_tasks(2)
    envs = [copy.deepcopy(hopper) for _ in range(6)]
    for i, env in enumerate(envs):
        env.set_task(tasks[i % 2])
    models = identical_models(envs)
    assert [models[id(env)] for env in envs] == [envs[i % 2].model for i in range(6)]


def _perturbed(value: np.ndarray, index: int = 0) -> np.ndarray:
    """``value`` with its entry ``index`` (flat) changed in its last bit (or by one)."""
    flat = value.reshape(-1).copy()
    if flat.dtype.kind == 'f':
        flat[index] = np.nextafter(flat[index], flat.dtype.type(np.inf))
    elif flat.dtype.kind == 'b':
        flat[index] = not flat[index]
    else:
        flat[index] = flat[index] ^ 1
    return flat.reshape(value.shape)


@pytest.mark.mujoco
@pytest.mark.parametrize('env_name', ['HalfCheetahFwdBack', 'HumanoidRandDirec'])
def test_same_physics_sees_every_array_option_and_statistic_but_the_textures(env_name):
    """The compiled comparison: a copy with any one array of the model changed in one entry
    (every non-empty array MuJoCo's bindings show, a hundred and more), or any option, or
    the statistics, or the visual setting the engine reads, is not the same physics; one
    whose textures' pixels differ is (only rendering reads them), while its serialisation
    differs; a deep copy is the same."""
    import copy  # pylint: disable=import-outside-toplevel

    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel

    import mujoco  # pylint: disable=import-outside-toplevel
    lib = _cstep.library()
    if lib is None:
        pytest.skip(f'no compiled stepping library: {_cstep.reason}')
    model = ENVS[env_name]['env'].gym_env_cls(seed=0).model
    assert _cstep.same_physics(lib, model, copy.deepcopy(model))
    names = [name for name in dir(model) if not name.startswith('_')
             and isinstance(getattr(model, name), np.ndarray) and getattr(model, name).size]
    assert 'tex_data' in names and len(names) > 100
    for name in names:
        for index in (0, -1):  # the first and the last entry: the whole array is compared
            other = copy.deepcopy(model)
            getattr(other, name)[...] = _perturbed(getattr(model, name), index)
            assert _cstep.same_physics(lib, model, other) == (name == 'tex_data'), (name, index)
    hopper = ENVS['HopperRandParams']['env'].gym_env_cls(seed=0).model  # other sizes
    assert not _cstep.same_physics(lib, model, hopper)
    assert not _cstep.same_physics(lib, hopper, model)
    textured = copy.deepcopy(model)
    textured.tex_data[...] = _perturbed(model.tex_data)
    blobs = []
    for m in (model, textured):
        blobs.append(np.empty(mujoco.mj_sizeModel(m), dtype=np.uint8))
        mujoco.mj_saveModel(m, None, blobs[-1])
    assert not np.array_equal(*blobs)
    changes = {'opt.timestep': lambda m: setattr(m.opt, 'timestep', m.opt.timestep * 2),
               'opt.gravity': lambda m: m.opt.gravity.__setitem__(2, -9.8),
               'opt.o_solimp': lambda m: m.opt.o_solimp.__setitem__(0, 0.5),
               'opt.iterations': lambda m: setattr(m.opt, 'iterations', m.opt.iterations + 1),
               'opt.disableflags': lambda m: setattr(m.opt, 'disableflags', 1),
               'stat.meaninertia': lambda m: setattr(m.stat, 'meaninertia', 2.5),
               'vis.global.bvactive': lambda m: setattr(m.vis.global_, 'bvactive',
                                                        1 - m.vis.global_.bvactive)}
    for what, change in changes.items():
        other = copy.deepcopy(model)
        change(other)
        assert not _cstep.same_physics(lib, model, other), what


def test_same_bytes_finds_a_difference_at_any_byte(monkeypatch):
    """The model comparison (``memcmp`` where the C library is loaded, else
    ``np.array_equal``) sees one flipped bit at the first, a middle and the last byte,
    and a length difference; on Linux it is the ``memcmp`` path."""
    import sys  # pylint: disable=import-outside-toplevel

    from garage_promp.envs import _mujoco  # pylint: disable=import-outside-toplevel
    if sys.platform.startswith('linux'):
        assert _mujoco._MEMCMP is not None  # pylint: disable=protected-access
    a = np.random.default_rng(0).integers(0, 256, 100_003, dtype=np.uint8)
    for memcmp in (_mujoco._MEMCMP, None):  # pylint: disable=protected-access
        monkeypatch.setattr(_mujoco, '_MEMCMP', memcmp)
        assert _mujoco.same_bytes(a, a.copy())
        for i in (0, a.size // 2, a.size - 1):
            b = a.copy()
            b[i] ^= 1
            assert not _mujoco.same_bytes(a, b)
        assert not _mujoco.same_bytes(a, a[:-1].copy())
        assert not _mujoco.same_bytes(a[:-1].copy(), a)


@pytest.mark.mujoco
def test_a_lean_wave_steps_identical_models_as_one(monkeypatch):
    """Inside the stepper, a wave's HalfCheetah copies are stepped with one model (the
    sampler's episodes are still those of the wrapped path, tested above); outside it,
    ``batch_step`` steps every env with its own."""
    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel

    import mujoco  # pylint: disable=import-outside-toplevel
    stepped = []
    real, real_batch = mujoco.mj_step, _cstep.step_batch
    monkeypatch.setattr(mujoco, 'mj_step', lambda m, d, nstep: (stepped.append(id(m)),
                                                                   real(m, d, nstep=nstep)))

    def step_batch(lib, models, *args, **kwargs):  # the compiled loop, where it is built
        stepped.extend(id(m) for m in models)
        return real_batch(lib, models, *args, **kwargs)
    monkeypatch.setattr(_cstep, 'step_batch', step_batch)
    _sample('HalfCheetahFwdBack', True, horizon=5)
    assert stepped and len(set(stepped)) == 1
    stepped.clear()
    _sample('HalfCheetahFwdBack', False, horizon=5)  # the wrapped path: each env's own model
    assert len(set(stepped)) == 9
    gym_cls = ENVS['HalfCheetahFwdBack']['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(3)]
    stepped.clear()
    gym_cls.batch_step(envs, np.zeros((3, 6)))
    assert stepped == [id(env.model) for env in envs]


@pytest.mark.mujoco
@pytest.mark.parametrize('compiled', [True, False], ids=['compiled', 'python'])
def test_a_waves_rows_are_each_envs_own_numbers(compiled, monkeypatch):
    """``MujocoMetaEnv._rows`` / ``_stack`` (one gather over the wave where the compiled
    library is loaded) give each env's own numbers of every field it reads, as the
    env-by-env reads give them, and a part of one (the torso's x-y)."""
    from garage_promp.envs import AntRandDirecEnv, HumanoidRandDirecEnv, _cstep, _mujoco  # pylint: disable=import-outside-toplevel  # pylint: disable=import-outside-toplevel
    if not compiled:
        monkeypatch.setattr(_cstep, 'library', lambda: None)
    elif _cstep.library() is None:
        pytest.skip(f'no compiled stepping library: {_cstep.reason}')
    for cls in (AntRandDirecEnv, HumanoidRandDirecEnv):
        envs = [cls(seed=s) for s in range(3)]
        for env in envs:
            env.reset()
        gyms = [env.gym_env.unwrapped for env in envs]
        for gym in gyms:  # states that differ env by env
            mujoco.mj_step(gym.model, gym.data, nstep=3)
        with _mujoco.stepping_with_models(_mujoco.WaveModels()):
            for field in _cstep.GATHER_FIELDS:
                got = _mujoco.MujocoMetaEnv._stack(gyms, field)
                expected = np.array([getattr(g.data, field).ravel() for g in gyms])
                assert got.dtype == expected.dtype and np.array_equal(got, expected), field
            if cls is AntRandDirecEnv:
                torso = gyms[0]._torso  # pylint: disable=protected-access
                assert np.array_equal(type(gyms[0])._torso_rows(gyms),  # pylint: disable=protected-access
                                      [g.data.xpos[torso, :2] for g in gyms])


def test_wave_models_number_the_same_envs_alike_whatever_list_holds_them():
    """The wave's constants are kept under :meth:`WaveModels.group`: one number for the same
    envs in the same order (the same list object or another), another for other envs or
    another order, so no constant of some envs is handed to others."""
    from garage_promp.envs._mujoco import WaveModels, stepping_with_models, wave_constant  # pylint: disable=import-outside-toplevel
    a, b, c = object(), object(), object()
    models = WaveModels()
    first = [a, b]
    assert models.group(first) == models.group(first) == models.group([a, b])
    assert len({models.group([a, b]), models.group([b, a]), models.group([a, b, c]),
                models.group([c])}) == 4
    assert models.group(first) == models.group([a, b])  # after other lists in between
    calls = []
    with stepping_with_models(models):
        for envs in (first, [a, b], [b, a], first, [c]):
            wave_constant(envs, 'names', lambda es: calls.append(list(es)) or len(calls))
    assert calls == [[a, b], [b, a], [c]]


@pytest.mark.mujoco
def test_a_lean_step_stopped_by_an_error_leaves_every_wrapper_at_its_count(monkeypatch):
    """The stepper writes the wrappers' step counts of a wave's running episodes only where
    a step stops on an error (an ended episode's at once): there each wrapper of the
    step's rows is at that step's count, as ``GymnasiumEnv.step`` counts a step before it
    runs, and the error names the step."""
    envs = [normalize_actions(ENVS['HopperRandParams']['env']()) for _ in range(3)]
    for env in envs:
        env.reset()
    wrappers = [env._env for env in envs]  # pylint: disable=protected-access
    gym_cls = type(wrappers[0].gym_env)
    real, fail = gym_cls.batch_step, []

    def failing(cls, gyms, scaled):
        obs, rewards, terminated, truncated, infos = real.__func__(cls, gyms, scaled)
        if len(gyms) == 3 and fail:  # the second env's episode ends at the second step
            terminated = np.array([False, True, False])
        elif fail:
            obs[1, 0] = np.nan
        return obs, rewards, terminated, truncated, infos
    monkeypatch.setattr(gym_cls, 'batch_step', classmethod(failing))
    stepper = LeanStepper.of(envs)
    stepper.start(range(3))
    actions = np.zeros((3, envs[0].action_space.shape[0]), dtype=np.float32)
    stepper.step(np.arange(3), actions, np.full(3, 1))
    fail.append(True)
    stepper.step(np.arange(3), actions, np.full(3, 2))
    assert wrappers[1]._step_cnt is None  # pylint: disable=protected-access
    with pytest.raises(ValueError, match='at step 3') as error:
        stepper.step(np.array([0, 2]), actions[:2], np.full(2, 3))
    assert error.value.lean_row == 2
    assert [w._step_cnt for w in wrappers] == [3, None, 3]  # pylint: disable=protected-access
