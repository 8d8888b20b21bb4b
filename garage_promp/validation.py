"""Argument checks shared by every constructor and launcher.

Each check returns the value in canonical form (a Python ``int``, ``float``
or ``bool``) or raises ``ValueError`` naming the argument and its bad value,
before anything is allocated, spawned or written. The rules:

* numbers must be real and finite, and in range; numpy scalars are accepted;
* an int must not be a ``bool`` (``True`` is not a batch size);
* a bool must be a ``bool`` (the strings ``'no'`` or ``'false'`` are refused,
  not read as True);
* strings are never read as numbers (``discount='0.99'`` is refused).

The second half ("command line") holds what every launcher and benchmark
checks its options with: click types with bounds (counts, seeds, workers,
finite rates, comma-separated lists, environment names, writable output
paths), a batch-size check, and :func:`usage_errors` / :func:`user_errors`,
which turn the errors that remain into click's usage error naming the
option, or into one ``Error: ...`` line when they are not about the command
line.
"""
import contextlib
import math
import numbers
import os
import re
import signal
import tempfile
import threading
from typing import Any, Callable, Iterable

from garage_promp._console import ensure_std_streams
from garage_promp._files import file_kind
from garage_promp._garage_compat import RAY_MISSING_MESSAGE, ray_available

import click
import numpy as np


def shown(value: Any, limit: int = 200) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters (a 100 kB ``--set`` value
    is named, not printed; a value holding an int too long for ``repr``, over 4,300
    digits, by its type)."""
    try:
        text = repr(value)
    except ValueError:  # int's str digits limit (sys.set_int_max_str_digits)
        if isinstance(value, int):
            return f'{"-" * (value < 0)}an int of {value.bit_length():,} bits'
        return f'a {type(value).__name__} holding a number too long to show'
    return text if len(text) <= limit else f'{text[:limit - 20]}... ({len(text):,} characters)'


def _fail(name: str, requirement: str, value: Any):
    raise ValueError(f'{name} must be {requirement}, got {shown(value)}')


def is_complex(value: Any) -> bool:
    """Whether ``value`` is a complex number, or a numpy array or torch tensor of them."""
    if isinstance(value, (complex, np.complexfloating)):
        return True
    if isinstance(value, np.ndarray):
        return np.iscomplexobj(value)
    tensor_is_complex = getattr(value, 'is_complex', None)  # (torch, not imported here)
    return callable(tensor_is_complex) and bool(tensor_is_complex())


def _scalar_note(value: Any) -> str:
    """For a refused 0-d array or tensor, whose printed value looks like a fine number."""
    if is_complex(value):
        return ' (a real number, not a complex one)'
    if getattr(value, 'ndim', None) == 0 or getattr(value, 'shape', None) == ():
        return (f' (a Python or numpy scalar, not a 0-d {type(value).__name__}: pass '
                'value.item())')
    return ''


def check_int(value: Any, name: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum]; with no ``maximum``, at most
    :data:`MAX_COUNT` (no count, size or index is larger: beyond it a loop never ends, or an
    allocation or a C integer overflows)."""
    bounds = _bounds(minimum, maximum, closed=(True, True))
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(name, f'an int{bounds}' + _scalar_note(value), value)
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None
                                                    and value > maximum):
        _fail(name, f'an int{bounds}', value)
    if maximum is None and value > MAX_COUNT:
        _fail(name, f'an int{bounds} and at most {MAX_COUNT:,}', value)
    return value


def check_float(value: Any, name: str, low: float | None = None,
                high: float | None = None, *, low_open: bool = False,
                high_open: bool = False, float32: bool = False) -> float:
    """``value`` as a finite float in the interval between low and high.

    ``float32``: the value enters float32 arithmetic (a step size on the policy's
    parameters), so it must also be finite there, and an open bound must still hold
    once rounded to float32: 1e39 would be inf, and a step size of 1e-60 zero.
    """
    bounds = _bounds(low, high, closed=(not low_open, not high_open))
    requirement = f'a finite number{bounds}' + (' in float32' if float32 else '')
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(name, requirement + _scalar_note(value), value)
    try:
        value = float(value)
    except OverflowError:  # an int or fraction beyond float's range: 10**400
        _fail(name, requirement, value)
    if not math.isfinite(value):
        _fail(name, requirement, value)
    if low is not None and (value < low or (low_open and value == low)):
        _fail(name, requirement, value)
    if high is not None and (value > high or (high_open and value == high)):
        _fail(name, requirement, value)
    if float32:
        single = float(np.float32(value)) if abs(value) <= _FLOAT32_MAX else math.inf
        if not math.isfinite(single) or (low_open and single == low) or (
                high_open and single == high):
            _fail(name, requirement, value)
    return value


