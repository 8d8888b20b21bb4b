"""Meta-World's ``step`` for a whole wave of envs at once (the lean sampler path).

:meth:`~garage_promp.envs.metaworld.MetaWorldEnv.batch_step` used to call each env's
``step`` (Meta-World's ``SawyerXYZEnv.step`` with :mod:`._metaworld_speedups`). On ML1
``reach-v3`` that Python (the mocap move, the observation, the reward, the info dict)
cost about 45 µs of a 140 µs step, as much as the rest of the sampler. :func:`step_batch`
computes the same step for all of a wave's envs with array operations, in the order
Meta-World's ``step`` does it:

1. ``set_xyz_action`` for every row (clip, scale, add to the mocap position, clip to
   the mocap bounds: elementwise, the same dtypes as row by row);
2. for every simulation, in one call into the compiled loop per class (``_cstep.c``,
   ``gp_step_mocap_batch``; from Python without it): the mocap position and
   orientation, the controls ``(a, -a)``, ``mj_step`` ``frame_skip`` times,
   ``mj_rnePostConstraint`` and the ``mj_forward`` Meta-World calls before reading the
   observation; then the numbers steps 3 and 4 read of it are copied out while its
   ``MjData`` is in the cache. Meta-World's ``_set_pos_site`` writes of the goal sites between the
   simulation and ``mj_forward`` are checked (its assertions, the site names) but not
   written: ``mj_forward`` recomputes every ``site_xpos`` from the model (``mj_kinematics``),
   so they never outlive the step;
3. the observation: hand, gripper opening (``np.linalg.norm`` as NumPy computes it for one
   vector: the stacked vector-vector ``matmul`` calls the same BLAS dot), the objects'
   positions and quaternions (gathered for the classes of :data:`KERNELS`, 47 of ML45's
   50; the others' own ``_get_pos_objects`` / ``_get_quat_objects``), the previous frame,
   the goal; clipped to the observation space; each env's ``_prev_obs``,
   ``_last_stable_obs`` and ``curr_path_length`` set as its ``step`` sets them;
4. the reward and info: for an env class with an array reward in :data:`KERNELS` (the
   ten ML10 training classes: ``reach``, ``push``, ``pick-place``, ``door-open``,
   ``drawer-close``, ``button-press-topdown``, ``peg-insert-side``, ``window-open``,
   ``sweep``, ``basketball``), for all its rows at once (the distances, ``tolerance`` and
   ``rect_prism_tolerance`` terms as arrays, the contact test of ``touching_main_object``
   in C, ``gp_pad_forces``, and the scalar steps whose types matter, such as
   ``hamacher_product``, NumPy's ``log`` of one ``float64`` and the reward's branches, row
   by row in Meta-World's own expressions); any other class's own ``evaluate_state`` row
   by row.

Every number is the one Meta-World's own ``step`` computes, bit for bit
(``tests/envs/test_metaworld_batch.py`` runs both on Meta-World's scripted policies and
random actions for every ML45 class, ML10's among them, and compares observations,
rewards, infos and the simulations' state). Where a
float operation's scalar form differs from NumPy's array form (``x ** 2`` of a ``float64``
scalar is C's ``pow``, NumPy's array square is ``x * x``), the kernels use the scalar form
element by element. A wave with anything this path does not reproduce (a class or env that
replaces the step, its simulation, the observation or the action; a model with another
number of controls or mocap bodies; an episode past its end; an unstable simulation;
action rows that do not match the envs, or an env listed twice) is left to the
env-by-env loop, which raises Meta-World's own errors; a class whose reward or objects
are patched keeps the wave but computes them with its own methods; so does, for its reward,
a class whose kernel would read an attribute that is not ``float64`` (Meta-World's
arithmetic on it would round otherwise), and every class while one of the ``reward_utils``
helpers a kernel computes itself (``tolerance``, ``rect_prism_tolerance``) is patched. An
error in a kernel (Meta-World's checks of bounds and margins, its assertions) is raised again by
the env's own ``evaluate_state``, from the env it is about.
"""
from __future__ import annotations

import functools
import inspect
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple
import weakref

from garage_promp.envs import _cstep
from garage_promp.envs import _metaworld_speedups as fast
from garage_promp.envs._mujoco import row_dots

import mujoco
import numpy as np


