"""Meta-World 3 adapter: names, benchmarks, task sampling, env updates, copies."""
import copy
import pickle

import garage_promp  # noqa: F401
from garage_promp.envs import (
    MetaWorldEnv,
    MetaWorldTaskSampler,
    MetaWorldTaskUpdate,
    check_env_name,
    make_benchmark,
)

from garage import StepType
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
import numpy as np
import pytest

ML10_TRAIN = ['reach-v3', 'push-v3', 'pick-place-v3', 'door-open-v3', 'drawer-close-v3',
              'button-press-topdown-v3', 'peg-insert-side-v3', 'window-open-v3', 'sweep-v3',
              'basketball-v3']
ML10_TEST = ['drawer-open-v3', 'door-close-v3', 'shelf-place-v3', 'sweep-into-v3',
             'lever-pull-v3']
ACTIONS = np.random.default_rng(0).uniform(-1.5, 1.5, (12, 4)).astype(np.float32)


@pytest.fixture(scope='module')
def reach():
    return make_benchmark('ML1', 'reach-v3', seed=1)


@pytest.fixture(scope='module')
def ml10():
    return make_benchmark('ML10', seed=1)


def _rand_vecs(updates):
    return [pickle.loads(u.task.data)['rand_vec'] for u in updates]


def _rollout(env, actions=ACTIONS):
    """Observations and rewards of one episode under fixed actions."""
    obs = [env.reset()[0]]
    rewards = []
    for action in actions:
        env_step = env.step(action)
        obs.append(env_step.observation)
        rewards.append(env_step.reward)
    return np.array(obs), np.array(rewards)


# ------------------------------------------------------------------ names
def test_unknown_name_lists_the_v3_names():
    with pytest.raises(ValueError, match='unknown Meta-World environment') as err:
        check_env_name('reech-v3')
    assert "did you mean 'reach-v3'" in str(err.value)
    assert 'pick-place-v3' in str(err.value) and 'window-open-v3' in str(err.value)


@pytest.mark.parametrize('old,new', [('push-v2', 'push-v3'), ('pick-place-v1', 'pick-place-v3')])
def test_garage_era_name_names_the_v3_env(old, new):
    with pytest.raises(ValueError, match=f"use '{new}'"):
        check_env_name(old)
    assert check_env_name(new) == new


def test_benchmark_arguments_are_checked():
    with pytest.raises(ValueError, match='ML1 needs a task'):
        make_benchmark('ML1')
    with pytest.raises(ValueError, match='takes no task'):
        make_benchmark('ML10', task='reach-v3')
    with pytest.raises(ValueError, match='takes no task'):
        make_benchmark('ML45', task='reach-v3')
    with pytest.raises(ValueError, match='benchmark must be one of'):
        make_benchmark('MT10')
    with pytest.raises(ValueError, match="use 'push-v3'"):
        make_benchmark('ML1', task='push-v2')
    with pytest.raises(ValueError, match='seed'):
        make_benchmark('ML1', task='reach-v3', seed=-1)


@pytest.mark.metaworld
def test_a_benchmark_built_again_in_a_process_is_meta_worlds_own_with_lists_of_its_own(reach):
    """The second make_benchmark of the same (name, task, seed) takes the first one's goals
    (Meta-World's own construction resets each class's env 50 times), as Meta-World builds
    them, in lists the caller may edit without editing the next caller's; numpy's global
    generator is left as it was, as by Meta-World."""
    import metaworld  # pylint: disable=import-outside-toplevel
    state = np.random.get_state()[1].copy()
    again = make_benchmark('ML1', 'reach-v3', seed=1)
    assert (np.random.get_state()[1] == state).all()
    fresh = metaworld.ML1('reach-v3', seed=1)
    for split in ('train_tasks', 'test_tasks'):
        assert getattr(again, split) == getattr(fresh, split) == getattr(reach, split)
        assert getattr(again, split) is not getattr(reach, split)
    assert list(again.train_classes) == list(fresh.train_classes)
    again.train_tasks.clear()
    assert len(make_benchmark('ML1', 'reach-v3', seed=1).train_tasks) == 50
    assert make_benchmark('ML1', 'reach-v3', seed=2).train_tasks != fresh.train_tasks