#: The largest finite float32.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


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
    if device.type not in ('cpu', 'cuda') or device.type == 'cpu' and device.index:
        _fail(name, "'cpu', 'cuda' or 'cuda:N'", value)  # (torch takes 'cpu:1' for the CPU)
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



# ------------------------------------------------------------------ command line
# The launchers' and benchmarks' shared option checking. Every count, size,
# rate, list and output path is a click type below, so click refuses a bad
# value by the option's name while it parses the command line: before the
# script builds, spawns or writes anything. Checks that need several options
# at once (a batch's size) or a built object run next, through
# :func:`usage_errors`; errors that are not about the command line (a run
# directory without a snapshot, an env that fails to build) go through
# :func:`user_errors`: one ``Error: ...`` line, no usage text, no traceback.

#: The most any count option takes (epochs, iterations, tasks, episodes, ...):
#: beyond it a loop never ends or an allocation or a C integer overflows.
MAX_COUNT = 10 ** 9
#: Seeds: every RNG seeded from them (numpy, torch, random, garage's
#: ``set_seed``, which takes seeds modulo 2**32 - 2) gets a distinct seed.
MAX_SEED = 2 ** 31 - 1
#: Budgets of env steps.
MAX_ENV_STEPS = 10 ** 13
#: Episode lengths (horizons).
MAX_EPISODE_LENGTH = 10 ** 6
#: Units of one hidden layer (a 4096 x 4096 layer is 64 MiB of float32).
MAX_HIDDEN_SIZE = 4096
#: Hidden layers of a policy (the paper's have 2; 16 of MAX_HIDDEN_SIZE are 1 GiB of float32).
MAX_HIDDEN_LAYERS = 16
#: Env steps of one sampling round (tasks x episodes x horizon): 600 times the
#: paper's largest (40 x 20 x 200), and about what fits in memory.
MAX_BATCH_STEPS = 10 ** 8
#: Durations in seconds (about 3 years).
MAX_SECONDS = 10 ** 8
#: Worker processes (or threads) on this machine: more than 8 per core only
#: slows sampling down, and each process holds its own copies of the envs.
MAX_WORKERS = max(32, 8 * (os.cpu_count() or 1))


class IntRange(click.IntRange):
    """click's IntRange written in the digits 0-9 (a sign allowed): Python's ``int`` also
    reads other scripts' digits ('١٢' is 12) and digit groups ('1_0' is 10), which no other
    option and no file this package writes accepts."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not re.fullmatch(r'[+-]?[0-9]+', value.strip()):
            self.fail(f'{value!r} is not an integer written in the digits 0-9.', param, ctx)
        return super().convert(value, param, ctx)


def count(minimum: int = 1, maximum: int = MAX_COUNT) -> click.IntRange:
    """A click type: an int in [minimum, maximum] (default [1, MAX_COUNT])."""
    return IntRange(minimum, maximum)


#: A click type: a seed in [0, MAX_SEED].
SEED = IntRange(0, MAX_SEED)
#: A click type: a number of worker processes (or threads), in [1, MAX_WORKERS].
WORKERS = IntRange(1, MAX_WORKERS)
#: A click type: a budget of env steps, in [1, MAX_ENV_STEPS].
ENV_STEPS = IntRange(1, MAX_ENV_STEPS)
#: A click type: an episode length, in [1, MAX_EPISODE_LENGTH].
EPISODE_LENGTH = IntRange(1, MAX_EPISODE_LENGTH)


class FiniteFloat(click.FloatRange):
    """click's FloatRange that also refuses 'nan' and 'inf' (FloatRange takes both)."""

    name = 'finite float'

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():  # float() reads other digits too
            self.fail(f'{value!r} is not a number written in the digits 0-9.', param, ctx)
        value = super().convert(value, param, ctx)
        if not math.isfinite(value):
            self.fail(f'{value} is not a finite number.', param, ctx)
        return value


def positive(maximum: float | None = None) -> FiniteFloat:
    """A click type: a finite float > 0 (and <= maximum)."""
    return FiniteFloat(min=0., min_open=True, max=maximum)


#: A click type: a duration in seconds, in (0, MAX_SECONDS].
SECONDS = positive(MAX_SECONDS)


def sampler_kind(ctx, param, value):
    """A ``--sampler`` option's callback: ``ray`` without Ray installed is a usage error
    while parsing (not the first sampling round's, after the run dir and envs are made)."""
    if value == 'ray' and not ray_available():
        raise click.BadParameter(RAY_MISSING_MESSAGE.format(name="'ray'"), ctx, param)
    return value


