"""numpy's seeding for many seeds at once (``garage_promp._seeding``) is numpy's, bit for bit,
and the sampler's episodes are those of numpy's objects built one by one."""
from garage_promp import _seeding
from garage_promp.envs.base import MetaEnv
from garage_promp.envs.gymnasium_env import seeders
from garage_promp.experiment.paper_config import ENVS
from garage_promp.sampler import rollout
from garage_promp.sampler.rollout import episode_seed_sequences, wave_seeds

from garage.envs import normalize
import numpy as np
import pytest

from tests.helpers import ShortPointEnv
from tests.test_lean_stepping import _assert_identical, _sample


def _numpy_sequence(entropy_words, spawn_key, pool_size):
    entropy = [int(w) for w in entropy_words]
    return np.random.SeedSequence(entropy if len(entropy) > 1 else entropy[0],
                                  spawn_key=tuple(int(k) for k in spawn_key),
                                  pool_size=pool_size)


@pytest.mark.parametrize('pool_size', [4, 5, 8])
@pytest.mark.parametrize('key_length', [0, 1, 3, 9])
def test_pools_and_states_are_numpys(pool_size, key_length):
    rng = np.random.default_rng(pool_size * 10 + key_length)
    for entropy_length in (1, 2, 6):
        n = 7
        entropy = rng.integers(0, 2**32, (n, entropy_length), dtype=np.uint64)
        entropy[0] = 0  # a zero seed is one word, [0]
        keys = rng.integers(0, 2**32, (n, key_length), dtype=np.uint64)
        keys[1] = 0
        pools = _seeding.seed_sequence_pools(
            _seeding.assembled_entropy(entropy.astype(np.uint32), keys.astype(np.uint32),
                                       pool_size), pool_size)
        for row in range(n):
            sequence = _numpy_sequence(entropy[row], keys[row], pool_size)
            np.testing.assert_array_equal(pools[row], sequence.pool)
            for n_words, dtype in ((1, np.uint32), (11, np.uint32), (4, np.uint64),
                                   (3, np.uint64)):
                got = _seeding.generate_state(pools[row:row + 1], n_words, dtype)[0]
                want = sequence.generate_state(n_words, dtype)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)


def test_pcg64_states_give_numpys_streams():
    rng = np.random.default_rng(0)
    for _ in range(50):
        sequence = np.random.SeedSequence(int(rng.integers(2**63)),
                                          spawn_key=tuple(rng.integers(0, 100, 3).tolist()))
        state = _seeding.pcg64_state(sequence.generate_state(4, np.uint64))
        assert state == np.random.PCG64(sequence).state
        mine = _seeding.reseeded(None, state)
        theirs = np.random.default_rng(sequence)
        np.testing.assert_array_equal(mine.standard_normal(9, dtype=np.float32),
                                      theirs.standard_normal(9, dtype=np.float32))
        np.testing.assert_array_equal(mine.uniform(-1, 1, 5), theirs.uniform(-1, 1, 5))


def test_a_generator_is_reseeded_in_place_and_another_kind_replaced():
    sequence = np.random.SeedSequence(5, spawn_key=(1, ))
    state = _seeding.pcg64_state(sequence.generate_state(4, np.uint64))
    generator = np.random.default_rng(123)
    generator.standard_normal(3)  # its position moved on: reseeding starts the stream over
    assert _seeding.reseeded(generator, state) is generator
    np.testing.assert_array_equal(generator.random(4), np.random.default_rng(sequence).random(4))
    other = np.random.Generator(np.random.MT19937(1))
    replaced = _seeding.reseeded(other, state)
    assert replaced is not other and isinstance(replaced.bit_generator, np.random.PCG64)
    np.testing.assert_array_equal(replaced.random(4), np.random.default_rng(sequence).random(4))


def test_words_of_ints():
    from numpy.random.bit_generator import _coerce_to_uint32_array  # pylint: disable=import-outside-toplevel,no-name-in-module
    for value in (0, 1, 2**32 - 1, 2**32, 2**70 + 5):
        np.testing.assert_array_equal(_seeding.int_words(value), _coerce_to_uint32_array(value))
    with pytest.raises(ValueError, match='non-negative'):
        _seeding.int_words(-1)
    assert _seeding.column_words([0, 5, 2**32 - 1]).tolist() == [0, 5, 2**32 - 1]
    assert _seeding.column_words([1, 2**32]) is None
    assert _seeding.column_words([1, -1]) is None
    assert _seeding.column_words(np.array([1.5])) is None


