"""Exact, faster equivalents of per-step costs of Meta-World 3.1.1's own Python.

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
  places the same numbers by reshaping, and ``_get_obs`` joins the frame-stacked
  observation with one ``np.concatenate`` instead of ``np.hstack``.
- **Name lookups and NumPy's wrappers in the step itself.** Every step looks up the
  hand, the claws, the fingertip sites and the goal sites by name
  (``data.body("hand")``, ``data.site(name)``: a new view object each time), and calls
  ``np.clip`` and ``np.linalg.norm`` on three numbers, whose Python wrappers cost more
  than the arithmetic. :func:`set_xyz_action`, :func:`step`, :func:`get_endeff_pos`,
  :func:`tcp_center`, :func:`get_body_com`, :func:`_get_site_pos` and
  :func:`_set_pos_site` index MuJoCo's arrays by ids looked up once per model
  (:func:`body_id`, :func:`site_id`), call the ``clip`` ufunc that ``np.clip`` itself
  calls, with the same arguments, and take the norm as ``np.linalg.norm`` computes it for
  a 1-D array (``sqrt(x.dot(x))``). :func:`step` also sets the two gripper controls and
  advances the simulation as gymnasium's ``MujocoEnv.do_simulation`` does, without
  building an array to check the control's shape, where neither ``do_simulation`` nor
  ``_step_mujoco_simulation`` is overridden.

:func:`install` puts them in place (``Rotation`` and ``tolerance`` in Meta-World's
modules, the methods of :data:`METHODS` on ``SawyerXYZEnv``);
``garage_promp.envs.metaworld`` calls it when it first imports Meta-World.
:func:`uninstall` restores Meta-World's own code.
"""
import inspect
import math
import sys
from typing import Any
import weakref

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

try:  # the ufunc np.clip calls (NumPy 2 moved it)
    from numpy._core.umath import clip as _clip
except ImportError:  # NumPy 1
    from numpy.core.umath import clip as _clip

#: SciPy's orthogonality tolerance in ``Rotation.from_matrix`` (``isclose(M Mᵀ, I, atol=1e-12)``).
ORTHOGONALITY_ATOL = 1e-12