def distinct(ctx, param, values):
    """A click callback: the values of a repeatable option, an argument or a comma list,
    each given once (a value given twice would be run, counted or measured twice).

    Raises:
        click.BadParameter: Naming the repeated values and the option (or argument).
    """
    del ctx
    values = () if values is None else values
    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        hint = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        raise click.BadParameter(f'{", ".join(repeated)} given more than once', param_hint=hint)
    return values


class CommaList(click.ParamType):
    """A click type: a comma-separated list, each element converted by ``item_type``.

    Refuses an empty value, an empty element (``'1,,2'``, ``'1,'``) and any
    element ``item_type`` refuses, naming the option; gives a tuple.

    Args:
        item_type (click.ParamType): The type of each element.
        example (str): A valid value, shown in the error.
        max_items (int or None): The most elements it takes.

    """

    name = 'list'

    def __init__(self, item_type: click.ParamType, example: str, max_items: int | None = None):
        self.item_type = item_type
        self.example = example
        self.max_items = max_items

    def get_metavar(self, param, ctx=None):  # pylint: disable=unused-argument
        return 'A,B,...'

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        parts = str(value).split(',')
        if any(not part.strip() for part in parts):
            self.fail(f'expected a comma-separated list such as {self.example!r}, got '
                      f'{value!r}', param, ctx)
        if self.max_items is not None and len(parts) > self.max_items:
            self.fail(f'at most {self.max_items} elements, got {len(parts)}', param, ctx)
        return tuple(self.item_type.convert(part.strip(), param, ctx) for part in parts)


#: A click type: a policy's hidden layer sizes, e.g. '64,64'.
HIDDEN_SIZES = CommaList(IntRange(1, MAX_HIDDEN_SIZE), '64,64', MAX_HIDDEN_LAYERS)


