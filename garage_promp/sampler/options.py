"""The sampler's argument checks, one set for every constructor that takes them.

``make_sampler``, :class:`~garage_promp.sampler.meta_sampler.MetaSampler`, the
backends and :class:`~garage_promp.sampler.rollout.RolloutWorker` share
arguments (the worker count, the seed, the horizon, the worker timeout, the
env budgets); each checks them with :func:`check_sampler_options`, so a bad
value is refused with the same message wherever it enters, and before any
worker is made or spawned. The bounds are the command line's
(:mod:`garage_promp.validation`).
"""
from typing import Any, Callable, Dict

from garage_promp.validation import (
    MAX_COUNT,
    MAX_EPISODE_LENGTH,
    MAX_SECONDS,
    MAX_SEED,
    MAX_WORKERS,
    check_bool,
    check_float,
    check_int,
)


def _optional(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    return lambda value, name: None if value is None else check(value, name)


def _count(minimum: int, maximum: int) -> Callable[[Any, str], int]:
    return lambda value, name: check_int(value, name, minimum, maximum)


_CHECKS: Dict[str, Callable[[Any, str], Any]] = {
    'seed': _count(0, MAX_SEED),  # the launchers' and build_experiment's range
    # Each episode draws its action noise for the whole horizon up front.
    'max_episode_length': _count(1, MAX_EPISODE_LENGTH),
    'envs_per_task': _optional(_count(1, MAX_COUNT)),
    'max_envs_per_worker': _optional(_count(1, MAX_COUNT)),
    'worker_timeout': _optional(lambda value, name: check_float(
        value, name, 0., MAX_SECONDS, low_open=True)),
    'batched': check_bool,
    'lean': check_bool,
}


def check_sampler_options(*, max_workers: int = MAX_WORKERS, **options: Any) -> Dict[str, Any]:
    """``options`` checked, in canonical form (Python ints, floats and bools).

    Known options: ``n_workers`` (an int in [1, max_workers]), ``seed`` (an
    int >= 0), ``max_episode_length`` (an int in [1, MAX_EPISODE_LENGTH]),
    ``envs_per_task`` and ``max_envs_per_worker`` (None or an int >= 1),
    ``worker_timeout`` (None or seconds in (0, MAX_SECONDS]), ``batched`` and
    ``lean`` (bools).

    Args:
        max_workers (int): The most workers. By default MAX_WORKERS, the most
            worth running on one machine; Ray's actors may be spread over a
            cluster (``RayBackend`` passes MAX_COUNT).
        **options: The options to check, by name.

    Returns:
        dict: The options under the same names, checked.

    Raises:
        ValueError: Naming the first bad option and its value.
        TypeError: For an option that is not one of these.

    """
    checks = dict(_CHECKS, n_workers=_count(1, max_workers))
    unknown = sorted(set(options) - set(checks))
    if unknown:
        raise TypeError(f'unknown sampler option(s) {unknown}; known: {sorted(checks)}')
    return {name: checks[name](value, name) for name, value in options.items()}