@pytest.mark.parametrize('seed', [0, 7, 2**32 + 3, 2**80])
@pytest.mark.parametrize('key', [(0, ), (3, 1), (2**32, 2)])
def test_wave_seeds_are_the_episode_sequences(seed, key):
    episodes = [(0, 0), (0, 1), (5, 2**31), (19, 9)]
    env_seeds, noise = wave_seeds(seed, key, episodes)
    for (task, episode), env_seed, material in zip(episodes, env_seeds, noise):
        env_seq, noise_seq = episode_seed_sequences(seed, key, task, episode)
        assert env_seed == int(env_seq.generate_state(1)[0])
        assert type(env_seed) is int  # pylint: disable=unidiomatic-typecheck
        generator = (_seeding.reseeded(None, material) if isinstance(material, dict)
                     else np.random.default_rng(material))
        np.testing.assert_array_equal(generator.standard_normal(6),
                                      np.random.default_rng(noise_seq).standard_normal(6))
    # A key word of 2**32 or more takes numpy's objects one by one.
    assert all(isinstance(m, dict) for m in noise) == (max(key) < 2**32)
    assert wave_seeds(seed, key, []) == ([], [])


def _env(name='HalfCheetahFwdBack', seed=0):
    return normalize(ENVS[name]['env'](seed=seed), expected_action_scale=10.)


@pytest.mark.mujoco
@pytest.mark.parametrize('name', ['HalfCheetahFwdBack', 'HopperRandParams'])
def test_seeding_a_wave_seeds_each_env_as_its_seed_does(name):
    seeds = [0, 1, 2**32 - 1, 12345]
    fast, slow = [_env(name) for _ in seeds], [_env(name) for _ in seeds]
    calls = seeders(fast, seeds)
    assert all(call.func.__name__ == 'seed_with_state' for call in calls)
    for call, env, seed in zip(calls, slow, seeds):
        call()
        env.seed(seed)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
        inner_a, inner_b = a.unwrapped._env, b.unwrapped._env  # pylint: disable=protected-access
        np.testing.assert_array_equal(inner_a.np_random.random(5), inner_b.np_random.random(5))
        assert repr(a.sample_tasks(3)) == repr(b.sample_tasks(3))


@pytest.mark.mujoco
def test_seeding_a_wave_falls_back_to_each_envs_seed():
    # Not a package meta-env: its own seed, or none.
    assert seeders([ShortPointEnv()], [3]) == [None]
    envs = [_env(), _env()]
    # Two envs sharing one generator object are never re-seeded in place.
    shared = envs[0].unwrapped._env.np_random  # pylint: disable=protected-access
    envs[1].unwrapped._env.np_random = shared  # pylint: disable=protected-access
    calls = seeders(envs, [1, 2])
    assert [call.func.__name__ for call in calls] == ['seed', 'seed']
    # A seed over 32 bits: seeded one by one, as before.
    envs = [_env(), _env()]
    calls = seeders(envs, [1, 2**40])
    assert [call.func for call in calls] == [envs[0].seed, envs[1].seed]
    calls[1]()
    reference = _env()
    reference.seed(2**40)
    np.testing.assert_array_equal(envs[1].reset()[0], reference.reset()[0])


@pytest.mark.mujoco
@pytest.mark.parametrize('name', ['HalfCheetahFwdBack', 'HopperRandParams'])
def test_sampled_episodes_are_those_of_numpys_objects_one_by_one(monkeypatch, name):
    fast = _sample(name, lean=True, rounds=2)
    # numpy's objects one by one: every seed and key word taken as too wide.
    monkeypatch.setattr(rollout, 'column_words', lambda values: None)
    monkeypatch.setattr(MetaEnv, 'reset_generator_states', staticmethod(lambda seeds: None))
    slow = _sample(name, lean=True, rounds=2)
    _assert_identical(fast, slow)


def test_old_pickles_task_seed_material_still_samples():
    env = ENVS['HalfCheetahFwdBack']['env'](seed=4).unwrapped._env  # pylint: disable=protected-access
    want = env.sample_tasks(4)
    env.seed(4)
    entropy, key, pool = env._task_seq  # pylint: disable=protected-access
    env._task_seq = np.random.SeedSequence(entropy, spawn_key=key, pool_size=pool)  # pylint: disable=protected-access
    assert repr(env.sample_tasks(4)) == repr(want)