# ------------------------------------------------------------------ exact array forms
def row_norms(vectors: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(v)`` of each row ``v`` of a float64 array, bit for bit.

    NumPy's norm of a 1-D float array is ``sqrt(v.dot(v))``, and ``dot`` calls the BLAS
    ``ddot``, whose sum of products (fused or not) depends on the machine's BLAS. A
    stack of vector-vector products in ``matmul`` calls the same function per row.
    """
    return np.sqrt(row_dots(vectors, vectors))


def scalar_squares(values: np.ndarray) -> np.ndarray:
    """``x ** 2`` of each entry as a ``float64`` scalar computes it (C ``pow``; inf, not
    an error, past the largest float), which differs from NumPy's array square
    (``x * x``) in the last bit for some ``x``."""
    return np.array([x ** 2 for x in np.asarray(values, dtype=np.float64)], dtype=np.float64)


def quats_from_matrices(matrices: np.ndarray, lib: Any = None) -> np.ndarray:
    """:func:`~._metaworld_speedups.quat_from_matrix` (SciPy's ``as_quat``) of each row
    of an ``(n, 9)`` array: with the compiled library ``lib`` all rows in one call
    (``gp_quats``, the same float operations), rows that are not a proper rotation to
    SciPy's tolerance (and every row without ``lib``) by the row-by-row function."""
    m = np.asarray(matrices, dtype=np.float64).reshape(-1, 9)
    if lib is None:
        return np.array([fast.quat_from_matrix(row) for row in m]).reshape(-1, 4)
    quats, proper = _cstep.quats(lib, m)
    for row in np.flatnonzero(~proper):
        quats[row] = fast.quat_from_matrix(m[row])
    return quats


def long_tail(x: np.ndarray, value_at_margin: float) -> np.ndarray:
    """Meta-World's ``_sigmoids(x, value_at_margin, 'long_tail')`` of each ``float64``
    entry as for a scalar: ``1 / ((x * scale) ** 2 + 1)``, the square by ``pow``."""
    scale = np.sqrt(1 / value_at_margin - 1)
    return 1 / (scalar_squares(x * scale) + 1)


def tolerance_rows(x: np.ndarray, upper: float, margin: np.ndarray,
                   value_at_margin: float = 0.1, lower: float = 0.0,
                   sigmoid: str = 'long_tail') -> np.ndarray:
    """``tolerance(x, bounds=(lower, upper), margin=margin, sigmoid=sigmoid)`` of each row
    (:func:`~._metaworld_speedups.tolerance`, Meta-World's): 1 inside the bounds, else the
    sigmoid of the distance to the nearer bound over the margin (0 where the margin is 0):
    ``long_tail`` as arrays (:func:`long_tail`), any other sigmoid by Meta-World's own
    ``_sigmoids`` on each ``float64`` distance. A negative margin raises Meta-World's error
    (for the first such row)."""
    if lower > upper:
        raise ValueError('Lower bound must be <= upper bound.')
    negative = margin < 0
    if negative.any():
        raise ValueError('`margin` must be non-negative. Current value: '
                         f'{margin[np.flatnonzero(negative)[0]]}')
    inside = (lower <= x) & (x <= upper)
    out = np.where(inside, 1.0, 0.0)
    outside = ~inside & (margin != 0)
    if outside.any():
        xs = x[outside]
        distance = np.where(xs < lower, lower - xs, xs - upper) / margin[outside]
        if sigmoid == 'long_tail':
            out[outside] = long_tail(distance, value_at_margin)
        else:
            own = fast.ORIGINALS['_sigmoids']
            out[outside] = [own(d, value_at_margin, sigmoid) for d in distance]
    return out


class _OwnCode(Exception):
    """Raised by a kernel for a class's rows it does not reproduce (an attribute that is
    not ``float64``, with which Meta-World's own arithmetic would round otherwise): the
    class's own ``evaluate_state`` computes them, row by row."""


def _stacked(envs, name: str) -> np.ndarray:
    """Each env's attribute ``name`` (a ``float64`` array or number), one row each; else
    :class:`_OwnCode`."""
    values = [getattr(env, name) for env in envs]
    if not all(type(value) is float or (isinstance(value, (np.ndarray, np.float64))
                                        and value.dtype == np.float64) for value in values):
        raise _OwnCode(name)
    return np.array(values, dtype=np.float64)


def gripper_caging(envs, actions, obj, left_pad, right_pad, tcp, obj_radius: float,
                   pad_success_thresh: float, xz_thresh: float,
                   desired_gripper_effort: float = 1.0, high_density: bool = False) -> list:
    """``SawyerXYZEnv._gripper_caging_reward`` of every row (without ``medium_density``):
    the pads' and the tool centre's distances and their ``tolerance`` as arrays, then
    Meta-World's own scalar steps row by row (its ``hamacher_product``, the gripper
    effort from the row's action), so the values and their types are its own."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    obj_init = _stacked(envs, 'obj_init_pos')
    init_tcp = _stacked(envs, 'init_tcp')
    pad_y = np.stack((left_pad[:, 1], right_pad[:, 1]), axis=1)
    pad_to_obj = np.abs(pad_y - obj[:, 1:2])
    pad_to_obj_init = np.abs(pad_y - obj_init[:, 1:2])
    margin_lr = np.abs(pad_to_obj_init - pad_success_thresh)
    caging_lr = np.stack([tolerance_rows(pad_to_obj[:, i], pad_success_thresh,
                                         margin_lr[:, i], lower=obj_radius)
                          for i in range(2)], axis=1).tolist()
    xz = [0, 2]
    margin_xz = row_norms(obj_init[:, xz] - init_tcp[:, xz]) - xz_thresh
    caging_xz = tolerance_rows(row_norms(tcp[:, xz] - obj[:, xz]), xz_thresh,
                               margin_xz).tolist()
    out = []
    for (left, right), cage_xz, action in zip(caging_lr, caging_xz, actions):
        caging_y = hamacher_product(left, right)
        gripper_closed = (min(max(0, action[-1]), desired_gripper_effort)
                          / desired_gripper_effort)
        caging = hamacher_product(caging_y, float(cage_xz))
        gripping = gripper_closed if caging > 0.97 else 0.0
        caging_and_gripping = hamacher_product(caging, gripping)
        if high_density:
            caging_and_gripping = (caging_and_gripping + caging) / 2
        out.append(caging_and_gripping)
    return out


# ------------------------------------------------------------------ per-class kernels
class Kernel:
    """What :func:`step_batch` computes with arrays for one Meta-World env class.

    Attributes:
        positions: ``(field, kind, name)`` of each object's position in
            ``_get_pos_objects()``: ``field`` a 3-number array of
            :data:`_cstep.GATHER_FIELDS` (``'xpos'``, ``'site_xpos'``, ``'geom_xpos'``) and
            ``kind`` the model's ``'body'`` / ``'site'`` / ``'geom'``; a fourth entry, a
            3-tuple, is a constant the class adds to it (``get_body_com(...) + [0, 0, 0.193]``).
        rotations: the same for each object's orientation in ``_get_quat_objects()``: a
            ``'geom_xmat'`` / ``'xmat'`` / ``'site_xmat'`` (turned into SciPy's
            ``from_matrix(...).as_quat()``), an ``'xquat'``, or ``('const', None, q)`` for
            a class that returns the constant ``q`` (``np.zeros(4)``).
        parts: what ``reward`` reads of the simulation, gathered after the step (the same
            ``(field, kind, name)`` form).
        reward: ``reward(envs, obs, actions, parts, touching) -> (rewards, infos)`` with the
            v2 rewards: ``parts`` the gathered rows, ``touching()`` each env's
            ``touching_main_object``; ``infos`` key -> the rows' values (as Meta-World's
            ``evaluate_state`` gives them, so they stack to its dtypes). None where only
            the observation is computed with arrays.
        main_object: the geom the class's ``_get_id_main_object`` names (Meta-World's
            ``'objGeom'`` for the classes here), for ``touching``.
        methods: the class's own methods ``reward`` stands for besides
            :data:`_KERNEL_NAMES` (each must be Meta-World's for the kernel to be used).
    """

    def __init__(self, positions: Sequence[Tuple[str, str, str]],
                 rotations: Sequence[Tuple[str, str, str]],
                 parts: Sequence[Tuple[str, str, str]] = (), reward: Callable | None = None,
                 main_object: str = 'objGeom', methods: Sequence[str] = ()):
        if len(positions) != len(rotations):
            raise ValueError('one orientation per object position expected')
        self.positions, self.rotations = tuple(positions), tuple(rotations)
        self.parts, self.reward = tuple(parts), reward
        self.main_object, self.methods = main_object, tuple(methods)


_FINGERTIPS = (('site_xpos', 'site', 'rightEndEffector'), ('site_xpos', 'site', 'leftEndEffector'))
_PADS = (('xpos', 'body', 'leftpad'), ('xpos', 'body', 'rightpad'))


def _tcp(parts: np.ndarray) -> np.ndarray:
    """``tcp_center`` of each row of gathered ``parts`` that begin with :data:`_FINGERTIPS`:
    the right and left fingertips' midpoint, ``(right + left) / 2``."""
    return (parts[:, 0:3] + parts[:, 3:6]) / 2.0


def _reach_reward(envs, obs, actions, parts, touching):
    """``SawyerReachEnvV3.evaluate_state`` with the v2 reward, for every row: the distance
    of the tool centre (the fingertips' midpoint, ``tcp_center``) to the target, shaped by
    ``tolerance`` (bounds 0 to 0.05, margin the hand's initial distance to the target,
    long tail)."""
    del obs, actions, touching  # the v2 reach reward reads only the simulation and target
    targets = _stacked(envs, '_target_pos')
    hand_init = _stacked(envs, 'hand_init_pos')
    tcp = _tcp(parts)
    tcp_to_target = row_norms(tcp - targets)
    in_place = tolerance_rows(tcp_to_target, 0.05, row_norms(hand_init - targets))
    reward = 10 * in_place
    return reward, {
        'success': (tcp_to_target <= 0.05).astype(np.float64),
        'near_object': tcp_to_target,
        'grasp_success': np.ones(len(envs)),
        'grasp_reward': tcp_to_target,
        'in_place_reward': in_place,
        'obj_to_target': tcp_to_target,
        'unscaled_reward': reward,
    }


#: The keys of Meta-World's step infos, in its order.
_INFO_KEYS = ('success', 'near_object', 'grasp_success', 'grasp_reward', 'in_place_reward',
              'obj_to_target', 'unscaled_reward')


def _grasp_info(success, to_obj, touching, tcp_opened, obj_z, obj_init_z, grasped, place,
                to_target, reward) -> tuple:
    """The info of the grasping classes' ``evaluate_state`` (push, pick-place), in
    :data:`_INFO_KEYS` order, with Meta-World's expressions: ``grasp_success`` is
    ``touching_main_object and tcp_opened > 0 and obj[2] - 0.02 > obj_init_pos[2]``."""
    return (float(success), float(to_obj <= 0.03),
            float(bool(touching) and (tcp_opened > 0) and (obj_z - 0.02 > obj_init_z)),
            grasped, place, to_target, reward)


def _push_reward(envs, obs, actions, parts, touching):
    """``SawyerPushEnvV3.evaluate_state`` with the v2 reward, for every row: the distances
    as arrays, the caging reward (:func:`gripper_caging`, high density), then the reward's
    branches and the info row by row in Meta-World's own expressions."""
    radius = type(envs[0]).TARGET_RADIUS
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    targets = _stacked(envs, '_target_pos')
    obj_init = _stacked(envs, 'obj_init_pos')
    tcp_to_obj = row_norms(obj - tcp)
    target_to_obj = row_norms(obj - targets)
    in_place = tolerance_rows(target_to_obj, radius, row_norms(obj_init - targets))
    grasped = gripper_caging(envs, actions, obj, parts[:, 6:9], parts[:, 9:12], tcp,
                             obj_radius=0.015, pad_success_thresh=0.05, xz_thresh=0.005,
                             high_density=True)
    touching_now = touching()
    rewards, rows = [], []
    for n, (to_obj, to_target, place, object_grasped) in enumerate(zip(
            tcp_to_obj.tolist(), target_to_obj.tolist(), in_place.tolist(), grasped)):
        tcp_opened = obs[n, 3]
        reward = 2 * object_grasped
        if to_obj < 0.02 and tcp_opened > 0:
            reward += 1.0 + reward + 5.0 * place
        if to_target < radius:
            reward = 10.0
        rewards.append(reward)
        rows.append(_grasp_info(to_target <= radius, to_obj, touching_now[n], tcp_opened,
                                obs[n, 6], envs[n].obj_init_pos[2], object_grasped, place,
                                to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _xz(points: np.ndarray) -> np.ndarray:
    """``p + np.array([0.0, -p[1], 0.0])`` of each row ``p``, as Meta-World's caging
    rewards form a point's x-z projection (a sum of each coordinate and 0 or ``-y``)."""
    zeros = np.zeros(len(points))
    return points + np.stack((zeros, -points[:, 1], zeros), axis=1)


def _own_caging_terms(envs, obj: np.ndarray, left_pad: np.ndarray, right_pad: np.ndarray,
                      tcp: np.ndarray) -> Tuple[np.ndarray, ...]:
    """The array terms of the caging rewards pick-place and sweep write themselves (not the
    base class's), for every row: each pad's y offset from the object (left pad minus
    object, object minus right pad); its margin, how far the object's y is from the pad's
    start position (``init_left_pad`` / ``init_right_pad``, views of the simulation's body
    positions, read as the original reads them) less 0.05; and the tool centre's x-z
    caging (``tolerance`` to 0.005, the margin its start distance from the object's less
    0.005). Returns ``(to_left, to_right, left_margin, right_margin, x_z_caging)``."""
    init_left = _stacked(envs, 'init_left_pad')
    init_right = _stacked(envs, 'init_right_pad')
    to_left = left_pad[:, 1] - obj[:, 1]
    to_right = obj[:, 1] - right_pad[:, 1]
    left_margin = np.abs(np.abs(obj[:, 1] - init_left[:, 1]) - 0.05)
    right_margin = np.abs(np.abs(obj[:, 1] - init_right[:, 1]) - 0.05)
    x_z_margin = row_norms(_xz(_stacked(envs, 'obj_init_pos'))
                           - _xz(_stacked(envs, 'init_tcp'))) - 0.005
    x_z_caging = tolerance_rows(row_norms(_xz(tcp) - _xz(obj)), 0.005, x_z_margin)
    return to_left, to_right, left_margin, right_margin, x_z_caging


def _pick_place_reward(envs, obs, actions, parts, touching):
    """``SawyerPickPlaceEnvV3.evaluate_state`` with the v2 reward, for every row: its own
    caging reward (:func:`_own_caging_terms`, pads' bounds 0.015 to 0.05), the distances
    and ``tolerance`` terms as arrays; the products, the gripper effort and the reward's
    branches row by row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    targets = _stacked(envs, '_target_pos')
    obj_to_target = row_norms(obj - targets)
    tcp_to_obj = row_norms(obj - tcp)
    in_place = tolerance_rows(obj_to_target, 0.05,
                              row_norms(_stacked(envs, 'obj_init_pos') - targets))
    to_left, to_right, left_margin, right_margin, x_z_caging = _own_caging_terms(
        envs, obj, parts[:, 6:9], parts[:, 9:12], tcp)
    right_caging = tolerance_rows(to_right, 0.05, right_margin, lower=0.015)
    left_caging = tolerance_rows(to_left, 0.05, left_margin, lower=0.015)
    touching_now = touching()
    rewards, rows = [], []
    for n, (to_target, to_obj, place, left, right, cage_xz) in enumerate(zip(
            obj_to_target.tolist(), tcp_to_obj.tolist(), in_place.tolist(),
            left_caging.tolist(), right_caging.tolist(), x_z_caging.tolist())):
        y_caging = hamacher_product(left, right)
        gripper_closed = min(max(0, actions[n][-1]), 1)
        caging = hamacher_product(y_caging, cage_xz)
        gripping = gripper_closed if caging > 0.97 else 0.0
        object_grasped = (hamacher_product(caging, gripping) + caging) / 2
        reward = hamacher_product(object_grasped, place)
        tcp_opened = obs[n, 3]
        if _lifted(to_obj, 0.02, tcp_opened, obs[n, 6], envs[n].obj_init_pos[2]):
            reward += 1.0 + 5.0 * place
        if to_target < 0.05:
            reward = 10.0
        rewards.append(reward)
        rows.append(_grasp_info(to_target <= 0.07, to_obj, touching_now[n], tcp_opened,
                                obs[n, 6], envs[n].obj_init_pos[2], object_grasped, place,
                                to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def rect_prism_tolerance(curr: np.ndarray, zero: np.ndarray, one: np.ndarray) -> list:
    """Meta-World's ``reward_utils.rect_prism_tolerance(curr, zero, one)`` of each row, with
    its types: the float 1.0 outside the box of corners ``zero`` and ``one`` (NaN is
    outside), else (a ``float64``) the product of the three coordinates' fractions of the
    way from ``zero`` to ``one``, formed as the original forms them (``x * y * z``)."""
    within = np.where(one >= zero, (zero <= curr) & (curr <= one),
                      (one <= curr) & (curr <= zero)).all(axis=1)
    out: list = [1.0] * len(curr)
    if within.any():
        scales = (curr[within] - zero[within]) / (one[within] - zero[within])
        for n, value in zip(np.flatnonzero(within), scales[:, 0] * scales[:, 1] * scales[:, 2]):
            out[n] = value  # (a float64, as the original's)
    return out


def _sweep_caging(envs, obj, left_pad, right_pad, tcp, obj_radius: float) -> list:
    """``SawyerSweepEnvV3._gripper_caging_reward`` of every row (its own, not the base
    class's): :func:`_own_caging_terms`, with the pads' ``tolerance`` for caging (to 0.05)
    and for gripping (to the radius + 0.01) as arrays; the products and the branch row by
    row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    to_left, to_right, left_margin, right_margin, x_z_caging = _own_caging_terms(
        envs, obj, left_pad, right_pad, tcp)
    grip = obj_radius + 0.01
    right_caging = tolerance_rows(to_right, 0.05, right_margin, lower=obj_radius)
    left_caging = tolerance_rows(to_left, 0.05, left_margin, lower=obj_radius)
    right_gripping = tolerance_rows(to_right, grip, right_margin, lower=obj_radius)
    left_gripping = tolerance_rows(to_left, grip, left_margin, lower=obj_radius)
    out = []
    for right, left, right_grip, left_grip, cage_xz in zip(
            right_caging.tolist(), left_caging.tolist(), right_gripping.tolist(),
            left_gripping.tolist(), x_z_caging.tolist()):
        y_caging = hamacher_product(right, left)
        y_gripping = hamacher_product(right_grip, left_grip)
        caging = hamacher_product(y_caging, cage_xz)
        gripping = y_gripping if caging > 0.95 else 0.0
        out.append((caging + gripping) / 2)
    return out


def _sweep_reward(envs, obs, actions, parts, touching):
    """``SawyerSweepEnvV3.evaluate_state`` with the v2 reward, for every row: the distances
    and ``tolerance`` as arrays, its own caging reward (:func:`_sweep_caging`), the product,
    the success branch and the info row by row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del actions  # the sweep's caging reward does not use the gripper effort
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    targets = _stacked(envs, '_target_pos')
    obj_to_target = row_norms(obj - targets)
    tcp_to_obj = row_norms(obj - tcp)
    in_place = tolerance_rows(obj_to_target, 0.05,
                              row_norms(_stacked(envs, 'obj_init_pos') - targets))
    grasped = _sweep_caging(envs, obj, parts[:, 6:9], parts[:, 9:12], tcp,
                            type(envs[0]).OBJ_RADIUS)
    touching_now = touching()
    rewards, rows = [], []
    for n, (to_target, to_obj, place, object_grasped) in enumerate(zip(
            obj_to_target.tolist(), tcp_to_obj.tolist(), in_place.tolist(), grasped)):
        reward = (2 * object_grasped) + (6 * hamacher_product(object_grasped, place))
        if to_target < 0.05:
            reward = 10.0
        rewards.append(reward)
        rows.append((float(to_target <= 0.05), float(to_obj <= 0.03), object_grasped,
                     float(bool(touching_now[n]) and (obs[n, 3] > 0)), place, to_target,
                     reward))
    keys = ('success', 'near_object', 'grasp_reward', 'grasp_success', 'in_place_reward',
            'obj_to_target', 'unscaled_reward')
    return [float(r) for r in rewards], dict(zip(keys, map(list, zip(*rows))))


def _lifted(to_obj: float, within: float, tcp_opened: float, obj_z: float,
            obj_init_z: float) -> bool:
    """The grasp bonus's test of pick-place, peg-insert-side and basketball: the tool
    centre within ``within`` of the object, the gripper open, the object lifted 0.01 above
    its start."""
    return to_obj < within and tcp_opened > 0 and obj_z - 0.01 > obj_init_z


def _lifted_reward(object_grasped: float, place: float, lifted: bool,
                   succeeded: bool) -> Tuple[float, float]:
    """peg-insert-side's and basketball's reward of one row, and its grasp term: a lifted
    object counts as grasped (1), the reward is the grasp and the placing's
    ``hamacher_product``, plus ``1 + 5 * place`` when lifted, and 10 on success."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    if lifted:
        object_grasped = 1.0
    reward = hamacher_product(object_grasped, place)
    if lifted:
        reward += 1.0 + 5.0 * place  # (peg-insert-side writes 5: the same product)
    if succeeded:
        reward = 10.0
    return object_grasped, reward


def _peg_insert_side_reward(envs, obs, actions, parts, touching):
    """``SawyerPegInsertionSideEnvV3.evaluate_state`` with the v2 reward, for every row: the
    distances (the peg head's to the target scaled by (1, 2, 2)), ``tolerance`` and the two
    collision boxes' :func:`rect_prism_tolerance` as arrays, the caging reward
    (:func:`gripper_caging`, high density); the products, the grasp bonus and the success
    branch row by row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del touching  # the peg's grasp_success is geometric
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    head = parts[:, 12:15]
    targets = _stacked(envs, '_target_pos')
    scale = np.array([1.0, 2.0, 2.0])
    tcp_to_obj = row_norms(obj - tcp)
    obj_to_target = row_norms((head - targets) * scale)
    in_place = tolerance_rows(
        obj_to_target, type(envs[0]).TARGET_RADIUS,
        row_norms((_stacked(envs, 'peg_head_pos_init') - targets) * scale))
    box_1 = rect_prism_tolerance(head, zero=parts[:, 15:18], one=parts[:, 18:21])
    box_2 = rect_prism_tolerance(head, zero=parts[:, 21:24], one=parts[:, 24:27])
    grasped = gripper_caging(envs, actions, obj, parts[:, 6:9], parts[:, 9:12], tcp,
                             obj_radius=0.0075, pad_success_thresh=0.03, xz_thresh=0.005,
                             high_density=True)
    rewards, rows = [], []
    for n, (to_obj, to_target, place, first, second, object_grasped) in enumerate(zip(
            tcp_to_obj.tolist(), obj_to_target.tolist(), in_place.tolist(), box_1, box_2,
            grasped)):
        tcp_opened, obj_z, obj_init_z = obs[n, 3], obs[n, 6], envs[n].obj_init_pos[2]
        place = hamacher_product(place, hamacher_product(second, first))
        object_grasped, reward = _lifted_reward(
            object_grasped, place, _lifted(to_obj, 0.08, tcp_opened, obj_z, obj_init_z),
            to_target <= 0.07)
        rewards.append(reward)
        rows.append((float(to_target <= 0.07), float(to_obj <= 0.03),
                     float(_lifted(to_obj, 0.02, tcp_opened, obj_z, obj_init_z)),
                     object_grasped, place, to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _basketball_reward(envs, obs, actions, parts, touching):
    """``SawyerBasketballEnvV3.evaluate_state`` with the v2 reward, for every row: the ball's
    distance to the target raised to 0.3 (scaled by (1, 1, 2)), ``tolerance`` and the
    caging reward (:func:`gripper_caging`, high density) as arrays; the product, the grasp
    bonus and the success branch row by row in Meta-World's own expressions."""
    del touching  # the basketball's grasp_success is geometric
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    targets = _stacked(envs, '_target_pos')
    targets[:, 2] = 0.3
    scale = np.array([1.0, 1.0, 2.0])
    radius = type(envs[0]).TARGET_RADIUS
    target_to_obj = row_norms((obj - targets) * scale)
    in_place = tolerance_rows(
        target_to_obj, radius, row_norms((_stacked(envs, 'obj_init_pos') - targets) * scale))
    tcp_to_obj = row_norms(obj - tcp)
    grasped = gripper_caging(envs, actions, obj, parts[:, 6:9], parts[:, 9:12], tcp,
                             obj_radius=0.025, pad_success_thresh=0.06, xz_thresh=0.005,
                             high_density=True)
    rewards, rows = [], []
    for n, (to_target, place, to_obj, object_grasped) in enumerate(zip(
            target_to_obj.tolist(), in_place.tolist(), tcp_to_obj.tolist(), grasped)):
        tcp_opened, obj_z, obj_init_z = float(obs[n, 3]), obs[n, 6], envs[n].obj_init_pos[2]
        object_grasped, reward = _lifted_reward(
            object_grasped, place, _lifted(to_obj, 0.035, tcp_opened, obj_z, obj_init_z),
            to_target < radius)
        rewards.append(reward)
        rows.append((float(to_target <= radius), float(to_obj <= 0.05),
                     float((tcp_opened > 0) and (obj_z - 0.03 > obj_init_z)),
                     object_grasped, place, to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _door_open_reward(envs, obs, actions, parts, touching):
    """``SawyerDoorEnvV3.evaluate_state`` with the v2 reward, for every row: the hand's
    distances to the handle and the ``tolerance`` terms as arrays; the funnel's floor
    (NumPy's ``log`` of one ``float64``, as the original takes it), the grab effort (its
    ``_reward_grab_effort``), the products, the sum and the success override row by row in
    Meta-World's own expressions. ``parts`` is the door hinge's angle."""
    from metaworld.envs.sawyer_door_v3 import SawyerDoorEnvV3  # pylint: disable=import-outside-toplevel
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del touching  # the door's grasp_success is the grab effort
    theta = parts[:, 0]
    hand = obs[:, :3]
    door = obs[:, 4:7] + np.array([-0.05, 0, 0])
    threshold = 0.12
    radius = row_norms(hand[:, :2] - door[:, :2])
    floor = np.array([0.0 if r <= threshold else 0.04 * np.log(r - threshold) + 0.4
                      for r in radius])  # (numpy's float64 scalars, as the original's)
    above_floor = np.ones(len(envs))
    under = ~(hand[:, 2] >= floor)
    if under.any():
        above_floor[under] = tolerance_rows(floor[under] - hand[under, 2], 0.01,
                                            floor[under] / 2.0)
    in_place = tolerance_rows(row_norms(hand - door - np.array([0.05, 0.03, -0.01])),
                              threshold / 2.0, np.full(len(envs), 0.5))
    opened = tolerance_rows(np.pi / 2.0 + np.pi / 6 - (-theta), 0.5,
                            np.full(len(envs), np.pi / 3.0))
    rewards, rows = [], []
    for n, (angle, floor_term, place, door_term) in enumerate(zip(
            theta.tolist(), above_floor.tolist(), in_place.tolist(), opened.tolist())):
        grab = SawyerDoorEnvV3._reward_grab_effort(actions[n])  # pylint: disable=protected-access
        ready = hamacher_product(floor_term, place)
        door_opened = 0.2 * float(angle < -np.pi / 90.0) + 0.8 * door_term
        reward = sum((2.0 * hamacher_product(ready, grab), 8.0 * door_opened))
        success = abs(obs[n, 4] - envs[n]._target_pos[0]) <= 0.08  # pylint: disable=protected-access
        if success:
            reward = 10.0
        rewards.append(reward)
        rows.append((float(success), ready, grab >= 0.5, grab, door_opened, 0, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _drawer_close_reward(envs, obs, actions, parts, touching):
    """``SawyerDrawerCloseEnvV3.evaluate_state`` with the v2 reward, for every row: the
    distances and ``tolerance`` terms as arrays (the reach's Gaussian by Meta-World's own
    sigmoid, number by number); the gripper effort, the products and the success override
    row by row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del touching  # the drawer's grasp_success is always 1
    assert all(env.hand_init_pos is not None for env in envs), \
        '`reset_model()` must be called before `compute_reward()`.'
    radius = type(envs[0]).TARGET_RADIUS
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    targets = _stacked(envs, '_target_pos')
    obj_init = _stacked(envs, 'obj_init_pos')
    target_to_obj = row_norms(obj - targets)
    in_place = tolerance_rows(target_to_obj, radius,
                              np.abs(row_norms(obj_init - targets) - radius))
    tcp_to_obj = row_norms(obj - tcp)
    reach_radius = 0.005
    reach = tolerance_rows(
        tcp_to_obj, reach_radius,
        np.abs(row_norms(obj_init - _stacked(envs, 'init_tcp')) - reach_radius),
        sigmoid='gaussian')
    rewards, rows = [], []
    for n, (to_target, place, to_obj, reached) in enumerate(zip(
            target_to_obj, in_place.tolist(), tcp_to_obj.tolist(), reach.tolist())):
        gripper_closed = min(max(0, actions[n][-1]), 1)
        reached = hamacher_product(reached, gripper_closed)
        reward = hamacher_product(reached, place)
        if to_target <= radius + 0.015:
            reward = 1.0
        reward *= 10
        rewards.append(reward)
        rows.append((float(to_target <= radius + 0.015), float(to_obj <= 0.01), 1.0, reached,
                     place, to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _window_open_reward(envs, obs, actions, parts, touching):
    """``SawyerWindowOpenEnvV3.evaluate_state`` with the v2 reward, for every row: the
    handle's x distance to the target and the tool centre's distance to the handle (its
    site's position, not the observation's clipped copy, as the original reads it), the
    ``tolerance`` terms as arrays; the product row by row with Meta-World's own
    ``hamacher_product``."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del obs, actions, touching  # the window's reward reads the simulation and its target
    radius = type(envs[0]).TARGET_RADIUS
    tcp = _tcp(parts)
    obj = parts[:, 6:9]
    targets = _stacked(envs, '_target_pos')
    target_to_obj = row_norms((obj[:, 0] - targets[:, 0])[:, None])
    target_to_obj_init = row_norms((_stacked(envs, 'obj_init_pos')[:, 0]
                                    - targets[:, 0])[:, None])
    in_place = tolerance_rows(target_to_obj, radius, np.abs(target_to_obj_init - radius))
    handle_radius = 0.02
    tcp_to_obj = row_norms(obj - tcp)
    tcp_to_obj_init = row_norms(_stacked(envs, 'window_handle_pos_init')
                                - _stacked(envs, 'init_tcp'))
    reach = tolerance_rows(tcp_to_obj, handle_radius, np.abs(tcp_to_obj_init - handle_radius))
    rewards, rows = [], []
    for to_target, place, to_obj, reached in zip(
            target_to_obj.tolist(), in_place.tolist(), tcp_to_obj.tolist(), reach.tolist()):
        reward = 10 * hamacher_product(reached, place)
        rewards.append(reward)
        rows.append((float(to_target <= radius), float(to_obj <= 0.05), 1.0, reached, place,
                     to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


def _button_press_topdown_reward(envs, obs, actions, parts, touching):
    """``SawyerButtonPressTopdownEnvV3.evaluate_state`` with the v2 reward, for every row:
    the distances and ``tolerance`` terms as arrays; the gripper's closing, the product and
    the press bonus row by row in Meta-World's own expressions."""
    from metaworld.utils.reward_utils import hamacher_product  # pylint: disable=import-outside-toplevel
    del actions, touching  # the button's reward reads the observation and the simulation
    obj = obs[:, 4:7]
    tcp = _tcp(parts)
    tcp_to_obj = row_norms(obj - tcp)
    obj_to_target = np.abs(_stacked(envs, '_target_pos')[:, 2] - obj[:, 2])
    near_button = tolerance_rows(tcp_to_obj, 0.01, row_norms(obj - _stacked(envs, 'init_tcp')))
    pressed = tolerance_rows(obj_to_target, 0.005, _stacked(envs, '_obj_to_target_init'))
    rewards, rows = [], []
    for n, (to_obj, to_target, near, press) in enumerate(zip(
            tcp_to_obj.tolist(), obj_to_target, near_button.tolist(), pressed.tolist())):
        reward = 5 * hamacher_product(1 - obs[n, 3], near)
        if to_obj <= 0.03:
            reward += 5 * press
        rewards.append(reward)
        rows.append((float(to_target <= 0.024), float(to_obj <= 0.05), float(obs[n, 3] > 0),
                     near, press, to_target, reward))
    return [float(r) for r in rewards], dict(zip(_INFO_KEYS, map(list, zip(*rows))))


_ZEROS = ('const', None, (0., 0., 0., 0.))
#: Kernels by Meta-World env class (module, name): :func:`_plan` uses one only for
#: that very class (not a subclass or another class of the name), with
#: :mod:`._metaworld_speedups`' ``tcp_center`` in place.
KERNELS: Dict[Tuple[str, str], Kernel] = {
    ('metaworld.envs.sawyer_reach_v3', 'SawyerReachEnvV3'): Kernel(
        positions=(('xpos', 'body', 'obj'), ), rotations=(('geom_xmat', 'geom', 'objGeom'), ),
        parts=_FINGERTIPS, reward=_reach_reward),
    ('metaworld.envs.sawyer_push_v3', 'SawyerPushEnvV3'): Kernel(
        positions=(('xpos', 'body', 'obj'), ), rotations=(('geom_xmat', 'geom', 'objGeom'), ),
        parts=_FINGERTIPS + _PADS, reward=_push_reward),
    ('metaworld.envs.sawyer_pick_place_v3', 'SawyerPickPlaceEnvV3'): Kernel(
        positions=(('xpos', 'body', 'obj'), ), rotations=(('geom_xmat', 'geom', 'objGeom'), ),
        parts=_FINGERTIPS + _PADS, reward=_pick_place_reward),
    ('metaworld.envs.sawyer_sweep_v3', 'SawyerSweepEnvV3'): Kernel(
        positions=(('xpos', 'body', 'obj'), ), rotations=(('xquat', 'body', 'obj'), ),
        parts=_FINGERTIPS + _PADS, reward=_sweep_reward),
    ('metaworld.envs.sawyer_peg_insertion_side_v3', 'SawyerPegInsertionSideEnvV3'): Kernel(
        positions=(('site_xpos', 'site', 'pegGrasp'), ),
        rotations=(('site_xmat', 'site', 'pegGrasp'), ),
        parts=_FINGERTIPS + _PADS + tuple(('site_xpos', 'site', name) for name in (
            'pegHead', 'bottom_right_corner_collision_box_1', 'top_left_corner_collision_box_1',
            'bottom_right_corner_collision_box_2', 'top_left_corner_collision_box_2')),
        reward=_peg_insert_side_reward),
    ('metaworld.envs.sawyer_basketball_v3', 'SawyerBasketballEnvV3'): Kernel(
        positions=(('xpos', 'body', 'bsktball'), ), rotations=(('xquat', 'body', 'bsktball'), ),
        parts=_FINGERTIPS + _PADS, reward=_basketball_reward),
    ('metaworld.envs.sawyer_door_v3', 'SawyerDoorEnvV3'): Kernel(
        positions=(('geom_xpos', 'geom', 'handle'), ),
        rotations=(('geom_xmat', 'geom', 'handle'), ),
        parts=(('qpos', 'joint', 'doorjoint'), ), reward=_door_open_reward,
        methods=('_reward_grab_effort', '_reward_pos')),
    ('metaworld.envs.sawyer_drawer_close_v3', 'SawyerDrawerCloseEnvV3'): Kernel(
        positions=(('xpos', 'body', 'drawer_link', (0.0, -0.16, 0.05)), ),
        rotations=(_ZEROS, ),
        parts=_FINGERTIPS, reward=_drawer_close_reward),
    ('metaworld.envs.sawyer_window_open_v3', 'SawyerWindowOpenEnvV3'): Kernel(
        positions=(('site_xpos', 'site', 'handleOpenStart'), ),
        rotations=(_ZEROS, ),
        parts=_FINGERTIPS + (('site_xpos', 'site', 'handleOpenStart'), ),
        reward=_window_open_reward),
    ('metaworld.envs.sawyer_button_press_topdown_v3', 'SawyerButtonPressTopdownEnvV3'): Kernel(
        positions=(('xpos', 'body', 'button', (0.0, 0.0, 0.193)), ),
        rotations=(('xquat', 'body', 'button'), ),
        parts=_FINGERTIPS, reward=_button_press_topdown_reward),
}

#: Observation-only kernels (the reward stays the class's own ``evaluate_state``), as
#: ``(class, module, positions, rotations)``: every ML45 class whose ``_get_pos_objects`` /
#: ``_get_quat_objects`` read MuJoCo's arrays (plus a constant) or return a constant, as
#: Meta-World 3.1.1's env modules write them. ``dial-turn`` (an angle) and ``stick-push`` /
#: ``stick-pull`` keep their own methods.
_OBSERVED = (
    ('SawyerNutAssemblyEnvV3', 'sawyer_assembly_peg_v3',
     (('site_xpos', 'site', 'RoundNut-8'),),
     (('xquat', 'body', 'RoundNut'),)),
    ('SawyerBinPickingEnvV3', 'sawyer_bin_picking_v3',
     (('xpos', 'body', 'obj'),),
     (('xquat', 'body', 'obj'),)),
    ('SawyerBoxCloseEnvV3', 'sawyer_box_close_v3',
     (('xpos', 'body', 'top_link'),),
     (('xquat', 'body', 'top_link'),)),
    ('SawyerButtonPressTopdownWallEnvV3', 'sawyer_button_press_topdown_wall_v3',
     (('xpos', 'body', 'button', (0.0, 0.0, 0.193)),),
     (('xquat', 'body', 'button'),)),
    ('SawyerButtonPressEnvV3', 'sawyer_button_press_v3',
     (('xpos', 'body', 'button', (0.0, -0.193, 0.0)),),
     (('xquat', 'body', 'button'),)),
    ('SawyerButtonPressWallEnvV3', 'sawyer_button_press_wall_v3',
     (('xpos', 'body', 'button', (0.0, -0.193, 0.0)),),
     (('xquat', 'body', 'button'),)),
    ('SawyerCoffeeButtonEnvV3', 'sawyer_coffee_button_v3',
     (('site_xpos', 'site', 'buttonStart'),),
     (('const', None, (1.0, 0.0, 0.0, 0.0)),)),
    ('SawyerCoffeePullEnvV3', 'sawyer_coffee_pull_v3',
     (('xpos', 'body', 'obj'),),
     (('geom_xmat', 'geom', 'mug'),)),
    ('SawyerCoffeePushEnvV3', 'sawyer_coffee_push_v3',
     (('xpos', 'body', 'obj'),),
     (('geom_xmat', 'geom', 'mug'),)),
    ('SawyerNutDisassembleEnvV3', 'sawyer_disassemble_peg_v3',
     (('site_xpos', 'site', 'RoundNut-8'),),
     (('xquat', 'body', 'RoundNut'),)),
    ('SawyerDoorCloseEnvV3', 'sawyer_door_close_v3',
     (('geom_xpos', 'geom', 'handle'),),
     (('geom_xmat', 'geom', 'handle'),)),
    ('SawyerDoorLockEnvV3', 'sawyer_door_lock_v3',
     (('site_xpos', 'site', 'lockStartLock'),),
     (('xquat', 'body', 'door_link'),)),
    ('SawyerDoorUnlockEnvV3', 'sawyer_door_unlock_v3',
     (('site_xpos', 'site', 'lockStartUnlock'),),
     (('xquat', 'body', 'door_link'),)),
    ('SawyerHandInsertEnvV3', 'sawyer_hand_insert_v3',
     (('xpos', 'body', 'obj'),),
     (('xquat', 'body', 'obj'),)),
    ('SawyerDrawerOpenEnvV3', 'sawyer_drawer_open_v3',
     (('xpos', 'body', 'drawer_link', (0.0, -0.16, 0.0)),),
     (('xquat', 'body', 'drawer_link'),)),
    ('SawyerFaucetOpenEnvV3', 'sawyer_faucet_open_v3',
     (('site_xpos', 'site', 'handleStartOpen', (0.0, 0.0, -0.01)),),
     (('xquat', 'body', 'faucetBase'),)),
    ('SawyerFaucetCloseEnvV3', 'sawyer_faucet_close_v3',
     (('site_xpos', 'site', 'handleStartClose', (0.0, 0.0, -0.01)),),
     (('xquat', 'body', 'faucetBase'),)),
    ('SawyerHammerEnvV3', 'sawyer_hammer_v3',
     (('xpos', 'body', 'hammer'), ('xpos', 'body', 'nail_link')),
     (('xquat', 'body', 'hammer'), ('xquat', 'body', 'nail_link'))),
    ('SawyerHandlePressSideEnvV3', 'sawyer_handle_press_side_v3',
     (('site_xpos', 'site', 'handleStart'),),
     (_ZEROS,)),
    ('SawyerHandlePressEnvV3', 'sawyer_handle_press_v3',
     (('site_xpos', 'site', 'handleStart'),),
     (_ZEROS,)),
    ('SawyerHandlePullSideEnvV3', 'sawyer_handle_pull_side_v3',
     (('site_xpos', 'site', 'handleCenter'),),
     (_ZEROS,)),
    ('SawyerHandlePullEnvV3', 'sawyer_handle_pull_v3',
     (('site_xpos', 'site', 'handleRight'),),
     (_ZEROS,)),
    ('SawyerLeverPullEnvV3', 'sawyer_lever_pull_v3',
     (('site_xpos', 'site', 'leverStart'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerPickPlaceWallEnvV3', 'sawyer_pick_place_wall_v3',
     (('geom_xpos', 'geom', 'objGeom'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerPickOutOfHoleEnvV3', 'sawyer_pick_out_of_hole_v3',
     (('xpos', 'body', 'obj'),),
     (('xquat', 'body', 'obj'),)),
    ('SawyerPlateSlideEnvV3', 'sawyer_plate_slide_v3',
     (('geom_xpos', 'geom', 'puck'),),
     (('geom_xmat', 'geom', 'puck'),)),
    ('SawyerPlateSlideSideEnvV3', 'sawyer_plate_slide_side_v3',
     (('geom_xpos', 'geom', 'puck'),),
     (('geom_xmat', 'geom', 'puck'),)),
    ('SawyerPlateSlideBackEnvV3', 'sawyer_plate_slide_back_v3',
     (('geom_xpos', 'geom', 'puck'),),
     (('geom_xmat', 'geom', 'puck'),)),
    ('SawyerPlateSlideBackSideEnvV3', 'sawyer_plate_slide_back_side_v3',
     (('geom_xpos', 'geom', 'puck'),),
     (('geom_xmat', 'geom', 'puck'),)),
    ('SawyerPegUnplugSideEnvV3', 'sawyer_peg_unplug_side_v3',
     (('site_xpos', 'site', 'pegEnd'),),
     (('xquat', 'body', 'plug1'),)),
    ('SawyerSoccerEnvV3', 'sawyer_soccer_v3',
     (('xpos', 'body', 'soccer_ball'),),
     (('xmat', 'body', 'soccer_ball'),)),
    ('SawyerPushWallEnvV3', 'sawyer_push_wall_v3',
     (('geom_xpos', 'geom', 'objGeom'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerPushBackEnvV3', 'sawyer_push_back_v3',
     (('geom_xpos', 'geom', 'objGeom'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerReachWallEnvV3', 'sawyer_reach_wall_v3',
     (('xpos', 'body', 'obj'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerShelfPlaceEnvV3', 'sawyer_shelf_place_v3',
     (('xpos', 'body', 'obj'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerSweepIntoGoalEnvV3', 'sawyer_sweep_into_goal_v3',
     (('xpos', 'body', 'obj'),),
     (('geom_xmat', 'geom', 'objGeom'),)),
    ('SawyerWindowCloseEnvV3', 'sawyer_window_close_v3',
     (('site_xpos', 'site', 'handleCloseStart'),),
     (_ZEROS,)),
)
for _cls, _module, _positions, _rotations in _OBSERVED:
    KERNELS.setdefault((f'metaworld.envs.{_module}', _cls),
                       Kernel(positions=_positions, rotations=_rotations))

#: The hand's position and the two claws' (``get_endeff_pos`` and the gripper opening).
_HAND_PARTS = (('xpos', 'body', 'hand'), ('xpos', 'body', 'rightclaw'),
               ('xpos', 'body', 'leftclaw'))
_WIDTHS = {'xpos': 3, 'xmat': 9, 'xquat': 4, 'site_xpos': 3, 'site_xmat': 9, 'geom_xpos': 3,
           'geom_xmat': 9, 'mocap_pos': 3, 'mocap_quat': 4}


# ------------------------------------------------------------------ what a class allows
#: The methods whose code :func:`step_batch` stands for: an env whose class replaces one
#: (or that has one of its own, set on the instance) takes the env-by-env loop.
_REPLACED = (('step', fast.step), ('set_xyz_action', fast.set_xyz_action),
             ('_get_obs', fast._get_obs),  # pylint: disable=protected-access
             ('_get_curr_obs_combined_no_goal', fast.curr_obs_combined_no_goal),
             ('get_endeff_pos', fast.get_endeff_pos),
             ('_set_pos_site', fast._set_pos_site))  # pylint: disable=protected-access
#: What a kernel stands for besides :data:`_REPLACED`: each must be Meta-World's own (defined
#: in a ``metaworld`` module, or the package's exact replacement) for the kernel to be used.
_KERNEL_NAMES = ('evaluate_state', 'compute_reward', '_get_pos_objects', '_get_quat_objects',
                 '_gripper_caging_reward', '_get_id_main_object', 'touching_object',
                 'touching_main_object', 'tcp_center', 'get_body_com', '_get_site_pos')
_INSTANCE_NAMES = frozenset(
    tuple(name for name, _ in _REPLACED) + _KERNEL_NAMES
    + ('do_simulation', '_step_mujoco_simulation', '_get_pos_goal', '_target_site_config',
       'TARGET_RADIUS', 'OBJ_RADIUS')
    + tuple(name for kernel in KERNELS.values() for name in kernel.methods))


class _Plan:
    """Per env class: its kernel, whether its goal is ``_target_pos``, and whether its
    target sites are ``SawyerXYZEnv``'s (the goal site at ``_target_pos``)."""

    def __init__(self, kernel: Kernel | None, goal_is_target: bool, default_sites: bool):
        self.kernel, self.goal_is_target = kernel, goal_is_target
        self.default_sites = default_sites


_PLANS: Dict[type, _Plan] = {}


def _class_ok(cls) -> bool:
    """Whether ``cls`` steps with the code :func:`step_batch` reproduces (checked at every
    call: :func:`~._metaworld_speedups.uninstall` puts Meta-World's own code back)."""
    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv  # pylint: disable=import-outside-toplevel
    return (all(getattr(cls, name, None) is code for name, code in _REPLACED)
            and cls.do_simulation is MujocoEnv.do_simulation
            and cls._step_mujoco_simulation is MujocoEnv._step_mujoco_simulation)  # pylint: disable=protected-access


def _meta_worlds_own(cls, name: str) -> bool:
    """Whether ``cls``'s attribute ``name`` is Meta-World's code (or the package's exact
    replacement of it), not a user's: a function or property of a ``metaworld`` module."""
    attribute = inspect.getattr_static(cls, name, None)
    if isinstance(attribute, property):
        attribute = attribute.fget
    if getattr(attribute, 'fast', False):
        return True
    module = getattr(attribute, '__module__', None) or ''
    return module == 'metaworld' or module.startswith('metaworld.')


def _reward_helpers_own() -> bool:
    """Whether the helpers of ``metaworld.utils.reward_utils`` that the kernels compute
    themselves (``tolerance``, its ``_sigmoids``, ``rect_prism_tolerance``) are Meta-World's
    own or the package's exact replacement: a patched one makes every class compute its
    reward with its own code (which calls the patch; the observations, which do not use
    them, stay gathered). The kernels call the module's ``hamacher_product`` themselves."""
    from metaworld.utils import reward_utils  # pylint: disable=import-outside-toplevel
    return all(getattr(helper, 'fast', False)
               or getattr(helper, '__module__', None) == 'metaworld.utils.reward_utils'
               for helper in (reward_utils.tolerance, reward_utils._sigmoids,  # pylint: disable=protected-access
                              reward_utils.rect_prism_tolerance))


def _plan(cls) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
        kernel = KERNELS.get((cls.__module__, cls.__name__))
        module = sys.modules.get(cls.__module__)
        if getattr(module, cls.__name__, None) is not cls:
            kernel = None  # another class of that name: not Meta-World's
        plan = _PLANS[cls] = _Plan(
            kernel, cls._get_pos_goal is SawyerXYZEnv._get_pos_goal,  # pylint: disable=protected-access
            cls._target_site_config is SawyerXYZEnv._target_site_config)  # pylint: disable=protected-access
    if plan.kernel is not None and not (cls.tcp_center is fast.tcp_center and all(
            _meta_worlds_own(cls, name) for name in _KERNEL_NAMES + plan.kernel.methods)):
        return _Plan(None, plan.goal_is_target, plan.default_sites)
    return plan


# ------------------------------------------------------------------ the step
#: Per env: the ``(model, data)`` whose static checks passed (controls, mocap bodies,
#: frame skip, action scale, the default goal site), so later steps check identities only.
_CHECKED: weakref.WeakKeyDictionary[Any, Tuple[Any, Any]] = weakref.WeakKeyDictionary()


def _static_ok(env, plan: _Plan) -> bool:
    model, data = env.model, env.data
    checked = _CHECKED.get(env)
    if checked is not None and checked[0] is model and checked[1] is data:
        return True
    ok = (model.nu == 2 and model.nmocap == 1 and type(env.frame_skip) is int
          and type(env.action_scale) is float)
    if ok and plan.default_sites:
        try:
            fast.site_id(env, 'goal')
        except KeyError:
            ok = False
    if ok:
        _CHECKED[env] = (model, data)
    return ok


def _ready(env, plan: _Plan, actions_width: int) -> bool:
    """Whether this env's step now is one :func:`step_batch` reproduces (else the
    env-by-env loop takes the wave, and raises Meta-World's errors)."""
    if not vars(env).keys().isdisjoint(_INSTANCE_NAMES):
        return False
    target = env._target_pos  # pylint: disable=protected-access
    if not (actions_width == 4 and env.curr_path_length < env.max_path_length
            and not env._did_see_sim_exception  # pylint: disable=protected-access
            and env._set_task_called  # pylint: disable=protected-access
            and type(target) is np.ndarray and target.shape == (3, )
            and _static_ok(env, plan)):
        return False
    if plan.default_sites:  # [('goal', _target_pos)]: checked above
        return True
    try:  # what Meta-World's _set_pos_site would check of each target site
        for name, pos in env._target_site_config:  # pylint: disable=protected-access
            if not (isinstance(pos, np.ndarray) and pos.ndim == 1 and len(pos) >= 3):
                return False
            fast.site_id(env, name)
    except Exception:  # pylint: disable=broad-except
        return False
    return True


#: Gather specs per model and parts (ids looked up once per model).
_SPECS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def _spec(env, parts) -> Tuple[np.ndarray, int]:
    """The gather spec of ``(field, kind, name)`` parts for ``env``'s model (``kind``
    None: ``name`` is the index)."""
    specs = _SPECS.get(env.model)
    if specs is None:
        specs = _SPECS[env.model] = {}
    found = specs.get(parts)
    if found is None:
        fields, starts, counts = [], [], []
        for field, kind, name in parts:
            index = name if kind is None else fast._model_id(env.model, kind, name)  # pylint: disable=protected-access
            fields.append(_cstep.FIELD_CODES[field])
            if kind == 'joint':  # a hinge or slide joint's coordinate in qpos
                starts.append(int(env.model.jnt_qposadr[index]))
                counts.append(1)
                continue
            starts.append(index * _WIDTHS[field])
            counts.append(_WIDTHS[field])
        found = specs[parts] = (np.array([fields, starts, counts], dtype=np.int32), sum(counts))
    return found


def _gather(lib, envs, ptrs, parts, read: Dict[Any, np.ndarray] | None = None) -> np.ndarray:
    """``(n, width)`` rows of the ``parts`` of every env's data (one model layout: the
    ids are looked up in the first env's model; :func:`step_batch` groups by class); the
    rows ``read`` holds for ``parts`` where it has them (read next to each step)."""
    if read is not None and parts in read:
        return read[parts]
    spec, width = _spec(envs[0], parts)
    return _cstep.gather(lib, ptrs, spec, width,
                         None if lib is not None else [env.data for env in envs])


def _parts_after(plan: _Plan) -> Tuple[Tuple[Any, ...], ...]:
    """The parts a class's rows read of the simulation after the step (step 3's hand and
    objects, their rotations, step 4's kernel parts): each a :func:`_gather` argument."""
    kernel = plan.kernel
    if kernel is None:
        return ()
    parts = [_HAND_PARTS + tuple(p[:3] for p in kernel.positions),
             tuple(r for r in kernel.rotations if r[0] != 'const')]
    if kernel.reward is not None:
        parts.append(kernel.parts)
    return tuple(part for part in parts if part)


def _simulate(lib, envs, models, datas, addresses, mocap, actions, groups, plans):
    """Step 2 of the module docstring for every env (row ``i`` of ``mocap`` and
    ``actions``).

    Compiled, each class's rows are stepped in one call that also copies out, right after
    each simulation's step (while its ``MjData`` is in the cache), the parts its class
    reads afterwards (:func:`_parts_after`); returns them, class -> parts -> rows (for
    :func:`_gather`). A MuJoCo error carries ``lean_index``, the row of the env it is
    about; the classes' rows before it have been stepped.
    """
    grip = actions[:, 3]
    ctrl = np.empty((len(envs), 2))
    ctrl[:, 0] = grip  # the values data.ctrl[:] = [grip, -grip] stores
    ctrl[:, 1] = -grip
    quat = fast._MOCAP_QUAT.astype(np.float64)  # pylint: disable=protected-access
    frame_skip = envs[0].frame_skip
    read: Dict[type, Dict[Any, np.ndarray]] = {}
    if lib is not None:
        for cls, members in groups.items():
            parts = _parts_after(plans[cls])
            try:
                spec, _ = _spec(envs[members[0]], sum(parts, ())) if parts else (None, 0)
            except Exception:  # pylint: disable=broad-except
                spec = None  # (a name the model lacks: gathered later, which raises)
            try:
                rows = _cstep.step_mocap_batch(
                    lib, [models[n] for n in members], [datas[n] for n in members],
                    mocap[members], quat, ctrl[members], frame_skip, True, True,
                    (addresses[0][members], addresses[1][members]), after=spec)
            except mujoco.FatalError as error:
                error.lean_index = members[error.lean_index]
                raise
            if rows is not None:
                read[cls], at = {}, 0
                for part in parts:
                    width = _spec(envs[members[0]], part)[1]
                    read[cls][part] = np.ascontiguousarray(rows[:, at:at + width])
                    at += width
        return read
    for n, (model, data) in enumerate(zip(models, datas)):
        try:
            data.mocap_pos = mocap[n:n + 1]
            data.mocap_quat = quat
            data.ctrl[0], data.ctrl[1] = ctrl[n]
            mujoco.mj_step(model, data, nstep=frame_skip)
            mujoco.mj_rnePostConstraint(model, data)
            mujoco.mj_forward(model, data)
        except Exception as error:
            error.lean_index = n
            raise
    return read


def step_batch(envs: Sequence[Any], actions: np.ndarray):
    """Meta-World's ``step`` of every env (``SawyerXYZEnv``) with its row of ``actions``.

    Returns:
        tuple or None: ``(observations, rewards, truncated, infos)`` as the envs' own
        ``step`` gives them (float64 ``(n, 39)`` observations, float64 rewards, bool
        truncations), ``infos`` either key -> ``(n,)`` arrays (a wave of one class with a
        kernel) or one dict per env; or None where this path does not reproduce the
        step (see the module docstring), and then nothing has been changed.

    Errors: Meta-World's error from an env's reward is raised from that env (a kernel's
    rows are evaluated again by the env's own ``evaluate_state`` to find it) with
    ``lean_index``, its row, after every env has been stepped (the env-by-env loop
    stops at it). A MuJoCo error in the compiled loop carries ``lean_index`` too; the
    simulations stepped before it (its class's rows before it, and the classes' before
    its class) have been stepped, their envs' Python state (step count, previous frame)
    not. Either ends the sampling run.
    """
    actions = np.asarray(actions)
    if (actions.ndim != 2 or not len(envs) or len(actions) != len(envs)
            or len({id(env) for env in envs}) != len(envs)):
        return None  # the env-by-env loop does what it does with these
    classes = {type(env) for env in envs}
    from metaworld.sawyer_xyz_env import SawyerXYZEnv  # pylint: disable=import-outside-toplevel
    if not all(issubclass(cls, SawyerXYZEnv) and _class_ok(cls) for cls in classes):
        return None
    plans = {cls: _plan(cls) for cls in classes}
    width = actions.shape[1]
    if not all(_ready(env, plans[type(env)], width) for env in envs):
        return None
    first = envs[0]
    if any(env.frame_skip != first.frame_skip or env.action_scale != first.action_scale
           or env._obs_obj_max_len != first._obs_obj_max_len  # pylint: disable=protected-access
           for env in envs):
        return None
    lib = _cstep.library()
    models, datas = [env.model for env in envs], [env.data for env in envs]
    addresses = _cstep.pointers(models, datas) if lib is not None else (None, None)
    ptrs = addresses[1]
    # 1. set_xyz_action: the row-by-row operations on all rows.
    mocap_low = np.array([env.mocap_low for env in envs])
    mocap_high = np.array([env.mocap_high for env in envs])
    mocap_now = _gather(lib, envs, ptrs, (('mocap_pos', None, 0), ))
    pos_delta = fast._clip(actions[:, :3], -1, 1) * first.action_scale  # pylint: disable=protected-access
    mocap = fast._clip(mocap_now + pos_delta, mocap_low, mocap_high)  # pylint: disable=protected-access
    groups: Dict[type, List[int]] = {}
    for n, env in enumerate(envs):
        groups.setdefault(type(env), []).append(n)
    # 2. the simulations.
    read = _simulate(lib, envs, models, datas, addresses, mocap, actions, groups, plans)
    for env in envs:
        env.curr_path_length += 1
    # 3. the observation (the ids of bodies, sites and geoms looked up per class: one XML).
    curr = np.zeros((len(envs), 4 + first._obs_obj_max_len))  # pylint: disable=protected-access
    for cls, members in groups.items():
        kernel = plans[cls].kernel
        group = [envs[n] for n in members]
        group_ptrs = None if ptrs is None else ptrs[members]
        if kernel is None:
            for n, env in zip(members, group):
                curr[n] = env._get_curr_obs_combined_no_goal()  # pylint: disable=protected-access
            continue
        parts = _gather(lib, group, group_ptrs,
                        _HAND_PARTS + tuple(p[:3] for p in kernel.positions), read.get(cls))
        rows = curr[members]
        rows[:, :3] = parts[:, :3]
        rows[:, 3] = fast._clip(row_norms(parts[:, 3:6] - parts[:, 6:9]) / 0.1, 0.0, 1.0)  # pylint: disable=protected-access
        gathered = tuple(r for r in kernel.rotations if r[0] != 'const')
        rotations = _gather(lib, group, group_ptrs, gathered, read.get(cls)) if gathered else None
        at_p, at_r, column = 9, 0, 4
        for position, (field, _, name) in zip(kernel.positions, kernel.rotations):
            rows[:, column:column + 3] = parts[:, at_p:at_p + 3]
            if len(position) == 4:  # the class's constant offset, added as it adds it
                rows[:, column:column + 3] += np.array(position[3], dtype=np.float64)
            if field == 'const':
                rows[:, column + 3:column + 7] = np.array(name, dtype=np.float64)
            else:
                width = _WIDTHS[field]
                rotation = rotations[:, at_r:at_r + width]
                rows[:, column + 3:column + 7] = (quats_from_matrices(rotation, lib)
                                                  if width == 9 else rotation)
                at_r += width
            at_p, column = at_p + 3, column + 7
        curr[members] = rows
    goals = np.zeros((len(envs), 3))
    for n, env in enumerate(envs):
        if not env._partially_observable:  # pylint: disable=protected-access
            goals[n] = (env._target_pos if plans[type(env)].goal_is_target  # pylint: disable=protected-access
                        else env._get_pos_goal())  # pylint: disable=protected-access
    prev = np.array([env._prev_obs for env in envs])  # pylint: disable=protected-access
    obs = np.concatenate((curr, prev, goals), axis=1)
    low = np.array([env.sawyer_observation_space.low for env in envs])
    high = np.array([env.sawyer_observation_space.high for env in envs])
    obs = fast._clip(obs, low, high, dtype=np.float64)  # pylint: disable=protected-access
    for n, env in enumerate(envs):
        env._prev_obs = curr[n]  # pylint: disable=protected-access
        env._last_stable_obs = obs[n]  # pylint: disable=protected-access
    truncated = np.array([env.curr_path_length == env.max_path_length for env in envs])
    # 4. the reward and the info.
    rewards, infos = _evaluate(lib, envs, plans, groups, ptrs, obs, actions, read)
    return obs.copy(), rewards, truncated, infos  # (the envs keep views of obs)


def _touching(lib, group, ptrs, main_object: str):
    """``touching_main_object`` of every env of one class, as a bool array;
    ``main_object`` is the geom its ``_get_id_main_object`` names (the kernel's class)."""
    env = group[0]
    if lib is not None and type(env).touching_object is fast.touching_object:
        objects = np.full(len(group), fast._model_id(env.model, 'geom', main_object))  # pylint: disable=protected-access
        forces = _cstep.pad_forces(lib, ptrs, objects,
                                   fast._model_id(env.model, 'geom', 'leftpad_geom'),  # pylint: disable=protected-access
                                   fast._model_id(env.model, 'geom', 'rightpad_geom'))  # pylint: disable=protected-access
        if forces is not None:
            return (0 < forces[:, 0]) & (0 < forces[:, 1])
    return np.array([bool(env.touching_main_object) for env in group])


def _evaluate(lib, envs, plans, groups, ptrs, obs, actions, read):
    """Rewards and infos: a kernel's for its class's rows, else ``evaluate_state``; the
    parts ``read`` next to each step (:func:`_simulate`) where it has them."""
    rewards = np.empty(len(envs))
    infos: List[Any] = [None] * len(envs)
    for cls, members in groups.items():
        kernel = plans[cls].kernel
        group = [envs[n] for n in members]
        if (kernel is None or kernel.reward is None or not _reward_helpers_own()
                or any(env.reward_function_version != 'v2' for env in group)):
            for n, env in zip(members, group):
                reward, infos[n] = _evaluate_one(env, obs, actions, n)
                rewards[n] = float(reward)
            continue
        group_ptrs = None if ptrs is None else ptrs[members]
        parts = _gather(lib, group, group_ptrs, kernel.parts, read.get(cls))
        try:
            reward, info = kernel.reward(group, obs[members], actions[members], parts,
                                         functools.partial(_touching, lib, group, group_ptrs,
                                                           kernel.main_object))
        except _OwnCode:
            for n, env in zip(members, group):
                reward, infos[n] = _evaluate_one(env, obs, actions, n)
                rewards[n] = float(reward)
            continue
        except Exception:
            # Meta-World's own error, from the env it is about (the sampler names it).
            for n, env in zip(members, group):
                _evaluate_one(env, obs, actions, n)
            raise
        if len(groups) == 1:
            return np.asarray(reward, dtype=np.float64), {
                key: np.asarray(values) for key, values in info.items()}
        rewards[members] = reward
        info = {key: values.tolist() if isinstance(values, np.ndarray) else values
                for key, values in info.items()}  # Python floats, as Meta-World's
        for row, n in enumerate(members):
            infos[n] = {key: values[row] for key, values in info.items()}
    return rewards, infos


def _evaluate_one(env, obs, actions, n):
    """``env.evaluate_state`` of row ``n``; an error carries ``lean_index`` ``n``."""
    try:
        return env.evaluate_state(obs[n], actions[n])
    except Exception as error:
        error.lean_index = n
        raise
