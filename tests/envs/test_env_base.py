"""MetaEnv: seeding, task protocol and diagnostics (on the cheap point envs)."""
import itertools

import garage_promp  # noqa: F401
from garage_promp.envs import DEFAULT_SEED, PointCornerGym, PointEnv1D, PointEnvCorner, base

from dowel import tabular
from garage import EpisodeBatch, StepType
from garage.experiment import deterministic
import numpy as np
import pytest


def _fresh_counter(monkeypatch):
    monkeypatch.setattr(base, '_instance_counter', itertools.count())


def _draws(env):
    """Tasks and reset observations, the two seeded streams."""
    tasks = env.sample_tasks(5)
    starts = [env.reset()[0] for _ in range(3)]
    return np.array(tasks), np.array(starts)


def test_same_seed_gives_same_tasks_and_reset_noise():
    a, b = _draws(PointEnvCorner(seed=7)), _draws(PointEnvCorner(seed=7))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_different_seeds_give_different_reset_noise():
    a, b = _draws(PointEnvCorner(seed=7)), _draws(PointEnvCorner(seed=8))
    assert not np.array_equal(a[1], b[1])


def test_seed_reseeds_both_generators():
    env = PointEnvCorner(seed=1)
    first = _draws(env)
    env.seed(1)
    again = _draws(env)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])


def test_task_and_reset_streams_are_independent():
    # Sampling tasks must not shift the reset noise (one stream each).
    env, other = PointEnv1D(seed=4), PointEnv1D(seed=4)
    env.sample_tasks(10)
    np.testing.assert_array_equal(env.reset()[0], other.reset()[0])


def test_default_seed_comes_from_garage_seed(monkeypatch):
    def draws(garage_seed):
        monkeypatch.setattr(deterministic, 'seed_', garage_seed)
        _fresh_counter(monkeypatch)
        return _draws(PointEnvCorner())[1]

    np.testing.assert_array_equal(draws(11), draws(11))
    assert not np.array_equal(draws(11), draws(12))
    np.testing.assert_array_equal(draws(None), draws(DEFAULT_SEED))


def test_unseeded_instances_draw_different_streams(monkeypatch):
    monkeypatch.setattr(deterministic, 'seed_', 3)
    _fresh_counter(monkeypatch)
    a, b = PointEnvCorner(), PointEnvCorner()
    assert not np.array_equal(_draws(a)[1], _draws(b)[1])


@pytest.mark.parametrize('seed', [-1, 1.5, '3', True])
def test_invalid_seed(seed):
    with pytest.raises(ValueError, match='seed must be a non-negative int'):
        PointEnvCorner(seed=seed)
    with pytest.raises(ValueError, match='seed must be a non-negative int'):
        PointEnvCorner(seed=0).seed(seed)


@pytest.mark.parametrize('n_tasks', [-1, 2.0, None])
def test_invalid_n_tasks(n_tasks):
    with pytest.raises(ValueError, match='n_tasks'):
        PointEnv1D(seed=0).sample_tasks(n_tasks)


def test_sample_tasks_zero():
    assert PointEnv1D(seed=0).sample_tasks(0) == []


def test_set_task_does_not_reset():
    env = PointEnvCorner(seed=0)
    env.set_task((2., 2.))
    obs, _ = env.reset()
    obs = env.step(np.array([0.1, 0.05])).observation
    env.set_task((-2., -2.))
    after = env.step(np.array([0.1, 0.05]))
    assert after.step_type == StepType.MID
    np.testing.assert_allclose(after.observation, obs + [0.1, 0.05],
                               rtol=1e-6)
    np.testing.assert_array_equal(after.env_info['task'], [-2., -2.])


def test_invalid_task_keeps_the_old_one():
    env = PointEnv1D(seed=0)
    env.set_task(-1.)
    with pytest.raises(ValueError, match=r'task goal should be 1\. or -1\.'):
        env.set_task(0.)
    assert env.task == env.get_task() == -1.


