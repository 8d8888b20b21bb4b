"""Exact, faster equivalents of four per-step costs of Meta-World 3.1.1's own Python.

Profiles of a Meta-World step (``benchmarks/physics.py`` puts it against the
physics) show pieces of Meta-World's Python costing more than MuJoCo's
``mj_step`` itself; they are replaced here by code that computes the same values
with the same floating-point operations in the same order, so observations and
rewards are equal bit for bit (``tests/envs/test_metaworld_speedups.py``):

- **The object quaternion of the observation.** Every env builds it each step
  with ``scipy.spatial.transform.Rotation.from_matrix(xmat).as_quat()`` for one
  3x3 matrix (``_get_quat_objects`` in metaworld/envs/sawyer_*_v3.py): SciPy's
  array-API dispatch, determinant, Gram check and Rotation object cost tens of
  microseconds for one quaternion. :func:`quat_from_matrix` repeats SciPy's
  arithmetic (the branch on the largest of the diagonal and the trace, then the
  division by the norm) on Python floats; a matrix that is not a proper
  rotation to within SciPy's own tolerance (never a MuJoCo ``xmat``) goes to
  SciPy, so errors and projections stay SciPy's.
- **The gripper-object contact test of the grasp rewards.**
  ``SawyerXYZEnv.touching_object`` (metaworld/sawyer_xyz_env.py) iterates over
  ``data.contact`` twice in Python, building one contact object per contact;
  :func:`touching_object` selects the same contacts from the contact arrays
  (``geom1``, ``geom2``, ``efc_address``) and sums the same forces in the same
  order.
- **The shaped rewards' ``tolerance``.** ``metaworld.utils.reward_utils.tolerance``
  (dm_control's) is called several times a step by the grasp rewards, always on one
  number, and builds 0-d arrays with ``np.logical_and`` and two ``np.where`` for it;
  :func:`tolerance` takes the same branch in Python and calls the same
  ``_sigmoids`` on a ``float64`` scalar, whose arithmetic is the original's (a 0-d
  array's operations return ``float64`` scalars there too). Arguments of other
  types or other sigmoids go to Meta-World's own function.
- **The observation's layout.** ``SawyerXYZEnv._get_curr_obs_combined_no_goal``
  splits the objects' positions and quaternions with ``np.split`` and joins them
  with a ``np.hstack`` per object, every step; :func:`curr_obs_combined_no_goal`
  places the same numbers by reshaping.

:func:`install` puts them in place (``Rotation`` and ``tolerance`` in Meta-World's
modules, ``touching_object`` and ``_get_curr_obs_combined_no_goal`` on ``SawyerXYZEnv``);
``garage_promp.envs.metaworld`` calls it when it first imports Meta-World.
:func:`uninstall` restores Meta-World's own code.
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


def touching_object(self, object_geom_id: int) -> bool:
    """``SawyerXYZEnv.touching_object``: both pads press on the object (contact forces > 0)."""
    data = self.data
    leftpad_geom_id = data.geom('leftpad_geom').id
    rightpad_geom_id = data.geom('rightpad_geom').id
    contact = data.contact
    geom1, geom2 = contact.geom1, contact.geom2
    with_object = (geom1 == object_geom_id) | (geom2 == object_geom_id)
    forces = []
    for pad in (leftpad_geom_id, rightpad_geom_id):
        selected = with_object & ((geom1 == pad) | (geom2 == pad))
        # Python's sum over the same contacts in the same order, as the original.
        forces.append(sum(data.efc_force[address]
                          for address in contact.efc_address[selected].tolist()))
    return 0 < forces[0] and 0 < forces[1]


touching_object.fast = True


def curr_obs_combined_no_goal(self) -> np.ndarray:
    """``SawyerXYZEnv._get_curr_obs_combined_no_goal``: hand position, gripper opening, then
    each object's position and quaternion, zero-padded.

    The same values as Meta-World's (only the gripper term is arithmetic, and it is
    computed by the same calls); the objects' entries are placed by reshaping rather
    than by ``np.split`` and a nested ``np.hstack`` per object, which cost more than the
    rest of the observation. Object arrays that do not pair up (never in Meta-World's
    envs) go to Meta-World's own code, so its assertions and errors stay its own.
    """
    obj_pos = self._get_pos_objects()
    obj_quat = self._get_quat_objects()
    n_objects = len(obj_pos) // 3
    if (not n_objects or len(obj_pos) % 3 or len(obj_quat) % 4
            or len(obj_quat) // 4 != n_objects
            or 7 * n_objects > self._obs_obj_max_len):
        return ORIGINALS['_get_curr_obs_combined_no_goal'](self)
    pos_hand = self.get_endeff_pos()
    finger_right, finger_left = self.data.body('rightclaw'), self.data.body('leftclaw')
    gripper_distance_apart = np.linalg.norm(finger_right.xpos - finger_left.xpos)
    gripper_distance_apart = np.clip(gripper_distance_apart / 0.1, 0.0, 1.0)
    obs_obj_padded = np.zeros(self._obs_obj_max_len)
    objects = obs_obj_padded[:7 * n_objects].reshape(n_objects, 7)
    objects[:, :3] = np.reshape(obj_pos, (n_objects, 3))
    objects[:, 3:] = np.reshape(obj_quat, (n_objects, 4))
    return np.hstack((pos_hand, gripper_distance_apart, obs_obj_padded))


curr_obs_combined_no_goal.fast = True

def _plain_number(value) -> bool:
    kind = type(value)
    return kind is float or kind is int or kind is np.float64


#: The sigmoids of :func:`tolerance`'s fast path: those Meta-World's v3 rewards use.
TOLERANCE_SIGMOIDS = ('long_tail', 'gaussian')


def tolerance(x, bounds=(0.0, 0.0), margin=0.0, sigmoid='gaussian', value_at_margin=0.1):
    """``metaworld.utils.reward_utils.tolerance`` for one ``float`` / ``float64`` ``x``.

    1 inside ``bounds``, else the sigmoid of the distance to the nearest bound over
    ``margin`` (0 with no margin). The same checks and errors, the same float64
    operations in the same order (the distance is formed as the original's
    ``np.where`` forms it, then divided by the margin), and the same result type
    (a Python float). Anything else is the original's to handle.
    """
    if ((type(x) is not float and type(x) is not np.float64)
            or sigmoid not in TOLERANCE_SIGMOIDS or type(bounds) is not tuple
            or len(bounds) != 2 or not (_plain_number(bounds[0]) and _plain_number(bounds[1])
                                        and _plain_number(margin))):
        return ORIGINALS['tolerance'](x, bounds=bounds, margin=margin, sigmoid=sigmoid,
                                      value_at_margin=value_at_margin)
    lower, upper = bounds
    if lower > upper:
        raise ValueError('Lower bound must be <= upper bound.')
    if margin < 0:
        raise ValueError(f'`margin` must be non-negative. Current value: {margin}')
    in_bounds = lower <= x and x <= upper
    if margin == 0:
        return 1.0 if in_bounds else 0.0
    distance = np.float64(lower - x if x < lower else x - upper) / margin
    value = ORIGINALS['_sigmoids'](distance, value_at_margin, sigmoid)
    return 1.0 if in_bounds else float(value)


tolerance.fast = True


#: Meta-World's own implementations, kept for :func:`uninstall`, the tests and
#: :func:`tolerance` (which calls the original ``_sigmoids``).
ORIGINALS = {}

#: The ``SawyerXYZEnv`` methods replaced, with their replacements.
METHODS = (('touching_object', touching_object),
           ('_get_curr_obs_combined_no_goal', curr_obs_combined_no_goal))


def install() -> int:
    """Put the exact, faster equivalents in place; return how many env modules use the
    quaternion. Idempotent."""
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    for name, fast in METHODS:
        if not getattr(getattr(SawyerXYZEnv, name), 'fast', False):
            ORIGINALS[name] = getattr(SawyerXYZEnv, name)
            setattr(SawyerXYZEnv, name, fast)
    from metaworld.utils import reward_utils  # pylint: disable=import-outside-toplevel
    if not getattr(reward_utils.tolerance, 'fast', False):
        ORIGINALS['tolerance'] = reward_utils.tolerance
        ORIGINALS['_sigmoids'] = reward_utils._sigmoids  # pylint: disable=protected-access
    count = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith('metaworld.'):
            continue
        if name.startswith('metaworld.envs.') and getattr(module, 'Rotation', None) in (
                Rotation, ROTATION):
            module.Rotation = ROTATION
            count += 1
        if getattr(module, 'tolerance', None) is ORIGINALS['tolerance']:
            module.tolerance = tolerance  # reward_utils itself, and modules that import it
    return count


def uninstall():
    """Meta-World's own code again (for comparisons)."""
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    for name, _ in METHODS:
        if name in ORIGINALS:
            setattr(SawyerXYZEnv, name, ORIGINALS[name])
    for name, module in list(sys.modules.items()):
        if name.startswith('metaworld.envs.') and getattr(module, 'Rotation', None) is ROTATION:
            module.Rotation = Rotation
        if name.startswith('metaworld.') and getattr(module, 'tolerance', None) is tolerance:
            module.tolerance = ORIGINALS['tolerance']
