"""Task distributions of the paper's environments (original ProMP envs), and their checks.

Pure numpy: every sampler takes the env's task generator, every check returns
the task in canonical form or raises a ValueError that says what is expected.
"""
from typing import Any, Dict, List, Sequence

from garage_promp.validation import is_complex

import numpy as np

CORNERS = np.array([[-2., -2.], [2., -2.], [-2., 2.], [2., 2.]])
"""Goals of the 2-D point envs (MetaPointEnvCorner / MetaPointEnvMomentum)."""


def _refuse_non_real(task: Any, name: str, expected: str) -> None:
    """Refuse a task value that is not real numbers, which numpy would turn into some:
    a complex number (its imaginary part dropped, with only a warning), text
    (``np.array(['2'], float)`` is 2.: strings are never read as numbers) or booleans
    (``True`` as 1.)."""
    try:
        values = np.asarray(task)  # (a list of numbers as one array)
    except (TypeError, ValueError):  # ragged or odd: the caller's own check names it
        values = None
    if _holds_bool_or_text(task) or (values is not None and values.dtype.kind in 'bUS'):
        raise ValueError(f'task {name} should be {expected}, got {task!r}: booleans and text '
                         'are not read as numbers')
    if values is not None and is_complex(values):
        raise ValueError(f'task {name} should be {expected}, got {task!r}: a complex number')


#: The most items :func:`_holds_bool_or_text` looks at (a goal has 2, a RandParams
#: entry is a typed array, not walked; a list that holds itself ends the walk too).
_WALK_LIMIT = 100_000

#: Text, as numpy reads it into numbers (``np.array([bytearray(b'2')], object)`` is 2.).
_TEXT = (str, bytes, bytearray)


def _holds_bool_or_text(value: Any) -> bool:
    """Whether ``value`` is, or a list, tuple or object array holds at any depth, a bool or
    text (``np.asarray([True, 1.5])`` is floats: the bool is gone before a dtype can show
    it; ``np.array(['2'], dtype=object)`` keeps its text, which ``astype(float)`` would
    read as 2.)."""
    stack, walked = [value], 0
    while stack and walked < _WALK_LIMIT:
        item = stack.pop()
        walked += 1
        if isinstance(item, (bool, np.bool_, *_TEXT)):
            return True
        if isinstance(item, np.ndarray):
            if item.dtype.kind in 'bUS':
                return True
            if item.dtype == object:
                stack.extend(item.flat)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def sample_signs(rng: np.random.Generator, n_tasks: int) -> List[float]:
    """d in {-1, +1}, uniform, i.i.d. (the fwd/back direction, the 1-D goal)."""
    return [float(d) for d in rng.choice((-1., 1.), size=n_tasks)]


def check_sign(task: Any, name: str) -> float:
    """Return ``task`` as the float -1. or 1.

    Raises:
        ValueError: ``'task {name} should be 1. or -1., got ...'``.

    """
    _refuse_non_real(task, name, '1. or -1.')
    value = np.asarray(task, dtype=object)
    if value.size == 1 and value.item() in (-1., 1.) and not isinstance(
            value.item(), (bool, np.bool_)):
        return float(value.item())
    raise ValueError(f'task {name} should be 1. or -1., got {task!r}')


def sample_unit_vectors(rng: np.random.Generator,
                        n_tasks: int) -> List[np.ndarray]:
    """Directions uniform on the unit circle: v / |v|, v ~ N(0, I_2)."""
    directions = rng.normal(size=(n_tasks, 2))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return list(directions)


def check_vector(task: Any, name: str, dim: int = 2) -> np.ndarray:
    """Return ``task`` as a finite float64 array of shape ``(dim, )``.

    Raises:
        ValueError: If the task has another shape or is not finite.

    """
    _refuse_non_real(task, name, f'a finite array of shape ({dim},)')
    try:
        vector = np.array(task, dtype=np.float64)
    except (TypeError, ValueError):
        vector = None
    if vector is None or vector.shape != (dim, ) or not np.isfinite(
            vector).all():
        raise ValueError(f'task {name} should be a finite array of shape '
                         f'({dim},), got {task!r}')
    return vector


def check_unit_vector(task: Any, name: str) -> np.ndarray:
    """Return ``task`` as a 2-D unit vector (norm 1 within 1e-6)."""
    vector = check_vector(task, name)
    if abs(np.linalg.norm(vector) - 1.) > 1e-6:
        raise ValueError(f'task {name} should have unit norm, got {task!r} '
                         f'with norm {np.linalg.norm(vector)}')
    return vector


