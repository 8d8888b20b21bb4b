"""numpy's ``SeedSequence`` and ``PCG64`` seeding for many seeds at once, bit for bit.

The sampler derives three generators for every episode (the env's reset-noise
generator from the episode's env seed, the env seed itself, and the action-noise
generator), each through numpy's ``SeedSequence`` (NEP 19's hash of the entropy
words, ``numpy/random/bit_generator.pyx``) and ``PCG64``'s seeding from it
(``numpy/random/_pcg64.pyx``, ``pcg64_set_seed``). Built one by one, that is four
``SeedSequence`` objects, two ``PCG64`` and two ``Generator`` objects an episode,
about 50 µs of Python and Cython: a sixth of a HalfCheetahFwdBack episode's
sampling beside its physics, and more of a HopperRandParams one whose early
episodes end after a few dozen steps.

Here the same arithmetic runs on a column of seeds: the ``SeedSequence`` hash is
32-bit integer arithmetic whose multipliers depend only on how many words were
hashed before, so the pool of every row is mixed with one NumPy operation per
step of numpy's loop; ``PCG64``'s ``srandom`` is two 128-bit multiply-adds on
Python ints. :func:`pcg64_state` gives the state dict that ``PCG64.state``
accepts, so one ``Generator`` can be re-seeded for every episode.

Only inputs whose words are uniform over the rows are taken (each seed and key
element below 2**32, i.e. one ``uint32`` word); :func:`column_words` returns None
otherwise and the caller builds numpy's objects one by one. The tests check every
function against numpy itself.
"""
from typing import Dict, Sequence

import numpy as np

_MASK32 = 0xFFFFFFFF
_MASK128 = (1 << 128) - 1
# numpy/random/bit_generator.pyx
_INIT_A, _MULT_A = 0x43b0d7e5, 0x931e8875
_INIT_B, _MULT_B = 0x8b51f9dd, 0x58f38ded
_MIX_MULT_L, _MIX_MULT_R = 0xca01f9dd, 0x4973f715
_XSHIFT = 16
#: PCG64's multiplier (PCG_DEFAULT_MULTIPLIER_128, numpy/random/src/pcg64/pcg64.h).
PCG64_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645


def int_words(value: int) -> np.ndarray:
    """numpy's ``_int_to_uint32_array``: ``value`` (>= 0) as little-endian 32-bit words,
    ``[0]`` for 0."""
    if value < 0:
        raise ValueError(f'seed material must be non-negative, got {value}')
    words = [value & _MASK32]
    value >>= 32
    while value:
        words.append(value & _MASK32)
        value >>= 32
    return np.array(words, dtype=np.uint32)


def column_words(values: Sequence[int]) -> np.ndarray | None:
    """``values`` (ints >= 0) as ``uint32`` words, one each, or None if one needs more
    (or is negative): numpy's ``_coerce_to_uint32_array`` of each, stacked."""
    array = np.asarray(values)
    if array.dtype.kind not in 'iu' or (array.size and (array.min() < 0 or array.max() > _MASK32)):
        return None
    return array.astype(np.uint32)


def _hash_multipliers(count: int):
    """The multiplier of each of ``count`` successive ``hashmix`` calls from ``INIT_A``,
    and the constant each XORs in (the multiplier before it)."""
    const, out = _INIT_A, []
    for _ in range(count):
        xor = const
        const = (const * _MULT_A) & _MASK32
        out.append((np.uint32(xor), np.uint32(const)))
    return out


def _hashmix(value: np.ndarray, xor_mult) -> np.ndarray:
    xor, mult = xor_mult
    value = (value ^ xor) * mult
    return value ^ (value >> np.uint32(_XSHIFT))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
    return result ^ (result >> np.uint32(_XSHIFT))


def seed_sequence_pools(entropy: np.ndarray, pool_size: int = 4) -> np.ndarray:
    """The entropy pools of ``SeedSequence``s whose assembled entropy is each row of
    ``entropy`` (``(n, k)`` uint32): ``(n, pool_size)`` uint32.

    A ``SeedSequence(e, spawn_key=key)`` assembles ``e``'s words, zero-padded to
    ``pool_size`` when there is a spawn key, then the key's words
    (:func:`assembled_entropy`).
    """
    entropy = np.asarray(entropy, dtype=np.uint32)
    n, k = entropy.shape
    with np.errstate(over='ignore'):
        steps = iter(_hash_multipliers(pool_size + pool_size * (pool_size - 1)
                                       + max(0, k - pool_size) * pool_size))
        zero = np.zeros(n, dtype=np.uint32)
        pool = [_hashmix(entropy[:, i] if i < k else zero, next(steps)) for i in range(pool_size)]
        for src in range(pool_size):
            for dst in range(pool_size):
                if src != dst:
                    pool[dst] = _mix(pool[dst], _hashmix(pool[src], next(steps)))
        for src in range(pool_size, k):
            for dst in range(pool_size):
                pool[dst] = _mix(pool[dst], _hashmix(entropy[:, src], next(steps)))
    return np.stack(pool, axis=1)


