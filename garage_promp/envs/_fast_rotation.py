"""An exact, fast ``Rotation.from_matrix(m).as_quat()`` for Meta-World's observations.

Every Meta-World 3 env builds its observation each step with
``scipy.spatial.transform.Rotation.from_matrix(xmat).as_quat()`` for one 3x3
matrix (the object's orientation; ``_get_quat_objects`` in
metaworld/envs/sawyer_*_v3.py). SciPy's general machinery (array-API dispatch,
a determinant, a Gram-matrix check, a Rotation object) costs tens of
microseconds for that one quaternion, a large part of a Meta-World step
(benchmarks/physics.py measures it). :func:`quat_from_matrix` computes the same
quaternion with the same floating-point operations in the same order (SciPy's
branch on the largest of the diagonal and the trace, then the division by the
norm), so the result is equal bit for bit; ``tests/envs/test_fast_rotation.py``
checks that on random rotations and on every ML10 env's observations. A matrix
that is not a proper rotation to within SciPy's own tolerance (never a MuJoCo
``xmat``) goes to SciPy itself, so errors and projections stay SciPy's.

:func:`install` puts :data:`ROTATION` in place of the ``Rotation`` name of
Meta-World's env modules (only those; anything but ``from_matrix(...).as_quat()``
is handed to SciPy's ``Rotation``). ``garage_promp.envs.metaworld`` installs it
when it first imports Meta-World.
"""
import math
import sys
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

#: SciPy's orthogonality tolerance in ``Rotation.from_matrix`` (``isclose(M Mᵀ, I, atol=1e-12)``).
ORTHOGONALITY_ATOL = 1e-12


def _orthogonal(rows) -> bool:
    """M Mᵀ close to I as SciPy checks it (``isclose``: atol 1e-12, rtol 1e-5)."""
    for i in range(3):
        for j in range(3):
            gram = rows[i][0] * rows[j][0] + rows[i][1] * rows[j][1] + rows[i][2] * rows[j][2]
            target = 1. if i == j else 0.
            if not abs(gram - target) <= ORTHOGONALITY_ATOL + 1e-5 * abs(target):
                return False
    return True


def quat_from_matrix(matrix: Any) -> np.ndarray:
    """``Rotation.from_matrix(matrix).as_quat()`` (scalar last) for one 3x3 matrix."""
    m = np.asarray(matrix, dtype=float).reshape(3, 3)
    rows = m.tolist()
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = rows
    det = m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20) \
        + m02 * (m10 * m21 - m11 * m20)
    if det <= 0 or not _orthogonal(rows):
        return Rotation.from_matrix(m).as_quat()  # SciPy's error or projection
    trace = m00 + m11 + m22
    decision = (m00, m11, m22, trace)
    choice = max(range(4), key=decision.__getitem__)  # the first maximum, as argmax
    if choice == 0:
        q = (1 - trace + 2 * m00, m10 + m01, m20 + m02, m21 - m12)
    elif choice == 1:
        q = (m10 + m01, 1 - trace + 2 * m11, m21 + m12, m02 - m20)
    elif choice == 2:
        q = (m20 + m02, m21 + m12, 1 - trace + 2 * m22, m10 - m01)
    else:
        q = (m21 - m12, m02 - m20, m10 - m01, 1 + trace)
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return np.array([v / norm for v in q])


class _FromMatrix:
    """What ``from_matrix`` returns: ``as_quat()`` fast, anything else SciPy's."""

    __slots__ = ('_matrix', )

    def __init__(self, matrix):
        self._matrix = matrix

    def as_quat(self, canonical: bool = False, **kwargs) -> np.ndarray:
        if canonical or kwargs or np.ndim(self._matrix) != 2:
            return Rotation.from_matrix(self._matrix).as_quat(canonical=canonical, **kwargs)
        return quat_from_matrix(self._matrix)

    def __getattr__(self, name):
        return getattr(Rotation.from_matrix(self._matrix), name)


class _RotationShim:
    """Stands in for ``scipy.spatial.transform.Rotation`` in Meta-World's env modules."""

    @staticmethod
    def from_matrix(matrix, *args, **kwargs):
        if args or kwargs:
            return Rotation.from_matrix(matrix, *args, **kwargs)
        return _FromMatrix(matrix)

    def __getattr__(self, name):
        return getattr(Rotation, name)


ROTATION = _RotationShim()


def install() -> int:
    """Put :data:`ROTATION` in place of ``Rotation`` in every imported Meta-World env
    module; return how many modules use it. Idempotent."""
    count = 0
    for name, module in list(sys.modules.items()):
        if name.startswith('metaworld.envs.') and getattr(module, 'Rotation', None) in (
                Rotation, ROTATION):
            module.Rotation = ROTATION
            count += 1
    return count