def sample_disc_goals(rng: np.random.Generator, n_tasks: int,
                      radius: float) -> List[np.ndarray]:
    """Goals uniform in a disc: (r cos a, r sin a), a ~ U(0, 2pi), r = R sqrt(U)."""
    angle = rng.random(n_tasks) * 2 * np.pi
    r = radius * rng.random(n_tasks)**0.5
    return list(np.stack((r * np.cos(angle), r * np.sin(angle)), axis=-1))


def sample_corners(rng: np.random.Generator, n_tasks: int) -> List[np.ndarray]:
    """One of the four :data:`CORNERS`, uniform with replacement."""
    return [CORNERS[i].copy() for i in rng.integers(len(CORNERS), size=n_tasks)]


def check_corner(task: Any) -> np.ndarray:
    """Return ``task`` as one of the :data:`CORNERS`."""
    goal = check_vector(task, 'goal')
    if not (goal == CORNERS).all(axis=1).any():
        raise ValueError('task goal should be one of the corners '
                         f'{CORNERS.tolist()}, got {task!r}')
    return goal


# Spec §6, RandParams: multiplier base per parameter; exponent U(-3, 3).
RAND_PARAMS_BASES = {
    'body_mass': 1.5,
    'body_inertia': 1.5,
    'dof_damping': 1.3,
    'geom_friction': 1.5,
}
LOG_SCALE_LIMIT = 3.0


def sample_rand_params(rng: np.random.Generator, n_tasks: int,
                       init_params: Dict[str, np.ndarray]
                       ) -> List[Dict[str, np.ndarray]]:
    """Parameter sets: each element of each array x base**U(-3, 3).

    Args:
        rng (numpy.random.Generator): Task generator.
        n_tasks (int): Number of parameter sets.
        init_params (dict[str, numpy.ndarray]): The model's initial arrays.

    Returns:
        list[dict[str, numpy.ndarray]]: New arrays, same keys and shapes.

    """
    return [{
        key: init * RAND_PARAMS_BASES[key]**rng.uniform(
            -LOG_SCALE_LIMIT, LOG_SCALE_LIMIT, size=init.shape)
        for key, init in init_params.items()
    } for _ in range(n_tasks)]


def check_rand_params(task: Any, init_params: Dict[str, np.ndarray]
                      ) -> Dict[str, np.ndarray]:
    """Return a parameter set as a dict of fresh float64 arrays.

    Raises:
        ValueError: If the task is not a dict with exactly the keys of
            ``init_params``, or an array has the wrong shape, is not finite
            or is negative.

    """
    if not isinstance(task, dict) or set(task) != set(init_params):
        raise ValueError('task should be a dict with keys '
                         f'{sorted(init_params)}, got {_describe(task)}')
    checked = {}
    for key, init in init_params.items():
        given = task[key]
        if not (isinstance(given, np.ndarray) and given.dtype == np.float64):  # (a real dtype)
            _refuse_non_real(given, f'[{key!r}]',
                            f'a finite, non-negative array of shape {init.shape}')
        value = np.array(given, dtype=np.float64)
        if value.shape != init.shape:
            _refuse_rand_param(key, init, given)
        checked[key] = value
    # The values' checks over all arrays at once (a set_task per env and sampling round);
    # the culprit is looked for only where one fails.
    if not _finite_non_negative(np.concatenate([value.ravel() for value in checked.values()])):
        for key, value in checked.items():
            if not _finite_non_negative(value):
                _refuse_rand_param(key, init_params[key], task[key])
    for key in MUST_STAY_POSITIVE:
        if key in checked and ((checked[key] == 0) & (init_params[key] > 0)).any():
            raise ValueError(
                f'task[{key!r}] is 0 where the model\'s is positive (at '
                f'{np.argwhere((checked[key] == 0) & (init_params[key] > 0))[0].tolist()}): a '
                'body without mass or inertia cannot be simulated (its next step is not '
                'finite); sampled tasks scale each value by a positive factor')
    return checked


#: The parameters a body needs positive to move (damping and friction may be 0).
MUST_STAY_POSITIVE = ('body_mass', 'body_inertia')


def _finite_non_negative(values: np.ndarray) -> bool:
    return bool(np.isfinite(values).all() and not (values < 0).any())


def _refuse_rand_param(key: str, init: np.ndarray, given: Any):
    raise ValueError(f'task[{key!r}] should be a finite, non-negative '
                     f'array of shape {init.shape}, got {given!r}')


def flat_params(params: Dict[str, np.ndarray], keys: Sequence[str]
                ) -> np.ndarray:
    """Concatenate a parameter set into one vector, in ``keys`` order."""
    return np.concatenate([params[key].ravel() for key in keys])


def _describe(task: Any) -> str:
    if isinstance(task, dict):
        return f'a dict with keys {sorted(task)}'
    return repr(task)