def check_hidden_sizes(value: Any, name: str = 'hidden_sizes') -> tuple:
    """``value`` as a tuple of hidden layer sizes, each an int in [1, MAX_HIDDEN_SIZE], at
    most MAX_HIDDEN_LAYERS of them (the bounds of ``--hidden-sizes``).

    Raises:
        ValueError: Naming ``name``.

    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) \
            or not 1 <= len(value) <= MAX_HIDDEN_LAYERS:
        _fail(name, f'a list or tuple of 1 to {MAX_HIDDEN_LAYERS} layer sizes', value)
    return tuple(check_int(size, f'{name} (each layer\'s size)', 1, MAX_HIDDEN_SIZE)
                 for size in value)


def check_output_path(path: Any, name: str, directory: bool = True) -> str:
    """``path`` if it can be written as a directory (or, ``directory=False``, a file).

    It must not be empty; if it exists it must be a directory (a file); the
    nearest existing directory on its way must take a new file, which is
    tried (and removed at once): permission bits do not stop root, but
    ``/proc``, ``/sys`` or a read-only mount do. Nothing is left behind.

    Raises:
        ValueError: Naming ``name``, the path and why.

    """
    problem = _output_path_problem(path, directory)
    if problem:
        raise ValueError(f'{name} {problem}')
    return os.fspath(path)


def check_default_log_dir(name: str = 'the default log directory') -> str:
    """garage's default place for runs, ``./data/local/experiment``, if a run can be made
    in it (:func:`check_output_path`: a link loop or a dangling link on the way is named
    here, not met by ``os.makedirs`` after the experiment is built).

    Raises:
        ValueError: Naming ``name``, the path and why.

    """
    return check_output_path(os.path.join(os.getcwd(), 'data', 'local', 'experiment'), name)


def _output_path_problem(path: Any, directory: bool) -> str | None:
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip():
        return f'must be a path, got {path!r}'
    walk = _dot_dot_problem(text)
    if walk:
        return f'{text!r} cannot be written: {walk}'
    full = kernel_abspath(text)
    what = 'directory' if directory else 'file'
    broken = _broken_link_above(full)
    if broken:
        return f'{text!r} cannot be written: {broken}'
    # Writers go different ways at a link to nothing (open() follows it, garage's run
    # naming moves beside it): refused rather than guessed.
    broken = _broken_link(full)
    if broken:
        return f'{text!r} {broken}'
    if os.path.exists(full) and os.path.isdir(full) != directory:
        return f'{text!r} exists and is not a {what}'
    if not directory and os.path.exists(full) and not os.path.isfile(full):
        # Opening a named pipe blocks until a reader comes, a device takes or refuses the
        # bytes after all the work: refused up front, not met at the end.
        return f'{text!r} exists and is {file_kind(full)}, not a regular file'
    target = _nearest_existing(full if directory else os.path.dirname(full))
    if not os.path.isdir(target):
        return f'{text!r} cannot be written: {target!r} is not a directory'
    too_long = _name_too_long(full, target)
    if too_long:
        return f'{text!r} cannot be written: {too_long}'
    try:
        fd, probe = tempfile.mkstemp(prefix='.write_check_', dir=target)
    except OSError as error:
        return f'{text!r} cannot be written: {target!r} takes no new file ({error.strerror})'
    os.close(fd)
    os.unlink(probe)
    return None


def kernel_abspath(path: Any) -> str:
    """The absolute path the kernel reaches for ``path``, its last component as written.

    ``os.path.abspath`` drops ``link/..`` as text, where the kernel follows ``link`` first
    and takes its target's parent: ``l/../run`` with ``l -> real/deep`` is ``real/run``.
    Where ``path`` has a ``..`` component its directory is resolved as the kernel resolves
    it; elsewhere only ``.`` components, repeated and trailing ``/`` go (which the kernel
    also ignores). A last component that is a link is kept (the callers judge it).
    """
    joined = os.path.join(os.getcwd(), os.fspath(path))
    if '..' not in joined.split(os.sep):
        return os.path.normpath(joined)
    while joined not in (os.sep, '') and (joined.endswith(os.sep)
                                          or joined.endswith(os.sep + '.')):
        joined = joined[:-1] if joined.endswith(os.sep) else joined[:-2]
    head, tail = os.path.split(joined)
    if tail in ('', '..'):
        return os.path.realpath(joined)
    return os.path.join(os.path.realpath(head), tail)


def _dot_dot_problem(path: Any) -> str | None:
    """Why the kernel cannot walk a ``..`` of ``path``, or None: the component before each
    ``..`` must be a directory (``os.path.realpath`` cancels ``x/..`` as text where ``x``
    is a file, a link to nothing or a link loop, or does not exist; the kernel fails there)."""
    parts = os.path.join(os.getcwd(), os.fspath(path)).split(os.sep)
    for i, part in enumerate(parts):
        if part != '..' or i <= 1:
            continue
        before = os.sep.join(parts[:i]) or os.sep
        if os.path.isdir(before):
            continue
        why = _broken_link(before) or ('is not a directory' if os.path.lexists(before)
                                       else 'does not exist')
        return f'{before!r} {why}, so the .. after it cannot be followed'
    return None


def _broken_link_above(full: str) -> str | None:
    """Why an ancestor of ``full`` cannot be walked, or None: a symbolic link that loops or
    whose target does not exist (``os.path.exists`` is False for it, so a walk up to the
    nearest existing directory would pass it by and accept a path no one can create)."""
    parent = os.path.dirname(full)
    while parent != os.path.dirname(parent):
        broken = _broken_link(parent)
        if broken:
            return f'{parent!r} {broken}'
        parent = os.path.dirname(parent)
    return None


def _broken_link(path: str) -> str | None:
    """What ``path`` is, if it is a symbolic link that leads nowhere (a loop, or a link to
    nothing); None for anything else."""
    if not os.path.islink(path) or os.path.exists(path):
        return None
    if file_kind(path) == 'a symbolic link loop':
        return f'is a symbolic link loop (through {os.readlink(path)!r})'
    return f'is a symbolic link to {os.readlink(path)!r}, which does not exist'


def _nearest_existing(path: str) -> str:
    """``path`` or its nearest ancestor that exists (``path`` absolute)."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _name_too_long(full: str, existing: str) -> str | None:
    """Why the file system will refuse to create ``full`` by its length, or None.

    ``existing`` is its nearest existing directory, whose file system's limits
    (``NAME_MAX`` per name, ``PATH_MAX`` in all; 255 and 4096 where it does not
    say) apply to the names still to be made. Found while parsing, this is an
    error naming the option, not an ``OSError`` after the work is done.
    """
    def limit(name, default):
        try:
            return os.pathconf(existing, name)
        except (OSError, ValueError, AttributeError):  # not POSIX, or no such limit
            return default

    name_max, path_max = limit('PC_NAME_MAX', 255), limit('PC_PATH_MAX', 4096)
    if len(os.fsencode(full)) >= path_max:
        return (f'the path is {len(os.fsencode(full))} bytes long, more than this file system '
                f'allows ({path_max - 1})')
    rest = os.path.relpath(full, existing)
    for name in rest.split(os.sep):
        if len(os.fsencode(name)) > name_max:
            return (f'the name {name[:24]!r}... is {len(os.fsencode(name))} bytes long, more than '
                    f'this file system allows ({name_max})')
    return None