def _orthogonal(rows) -> bool:
    """M Mᵀ close to I as SciPy checks it (``isclose``: atol 1e-12, rtol 1e-5).

    Each entry of the Gram matrix once: entry (j, i) is entry (i, j) bit for bit (the
    same products, summed in the same order).
    """
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = rows
    diagonal = ORTHOGONALITY_ATOL + 1e-5 * 1.
    off = ORTHOGONALITY_ATOL + 1e-5 * 0.
    return (abs(a0 * a0 + a1 * a1 + a2 * a2 - 1.) <= diagonal
            and abs(b0 * b0 + b1 * b1 + b2 * b2 - 1.) <= diagonal
            and abs(c0 * c0 + c1 * c1 + c2 * c2 - 1.) <= diagonal
            and abs(a0 * b0 + a1 * b1 + a2 * b2 - 0.) <= off
            and abs(a0 * c0 + a1 * c1 + a2 * c2 - 0.) <= off
            and abs(b0 * c0 + b1 * c1 + b2 * c2 - 0.) <= off)


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
    computed as ``np.linalg.norm`` and ``np.clip`` compute it); the entries are placed
    in one zeroed array rather than by ``np.split`` and a nested ``np.hstack`` per
    object, which cost more than the rest of the observation. Object arrays that do not
    pair up (never in Meta-World's envs) go to Meta-World's own code, so its assertions
    and errors stay its own.
    """
    obj_pos = self._get_pos_objects()
    obj_quat = self._get_quat_objects()
    n_objects = len(obj_pos) // 3
    if (not n_objects or len(obj_pos) % 3 or len(obj_quat) % 4
            or len(obj_quat) // 4 != n_objects
            or 7 * n_objects > self._obs_obj_max_len):
        return ORIGINALS['_get_curr_obs_combined_no_goal'](self)
    pos_hand = self.get_endeff_pos()
    if len(pos_hand) != 3:
        return ORIGINALS['_get_curr_obs_combined_no_goal'](self)
    xpos = self.data.xpos
    apart = xpos[body_id(self, 'rightclaw')] - xpos[body_id(self, 'leftclaw')]
    # np.linalg.norm of a 1-D float array is sqrt(x.dot(x)); np.clip calls this ufunc.
    gripper_distance_apart = _clip(np.sqrt(apart.dot(apart)) / 0.1, 0.0, 1.0)
    obs = np.zeros(4 + self._obs_obj_max_len)
    obs[:3] = pos_hand
    obs[3] = gripper_distance_apart
    objects = obs[4:4 + 7 * n_objects].reshape(n_objects, 7)
    objects[:, :3] = np.reshape(obj_pos, (n_objects, 3))
    objects[:, 3:] = np.reshape(obj_quat, (n_objects, 4))
    return obs


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


#: Name -> id lookups per MuJoCo model (a model of another layout gets its own).
_IDS: 'weakref.WeakKeyDictionary[Any, dict]' = weakref.WeakKeyDictionary()


def _model_id(model, kind: str, name) -> int:
    ids = _IDS.get(model)
    if ids is None:
        ids = _IDS[model] = {}
    key = (kind, name)
    found = ids.get(key)
    if found is None:  # model.body(name) raises KeyError for an unknown name, as data's does
        found = ids[key] = getattr(model, kind)(name).id
    return found


def body_id(env, name) -> int:
    """The id of body ``name`` in ``env.model``, looked up once per model."""
    return _model_id(env.model, 'body', name)


def site_id(env, name) -> int:
    """The id of site ``name`` in ``env.model``, looked up once per model."""
    return _model_id(env.model, 'site', name)


def get_endeff_pos(self) -> np.ndarray:
    """``SawyerXYZEnv.get_endeff_pos``: the hand's position (a view of ``data.xpos``, as
    ``data.body("hand").xpos`` is)."""
    return self.data.xpos[body_id(self, 'hand')]


get_endeff_pos.fast = True


def get_body_com(self, body_name) -> np.ndarray:
    """gymnasium's ``MujocoEnv.get_body_com``: ``data.body(body_name).xpos``, as a view."""
    return self.data.xpos[body_id(self, body_name)]


get_body_com.fast = True


def _tcp_center(self) -> np.ndarray:
    """``SawyerXYZEnv.tcp_center``: the midpoint of the two fingertip sites."""
    xpos = self.data.site_xpos
    return (xpos[site_id(self, 'rightEndEffector')] + xpos[site_id(self, 'leftEndEffector')]) / 2.0


tcp_center = property(_tcp_center, doc=_tcp_center.__doc__)
_tcp_center.fast = True


def _get_site_pos(self, site_name) -> np.ndarray:
    """``SawyerXYZEnv._get_site_pos``: a copy of the site's position."""
    return self.data.site_xpos[site_id(self, site_name)].copy()


_get_site_pos.fast = True


def _set_pos_site(self, name, pos) -> None:
    """``SawyerXYZEnv._set_pos_site``: the site's position from the first three entries of
    ``pos`` (the same assertions; shorter arrays go to Meta-World's own code and its error)."""
    assert isinstance(pos, np.ndarray)
    assert pos.ndim == 1
    if len(pos) < 3:
        ORIGINALS['_set_pos_site'](self, name, pos)
        return
    self.data.site_xpos[site_id(self, name)] = pos[:3]


_set_pos_site.fast = True

#: The mocap orientation ``set_xyz_action`` sets (the original builds ``np.array([1, 0, 1, 0])``).
_MOCAP_QUAT = np.array([1, 0, 1, 0])