def generate_state(pools: np.ndarray, n_words: int, dtype=np.uint32) -> np.ndarray:
    """``SeedSequence.generate_state(n_words, dtype)`` of each pool row: ``(n, n_words)``."""
    wide = np.dtype(dtype) == np.dtype(np.uint64)
    if not wide and np.dtype(dtype) != np.dtype(np.uint32):
        raise ValueError('only support uint32 or uint64')
    count = n_words * (2 if wide else 1)
    pool_size = pools.shape[1]
    out = np.empty((pools.shape[0], count), dtype=np.uint32)
    const = _INIT_B
    with np.errstate(over='ignore'):
        for i in range(count):
            value = pools[:, i % pool_size] ^ np.uint32(const)
            const = (const * _MULT_B) & _MASK32
            value = value * np.uint32(const)
            out[:, i] = value ^ (value >> np.uint32(_XSHIFT))
    if wide:
        return out.astype('<u4').view('<u8').astype(np.uint64)
    return out


def assembled_entropy(entropy: np.ndarray, spawn_key: np.ndarray | None = None,
                      pool_size: int = 4) -> np.ndarray:
    """Rows of ``SeedSequence``'s assembled entropy: ``entropy`` ``(n, e)`` words, padded
    with zeros to ``pool_size`` where there is a spawn key, then ``spawn_key`` ``(n, s)``."""
    entropy = np.asarray(entropy, dtype=np.uint32)
    if spawn_key is None or spawn_key.shape[1] == 0:
        return entropy
    n, e = entropy.shape
    if e < pool_size:
        entropy = np.concatenate([entropy, np.zeros((n, pool_size - e), np.uint32)], axis=1)
    return np.concatenate([entropy, np.asarray(spawn_key, dtype=np.uint32)], axis=1)


def pcg64_state(words: Sequence[int]) -> Dict:
    """The state (``PCG64.state``'s dict) of ``PCG64(seq)`` where ``words`` is
    ``seq.generate_state(4, numpy.uint64)``: ``pcg64_set_seed``, i.e. PCG's
    ``srandom`` with state ``words[0:2]`` and stream ``words[2:4]`` (high, low)."""
    init_state = (int(words[0]) << 64) | int(words[1])
    init_seq = (int(words[2]) << 64) | int(words[3])
    inc = ((init_seq << 1) | 1) & _MASK128
    state = inc  # 0 * multiplier + inc
    state = (state + init_state) & _MASK128
    state = (state * PCG64_MULTIPLIER + inc) & _MASK128
    return {'bit_generator': 'PCG64', 'state': {'state': state, 'inc': inc},
            'has_uint32': 0, 'uinteger': 0}


def pcg64_states(entropy: np.ndarray, pool_size: int = 4) -> list:
    """The ``PCG64`` state (:func:`pcg64_state`) seeded by the ``SeedSequence`` of each row
    of assembled ``entropy`` (:func:`assembled_entropy`)."""
    pools = seed_sequence_pools(entropy, pool_size)
    return [pcg64_state(row) for row in generate_state(pools, 4, np.uint64)]


def generator_for(material, generator: np.random.Generator | None = None
                  ) -> np.random.Generator:
    """A generator on ``material``: ``generator`` re-seeded to it where it is a
    :func:`pcg64_state` (:func:`reseeded`), else ``numpy.random.default_rng(material)``
    (a ``SeedSequence`` built one by one)."""
    if isinstance(material, dict):
        return reseeded(generator, material)
    return np.random.default_rng(material)


def reseeded(generator: np.random.Generator | None, state: Dict) -> np.random.Generator:
    """``generator`` set to ``state`` (a :func:`pcg64_state`), or a new ``Generator`` where
    it is None or not on ``PCG64``: then the same stream as ``Generator(PCG64(seq))``."""
    if generator is None or type(generator) is not np.random.Generator or \
            type(generator.bit_generator) is not np.random.PCG64:  # pylint: disable=unidiomatic-typecheck
        generator = np.random.Generator(np.random.PCG64(0))
    generator.bit_generator.state = state
    return generator
