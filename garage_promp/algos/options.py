"""Construction checks shared by the algorithms: their options (what env and policy must be
is :func:`garage_promp.policies.check_env_and_policy`).

The keyword options of an algorithm class (its own and inherited) are what
``launchers/train.py --set`` and :func:`garage_promp.experiment.build_experiment`
accept; a variant such as ``LVCVPG`` fixes some of them (``FIXED_OPTIONS``).
"""
import inspect
from typing import Any, Dict, List

from garage_promp.policies import check_env_and_policy  # noqa: F401  (imported from here before)


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


