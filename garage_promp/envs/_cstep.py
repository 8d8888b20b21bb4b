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

It is compiled on first use with the C compiler (``$CC`` or ``cc``; about 0.3 s)
into ``$GARAGE_PROMP_CACHE`` (default ``~/.cache/garage_promp``, else the
temporary directory), one file per MuJoCo version and source, and loaded with
``ctypes``. Where there is no compiler, or the build fails, or
``GARAGE_PROMP_CSTEP=0``, :func:`library` returns None and the envs step from
Python as before (same numbers, slower). :func:`main` builds it and says where
(``scripts/install.sh`` runs it).
"""
import ctypes
import hashlib
import os
import pathlib
import subprocess
import tempfile
from typing import Any, Sequence

import mujoco
import numpy as np

SOURCE = pathlib.Path(__file__).with_name('_cstep.c')
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


def _target_name() -> str:
    digest = hashlib.sha256(SOURCE.read_bytes() + mujoco.__version__.encode()
                            + str(_mujoco_dir()).encode()).hexdigest()[:16]
    return f'cstep-mujoco{mujoco.__version__}-{digest}.so'


def _libmujoco() -> pathlib.Path:
    found = sorted(_mujoco_dir().glob('libmujoco.so*'))
    if not found:
        raise OSError(f'no libmujoco.so in {_mujoco_dir()}')
    return found[0]


def build() -> pathlib.Path:
    """Compile ``_cstep.c`` (if not yet) and return the shared library's path.

    Raises:
        OSError: Where no cache directory is writable or the compiler fails (its
            output in the message).

    """
    name, errors = _target_name(), []
    for directory in _cache_dirs():
        target = directory / name
        if target.is_file():
            return target
        try:
            directory.mkdir(parents=True, exist_ok=True)
            partial = directory / f'{name}.{os.getpid()}.tmp'
            libmujoco = _libmujoco()
            command = [os.environ.get('CC', 'cc'), '-O2', '-shared', '-fPIC',
                       f'-I{_mujoco_dir() / "include"}', str(SOURCE), '-o', str(partial),
                       str(libmujoco), f'-Wl,-rpath,{libmujoco.parent}']
            proc = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                  check=False)
            if proc.returncode != 0:
                partial.unlink(missing_ok=True)
                raise OSError(f'{" ".join(command)} failed: {proc.stderr.strip()[-2000:]}')
            os.replace(partial, target)  # whole, or not there: concurrent builds are safe
            return target
        except (OSError, subprocess.SubprocessError) as error:
            errors.append(str(error))
    raise OSError('; '.join(errors))


def library():
    """The loaded stepping library, or None where it cannot be had (see :data:`reason`)."""
    global _library, reason  # pylint: disable=global-statement
    if _library is _UNSET:
        if os.environ.get('GARAGE_PROMP_CSTEP', '1') == '0':
            _library, reason = None, 'GARAGE_PROMP_CSTEP=0'
            return None
        try:
            loaded = ctypes.PyDLL(str(build()))  # holds the GIL: see _cstep.c
            step = loaded.gp_step_batch
            step.argtypes = [_I, _P, _P, _P, _I, _I, _I, _P, _P, _I, _P, _I]
            step.restype = _I
            loaded.gp_last_error.restype = ctypes.c_char_p
            _library, reason = loaded, None
        except OSError as error:
            _library, reason = None, str(error)
    return _library


def _address(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def step_batch(lib, models: Sequence[Any], datas: Sequence[Any], actions: np.ndarray,
               nstep: int, rne: bool, gather: bool):
    """Step every ``datas[i]`` with ``models[i]`` and control row ``actions[i]``.

    Returns ``(x_before, qpos, qvel)`` rows when ``gather`` (else Nones). A MuJoCo error
    is raised as the bindings raise it (``mujoco.FatalError``), with ``lean_index``,
    the position of the simulation it came from.
    """
    n = len(datas)
    model0 = models[0]
    nq, nv, nu = model0.nq, model0.nv, model0.nu
    ctrl = np.ascontiguousarray(actions, dtype=np.float64).reshape(n, nu)
    model_ptrs = np.fromiter((m._address for m in models), dtype=np.uintp, count=n)  # pylint: disable=protected-access
    data_ptrs = np.fromiter((d._address for d in datas), dtype=np.uintp, count=n)  # pylint: disable=protected-access
    x_before = qpos = qvel = None
    if gather:
        x_before, qpos, qvel = np.empty(n), np.empty((n, nq)), np.empty((n, nv))
    failed = lib.gp_step_batch(n, model_ptrs.ctypes.data, data_ptrs.ctypes.data,
                               ctrl.ctypes.data, nu, nstep, int(rne), _address(x_before),
                               _address(qpos), nq, _address(qvel), nv)
    if failed:
        error = mujoco.FatalError(lib.gp_last_error().decode(errors='replace'))
        error.lean_index = failed - 1
        raise error
    return x_before, qpos, qvel


def main():
    """Build the library now (``scripts/install.sh``) and say where, or why not."""
    if library() is None:
        print(f'garage_promp: the compiled stepping loop is not available ({reason}); '
              'the envs step from Python (same numbers, slower)')
    else:
        print(f'garage_promp: compiled stepping loop {build()}')