class OutputPath(click.Path):
    """click's Path for something the command writes: checked writable while parsing.

    Args:
        directory (bool): A directory (True) or a file (False).
        **kwargs: click.Path's (e.g. ``path_type``).

    """

    def __init__(self, directory: bool = True, **kwargs):
        super().__init__(file_okay=not directory, dir_okay=directory, **kwargs)
        self.directory = directory

    def convert(self, value, param, ctx):
        if value == '-':  # (click's Path would take it as the name of a file here)
            self.fail("'-' is not standard output here: give a path (./- for a file named "
                      "'-')", param, ctx)
        problem = _output_path_problem(value, self.directory)
        if problem:
            self.fail(problem, param, ctx)
        if self.directory:
            value = normal_dir(value)
        return super().convert(value, param, ctx)


def normal_dir(path: str) -> str:
    """``path`` without a trailing ``/`` or ``.`` components, absolute where its last
    component would be ``.``; a path with a ``..`` component is made absolute and resolved
    as the kernel resolves it (:func:`kernel_abspath`: the links before the ``..`` first).

    garage's ``wrap_experiment`` puts a run beside an existing directory by appending
    ``_1``, ``_2``... to the path as written: ``run/`` would become ``run/_1``, inside the
    other run's directory, and ``.`` a hidden ``._1``; ``run`` and an absolute ``/abs/cwd``
    become ``run_1`` and ``/abs/cwd_1``, beside them.
    """
    text = os.fspath(path)
    if '..' in text.split(os.sep):  # (resolved as the kernel will: :func:`kernel_abspath`)
        return kernel_abspath(text)
    text = os.path.normpath(text)
    if os.path.basename(text) == '.':
        text = os.path.abspath(text)
    return text


#: A click type: a directory the command creates or writes into.
OUTPUT_DIR = OutputPath(directory=True)
#: A click type: a file the command writes.
OUTPUT_FILE = OutputPath(directory=False)


def check_input_dir(path: Any, name: str) -> str:
    """``path`` if it can name a directory the command only reads (one that is missing
    reads as empty): not empty, a directory where it exists, of a length the file system
    takes.

    Raises:
        ValueError: Naming ``name``, the path and why.

    """
    problem = _input_dir_problem(path)
    if problem:
        raise ValueError(f'{name} {problem}')
    return os.fspath(path)


def _input_dir_problem(path: Any) -> str | None:
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip():
        return f'must be a path, got {path!r}'
    walk = _dot_dot_problem(text)
    if walk:
        return f'{text!r} cannot be a directory: {walk}'
    full = kernel_abspath(text)
    if os.path.exists(full):
        return None if os.path.isdir(full) else f'{text!r} exists and is not a directory'
    broken = _broken_link_above(full)
    if broken:
        return f'{text!r} cannot be a directory: {broken}'
    too_long = _name_too_long(full, _nearest_existing(os.path.dirname(full)))
    return f'{text!r} cannot be a directory: {too_long}' if too_long else None


class InputDir(click.Path):
    """click's Path for a directory the command reads (:func:`check_input_dir`)."""

    def __init__(self, **kwargs):
        super().__init__(file_okay=False, **kwargs)

    def convert(self, value, param, ctx):
        problem = _input_dir_problem(value)
        if problem:
            self.fail(problem, param, ctx)
        return super().convert(value, param, ctx)


#: A click type: a directory the command reads; missing reads as empty.
INPUT_DIR = InputDir()


def check_batch_steps(horizon: int, factor: int = 1, *, as_arguments: bool = False,
                      factor_name: str | None = None, horizon_name: str | None = None,
                      **sizes: int) -> int:
    """Env steps sampled at once: the product of ``sizes``, ``horizon`` and ``factor``.

    ``sizes`` are named by their options, e.g. ``meta_batch_size=40`` for
    ``--meta-batch-size``, or with ``as_arguments`` by the Python arguments
    (``meta_batch_size=40``); ``factor`` is whatever else multiplies them, named
    first in the message by ``factor_name`` where given. ``horizon_name`` names the
    horizon the same way where the user gave it (``max_episode_length``); without
    it the horizon is the env's own and is named after the sizes.

    Raises:
        ValueError: If it is over MAX_BATCH_STEPS, naming the options (arguments),
            the largest first: an error is about the first option its message names.

    """
    steps = horizon * factor
    for value in sizes.values():
        steps *= value
    if steps > MAX_BATCH_STEPS:
        named = dict(sizes)
        if horizon_name:
            named[horizon_name] = horizon
        options = ' x '.join((f'{k}={v:,}' if as_arguments else f'--{k.replace("_", "-")} {v:,}')
                             for k, v in sorted(named.items(), key=lambda kv: -kv[1]))
        if not horizon_name:
            options += f' x horizon {horizon:,}'
        extra = f' x {factor:,}' if factor != 1 and not factor_name else ''
        first = f'{factor_name} = {factor:,} x ' if factor_name else ''
        raise ValueError(f'{first}{options}{extra} = {steps:,} env steps '
                         f'sampled at once; at most {MAX_BATCH_STEPS:,} fit in memory')
    return steps


