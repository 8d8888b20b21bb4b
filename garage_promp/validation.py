"""Argument checks shared by every constructor and launcher.

Each check returns the value in canonical form (a Python ``int``, ``float``
or ``bool``) or raises ``ValueError`` naming the argument and its bad value,
before anything is allocated, spawned or written. The rules:

* numbers must be real and finite, and in range; numpy scalars are accepted;
* an int must not be a ``bool`` (``True`` is not a batch size);
* a bool must be a ``bool`` (the strings ``'no'`` or ``'false'`` are refused,
  not read as True);
* strings are never read as numbers (``discount='0.99'`` is refused).
"""
import math
import numbers
from typing import Any, Iterable


def _fail(name: str, requirement: str, value: Any):
    raise ValueError(f'{name} must be {requirement}, got {value!r}')


def check_int(value: Any, name: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum]."""
    bounds = _bounds(minimum, maximum, closed=(True, True))
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(name, f'an int{bounds}', value)
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None
                                                    and value > maximum):
        _fail(name, f'an int{bounds}', value)
    return value


def check_float(value: Any, name: str, low: float | None = None,
                high: float | None = None, *, low_open: bool = False,
                high_open: bool = False) -> float:
    """``value`` as a finite float in the interval between low and high."""
    bounds = _bounds(low, high, closed=(not low_open, not high_open))
    requirement = f'a finite number{bounds}'
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(name, requirement, value)
    value = float(value)
    if not math.isfinite(value):
        _fail(name, requirement, value)
    if low is not None and (value < low or (low_open and value == low)):
        _fail(name, requirement, value)
    if high is not None and (value > high or (high_open and value == high)):
        _fail(name, requirement, value)
    return value


def check_bool(value: Any, name: str) -> bool:
    """``value`` as a bool; only True/False (and numpy bools) are accepted."""
    if type(value).__name__ == 'bool_' or isinstance(value, bool):
        return bool(value)
    return _fail(name, 'True or False', value)


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        _fail(name, f'one of {choices}', value)
    return value


def check_instance(value: Any, name: str, types, description: str,
                   allow_none: bool = False) -> Any:
    """``value`` if it is an instance of ``types`` (or None when allowed)."""
    if (value is None and allow_none) or isinstance(value, types):
        return value
    return _fail(name, description + (' or None' if allow_none else ''),
                 value)


def _bounds(low, high, closed) -> str:
    if low is None and high is None:
        return ''
    if high is None:
        return f' {">=" if closed[0] else ">"} {low}'
    if low is None:
        return f' {"<=" if closed[1] else "<"} {high}'
    return (f' in {"[" if closed[0] else "("}{low}, {high}'
            f'{"]" if closed[1] else ")"}')


def check_device(value: Any, name: str = 'device'):
    """``value`` as a ``torch.device`` that exists here: 'cpu', 'cuda' or 'cuda:N'.

    Raises:
        ValueError: For another device type, or a CUDA device when torch
            sees no GPU (a CPU-only build of torch, or no GPU visible).

    """
    import torch  # pylint: disable=import-outside-toplevel
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError):
        _fail(name, "'cpu', 'cuda' or 'cuda:N'", value)
    if device.type not in ('cpu', 'cuda'):
        _fail(name, "'cpu', 'cuda' or 'cuda:N'", value)
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            build = ('a CPU-only build' if torch.version.cuda is None
                     else f'built for CUDA {torch.version.cuda}, but no GPU is visible')
            raise ValueError(f'{name}={value!r} needs a CUDA GPU, but torch {torch.__version__} '
                             f'has none ({build}); use {name}=\'cpu\'')
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f'{name}={value!r}: there are {torch.cuda.device_count()} '
                             'CUDA device(s)')
    return device