# --------------------------------------------------------------- sampler
@pytest.mark.metaworld
def test_sampler_arguments_are_checked(reach, ml10):
    with pytest.raises(ValueError, match='max_episode_length must be <= 500'):
        MetaWorldTaskSampler(reach, max_episode_length=501)
    with pytest.raises(ValueError, match='max_episode_length'):
        MetaWorldTaskSampler(reach, max_episode_length=0)
    with pytest.raises(ValueError, match='reward_function_version'):
        MetaWorldTaskSampler(reach, reward_function_version='v3')
    with pytest.raises(ValueError, match='kind'):
        MetaWorldTaskSampler(reach, kind='validation')
    with pytest.raises(ValueError, match=r'wrapper must be None or a callable'):
        MetaWorldTaskSampler(reach, wrapper='x')
    sampler = MetaWorldTaskSampler(ml10, 'train', seed=0)
    with pytest.raises(ValueError, match='multiple of 10, the number of train classes of ML10'):
        sampler.sample(15)
    with pytest.raises(ValueError, match='with_replacement must be True or False'):
        sampler.sample(10, with_replacement='no')
    with pytest.raises(ValueError, match='meta_batch_size must be a positive multiple of 5'):
        MetaWorldTaskSampler(ml10, 'test', seed=0).check_n_tasks(4, 'meta_batch_size')
    with pytest.raises(ValueError, match='max_episode_length'):
        MetaWorldTaskUpdate(reach.train_tasks[0], max_episode_length=1000)
    # A meta-test draws goals without repeats only up to a class's 50: beyond, a goal would
    # be counted twice in its averages as if distinct.
    test = MetaWorldTaskSampler(ml10, 'test', seed=0)
    assert test.goals_per_class == 50 and test.check_distinct_goals(250) == 250
    with pytest.raises(ValueError, match=r'n_test_tasks=255 asks 51 goals of each of the 5 '
                                         r'test classes of ML10, which has 50 goals a class: '
                                         r'a goal would be drawn and counted twice; at most '
                                         r'250'):
        test.check_distinct_goals(255, 'n_test_tasks')


@pytest.mark.metaworld
def test_ml10_samples_every_train_and_test_class_equally(ml10):
    train = MetaWorldTaskSampler(ml10, 'train', max_episode_length=5, seed=0)
    test = MetaWorldTaskSampler(ml10, 'test', max_episode_length=5, seed=0)
    assert train.class_names == ML10_TRAIN and test.class_names == ML10_TEST
    assert train.n_tasks == 500 and test.n_tasks == 250
    names = [u.task.env_name for u in train.sample(20)]
    assert names == [name for name in ML10_TRAIN for _ in range(2)]
    for update in test.sample(5):
        env = update()
        env.reset()
        info = env.step(np.zeros(4, np.float32)).env_info
        assert info['task_name'] == update.task.env_name == env.task_name
        assert type(env.unwrapped) is ALL_V3_ENVIRONMENTS[update.task.env_name]
    assert [u.task.env_name for u in test.sample(5)] == ML10_TEST


@pytest.mark.metaworld
def test_goals_are_reproducible_from_the_seeds(reach):
    def draws(benchmark, seed):
        sampler = MetaWorldTaskSampler(benchmark, seed=seed)
        return _rand_vecs(sampler.sample(5) + sampler.sample(5))

    first = draws(reach, 7)
    np.testing.assert_array_equal(first, draws(reach, 7))
    assert not np.array_equal(first, draws(reach, 8))
    # The goals themselves come from the benchmark seed (ML1 test goals: seed + 1).
    other = make_benchmark('ML1', 'reach-v3', seed=2)
    assert not np.array_equal(_rand_vecs([MetaWorldTaskUpdate(t) for t in reach.train_tasks]),
                              _rand_vecs([MetaWorldTaskUpdate(t) for t in other.train_tasks]))
    again = make_benchmark('ML1', 'reach-v3', seed=1)
    np.testing.assert_array_equal(_rand_vecs(MetaWorldTaskSampler(reach, 'test', seed=0).sample(3)),
                                  _rand_vecs(MetaWorldTaskSampler(again, 'test', seed=0).sample(3)))


