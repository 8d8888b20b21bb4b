"""meta_test.py counts every evaluation episode of every goal: no Meta-World-style over-count.

Meta-World 3.1.1's own meta-learning evaluator (metaworld/evaluation.py) counts the first
3 finished episodes per task *class* with terminate-on-success on, so one goal that succeeds
at once can supply all of its class's successes. Here a class of 10 goals, one of which
succeeds at its first step and nine never, has success rate 0.1, whatever the order.
"""
import math
import pathlib

from garage import EpisodeBatch, StepType
import numpy as np
import pytest

from tests.helpers import load_script, make_setup

ROOT = pathlib.Path(__file__).parents[2]


def _goal_batch(env_spec, succeeds: bool, n_episodes=3, length=5, name='reach-v3'):
    """``n_episodes`` evaluation episodes of one goal; success only in the first step if any."""
    obs_dim = env_spec.observation_space.shape[0]
    act_dim = env_spec.action_space.shape[0]
    steps = n_episodes * length
    success = np.zeros(steps)
    if succeeds:
        success[::length] = 1.  # every episode succeeds at its first step
    step_types = np.array(([StepType.FIRST] + [StepType.MID] * (length - 2)
                           + [StepType.TIMEOUT]) * n_episodes, dtype=StepType)
    return EpisodeBatch(
        env_spec=env_spec, episode_infos={},
        observations=np.zeros((steps, obs_dim), dtype=np.float32),
        last_observations=np.zeros((n_episodes, obs_dim), dtype=np.float32),
        actions=np.zeros((steps, act_dim), dtype=np.float32), rewards=np.ones(steps),
        env_infos={'success': success, 'task_name': np.array([name] * steps)},
        agent_infos={}, step_types=step_types,
        lengths=np.full(n_episodes, length))


@pytest.mark.parametrize('first', [True, False])
def test_one_quick_goal_of_ten_gives_one_tenth(first):
    meta_test = load_script(ROOT / 'launchers' / 'meta_test.py', 'meta_test_counting')
    env, _, _, _ = make_setup()
    goals = [_goal_batch(env.spec, succeeds=(i == (0 if first else 9))) for i in range(10)]
    rows = meta_test.task_table(goals)
    reach = next(r for r in rows if r['task'] == 'reach-v3')
    assert reach['goals'] == 10 and reach['episodes'] == 30
    assert reach['success_rate'] == pytest.approx(0.1)


def _short_goal_batch(env_spec, succeeds: bool, n_episodes=3, horizon=5):
    """With terminate-on-success: a succeeding goal's episodes end at once (2 steps)."""
    return _goal_batch(env_spec, succeeds, n_episodes, 2 if succeeds else horizon)


def test_metaworld_evaluator_emulation_over_counts_as_meta_world_does():
    """Meta-World 3.1.1's evaluator, emulated: the first 3 finished episodes of the class.
    One quick goal of ten gives it 1.0 where the success rate is 0.1."""
    meta_test = load_script(ROOT / 'launchers' / 'meta_test.py', 'meta_test_counting')
    env, _, _, _ = make_setup()
    for quick in (0, 9):
        goals = [_short_goal_batch(env.spec, succeeds=(i == quick)) for i in range(10)]
        reach = meta_test.task_table(goals)[0]
        assert reach['success_rate'] == pytest.approx(0.1)
        assert reach['metaworld_evaluator_success'] == pytest.approx(1.0)
    # No quick goal: the count is the success of the first three finished.
    goals = [_goal_batch(env.spec, succeeds=(i == 0)) for i in range(10)]
    assert meta_test.task_table(goals)[0]['metaworld_evaluator_success'] == pytest.approx(1.0)
    goals = [_goal_batch(env.spec, succeeds=(i == 9)) for i in range(10)]
    assert meta_test.task_table(goals)[0]['metaworld_evaluator_success'] == pytest.approx(0.)


def test_before_adaptation_columns_come_from_the_pre_update_episodes():
    meta_test = load_script(ROOT / 'launchers' / 'meta_test.py', 'meta_test_counting')
    env, _, _, _ = make_setup()
    after = [_goal_batch(env.spec, succeeds=True) for _ in range(4)]
    before = [_goal_batch(env.spec, succeeds=(i == 0)) for i in range(4)]
    rows = meta_test.task_table(after, before)
    assert rows[0]['success_before'] == pytest.approx(0.25)
    assert rows[0]['success_rate'] == pytest.approx(1.0)
    assert rows[-1]['success_before'] == pytest.approx(0.25)
    import math  # pylint: disable=import-outside-toplevel
    assert math.isnan(meta_test.task_table(after)[0]['success_before'])


def test_the_evaluator_column_is_printed_only_where_successes_are_reported():
    """A paper env reports no success: its table has no Meta-World evaluator column or
    footnote; a Meta-World table has both."""
    meta_test = load_script(ROOT / 'launchers' / 'meta_test.py', 'meta_test_table')
    row = dict(task='t', goals=1, episodes=3, success_before=math.nan, success_rate=math.nan,
               return_before=math.nan, average_return=1.5,
               metaworld_evaluator_success=math.nan)
    table = meta_test.format_table([row])
    assert 'metaworld_evaluator' not in table and 'own evaluator' not in table
    assert '1.50' in table
    table = meta_test.format_table([dict(row, success_rate=0.5, metaworld_evaluator_success=1.0)])
    assert 'metaworld_evaluator*' in table and "Meta-World 3.1.1's own evaluator" in table