#: ``--set`` keys that the launchers also take as options of their own.
SIZE_OPTIONS = ('meta_batch_size', 'episodes_per_task')


def check_set_agrees(parsed: dict, given: dict) -> None:
    """Refuse a ``--set`` size that contradicts its own option.

    Args:
        parsed (dict): The ``--set`` pairs (:func:`parse_overrides`).
        given (dict): The sizes given by their options, key -> value (those a
            command passes on, e.g. to ``launchers/train.py``).

    Raises:
        click.UsageError: Naming both, where they differ.

    """
    for key in SIZE_OPTIONS:
        if key in parsed and key in given and parsed[key] != given[key]:
            raise click.UsageError(f'--set {key}={parsed[key]!r} contradicts '
                                   f'--{key.replace("_", "-")} {given[key]}: give one of them')


def parse_overrides(pairs: Iterable[str], option: str = '--set') -> dict:
    """``key=value`` strings as a dict, each value a Python literal where it is one.

    ``true``/``false`` (any case) are bools; a value that is not a literal
    stays a string (the constructors then refuse it by name).

    Raises:
        click.BadParameter: Naming ``option``, for a pair without ``=`` or key.

    """
    # pylint: disable=import-outside-toplevel
    import ast
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition('=')
        if not sep or not key.strip():
            raise click.BadParameter(f'expected key=value, got {shown(pair)}', param_hint=option)
        if value.lower() in ('true', 'false'):  # --set flag=true as well as flag=True
            parsed = value.lower() == 'true'
        else:
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                parsed = value
        if key in out and out[key] != parsed:
            raise click.BadParameter(f'{key} given twice, {shown(out[key])} and '
                                     f'{shown(parsed)}: give it once', param_hint=option)
        out[key] = parsed
    return out


def _message(error: BaseException) -> str:
    if getattr(error, 'traceback_file', None) and hasattr(error, 'summary'):
        # A sampler worker's error: what it raised and where; its traceback is in the file.
        return f"{error.summary}\n  (the worker's traceback is in {error.traceback_file})"
    if hasattr(error, 'full_message'):  # (a worker's KeyError would quote it all)
        return error.full_message
    if isinstance(error, OSError) and error.strerror and error.filename is not None:
        return f'{error.filename}: {error.strerror}'
    if isinstance(error, KeyError) and error.args:  # str() would quote it
        return str(error.args[0])
    return str(error) or type(error).__name__


def _names_an_option(message: str, ctx) -> bool:
    if ctx is None:
        return False
    opts = [opt for param in ctx.command.params for opt in param.opts if opt.startswith('-')]
    return any(re.search(rf'(?<![\w-]){re.escape(opt)}(?![\w-])', message) for opt in opts)


def _option_for(message: str, ctx, hints: dict | None) -> str | None:
    """The option a constructor's message is about: the first argument it names.

    Constructors name their arguments (``meta_batch_size must be ...``); an
    argument that is a parameter of the running command stands for its option
    (``--meta-batch-size``), and ``hints`` maps other names (``--set`` keys), which
    come first.
    """
    # Whole names only: not the pieces of a spelled option (``task`` in ``--episodes-per-task``).
    words = re.findall(r'(?<![-A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*(?![-A-Za-z0-9_])', message)
    # An argument given through ``hints`` first: a message naming several arguments
    # (a product of sizes) is about the one the user set that way.
    for word in words:
        if word in (hints or {}):
            return hints[word]
    names, spelled = {}, {}
    if ctx is not None:
        for param in ctx.command.params:
            if param.name and param.opts:
                names.setdefault(param.name, param.get_error_hint(ctx))
                spelled.update(dict.fromkeys(param.opts, param.get_error_hint(ctx)))
    # An option spelled out (``--meta-batch-size 1,000 x ...``) before a name.
    for option in re.findall(r'--[A-Za-z][A-Za-z0-9-]*', message):
        if option in spelled:
            return spelled[option]
    for word in words:
        if word in names:
            return names[word]
    return None