@pytest.mark.metaworld
def test_goals_are_drawn_without_replacement_until_all_are_used(reach):
    sampler = MetaWorldTaskSampler(reach, seed=0)
    goals = _rand_vecs(sampler.sample(30) + sampler.sample(20))
    assert len(np.unique(np.array(goals), axis=0)) == 50
    assert len(sampler.sample(4, with_replacement=True)) == 4


def test_a_meta_tests_draw_never_holds_a_goal_twice(reach):
    """Draws of 30 of 50 goals cross a cycle's end: the test split's draw takes the last
    cycle's goals first and the new cycle's others after them, so no draw repeats a goal
    (the training split keeps the cycle as drawn); where draws divide the 50 goals nothing
    is left over and the two splits draw the same goals, as before."""
    test = MetaWorldTaskSampler(reach, 'test', seed=0)
    for _ in range(6):
        assert len(np.unique(np.array(_rand_vecs(test.sample(30))), axis=0)) == 30
    train = MetaWorldTaskSampler(reach, 'train', seed=0)
    assert min(len(np.unique(np.array(_rand_vecs(train.sample(30))), axis=0))
               for _ in range(6)) < 30  # (the training split may repeat one)
    test, train = (MetaWorldTaskSampler(reach, kind, seed=0) for kind in ('test', 'train'))
    order = [[test._tasks['reach-v3'].index(u.task) for u in test.sample(10)]  # pylint: disable=protected-access
             for _ in range(12)]
    same = [[train._tasks['reach-v3'].index(u.task) for u in train.sample(10)]  # pylint: disable=protected-access
            for _ in range(12)]
    assert order == same


# ---------------------------------------------------------- env / update
@pytest.mark.metaworld
def test_env_steps_as_a_garage_env_with_the_task_name(reach):
    env = MetaWorldTaskSampler(reach, max_episode_length=3, seed=0).sample(1)[0]()
    assert isinstance(env, MetaWorldEnv) and env.reward_function_version == 'v2'
    assert env.spec.observation_space.shape == (39, ) and env.spec.action_space.shape == (4, )
    obs, _ = env.reset()
    assert obs.dtype == np.float32
    steps = [env.step(a) for a in ACTIONS[:3]]
    assert [s.step_type for s in steps] == [StepType.FIRST, StepType.MID, StepType.TIMEOUT]
    assert {'success', 'obj_to_target', 'task_name'} <= set(steps[0].env_info)
    assert all(s.env_info.keys() == steps[0].env_info.keys() for s in steps)
    assert steps[-1].env_info['task_name'] == 'reach-v3'
    env.reset()
    with pytest.raises(ValueError, match=r"action is not finite .* of SawyerReachEnvV3, "
                                         r"task='reach-v3', last action") as error:
        env.step(np.array([0., np.nan, 0., 0.]))
    assert len(str(error.value)) < 300  # the task's pickled data is not printed
    with pytest.raises(ValueError, match=r"action space's shape \(4,\), got array"):
        env.step(np.zeros(3))  # not Meta-World's bare AssertionError, and no step used up
    assert [env.step(a).step_type for a in ACTIONS[:3]][-1] == StepType.TIMEOUT


@pytest.mark.metaworld
def test_update_reuses_an_env_of_the_same_class_only(reach, ml10):
    first, second = MetaWorldTaskSampler(reach, max_episode_length=5, seed=0).sample(2)
    env = first()
    assert second(env) is env and env.get_task() is second.task
    for other in (MetaWorldTaskUpdate(second.task, max_episode_length=6),
                  MetaWorldTaskUpdate(second.task, max_episode_length=5,
                                      reward_function_version='v1'),
                  MetaWorldTaskUpdate(ml10.test_tasks[0], max_episode_length=5)):
        new = other(env)
        assert new is not env and new.get_task() is other.task
    with pytest.raises(ValueError, match='needs a new env'):
        env.set_task(ml10.test_tasks[0])