def set_xyz_action(self, action) -> None:
    """``SawyerXYZEnv.set_xyz_action``: move the mocap body by the clipped, scaled action.

    The same operations on the same dtypes, with NumPy's ``clip`` ufunc called directly;
    anything but an array action, or a model with other than one mocap body, goes to
    Meta-World's own code.
    """
    if type(action) is not np.ndarray or self.model.nmocap != 1:
        ORIGINALS['set_xyz_action'](self, action)
        return
    pos_delta = _clip(action, -1, 1) * self.action_scale
    data = self.data
    new_mocap_pos = data.mocap_pos + pos_delta[None]
    new_mocap_pos[0, :] = _clip(new_mocap_pos[0, :], self.mocap_low, self.mocap_high)
    data.mocap_pos = new_mocap_pos
    data.mocap_quat = _MOCAP_QUAT


set_xyz_action.fast = True


def _get_obs(self) -> np.ndarray:
    """``SawyerXYZEnv._get_obs``: this frame's and the last frame's observations, then the
    goal (zeros when it is hidden); one ``np.concatenate`` where the original's
    ``np.hstack`` makes each part at least 1-D first (they are 1-D arrays here; anything
    else goes to Meta-World's own code)."""
    pos_goal = self._get_pos_goal()
    if self._partially_observable:
        pos_goal = np.zeros_like(pos_goal)
    curr_obs = self._get_curr_obs_combined_no_goal()
    prev_obs = self._prev_obs
    if not (type(curr_obs) is np.ndarray and type(prev_obs) is np.ndarray
            and type(pos_goal) is np.ndarray
            and curr_obs.ndim == 1 and prev_obs.ndim == 1 and pos_goal.ndim == 1):
        obs = np.hstack((curr_obs, prev_obs, pos_goal))
    else:
        obs = np.concatenate((curr_obs, prev_obs, pos_goal))
    self._prev_obs = curr_obs
    return obs


_get_obs.fast = True

#: What an unstable simulation's step returns as its info (Meta-World's own constant).
_UNSTABLE_INFO = {
    'success': False,
    'near_object': 0.0,
    'grasp_success': False,
    'grasp_reward': 0.0,
    'in_place_reward': 0.0,
    'obj_to_target': 0.0,
    'unscaled_reward': 0.0,
}


def step(self, action):
    """``SawyerXYZEnv.step``: Meta-World's own sequence (mocap move, simulation, goal
    sites, ``mj_forward``, observation, clip, reward), its assertions and errors.

    Where gymnasium's ``do_simulation`` and ``_step_mujoco_simulation`` are not
    overridden, the two gripper controls are set and the simulation advanced as they do
    it (the controls ``a`` and ``-a``, ``mj_step`` with ``nstep=frame_skip``, then
    ``mj_rnePostConstraint``), without the array ``do_simulation`` builds to check the
    control's shape (a model with other than two actuators takes that path); the
    observation is clipped by the ufunc ``np.clip`` calls.
    """
    assert len(action) == 4, f'Actions should be size 4, got {len(action)}'
    self.set_xyz_action(action[:3])
    if self.curr_path_length >= self.max_path_length:
        raise ValueError('You must reset the env manually once truncate==True')
    model, data, kind = self.model, self.data, type(self)
    if (kind.do_simulation is _DO_SIMULATION and model.nu == 2
            and kind._step_mujoco_simulation is _STEP_SIMULATION):  # pylint: disable=protected-access
        ctrl, grip = data.ctrl, action[-1]
        ctrl[0] = grip  # the values data.ctrl[:] = [grip, -grip] stores
        ctrl[1] = -grip
        mujoco.mj_step(model, data, nstep=self.frame_skip)
        mujoco.mj_rnePostConstraint(model, data)
    else:
        self.do_simulation([action[-1], -action[-1]], n_frames=self.frame_skip)
    self.curr_path_length += 1
    for site in self._target_site_config:
        self._set_pos_site(*site)
    if self._did_see_sim_exception:
        assert self._last_stable_obs is not None
        return self._last_stable_obs, 0.0, False, False, dict(_UNSTABLE_INFO)
    mujoco.mj_forward(model, data)
    obs = self._get_obs()
    space = self.sawyer_observation_space
    if type(obs) is np.ndarray:
        obs = _clip(obs, space.low, space.high, dtype=np.float64)
    else:
        obs = np.clip(obs, a_max=space.high, a_min=space.low, dtype=np.float64)
    self._last_stable_obs = obs
    assert isinstance(self._last_stable_obs, np.ndarray)
    reward, info = self.evaluate_state(self._last_stable_obs, action)
    truncate = self.curr_path_length == self.max_path_length
    return np.array(self._last_stable_obs, dtype=np.float64), reward, False, truncate, info