@contextlib.contextmanager
def _translated(expected, translate):
    """Raise ``translate(message, click context, error)`` for the body's ``expected`` errors
    (click's own errors pass as they are)."""
    try:
        yield
    except click.ClickException:
        raise
    except expected as error:
        raise translate(_message(error), click.get_current_context(silent=True),
                        error) from error


def given_flags(ctx: click.Context, exclude=()) -> list:
    """The flags (``--env``) of ``ctx``'s options given on the command line, in the
    command's order, but those whose parameter names are in ``exclude``."""
    return [p.opts[0] for p in ctx.command.params if p.name not in exclude
            and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE]


def _repeated_option(command: click.Command, args, stop=()):
    """The first option of ``command`` that ``args`` give twice (``(first, second)`` as given),
    among those that hold one value or one flag (not ``multiple``, not ``count``); the scan
    stops at ``--`` and at a token in ``stop`` (a group's subcommand)."""
    single, takes_value = {}, set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.multiple and not param.count:
            for opt in (*param.opts, *param.secondary_opts):
                single[opt] = param.name
                if not param.is_flag:
                    takes_value.add(opt)
    seen, i = {}, 0
    while i < len(args):
        token = args[i]
        if token == '--' or token in stop:
            break
        name = token.split('=', 1)[0] if token.startswith('--') else token
        if name in single:
            if single[name] in seen:
                return seen[single[name]], name
            seen[single[name]] = name
            if name in takes_value and '=' not in token:
                i += 1  # its value, whatever it looks like
        i += 1
    return None


def _refuse_repeated(command, ctx, args, stop=()):
    repeated = _repeated_option(command, args, stop)
    if repeated is not None:
        first, second = repeated
        also = '' if first == second else f' (as {first})'
        raise click.UsageError(f'{second} is given twice{also}: give it once (the second would '
                               'silently replace the first)', ctx=ctx)


def _refuse_repeated_values(command: click.Command, ctx: click.Context):
    """A repeatable option given one value twice (``--env X --env X`` would measure X twice,
    ``--algo A --algo A`` run A twice) is refused, naming the option and the value."""
    for param in command.params:
        if not (isinstance(param, click.Option) and param.multiple):
            continue
        if ctx.get_parameter_source(param.name) != click.core.ParameterSource.COMMANDLINE:
            continue
        seen = []
        for value in ctx.params.get(param.name) or ():
            if value in seen:
                raise click.UsageError(f'{param.opts[0]} {value} is given twice: give each '
                                       'value once', ctx)
            seen.append(value)


class StrictCommand(click.Command):
    """A command that refuses an option given twice, where click keeps the last silently
    (``--seed 1 --seed 2`` would run seed 2, ``--out A --out B`` write to B), and a
    repeatable option's value given twice."""

    def parse_args(self, ctx, args):
        _refuse_repeated(self, ctx, args)
        rest = super().parse_args(ctx, args)
        _refuse_repeated_values(self, ctx)
        return rest


class StrictGroup(click.Group):
    """:class:`StrictCommand`'s rules for a group's own options and for its subcommands."""

    command_class = StrictCommand

    def parse_args(self, ctx, args):
        _refuse_repeated(self, ctx, args, stop=set(self.commands))
        rest = super().parse_args(ctx, args)
        _refuse_repeated_values(self, ctx)
        return rest


@contextlib.contextmanager
def usage_errors(param_hint: str | None = None, expected=(ValueError, ),
                 hints: dict | None = None):
    """The body's ``expected`` errors are about the command line: click's usage error.

    The error names ``param_hint`` (e.g. ``'--set'``) if given, else the
    option of the first argument its message names (see ``hints``:
    argument name -> option, e.g. ``{'clip_eps': '--set'}``).
    """
    def translate(message, ctx, error):
        del error
        hint = param_hint or _option_for(message, ctx, hints)
        if hint is not None:
            return click.BadParameter(message, ctx=ctx, param_hint=hint)
        return click.UsageError(message, ctx)

    with _translated(expected, translate):
        yield


@contextlib.contextmanager
def user_errors(subject: str | None = None, expected=(ValueError, OSError)):
    """The body's ``expected`` errors become one ``Error: ...`` line (exit 1, no traceback).

    Such an error is not about the command line (a directory that holds no
    run, a corrupt snapshot, an env that fails to build), so no usage text is
    shown; unless its message names one of the running command's options
    (``--epochs must be more``): then it is click's usage error. ``subject``
    (e.g. ``'--resume'``) starts the message.
    """
    def translate(message, ctx, error):
        # The system's refusal met while working (a full disk) is not about the command
        # line, even where its advice names an option (--resume DIR).
        about_options = not isinstance(error, OSError) and _names_an_option(message, ctx)
        if subject:
            message = f'{subject}: {message}'
        return click.UsageError(message, ctx) if about_options else click.ClickException(message)

    with _translated(expected, translate):
        yield