@pytest.mark.metaworld
def test_reused_env_steps_like_a_fresh_env_on_the_new_goal(reach):
    first, second = MetaWorldTaskSampler(reach, max_episode_length=12, seed=0).sample(2)
    env = first()
    reference = _rollout(second())
    before = _rollout(env)
    after = _rollout(second(env))
    np.testing.assert_allclose(after[1], reference[1])
    assert not np.allclose(before[1], reference[1])


@pytest.mark.metaworld
def test_reward_function_version_is_applied(reach):
    task = reach.train_tasks[0]
    v1 = MetaWorldEnv(task, max_episode_length=12, reward_function_version='v1')
    v2 = MetaWorldEnv(task, max_episode_length=12, reward_function_version='v2')
    assert v1.reward_function_version == 'v1'
    np.testing.assert_allclose(_rollout(v1)[0], _rollout(v2)[0])
    assert not np.allclose(_rollout(v1)[1], _rollout(v2)[1])


def _tag(env, task):
    """A picklable wrapper: remembers the task it was applied for."""
    env.wrapped_for = task.env_name
    return env


@pytest.mark.metaworld
def test_wrapper_is_applied_to_built_envs(reach):
    update = MetaWorldTaskSampler(reach, max_episode_length=5, seed=0, wrapper=_tag).sample(1)[0]
    assert update().wrapped_for == 'reach-v3'
    assert pickle.loads(pickle.dumps(update)).task == update.task


@pytest.mark.metaworld
@pytest.mark.parametrize('name', ['reach-v3', 'door-lock-v3'])
def test_copies_keep_the_task_and_step_exactly_like_the_original(name):
    task = make_benchmark('ML1', name, seed=0).train_tasks[3]
    env = MetaWorldEnv(task, max_episode_length=12, seed=1)
    reference = _rollout(env)
    env.reset()
    env.step(ACTIONS[0])  # copy mid-episode: the copy must still match after a reset
    for clone in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert clone.get_task() == task
        assert clone.unwrapped.action_space.shape == (4, )  # Metaworld#477
        with pytest.raises(RuntimeError, match='reset'):
            clone.step(ACTIONS[0])
        obs, rewards = _rollout(clone)
        np.testing.assert_allclose(obs, reference[0], atol=1e-6)
        np.testing.assert_allclose(rewards, reference[1], atol=1e-6)
    # The pickle is the recipe (task and settings), not the compiled MuJoCo model.
    assert len(pickle.dumps(env)) < 50_000


def test_train_class_counts_come_from_meta_world_without_building_a_benchmark(ml10):
    """The count a meta-batch size must be a multiple of, as the built benchmark has it
    (ML10 built here; ML45's 45 classes take half a minute to build, and come from the
    same Meta-World list)."""
    from garage_promp.envs.metaworld import n_train_classes  # pylint: disable=import-outside-toplevel
    assert n_train_classes('ML1') == 1
    assert n_train_classes('ML10') == len(ml10.train_classes) == 10
    assert n_train_classes('ML45') == 45
    with pytest.raises(ValueError, match='benchmark must be one of'):
        n_train_classes('MT10')


@pytest.mark.metaworld
def test_meta_world_steps_are_kept_as_meta_world_gives_them_after_a_mujoco_reset():
    """Meta-World 3 steps on where MuJoCo resets a simulation it finds unstable (with
    mujoco-py such events ended runs, Meta-World issue #25); the sampler's check of the
    package's own MuJoCo envs does not end a Meta-World run, which would meet the same event
    again on resume. (A plain gymnasium MuJoCo env under GymnasiumEnv does report it.)"""
    import mujoco  # pylint: disable=import-outside-toplevel
    task = make_benchmark('ML1', 'reach-v3', seed=0).train_tasks[0]
    env = MetaWorldEnv(task, max_episode_length=12, seed=1)
    env.reset()
    env.step(ACTIONS[0])
    data = env.unwrapped.data
    data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number = 1
    assert env.unstable_simulation() is None
