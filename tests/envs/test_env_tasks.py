"""Task distributions and task checks of the paper's envs (original ProMP envs)."""
import garage_promp  # noqa: F401
from garage_promp.envs import _tasks

import numpy as np
import pytest

N = 20000


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_signs_are_uniform_on_plus_minus_one(rng):
    signs = np.array(_tasks.sample_signs(rng, N))
    assert set(np.unique(signs)) == {-1., 1.}
    assert abs(signs.mean()) < 0.05  # SE of the mean: 1/sqrt(N) = 0.007


def test_unit_vectors_are_uniform_on_the_circle(rng):
    directions = np.array(_tasks.sample_unit_vectors(rng, N))
    assert directions.shape == (N, 2)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1.)
    angle = np.arctan2(directions[:, 1], directions[:, 0])
    counts, _ = np.histogram(angle, bins=8, range=(-np.pi, np.pi))
    # Uniform: each octant holds N/8 = 2500 (SE about 47).
    np.testing.assert_allclose(counts, N / 8, atol=250)


def test_disc_goals_are_uniform_in_the_radius_3_disc(rng):
    goals = np.array(_tasks.sample_disc_goals(rng, N, 3.))
    r2 = np.square(goals).sum(axis=1)
    assert r2.max() <= 9.
    # r = 3 sqrt(U) => r^2 = 9 U: mean 4.5, SE 9 / sqrt(12 N) = 0.018.
    assert r2.mean() == pytest.approx(4.5, abs=0.1)
    # Uniform in area: a quarter of the goals lie within radius 1.5.
    assert np.mean(r2 < 1.5**2) == pytest.approx(0.25, abs=0.02)
    np.testing.assert_allclose(goals.mean(axis=0), 0., atol=0.08)


def test_corners_are_uniform(rng):
    goals = np.array(_tasks.sample_corners(rng, N))
    for corner in _tasks.CORNERS:
        share = np.mean((goals == corner).all(axis=1))
        assert share == pytest.approx(0.25, abs=0.02)


def test_rand_params_multipliers_are_log_uniform_within_bounds(rng):
    # With initial values of one, a task *is* its multipliers.
    init = {
        'body_mass': np.ones(5),
        'body_inertia': np.ones((5, 3)),
        'dof_damping': np.ones(6),
        'geom_friction': np.ones((5, 3)),
    }
    tasks = _tasks.sample_rand_params(rng, 2000, init)
    for key, base in (('body_mass', 1.5), ('body_inertia', 1.5),
                      ('dof_damping', 1.3), ('geom_friction', 1.5)):
        mult = np.stack([task[key] for task in tasks])
        assert mult.shape == (2000, ) + init[key].shape
        exponent = np.log(mult) / np.log(base)
        assert exponent.min() >= -3. and exponent.max() <= 3.
        # U(-3, 3): mean 0, variance 36 / 12 = 3; elementwise independent.
        assert exponent.mean() == pytest.approx(0., abs=0.1)
        assert exponent.var() == pytest.approx(3., abs=0.15)
        assert exponent.min() < -2.9 and exponent.max() > 2.9


def test_rand_params_scale_the_initial_values(rng):
    init = {key: np.full(3, 2.) for key in _tasks.RAND_PARAMS_BASES}
    init['body_mass'] = np.array([0., 2., 4.])
    task = _tasks.sample_rand_params(rng, 1, init)[0]
    assert task['body_mass'][0] == 0.  # the world body has no mass
    ratio = task['body_mass'][2] / 4.
    assert 1.5**-3 <= ratio <= 1.5**3


@pytest.mark.parametrize('task', [1., -1, np.float64(1.), [-1.], np.array([1.])])
def test_check_sign_accepts(task):
    assert _tasks.check_sign(task, 'direction') in (-1., 1.)


@pytest.mark.parametrize('task', [0., 0.5, 2, True, 'a', [1., 1.], None,
                                  np.nan, np.bool_(True), [True], np.array(True),
                                  np.array([True], dtype=object), '1',
                                  np.array(['-1'], dtype=object),
                                  [[[np.array([True], dtype=object)]]]])
def test_check_sign_rejects(task):
    with pytest.raises(ValueError,
                       match=r'task direction should be 1\. or -1\.'):
        _tasks.check_sign(task, 'direction')


@pytest.mark.parametrize('task,match', [
    ([1., 1.], 'unit norm'),
    ([0.6, 0.8, 0.], r'shape \(2,\)'),
    ([np.nan, 1.], 'finite'),
    ('north', 'finite array'),
])
def test_check_unit_vector_rejects(task, match):
    with pytest.raises(ValueError, match=match):
        _tasks.check_unit_vector(task, 'direction')


def test_check_corner():
    np.testing.assert_array_equal(_tasks.check_corner((-2, 2)), [-2., 2.])
    with pytest.raises(ValueError, match='one of the corners'):
        _tasks.check_corner((1., 1.))