def announce_new_run_beside(log_dir: str, advice: str = '') -> None:
    """Where ``log_dir`` already exists, say that garage's ``wrap_experiment`` puts the new
    run beside it (it makes ``<name>_1``, ``_2``... for any existing directory, an empty one
    too), with ``advice``; and refuse, naming ``--log-dir``, a name that leaves no room for
    the suffix garage will take, or a path that is not UTF-8 text (garage's logs write it
    into the run's ``debug.log`` as UTF-8: a name of other bytes ended the run after its
    directory was made). Before anything is written."""
    try:
        os.path.abspath(log_dir).encode('utf-8')
    except UnicodeEncodeError:
        raise click.BadParameter(f'{os.path.abspath(log_dir)!r} is not UTF-8 text: '
                                 "garage's logs write the run's path as UTF-8",
                                 param_hint='--log-dir') from None
    if not os.path.isdir(log_dir):
        return
    parent, name = os.path.split(os.path.abspath(log_dir))
    suffix = 1
    while os.path.lexists(os.path.join(parent, f'{name}_{suffix}')):
        suffix += 1
    try:
        limit = os.pathconf(parent, 'PC_NAME_MAX')
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(f'{name}_{suffix}')) > limit:
        raise click.BadParameter(f'{log_dir} already exists, and the directory beside it '
                                 f"({name[:20]}..._{suffix}) would need a name over the file "
                                 f"system's {limit} bytes: give a shorter --log-dir"
                                 + (f'. {advice}' if advice else ''), param_hint='--log-dir')
    click.echo(f'{log_dir} already exists: this run goes to a new directory beside it, '
               f"{log_dir}_{suffix} (garage's wrap_experiment does not write into an existing "
               "one; its 'Logging to' line names it)." + (f' {advice}' if advice else ''),
               err=True)


def check_run_dir(path: Any) -> str:
    """``path`` if it is a training run's directory: it holds a snapshot.

    Raises:
        ValueError: If it is not a directory or holds neither ``params.pkl``
            nor an ``itr_N.pkl``.

    """
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        raise ValueError(f'{path!r} is not a directory')
    names = os.listdir(path)
    if 'params.pkl' not in names and not any(re.fullmatch(r'itr_\d+\.pkl', n) for n in names):
        raise ValueError(f'{os.fspath(path)!r} holds no snapshot (params.pkl or itr_N.pkl): it is '
                         'not a run directory')
    return os.fspath(path)


#: A launcher stopped by Ctrl-C exits with the shell's status for SIGINT.
INTERRUPTED_STATUS = 128 + 2


def run_command(command: click.Command, interrupted: str | Callable[[], str] = '') -> None:
    """Run a launcher's click ``command`` as click's standalone mode does, but for Ctrl-C.

    Click turns Ctrl-C into ``Aborted!`` and exit status 1, the status of an error.
    Here it is one ``Interrupted`` line (with ``interrupted``, e.g. where the run's
    snapshot is kept; a callable is asked at the interrupt, so that it can say what
    the run left behind) and status 130 (128 + SIGINT, what a shell reports), as
    ``benchmarks/learning.py`` and ``paper.py`` end. Usage errors, ``Error:`` lines,
    ``--help``, an end of input (``Aborted!``) and the command's return (status 0,
    whatever it returns) are click's own.

    A launcher sets Ctrl-C to the default action (``SIG_DFL``) before it imports the
    libraries, so that an interrupt while they load ends it as Ctrl-C ends a C program:
    no traceback, nothing written. Python's own handler is restored here, so that from
    now on Ctrl-C is ``KeyboardInterrupt`` again and the run can save what it has.
    """
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) == signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    ensure_std_streams()
    try:
        command.main(standalone_mode=False)
    except click.exceptions.Abort as abort:
        if isinstance(abort.__cause__, KeyboardInterrupt):  # Ctrl-C
            note = interrupted() if callable(interrupted) else interrupted
            click.echo('Interrupted' + (f': {note}' if note else '.'), err=True)
            raise SystemExit(INTERRUPTED_STATUS) from None
        click.echo('Aborted!', err=True)  # end of input at a prompt, as click says it
        raise SystemExit(1) from None
    except click.ClickException as error:
        error.show()
        raise SystemExit(error.exit_code) from None
    raise SystemExit(0)
