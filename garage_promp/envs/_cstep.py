"""The lean path's per-env stepping loop, compiled: one call steps a worker's simulations.

:meth:`~garage_promp.envs._mujoco.MujocoMetaEnv._simulate` sets each env's
controls and calls ``mujoco.mj_step`` env by env from Python; on
HalfCheetahFwdBack that loop (the call into the bindings, the controls' copy, the
reads of ``qpos`` and ``qvel``) costs about 6 µs of a 45 µs sampled step. Here the
same loop is a small C function (``_cstep.c``) that calls the same MuJoCo library
the bindings call (``libmujoco`` of the installed ``mujoco`` wheel, with its
headers), on the bindings' own ``mjModel`` and ``mjData`` (``MjData._address``):
the same calls on the same numbers, so the episodes are the same bit for bit
(``tests/test_lean_stepping.py`` checks it against ``step`` for every paper env).
The same library compares two models' physics (:func:`same_physics`, for
:func:`~garage_promp.envs._mujoco.identical_models`): every field of the model but
the textures' pixels, without serialising half a megabyte of textures per model.

It is compiled on first use with the C compiler (``$CC``, split as a shell would,
or ``cc``; about 0.3 s) into ``$GARAGE_PROMP_CACHE`` (default
``~/.cache/garage_promp``, else ``garage_promp-<uid>`` in the temporary directory;
a directory is used only if it is this user's and no one else may write to it),
one file per source, MuJoCo, compiler and machine, and loaded with ``ctypes``. A
cached file that does not load is built again once; a compiler that runs past
:data:`COMPILE_SECONDS` is ended with its children, and not tried again. Where there is no compiler,
or the build fails, or ``GARAGE_PROMP_CSTEP=0``, :func:`library` returns None
(:data:`reason` says why, and a warning says so once per process unless it was
switched off) and the envs step from Python as before (same numbers, slower).
:func:`main` builds it and says where (``scripts/install.sh`` runs it).
"""
import contextlib
import ctypes
import hashlib
import os
import pathlib
import platform
import shlex
import signal
import stat
import subprocess
import tempfile
from typing import Any, List, Sequence, Tuple
import warnings

import mujoco
import numpy as np

SOURCE = pathlib.Path(__file__).with_name('_cstep.c')
#: The compiler's options: no fused multiply-adds (-ffp-contract=off), so C's double
#: arithmetic is Python's and NumPy's, operation by operation (``gp_quats``).
FLAGS = ['-O2', '-ffp-contract=off', '-shared', '-fPIC']
_P = ctypes.c_void_p
_I = ctypes.c_int
_UNSET = object()
_library: Any = _UNSET
#: Why the last :func:`library` call has no library (None when it has one).
reason: str | None = None


def _mujoco_dir() -> pathlib.Path:
    return pathlib.Path(mujoco.__file__).parent


def _cache_dirs():
    configured = os.environ.get('GARAGE_PROMP_CACHE')
    if configured:
        yield pathlib.Path(configured)
        return
    yield pathlib.Path.home() / '.cache' / 'garage_promp'
    yield pathlib.Path(tempfile.gettempdir()) / f'garage_promp-{os.getuid()}'