@pytest.mark.parametrize('change,match', [
    (lambda t: t.pop('dof_damping'), 'keys'),
    (lambda t: t.update(extra=np.ones(1)), 'keys'),
    (lambda t: t.update(body_mass=np.ones(4)), r"task\['body_mass'\]"),
    (lambda t: t.update(geom_friction=-np.ones(3)),
     r"task\['geom_friction'\] should be a finite, non-negative"),
    (lambda t: t.update(dof_damping=np.array([1., np.inf, 1.])),
     r"task\['dof_damping'\] should be a finite"),
    (lambda t: t.update(body_inertia=np.array([1., 1., np.nan])),
     r"task\['body_inertia'\] .* got array\(\[ 1.,  1., nan\]\)"),
    (lambda t: t.update(body_inertia=[1, 2, -3]), r"task\['body_inertia'\] .* got \[1, 2, -3\]"),
    (lambda t: t.update(body_mass=np.array([1, 1, 1j])), r"task \['body_mass'\] .* complex"),
    (lambda t: t.update(body_mass=np.ones(3).astype(str)), r"task \['body_mass'\] .* text"),
    (lambda t: t.update(dof_damping=np.ones(3, dtype=bool)), r"task \['dof_damping'\] .* booleans"),
    (lambda t: t.update(geom_friction=[1., True, 1.]), r"task \['geom_friction'\] .* booleans"),
    # A body whose mass or inertia the model gives > 0 cannot be simulated at 0.
    (lambda t: t.update(body_mass=np.array([1., 0., 1.])),
     r"task\['body_mass'\] is 0 where the model's is positive \(at \[1\]\)"),
    (lambda t: t.update(body_inertia=np.zeros(3)), r"task\['body_inertia'\] is 0 where"),
])
def test_check_rand_params_rejects(change, match):
    """Each malformed parameter set is refused naming the array at fault (the values are
    checked over all arrays at once; the culprit is then looked for)."""
    init = {key: np.ones(3) for key in _tasks.RAND_PARAMS_BASES}
    task = {key: np.ones(3) for key in _tasks.RAND_PARAMS_BASES}
    change(task)
    with pytest.raises(ValueError, match=match):
        _tasks.check_rand_params(task, init)
    with pytest.raises(ValueError, match='dict'):
        _tasks.check_rand_params([1., 2.], init)


def test_check_rand_params_takes_zero_where_the_model_has_it():
    """The world body's mass is 0 in the model, and sampled tasks keep it 0; damping and
    friction may be 0 anywhere (no damping, no friction)."""
    init = {key: np.array([0., 1., 1.]) for key in _tasks.RAND_PARAMS_BASES}
    task = {key: np.array([0., 2., 3.]) for key in _tasks.RAND_PARAMS_BASES}
    task.update(dof_damping=np.zeros(3), geom_friction=np.zeros(3))
    checked = _tasks.check_rand_params(task, init)
    np.testing.assert_array_equal(checked['body_mass'], [0., 2., 3.])


@pytest.mark.parametrize('task', [['2', '2'], [b'2', b'2'], ('2', 2.), [True, False],
                                  [1.5, True], np.array([True, False]), np.array(['1', '0']),
                                  np.array(['2', '2'], dtype=object),
                                  np.array([1.5, True], dtype=object),
                                  [np.array(['1', '0'], dtype=object)], [np.str_('2'), 2.],
                                  np.array([bytearray(b'2'), 1.], dtype=object),
                                  [[[[np.array(['2', 2.], dtype=object)]]]]])
def test_a_task_of_text_or_booleans_is_refused_not_read_as_numbers(task):
    """numpy reads ``['2', '2']`` and ``[True, False]`` as floats (``[1.5, True]`` as
    floats before any dtype could show the bool): every task check refuses them."""
    with pytest.raises(ValueError, match='booleans and text are not read as numbers'):
        _tasks.check_vector(task, 'goal')
    with pytest.raises(ValueError, match='booleans and text'):
        _tasks.check_unit_vector(task, 'direction')
    with pytest.raises(ValueError, match='task goal'):
        _tasks.check_corner(task)


def test_an_ant_goal_whose_distance_overflows_is_refused():
    """A goal of 1e200 makes every step's distance inf and its progress NaN."""
    from garage_promp.envs.ant_rand_goal import AntRandGoalEnv  # pylint: disable=import-outside-toplevel
    env = AntRandGoalEnv()
    with pytest.raises(ValueError, match=r'\|goal\| under 1e154'):
        env.set_task([1e200, 1e200])
    env.set_task([1e150, -2.])  # large, but every distance a number
    env.reset()
    info = env.step(np.zeros(8)).env_info
    assert np.isfinite(info['forward_vel']) and np.isfinite(info['goal_dist'])