step.fast = True
_DO_SIMULATION = _STEP_SIMULATION = None  # gymnasium's, set by install()


#: Meta-World's own implementations, kept for :func:`uninstall`, the tests and
#: :func:`tolerance` (which calls the original ``_sigmoids``).
ORIGINALS = {}
#: ``SawyerXYZEnv``'s own attributes replaced (a property as a property), for
#: :func:`uninstall`; ``_INHERITED`` for one it inherits (gymnasium's ``get_body_com``).
ORIGINAL_ATTRIBUTES = {}
_INHERITED = object()

#: The ``SawyerXYZEnv`` methods replaced, with their replacements.
METHODS = (('touching_object', touching_object),
           ('_get_curr_obs_combined_no_goal', curr_obs_combined_no_goal),
           ('_get_obs', _get_obs),
           ('get_endeff_pos', get_endeff_pos),
           ('get_body_com', get_body_com),
           ('tcp_center', tcp_center),
           ('_get_site_pos', _get_site_pos),
           ('_set_pos_site', _set_pos_site),
           ('set_xyz_action', set_xyz_action),
           ('step', step))


def _is_fast(attribute) -> bool:
    if isinstance(attribute, property):
        attribute = attribute.fget
    return getattr(attribute, 'fast', False)


def install() -> int:
    """Put the exact, faster equivalents in place; return how many env modules use the
    quaternion. Idempotent."""
    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv  # pylint: disable=import-outside-toplevel
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    global _DO_SIMULATION, _STEP_SIMULATION  # pylint: disable=global-statement
    _DO_SIMULATION = MujocoEnv.do_simulation
    _STEP_SIMULATION = MujocoEnv._step_mujoco_simulation  # pylint: disable=protected-access
    for name, fast in METHODS:
        if not _is_fast(inspect.getattr_static(SawyerXYZEnv, name)):
            ORIGINALS[name] = getattr(SawyerXYZEnv, name)
            ORIGINAL_ATTRIBUTES[name] = vars(SawyerXYZEnv).get(name, _INHERITED)
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
    _INSTALLED[:] = [count]
    return count


_INSTALLED = []  # the last install()'s count, once there has been one


def ensure_installed() -> int:
    """:func:`install` on first use, and never again: it scans every loaded module
    (milliseconds), and the package asks for it at every env-class lookup (a hundred
    times a Meta-World meta-batch). Meta-World's env modules are all loaded by then
    (``metaworld.env_dict`` imports them). After an explicit :func:`uninstall`
    (comparisons with Meta-World's own code) envs keep Meta-World's code until
    :func:`install` is called again."""
    if not _INSTALLED:
        install()
    return _INSTALLED[0]


def uninstall():
    """Meta-World's own code again (for comparisons)."""
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    for name, _ in METHODS:
        if name in ORIGINAL_ATTRIBUTES:
            if ORIGINAL_ATTRIBUTES[name] is _INHERITED:  # e.g. gymnasium's get_body_com
                delattr(SawyerXYZEnv, name)
            else:
                setattr(SawyerXYZEnv, name, ORIGINAL_ATTRIBUTES[name])
    for name, module in list(sys.modules.items()):
        if name.startswith('metaworld.envs.') and getattr(module, 'Rotation', None) is ROTATION:
            module.Rotation = Rotation
        if name.startswith('metaworld.') and getattr(module, 'tolerance', None) is tolerance:
            module.tolerance = ORIGINALS['tolerance']