def _own_directory(directory: pathlib.Path) -> pathlib.Path:
    """``directory``, made if missing (mode 700), once it is checked to be a directory of
    this user that no one else may write to (code is loaded from it)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f'{directory} is not a directory')
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise OSError(f'{directory} is not only this user\'s (owner {info.st_uid}, mode '
                      f'{stat.S_IMODE(info.st_mode):o}): not loading code from it')
    return directory


def _compiler() -> List[str]:
    """The C compiler's command line: ``$CC`` split as a shell splits it (``cc`` without
    it); one that cannot be split or names nothing is an :class:`OSError`, as a compiler
    that is not there is (the envs then step from Python, with a warning)."""
    given = os.environ.get('CC') or 'cc'
    try:
        command = shlex.split(given)
    except ValueError as error:  # an unclosed quote
        raise OSError(f'CC={given!r} is not a command line: {error}') from None
    if not command:
        raise OSError(f'CC={given!r} names no compiler')
    return command


def _target_name() -> str:
    digest = hashlib.sha256(b'\0'.join([
        SOURCE.read_bytes(), mujoco.__version__.encode(), str(_mujoco_dir()).encode(),
        ' '.join(_compiler() + FLAGS).encode(), platform.machine().encode()])).hexdigest()[:16]
    return f'cstep-mujoco{mujoco.__version__}-{digest}.so'


def _libmujoco() -> pathlib.Path:
    found = sorted(_mujoco_dir().glob('libmujoco.so*'))
    if not found:
        raise OSError(f'no libmujoco.so in {_mujoco_dir()}')
    return found[0]


#: How long the compiler may run (a build takes a few seconds).
COMPILE_SECONDS = 120


class CompileTimeout(OSError):
    """The compiler ran past its time: not tried again (in another cache directory, or to
    rebuild), so that a compiler that hangs costs one wait, not four."""


def _compile(target: pathlib.Path):
    """Compile into ``target``: whole, or not there (a per-process file, then renamed, so
    concurrent builds are safe; removed on any failure or interruption)."""
    partial = target.with_name(f'{target.name}.{os.getpid()}.tmp')
    libmujoco = _libmujoco()
    command = [*_compiler(), *FLAGS, f'-I{_mujoco_dir() / "include"}',
               str(SOURCE), '-o', str(partial), str(libmujoco),
               f'-Wl,-rpath,{libmujoco.parent}']
    try:
        # In a session of its own, so that a compiler that hangs is ended with whatever it
        # started (a wrapper's child would hold the output pipes open past its kill).
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=COMPILE_SECONDS)
        except BaseException:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            # (Bounded: a child that left the group may hold the pipes open.)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=5)
            raise
        if proc.returncode != 0:
            raise OSError(f'{shlex.join(command)} failed: {stderr.strip()[-2000:]}')
        os.replace(partial, target)
    except subprocess.TimeoutExpired:
        raise CompileTimeout(f'{shlex.join(command)} ran past {COMPILE_SECONDS} s and was '
                             'ended') from None
    except subprocess.SubprocessError as error:
        raise OSError(f'{shlex.join(command)}: {error}') from None
    finally:
        partial.unlink(missing_ok=True)


def build(rebuild: bool = False) -> pathlib.Path:
    """Compile ``_cstep.c`` (if not yet, or again with ``rebuild``) and return the shared
    library's path.

    Raises:
        OSError: Where no cache directory can be used or the compiler fails (its output
            in the message).

    """
    name, errors = _target_name(), []
    for directory in _cache_dirs():
        try:
            target = _own_directory(directory) / name
            if rebuild or not target.is_file():
                _compile(target)
            return target
        except CompileTimeout:
            raise
        except OSError as error:
            errors.append(str(error))
    raise OSError('; '.join(errors))


def _load(path: pathlib.Path):
    loaded = ctypes.PyDLL(str(path))
    step = loaded.gp_step_batch
    step.argtypes = [_I, _P, _P, _P, _I, _I, _I, _I, _P, _I, _P, _I, _P, _I, _P]
    step.restype = _I
    loaded.gp_last_error.restype = ctypes.c_char_p
    same = loaded.gp_same_physics
    same.argtypes = [_P, _P]
    same.restype = _I
    mocap = loaded.gp_step_mocap_batch
    mocap.argtypes = [_I, _P, _P, _P, _P, _I, _P, _I, _I, _I, _I, _I, _P, _I, _P]
    mocap.restype = _I
    gather_rows = loaded.gp_gather
    gather_rows.argtypes = [_I, _P, _I, _P, _P, _P, _P]
    gather_rows.restype = _I
    pads = loaded.gp_pad_forces
    pads.argtypes = [_I, _P, _P, _I, _I, _P]
    pads.restype = _I
    quats = loaded.gp_quats
    quats.argtypes = [_I, _P, _P, _P]
    quats.restype = None
    return loaded


def same_physics(lib, a: Any, b: Any) -> bool:
    """Whether stepping with ``MjModel`` ``b`` computes exactly what ``a`` would: every
    size, option, statistic and array equal byte for byte, the textures' pixels (read
    only by rendering) aside (``gp_same_physics`` in ``_cstep.c``)."""
    return lib.gp_same_physics(a._address, b._address) == 1  # pylint: disable=protected-access


def library():
    """The loaded stepping library, or None where it cannot be had (see :data:`reason`)."""
    global _library, reason  # pylint: disable=global-statement
    if _library is _UNSET:
        if os.environ.get('GARAGE_PROMP_CSTEP', '1') == '0':
            _library, reason = None, 'GARAGE_PROMP_CSTEP=0'
            return None
        try:
            try:
                _library = _load(build())
            except CompileTimeout:
                raise
            except (OSError, AttributeError):  # a cached file that does not load: once more
                _library = _load(build(rebuild=True))
            reason = None
        except (OSError, AttributeError) as error:
            _library, reason = None, str(error)
            warnings.warn(f'garage_promp: the compiled stepping loop is not available '
                          f'({reason}); the envs step from Python (same numbers, slower)',
                          RuntimeWarning, stacklevel=2)
    return _library


def _address(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def pointers(models: Sequence[Any], datas: Sequence[Any]) -> Tuple[np.ndarray, np.ndarray]:
    """The ``mjModel*`` and ``mjData*`` arrays :func:`step_batch` passes to the loop."""
    return (np.fromiter((m._address for m in models), dtype=np.uintp, count=len(models)),  # pylint: disable=protected-access
            np.fromiter((d._address for d in datas), dtype=np.uintp, count=len(datas)))  # pylint: disable=protected-access


def step_batch(lib, models: Sequence[Any], datas: Sequence[Any], actions: np.ndarray,
               nstep: int, rne: bool, before: np.ndarray | None = None,
               after: np.ndarray | None = None,
               addresses: Tuple[np.ndarray, np.ndarray] | None = None
               ) -> Tuple[np.ndarray | None, np.ndarray | None]:
    """Step every ``datas[i]`` with ``models[i]`` and control row ``actions[i]``.

    ``before`` and ``after``, where given, are :func:`gather` specs (the caller has
    checked each part lies inside its array in every simulation): the parts they
    name are copied out of each simulation right before and right after its step,
    while its ``MjData`` is in the cache (``gp_step_batch`` in ``_cstep.c``).
    ``addresses``, where given, is :func:`pointers` of ``models`` and ``datas`` made
    before: the lean path makes them once a wave.
    Returns the ``(n, width)`` rows of ``before`` and of ``after`` (None where not
    asked). A MuJoCo error is raised as the bindings raise it (``mujoco.FatalError``),
    with ``lean_index``, the position of the simulation it came from.
    """
    n = len(datas)
    nu = models[0].nu
    ctrl = np.ascontiguousarray(actions, dtype=np.float64)
    if ctrl.shape != (n, nu) or len(models) != n:
        raise ValueError(f'{len(models)} models, {n} simulations and actions of shape '
                         f'{ctrl.shape}: one row of {nu} controls per simulation expected')
    model_ptrs, data_ptrs = addresses or pointers(models, datas)
    rows_before, before_args = _spec_rows(before, n)
    rows_after, after_args = _spec_rows(after, n)
    _check_stepped(lib, lib.gp_step_batch(n, model_ptrs.ctypes.data, data_ptrs.ctypes.data,
                                          ctrl.ctypes.data, nu, nstep, int(rne), *before_args,
                                          *after_args), before, after)
    return rows_before, rows_after


def _spec_rows(spec: np.ndarray | None, n: int) -> Tuple[np.ndarray | None, list]:
    """The ``(n, width)`` rows a stepping loop copies gather spec ``spec``'s parts into,
    and the loop's four arguments for it (parts, spec, width, rows); None and zeros for
    no spec."""
    if spec is None:
        return None, [0, None, 0, None]
    width = check_spec(spec)
    rows = np.empty((n, width))
    return rows, [spec.shape[1], spec.ctypes.data, width, rows.ctypes.data]


def _check_stepped(lib, failed: int, *specs) -> None:
    """Raise what a stepping loop's return value ``failed`` reports: -1, an unknown field
    code in one of ``specs`` (nothing stepped); ``i + 1``, MuJoCo's error in simulation
    ``i``, as the bindings raise it (``mujoco.FatalError``, with ``lean_index``)."""
    if failed < 0:
        raise ValueError(f'unknown field code in {" or ".join(map(repr, specs))}')
    if failed:
        error = mujoco.FatalError(lib.gp_last_error().decode(errors='replace'))
        error.lean_index = failed - 1
        raise error


def step_mocap_batch(lib, models: Sequence[Any], datas: Sequence[Any], mocap_pos: np.ndarray,
                     mocap_quat: np.ndarray, ctrl: np.ndarray, nstep: int, rne: bool,
                     forward: bool, addresses: Tuple[np.ndarray, np.ndarray] | None = None,
                     after: np.ndarray | None = None) -> np.ndarray | None:
    """Set each simulation's mocap bodies (``mocap_pos`` rows ``(n, nmocap * 3)``, the
    same ``mocap_quat`` for all) and controls (``ctrl`` rows), step it ``nstep`` times,
    then ``mj_rnePostConstraint`` and ``mj_forward`` where asked (``gp_step_mocap_batch``
    in ``_cstep.c``). ``addresses``, where given, is :func:`pointers` of ``models`` and
    ``datas``. ``after``, where given, is a :func:`gather` spec whose parts are copied out
    of each simulation right after its step, as :func:`step_batch` does: their rows are
    returned (else None). A MuJoCo error is raised as :func:`step_batch` raises it."""
    n = len(datas)
    mocap_pos = np.ascontiguousarray(mocap_pos, dtype=np.float64)
    mocap_quat = np.ascontiguousarray(mocap_quat, dtype=np.float64)
    ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
    nmocap = mocap_quat.size // 4
    if (len(models) != n or mocap_pos.shape != (n, 3 * nmocap) or ctrl.ndim != 2
            or len(ctrl) != n or mocap_quat.size != 4 * nmocap):
        raise ValueError(f'{len(models)} models, {n} simulations, mocap positions '
                         f'{mocap_pos.shape}, mocap orientation {mocap_quat.shape} and '
                         f'controls {ctrl.shape} do not match')
    rows, after_args = _spec_rows(after, n)
    model_ptrs, data_ptrs = addresses or pointers(models, datas)
    _check_stepped(lib, lib.gp_step_mocap_batch(
        n, model_ptrs.ctypes.data, data_ptrs.ctypes.data, mocap_pos.ctypes.data,
        mocap_quat.ctypes.data, nmocap, ctrl.ctypes.data, ctrl.shape[1], nstep, int(rne),
        int(forward), *after_args), after)
    return rows


#: The ``mjData`` arrays :func:`gather` reads, by the codes of ``gp_gather``.
GATHER_FIELDS = ('xpos', 'xmat', 'xquat', 'site_xpos', 'site_xmat', 'geom_xpos', 'geom_xmat',
                 'mocap_pos', 'mocap_quat', 'qpos', 'qvel', 'cfrc_ext', 'ctrl', 'cinert', 'cvel',
                 'qfrc_actuator', 'xipos')
#: Each field's code in a gather spec.
FIELD_CODES = {name: code for code, name in enumerate(GATHER_FIELDS)}


def spec_of(parts: Sequence[Tuple[str, int, int]]) -> np.ndarray:
    """The :func:`gather` spec of ``(field, first number, count)`` parts."""
    return np.array([[FIELD_CODES[field] for field, _, _ in parts],
                     [start for _, start, _ in parts], [count for _, _, count in parts]],
                    dtype=np.int32).reshape(3, len(parts))


def check_spec(spec: np.ndarray) -> int:
    """The width of a row of :func:`gather` spec ``spec`` (its counts' sum), once it is
    checked to be a C-contiguous ``(3, k)`` ``int32`` array of known field codes,
    non-negative starts and counts."""
    if (not isinstance(spec, np.ndarray) or spec.dtype != np.int32 or spec.ndim != 2
            or len(spec) != 3 or not spec.flags.c_contiguous):
        raise ValueError(f'a C-contiguous (3, k) int32 gather spec expected, got {spec!r}')
    codes, starts, counts = spec.tolist()  # (a few numbers: lists are quicker than arrays)
    if not all(0 <= code < len(GATHER_FIELDS) for code in codes):
        raise ValueError(f'unknown field code in {codes} (codes of {len(GATHER_FIELDS)} '
                         'fields: GATHER_FIELDS)')
    if min(starts + counts, default=0) < 0:
        raise ValueError(f'gather spec {spec.tolist()}: non-negative starts and counts '
                         'expected')
    return sum(counts)


def gather(lib, data_ptrs: np.ndarray | None, spec: np.ndarray, width: int,
           datas: Sequence[Any] | None = None) -> np.ndarray:
    """``(n, width)`` rows: per simulation, the parts ``spec`` names, one after another.

    ``spec`` is a C-contiguous ``(3, k)`` ``int32`` array: the parts' field codes
    (:data:`GATHER_FIELDS`), first numbers and counts (which sum to ``width``); the
    caller has checked each part lies inside its array (ids looked up in the model).
    With ``lib`` None the same numbers are read from Python, out of ``datas`` (the
    ``MjData`` of the simulations) instead of ``data_ptrs``.
    """
    if check_spec(spec) != width:
        raise ValueError(f'gather spec {spec.tolist()}: counts that sum to {width} expected')
    if lib is None:
        out = np.empty((len(datas), width))
        for row, data in zip(out, datas):
            at = 0
            for field, start, count in spec.T.tolist():
                row[at:at + count] = getattr(data, GATHER_FIELDS[field]).ravel()[
                    start:start + count]
                at += count
        return out
    out = np.empty((len(data_ptrs), width))
    if lib.gp_gather(len(data_ptrs), data_ptrs.ctypes.data, spec.shape[1], spec[0].ctypes.data,
                     spec[1].ctypes.data, spec[2].ctypes.data, out.ctypes.data):
        raise ValueError(f'unknown field code in {spec[0].tolist()}')
    return out


def quats(lib, matrices: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """SciPy's ``from_matrix(m).as_quat()`` of each row of an ``(n, 9)`` float64 array as
    ``_metaworld_speedups.quat_from_matrix`` computes it (``gp_quats``): ``(quats,
    proper)``, where rows with ``proper`` False are not proper rotations (left to SciPy)."""
    matrices = np.ascontiguousarray(matrices, dtype=np.float64)
    if matrices.ndim != 2 or matrices.shape[1] != 9:
        raise ValueError(f'(n, 9) matrices expected, got shape {matrices.shape}')
    out = np.empty((len(matrices), 4))
    proper = np.empty(len(matrices), dtype=np.intc)
    lib.gp_quats(len(matrices), matrices.ctypes.data, out.ctypes.data, proper.ctypes.data)
    return out, proper.astype(bool)


def pad_forces(lib, data_ptrs: np.ndarray, objects: np.ndarray, left: int,
               right: int) -> np.ndarray | None:
    """``(n, 2)`` sums of the contact forces between each simulation's geom ``objects[i]``
    and the left and right pad geoms, as Meta-World's ``touching_object`` forms them
    (``gp_pad_forces``); None where an index would fail (left to Python's error)."""
    objects = np.ascontiguousarray(objects, dtype=np.intc)
    out = np.empty((len(data_ptrs), 2))
    if lib.gp_pad_forces(len(data_ptrs), data_ptrs.ctypes.data, objects.ctypes.data, left,
                         right, out.ctypes.data):
        return None
    return out


def main():
    """Build the library now (``scripts/install.sh``) and say where, or why not."""
    if library() is None:
        print(f'garage_promp: the compiled stepping loop is not available ({reason}); '
              'the envs step from Python (same numbers, slower)')
    else:
        print(f'garage_promp: compiled stepping loop {build()}')
