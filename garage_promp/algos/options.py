"""Construction checks shared by the algorithms: their options and what env and policy must be.

The keyword options of an algorithm class (its own and inherited) are what
``launchers/train.py --set`` and :func:`garage_promp.experiment.build_experiment`
accept; a variant such as ``LVCVPG`` fixes some of them (``FIXED_OPTIONS``).
"""
import inspect
from typing import Any, Dict, List

from garage_promp.policies import distribution_params

import akro
import numpy as np
import torch


def option_defaults(cls) -> Dict[str, Any]:
    """The keyword options an algorithm class takes, with their defaults.

    Its own and inherited (the most derived class's default wins); options
    listed in the class's ``FIXED_OPTIONS`` (fixed by the variant, e.g. the
    inner estimator of ``LVCVPG``) are not among them. An option without a
    default maps to ``inspect.Parameter.empty``.
    """
    defaults = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get('__init__')
        if init is None or klass is object:
            continue
        for param in inspect.signature(init).parameters.values():
            if param.kind == param.KEYWORD_ONLY:
                defaults.setdefault(param.name, param.default)
    for name in getattr(cls, 'FIXED_OPTIONS', ()):
        defaults.pop(name, None)
    return defaults


def supported_options(cls) -> List[str]:
    """The keyword options an algorithm class takes (see :func:`option_defaults`)."""
    return sorted(option_defaults(cls))


def refuse_fixed_options(cls, kwargs: dict):
    """Raise ValueError if ``kwargs`` sets an option ``cls`` fixes."""
    for name in getattr(cls, 'FIXED_OPTIONS', ()):
        if name in kwargs:
            raise ValueError(
                f'{cls.__name__} does not take {name!r} (the variant fixes it; '
                f'use TRPOMAML or MetaVPG to choose it); its options are '
                f'{supported_options(cls)}')



def require(condition: bool, name: str, requirement: str, value):
    """Raise ValueError naming ``name``, what it must be and what it got, unless ``condition``."""
    if not condition:
        raise ValueError(f'{name} must be {requirement}, got {value!r}')


def check_env_and_policy(env, policy) -> int:
    """Check that ``env`` and ``policy`` fit each other; return the horizon.

    The env needs flat Box spaces, a bounded action space (Gaussian policy)
    and a finite horizon; the policy's input and output sizes must be the
    env's observation and action sizes.

    Raises:
        ValueError: Naming ``env`` or ``policy`` and what does not fit.

    """
    spec = getattr(env, 'spec', None)
    obs_space = getattr(spec, 'observation_space', None)
    act_space = getattr(spec, 'action_space', None)
    for name, space in (('observation', obs_space), ('action', act_space)):
        if not isinstance(space, akro.Box) or len(space.shape) != 1:
            raise ValueError(f'env must have a flat (1-D) Box {name} space, '
                             f'got {space!r}')
    if not (np.isfinite(act_space.low).all()
            and np.isfinite(act_space.high).all()):
        raise ValueError('env must have a bounded action space (Gaussian '
                         f'policy), got {act_space!r}')
    horizon = spec.max_episode_length
    if horizon is None or not np.isfinite(horizon):
        raise ValueError('env must have a finite max_episode_length, got '
                         f'{horizon!r}')
    # A probe forward: works for any policy, whatever it records of its spec.
    obs_dim, act_dim = obs_space.shape[0], act_space.shape[0]
    try:
        with torch.no_grad():
            mean, _ = distribution_params(policy, None, torch.zeros(1, obs_dim))
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"policy does not take the env's observations of size "
                         f'{obs_dim}: {error}') from error
    if tuple(mean.shape) != (1, act_dim):
        raise ValueError(f'policy outputs actions of size {mean.shape[-1]} but the env '
                         f'has {act_dim}')
    return int(horizon)