def _collect(env, actions_per_episode):
    """An EpisodeBatch of one episode per action list, by hand."""
    batches = []
    for actions in actions_per_episode:
        obs, _ = env.reset()
        steps = [env.step(np.array([a])) for a in actions]
        batches.append(EpisodeBatch(
            env_spec=env.spec,
            episode_infos={},
            observations=np.array([obs] + [s.observation
                                           for s in steps[:-1]]),
            last_observations=np.array([steps[-1].observation]),
            actions=np.array([s.action for s in steps]),
            rewards=np.array([s.reward for s in steps]),
            step_types=np.array([s.step_type for s in steps],
                                dtype=StepType),
            env_infos={'goal_dist': np.array(
                [s.env_info['goal_dist'] for s in steps])},
            agent_infos={},
            lengths=np.array([len(steps)])))
    return EpisodeBatch.concatenate(*batches)


@pytest.fixture
def read_tabular():
    """Mark the logged values as read, so dowel does not warn at clear()."""
    yield
    tabular.mark_all()


def test_log_diagnostics_records_per_episode_statistics(read_tabular):
    env = PointEnv1D(max_episode_length=5, seed=0)
    env.set_task(1.)
    # |clip(a) - 1| per step: episode 1 -> (0, 2) mean 1; episode 2 ->
    # (1, 3, 0.5) mean 1.5 (2.5 clips to 2, hence |2 - 1| = 1).
    episodes = _collect(env, [[1., -1.], [2.5, -2., 0.5]])
    env.log_diagnostics(episodes, prefix='Meta/')
    logged = dict(tabular.as_dict)
    assert logged['Meta/AverageGoalDist'] == pytest.approx(1.25)
    assert logged['Meta/StdGoalDist'] == pytest.approx(0.25)
    assert logged['Meta/MaxGoalDist'] == pytest.approx(1.5)
    assert logged['Meta/MinGoalDist'] == pytest.approx(1.)
    # A list of batches (one per task) gives the same statistics.
    tabular.mark_all()
    tabular.clear()
    env.log_diagnostics(list(episodes.split()), prefix='Meta/')
    assert tabular.as_dict == logged


def test_log_diagnostics_keeps_its_keys_without_episodes(read_tabular):
    PointEnv1D(seed=0).log_diagnostics([], prefix='X/')
    logged = dict(tabular.as_dict)
    assert sorted(logged) == ['X/AverageGoalDist', 'X/MaxGoalDist',
                              'X/MinGoalDist', 'X/StdGoalDist']
    assert all(np.isnan(v) for v in logged.values())


@pytest.mark.parametrize('seed', [0, 7, 2**32 + 5, None])
def test_the_generators_are_those_of_the_spawned_seed_sequence(seed, monkeypatch):
    """Task and reset-noise streams: PCG64 of children 0 and 1 of the env's seed
    sequence (``SeedSequence(seed).spawn(2)``; for no seed, garage's seed with the
    construction index as spawn key), whether the task generator is made at once or
    only when tasks are first sampled, and across a pickle either way."""
    import pickle
    monkeypatch.setattr(deterministic, 'seed_', 5)
    _fresh_counter(monkeypatch)
    parent = (np.random.SeedSequence(seed) if seed is not None
              else np.random.SeedSequence(5, spawn_key=(0,)))
    task_seq, reset_seq = parent.spawn(2)
    env = PointCornerGym(seed=seed)
    copy = pickle.loads(pickle.dumps(env))  # before any task was sampled
    expected_reset = np.random.Generator(np.random.PCG64(reset_seq)).uniform(-2, 2, 4)
    expected_tasks = PointCornerGym(seed=0)._sample_tasks(
        np.random.Generator(np.random.PCG64(task_seq)), 6)
    for e in (env, copy):
        np.testing.assert_array_equal(e.np_random.uniform(-2, 2, 4), expected_reset)
        np.testing.assert_array_equal(np.array(e.sample_tasks(3)), np.array(expected_tasks[:3]))
    resumed = pickle.loads(pickle.dumps(env))  # mid-stream: the generator's state travels
    np.testing.assert_array_equal(np.array(resumed.sample_tasks(3)),
                                  np.array(expected_tasks[3:]))


def test_sample_tasks_refuses_more_tasks_than_a_meta_batch_holds():
    """10^12 tasks would ask numpy for terabytes: refused naming n_tasks, before any draw."""
    env = PointEnvCorner(seed=1)
    with pytest.raises(ValueError, match=r'n_tasks must be at most 100,000,000'):
        env.sample_tasks(10 ** 12)
    with pytest.raises(ValueError, match='n_tasks must be at most'):
        env.sample_tasks(base.MAX_TASKS + 1)
    assert len(env.sample_tasks(3)) == 3
