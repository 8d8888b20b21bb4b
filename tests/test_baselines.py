"""Baselines: the checks of the original ProMP code's tests/test_baselines.py."""
import os
import pathlib
import pickle

from garage_promp._threads import available_cores
from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline

import numpy as np
import pytest


def _reference_data(task, seed=0):
    rng = np.random.default_rng(seed)
    base = np.arange(-4, 22, 0.6)[:44]
    targets = np.stack([(base if task == 1 else base**3) + rng.normal(0, 2, 44)
                        for _ in range(10)])
    obs = rng.normal(size=(10, 44, 3))
    return obs, targets, np.ones((10, 44))


@pytest.mark.parametrize('task', [1, 2])
def test_linear_time_baseline_fits_reference_targets(task):
    obs, targets, mask = _reference_data(task)
    baseline = LinearTimeBaseline()
    error = ((baseline.fit_predict(obs, targets, mask) - targets)**2).sum()
    assert 2 * error < (targets**2).sum()


def test_linear_feature_baseline_beats_zero_and_pickles_exactly():
    obs, _, mask = _reference_data(1)
    returns = obs[..., 0] * 3 + np.arange(44) / 10.
    baseline = LinearFeatureBaseline()
    fitted = baseline.fit_predict(obs, returns, mask)
    assert ((fitted - returns)**2).sum() < 0.01 * (returns**2).sum()
    copy = pickle.loads(pickle.dumps(baseline))
    np.testing.assert_array_equal(copy.predict(obs, mask), fitted)


def test_features_match_reference_definition():
    obs = np.array([[[20.], [-0.5], [-20.]]])
    features = LinearFeatureBaseline()._features(obs)
    # [clip(o), clip(o)^2, u, u^2, u^3, 1] with u = t/100
    np.testing.assert_allclose(features[0, 0], [10., 100., 0., 0., 0., 1.])
    np.testing.assert_allclose(features[0, 1], [-0.5, 0.25, .01, 1e-4, 1e-6, 1.])
    np.testing.assert_allclose(features[0, 2], [-10., 100., .02, 4e-4, 8e-6, 1.])
    # DiCE's reward baseline: [u, u^2, u^3, 1] alone, whatever the observations
    time_features = LinearTimeBaseline()._features(np.full((2, 3, 4), 7.))
    assert time_features.shape == (2, 3, 4)
    for row in time_features:
        np.testing.assert_allclose(row, [[0., 0., 0., 1.], [.01, 1e-4, 1e-6, 1.],
                                         [.02, 4e-4, 8e-6, 1.]])


@pytest.mark.parametrize('cls', [LinearFeatureBaseline, LinearTimeBaseline])
def test_an_unfitted_baseline_predicts_zero(cls):
    """Before its first fit a baseline predicts 0 everywhere (garage's
    ``LinearFeatureBaseline`` too), of the mask's shape."""
    obs, _, mask = _reference_data(1)
    predictions = cls().predict(obs, mask)
    assert isinstance(predictions, np.ndarray) and predictions.shape == mask.shape
    assert np.all(predictions == 0)


def test_the_default_solver_on_fewer_steps_than_features_solves_the_reference_system():
    """With fewer valid steps than features (Humanoid's 756 early in training) the
    default solves the original code's damped normal equations by ``lstsq``, bit for bit:
    the kernel system is the ``cholesky`` option's alone."""
    rng = np.random.default_rng(5)
    obs, targets = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3))
    mask = np.ones((2, 3))
    baseline = LinearFeatureBaseline()
    baseline.fit(obs, targets, mask)  # 6 rows, 16 features
    features = baseline._features(obs).reshape(6, 16)
    expected = np.linalg.lstsq(features.T @ features + 1e-5 * np.eye(16),
                               features.T @ targets.reshape(-1), rcond=-1)[0]
    assert baseline.coeffs.shape == (16, ) and np.array_equal(baseline.coeffs, expected)


def test_fit_predict_builds_the_features_once(monkeypatch):
    calls = []
    build = LinearFeatureBaseline._features

    def counted(self, observations):
        calls.append(observations.shape)
        return build(self, observations)

    monkeypatch.setattr(LinearFeatureBaseline, '_features', counted)
    obs, targets, mask = _reference_data(1)
    LinearFeatureBaseline().fit_predict(obs, targets, mask)
    assert calls == [obs.shape]


def test_padding_is_ignored_and_predicted_zero():
    obs, targets, mask = _reference_data(1)
    mask[:, 30:] = 0
    noisy = targets.copy()
    noisy[:, 30:] = 1e6
    baseline = LinearTimeBaseline()
    clean = LinearTimeBaseline().fit_predict(obs, targets, mask)
    np.testing.assert_allclose(baseline.fit_predict(obs, noisy, mask), clean)
    assert np.all(clean[:, 30:] == 0)
    assert np.all(ZeroBaseline().fit_predict(obs, targets, mask) == 0)


@pytest.mark.parametrize('cls', [LinearFeatureBaseline, LinearTimeBaseline])
def test_fit_predict_is_fit_then_predict_bit_for_bit(cls):
    """fit_predict builds the features once; the numbers are fit's and predict's."""
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(10, 50, 7)) * 4
    mask = (np.arange(50) < rng.integers(5, 50, size=(10, 1))).astype(float)
    targets = rng.normal(size=(10, 50)) * mask
    apart = cls()
    apart.fit(obs, targets, mask)
    together = cls()
    values = together.fit_predict(obs, targets, mask)
    assert np.array_equal(together.coeffs, apart.coeffs)
    assert np.array_equal(values, apart.predict(obs, mask))
    assert np.all(values[mask == 0] == 0) and np.any(values != 0)


def test_fit_predict_calls_a_subclass_own_fit_and_predict():
    calls = []

    class Logged(LinearFeatureBaseline):
        def fit(self, observations, targets, mask):
            calls.append('fit')
            super().fit(observations, targets, mask)

        def predict(self, observations, mask):
            calls.append('predict')
            return super().predict(observations, mask)

    obs, targets, mask = _reference_data(1)
    Logged().fit_predict(obs, targets, mask)
    assert calls == ['fit', 'predict']


DATA = __import__('pathlib').Path(__file__).resolve().parent / 'data'


def test_least_squares_survives_a_matrix_lapacks_gelsd_gives_up_on():
    """A damped Gram matrix from a HopperRandParams MAML-TRPO run (finite, condition number
    2e8) on which numpy's lstsq (LAPACK gelsd) raised "SVD did not converge": the solution
    still comes, and it solves the system."""
    from garage_promp.baselines import least_squares
    saved = np.load(DATA / 'gelsd_fails.npz')
    matrix, rhs = saved['matrix'], saved['rhs']
    assert np.isfinite(matrix).all() and np.linalg.cond(matrix) < 1e9
    try:
        np.linalg.lstsq(matrix, rhs, rcond=-1)
    except np.linalg.LinAlgError:
        pass  # as on the machine that recorded it
    else:
        pytest.skip("this machine's LAPACK gelsd converges on the matrix; the fallback is "
                    'tested below with gelsd made to fail')
    coeffs = least_squares(matrix, rhs)
    assert coeffs is not None and np.isfinite(coeffs).all()
    np.testing.assert_allclose(matrix @ coeffs, rhs, rtol=1e-6, atol=1e-6 * np.abs(rhs).max())


def test_least_squares_keeps_singular_values_down_to_machine_precision():
    """The reference's ``lstsq(..., rcond=-1)``: singular values are cut only below machine
    precision times the largest, not below ``max(M, N)`` times that (numpy's ``rcond=None``).
    A 40 x 40 system with one singular value at 1e-15 of the largest (between the two cut-offs)
    keeps its direction, and the solution is the one the reference's call gives."""
    from garage_promp.baselines import least_squares
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    v, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    singular = np.ones(40)
    singular[-1] = 1e-15
    matrix = (u * singular) @ v.T
    rhs = u[:, -1] + u[:, 0]
    coeffs = least_squares(matrix, rhs)
    np.testing.assert_array_equal(coeffs, np.linalg.lstsq(matrix, rhs, rcond=-1)[0])
    assert np.abs(v[:, -1] @ coeffs) > 1e12  # the small direction is kept (1 / 1e-15)


def test_the_fit_falls_back_to_the_plain_svd_only_where_gelsd_fails(monkeypatch):
    """Where np.linalg.lstsq solves, its numbers are used unchanged; where it raises, the
    fit gives SciPy's gelss solution of the same damped system."""
    import scipy.linalg
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(4, 7, 3)), rng.normal(size=(4, 7)), np.ones((4, 7))
    usual = LinearFeatureBaseline()
    usual.fit(obs, targets, mask)
    features = usual._features(obs).reshape(-1, 10)
    gram = features.T @ features + 1e-5 * np.eye(10)
    assert np.array_equal(usual.coeffs, np.linalg.lstsq(gram, features.T @ targets.reshape(-1),
                                                        rcond=-1)[0])

    def gives_up(*args, **kwargs):
        raise np.linalg.LinAlgError('SVD did not converge in Linear Least Squares')

    monkeypatch.setattr(np.linalg, 'lstsq', gives_up)
    fallback = LinearFeatureBaseline()
    fallback.fit(obs, targets, mask)
    expected = scipy.linalg.lstsq(gram, features.T @ targets.reshape(-1),
                                  lapack_driver='gelss')[0]
    assert np.array_equal(fallback.coeffs, expected)
    np.testing.assert_allclose(fallback.coeffs, usual.coeffs, rtol=1e-8, atol=1e-10)
    monkeypatch.setattr(scipy.linalg, 'lstsq', gives_up)
    with pytest.raises(FloatingPointError, match='no finite coefficients at 5 damping'):
        LinearFeatureBaseline().fit(obs, targets, mask)


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf, None], ids=repr)
def test_the_fit_retries_with_ten_times_the_damping_up_to_five_times(monkeypatch, bad):
    """The original ProMP code's linear_baseline.py: up to 5 solves, reg_coeff *= 10 after
    each one whose coefficients are not finite (the reference checks NaN only; an inf is
    as useless a prediction), and the first finite solution is kept."""
    import garage_promp.baselines as baselines  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(4, 7, 3)), rng.normal(size=(4, 7)), np.ones((4, 7))
    solve, dampings = baselines.least_squares, []

    def failing(times):
        def least_squares(matrix, rhs):
            dampings.append(matrix[0, 0] - gram[0, 0])
            coeffs = solve(matrix, rhs)
            if len(dampings) <= times:
                if bad is None:
                    return None  # (no solution at all: LAPACK failed both ways)
                coeffs = coeffs.copy()
                coeffs[1] = bad
            return coeffs
        return least_squares

    features = LinearFeatureBaseline()._features(obs).reshape(-1, 10)
    gram = features.T @ features
    monkeypatch.setattr(baselines, 'least_squares', failing(2))
    baseline = LinearFeatureBaseline()
    baseline.fit(obs, targets, mask)
    np.testing.assert_allclose(dampings, [1e-5, 1e-4, 1e-3], rtol=1e-6)
    assert np.array_equal(baseline.coeffs, solve(gram + 1e-3 * np.eye(10),
                                                 features.T @ targets.reshape(-1)))
    dampings.clear()
    monkeypatch.setattr(baselines, 'least_squares', failing(5))
    with pytest.raises(FloatingPointError, match=r'no finite coefficients at 5 damping strengths '
                                                 r'\(1e-05 to 0.1\)'):
        LinearFeatureBaseline().fit(obs, targets, mask)
    np.testing.assert_allclose(dampings, [1e-5, 1e-4, 1e-3, 1e-2, 1e-1], rtol=1e-6)


def test_overflowing_normal_equations_are_named_before_lapack_sees_them():
    """Finite returns whose squares overflow: refused with the culprit named (a NaN matrix
    can make LAPACK spin)."""
    rng = np.random.default_rng(0)
    obs, mask = rng.normal(size=(2, 5, 3)), np.ones((2, 5))
    with pytest.raises(FloatingPointError,
                       match=r'normal equations overflow .*\|return\| 1.7e\+308'):
        LinearFeatureBaseline().fit(obs, np.full((2, 5), 1.7e308), mask)


def _processing_inputs(n_tasks=2, episodes=10, horizon=200, obs_dim=17, seed=0):
    """HalfCheetah-sized episodes (2,000 x 38 baseline features a task)."""
    from garage_promp.algos._batch import ProcessingConfig  # pylint: disable=import-outside-toplevel

    import akro  # pylint: disable=import-outside-toplevel
    from garage import EnvSpec, EpisodeBatch  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(seed)
    n = n_tasks * episodes
    lengths = np.full(n, horizon)
    steps = int(lengths.sum())
    spec = EnvSpec(akro.Box(-np.inf, np.inf, (obs_dim,)), akro.Box(-1., 1., (6,)),
                   max_episode_length=horizon)
    episodes_batch = EpisodeBatch(
        env_spec=spec, episode_infos={},
        observations=rng.normal(size=(steps, obs_dim)) * rng.uniform(0.01, 5, obs_dim),
        last_observations=np.zeros((n, obs_dim)),
        actions=rng.uniform(-1, 1, (steps, 6)), rewards=rng.normal(size=steps),
        env_infos={}, agent_infos={'mean': np.zeros((steps, 6)), 'log_std': np.zeros((steps, 6))},
        step_types=np.array([0] * steps, dtype=object), lengths=lengths)
    config = ProcessingConfig(discount=0.99, gae_lambda=1., normalize_adv=False,
                              positive_adv=False, baseline=LinearFeatureBaseline())
    return episodes_batch, n_tasks, episodes, horizon, config


def test_the_per_task_processing_runs_on_one_blas_thread(monkeypatch):
    """Whatever numpy's BLAS is set to outside, the baseline fits see one thread."""
    from garage_promp.algos import _batch  # pylint: disable=import-outside-toplevel

    from threadpoolctl import threadpool_info, threadpool_limits  # pylint: disable=import-outside-toplevel
    seen = []
    fit_predict = LinearFeatureBaseline.fit_predict

    def spy(self, *args):
        seen.append([lib['num_threads'] for lib in threadpool_info()
                     if lib['user_api'] == 'blas'])
        return fit_predict(self, *args)

    monkeypatch.setattr(LinearFeatureBaseline, 'fit_predict', spy)
    with threadpool_limits(limits=2, user_api='blas'):
        outside = [lib['num_threads'] for lib in threadpool_info() if lib['user_api'] == 'blas']
        _batch.process_episodes(*_processing_inputs())
    assert len(seen) == 2 and all(counts == [1] * len(counts) and counts for counts in seen)
    if max(outside) < 2:
        pytest.skip('this BLAS cannot take 2 threads here; the limit was not exercised')


_PROCESS_IN_A_CHILD = '''
import hashlib, sys
sys.path.insert(0, {root!r})
from tests.test_baselines import _processing_inputs
from garage_promp.algos._batch import process_episodes
from garage_promp.baselines import LinearFeatureBaseline
digest = hashlib.sha256()

class Recorded(LinearFeatureBaseline):
    def fit_predict(self, *args):
        values = super().fit_predict(*args)
        digest.update(values.tobytes())  # float64: the float32 advantages hide the last bits
        return values

inputs = list(_processing_inputs())
inputs[-1].baseline = Recorded(solver={solver!r})
process_episodes(*inputs)
print(digest.hexdigest())
'''


@pytest.mark.skipif(available_cores() < 2, reason='one core: OpenBLAS takes one thread')
@pytest.mark.parametrize('solver', ['lstsq', 'cholesky'])
def test_processing_gives_the_same_bits_with_one_or_two_blas_threads_by_default(solver):
    """A process's default BLAS thread count (its cores, ``OMP_NUM_THREADS``) does not
    reach the baseline's values, with either solver: without the one-thread limit they
    differ in the last bits."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    root = str(pathlib.Path(__file__).parents[1])
    digests = set()
    for threads in ('1', '2'):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, '-c', _PROCESS_IN_A_CHILD.format(root=root,
                                                                                solver=solver)],
                             env=env, capture_output=True, text=True, check=True, timeout=300)
        digests.add(out.stdout.split()[-1])
    assert len(digests) == 1, digests


class _Predicting(LinearFeatureBaseline):
    """Predicts ``value`` on the valid cells (and a shape or dtype of its own where given)."""

    def __init__(self, value, shape=None, dtype=np.float64):
        super().__init__()
        self.value, self.shape, self.dtype = value, shape, dtype

    def fit_predict(self, observations, targets, mask):
        return np.full(self.shape or mask.shape, self.value, dtype=self.dtype)


@pytest.mark.parametrize('baseline, error, match', [
    (_Predicting(np.nan), FloatingPointError, 'the baseline _Predicting predicted NaN or inf for '
                                              'task 0 of the meta-batch'),
    (_Predicting(-np.inf), FloatingPointError, 'predicted NaN or inf for task 0'),
    (_Predicting(1e300), FloatingPointError, r'predicted 1e\+300 for task 0 of the meta-batch, '
                                             'beyond float32'),
    (_Predicting(1., shape=(3, 4)), ValueError, r'float64 values of shape \(3, 4\) for task 0'),
    (_Predicting('1', dtype=object), ValueError, 'predicted object values'),
])
@pytest.mark.parametrize('normalize_adv', [False, True])
def test_a_baseline_predicting_what_no_return_is_is_named(baseline, error, match, normalize_adv):
    """A NaN prediction would come out as advantages "beyond float32" whose largest value
    is 0, and 1e300 with normalised advantages as all-zero advantages (their std
    overflows): an update that changes nothing, without a word. Both name the baseline."""
    from garage_promp.algos._batch import process_episodes  # pylint: disable=import-outside-toplevel
    inputs = list(_processing_inputs())
    inputs[-1].baseline = baseline
    inputs[-1].normalize_adv = normalize_adv
    with pytest.raises(error, match=match):
        process_episodes(*inputs)
    inputs[-1].baseline = _Predicting(3.4e38)  # within float32: processed
    assert process_episodes(*inputs).advantages.isfinite().all()


@pytest.mark.parametrize('cls', [LinearFeatureBaseline, LinearTimeBaseline])
def test_the_cholesky_solver_solves_the_same_damped_system(cls):
    """``solver='cholesky'``: the damped normal equations solved by their Cholesky factor
    (those numbers exactly), the solution the default SVD gives to rounding; the default is
    the original code's ``lstsq``."""
    import scipy.linalg
    rng = np.random.default_rng(3)
    obs, targets, mask = rng.normal(size=(6, 9, 3)), rng.normal(size=(6, 9)), np.ones((6, 9))
    mask[2, 5:] = 0
    default, fast = cls(), cls(solver='cholesky')
    assert default.solver == 'lstsq' and fast.solver == 'cholesky'
    usual = default.fit_predict(obs, targets, mask)
    quick = fast.fit_predict(obs, targets, mask)
    features = fast._features(obs)[mask > 0]
    gram = features.T @ features + 1e-5 * np.eye(features.shape[1])
    rhs = features.T @ targets[mask > 0]
    expected = scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, lower=True), rhs)
    assert np.array_equal(fast.coeffs, expected)
    assert np.array_equal(default.coeffs, np.linalg.lstsq(gram, rhs, rcond=-1)[0])
    np.testing.assert_allclose(fast.coeffs, default.coeffs, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(quick, usual, rtol=1e-9, atol=1e-9)
    assert np.all(quick[2, 5:] == 0)
    copy = pickle.loads(pickle.dumps(fast))
    assert copy.solver == 'cholesky'
    np.testing.assert_array_equal(copy.predict(obs, mask), quick)


@pytest.mark.parametrize('shape, factorised', [((4, 7, 3), (10, 10)), ((2, 3, 8), (6, 6))],
                         ids=['normal equations', 'kernel'])
def test_the_cholesky_solver_falls_back_to_lstsq_where_the_factorisation_fails(
        monkeypatch, shape, factorised):
    """Where the damped matrix (of the normal equations, or of the kernel system where the
    rows are fewer than the features) is not numerically positive definite (LAPACK's
    ``potrf`` refuses it), that damping is solved as the default solves the normal
    equations."""
    import scipy.linalg
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=shape), rng.normal(size=shape[:2]), np.ones(shape[:2])
    usual = LinearFeatureBaseline()
    usual.fit(obs, targets, mask)
    seen = []

    def refuses(matrix, **kwargs):
        seen.append(matrix.shape)
        raise np.linalg.LinAlgError('2-th leading minor of the array is not positive definite')
    monkeypatch.setattr(scipy.linalg, 'cho_factor', refuses)
    fast = LinearFeatureBaseline(solver='cholesky')
    fast.fit(obs, targets, mask)
    assert seen == [factorised]
    assert np.array_equal(fast.coeffs, usual.coeffs)


@pytest.mark.parametrize('shape', [(4, 7, 3), (2, 3, 8)], ids=['normal equations', 'kernel'])
def test_the_cholesky_solver_keeps_the_damping_retries(monkeypatch, shape):
    """Non-finite coefficients from the Cholesky solve are retried at ten times the
    damping, as the default's (the original code's loop), of the normal equations or of
    the kernel system (fewer rows than features)."""
    import garage_promp.baselines as baselines  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=shape), rng.normal(size=shape[:2]), np.ones(shape[:2])
    solve, dampings = baselines.cholesky_solve, []

    def nan_once(matrix, rhs):
        dampings.append(matrix[0, 0])
        coeffs = solve(matrix, rhs)
        return coeffs if len(dampings) > 1 else coeffs * np.nan
    monkeypatch.setattr(baselines, 'cholesky_solve', nan_once)
    fast = LinearFeatureBaseline(solver='cholesky')
    fast.fit(obs, targets, mask)
    assert len(dampings) == 2
    np.testing.assert_allclose(dampings[1] - dampings[0], 1e-4 - 1e-5, rtol=1e-6)
    features = fast._features(obs).reshape(-1, 2 * shape[2] + 4)
    rows = len(features) < features.shape[1]
    expected = LinearFeatureBaseline(reg_coeff=1e-4, solver='cholesky')
    monkeypatch.setattr(baselines, 'cholesky_solve', solve)
    expected.fit(obs, targets, mask)
    assert rows == (shape == (2, 3, 8))
    assert np.array_equal(fast.coeffs, expected.coeffs)


def test_an_unknown_solver_is_refused_and_an_older_pickle_solves_as_before():
    with pytest.raises(ValueError, match=r"solver must be one of \('lstsq', 'cholesky'\), "
                                         r"got 'qr'"):
        LinearFeatureBaseline(solver='qr')
    old = LinearFeatureBaseline(solver='cholesky')
    del old.__dict__['_solver']  # as pickled before the option
    assert pickle.loads(pickle.dumps(old)).solver == 'lstsq'


def test_the_cholesky_solver_on_humanoid_sized_ill_conditioned_features():
    """On 756 features from 400 rows (HumanoidRandDirec's early batches: rank-deficient
    Gram matrices, condition numbers above 1e10 once damped, 1e12-5e12 in Humanoid's) the
    kernel system is solved, c = Phi^T (Phi Phi^T + lambda I)^-1 y (those numbers exactly),
    and predicts what ``lstsq`` predicts to 1e-4 of the largest return (the rounding of such a
    system; about 1e-4 on the recorded Humanoid batches too)."""
    import scipy.linalg
    rng = np.random.default_rng(1)
    states = rng.normal(size=(400, 40)) @ rng.normal(size=(40, 376)) * 0.3  # rank 40
    states[:, 300:] = 0.  # (Humanoid's contact forces of bodies that touch nothing)
    obs = states.reshape(10, 40, 376)
    targets = (states[:, :3] @ rng.normal(size=3) + rng.normal(size=400)).reshape(10, 40)
    mask = np.ones((10, 40))
    mask[3, 20:] = 0
    default, fast = LinearFeatureBaseline(), LinearFeatureBaseline(solver='cholesky')
    usual = default.fit_predict(obs, targets, mask)
    quick = fast.fit_predict(obs, targets, mask)
    features = fast._features(obs)[mask > 0]
    y = targets[mask > 0]
    gram = features.T @ features + 1e-5 * np.eye(756)
    assert np.linalg.cond(gram) > 1e10
    kernel = features @ features.T + 1e-5 * np.eye(len(y))
    expected = features.T @ scipy.linalg.cho_solve(scipy.linalg.cho_factor(kernel, lower=True), y)
    assert np.array_equal(fast.coeffs, expected)
    np.testing.assert_allclose(quick, usual, rtol=0, atol=1e-4 * np.abs(y).max())
    assert np.all(quick[3, 20:] == 0)



def test_the_cholesky_solver_on_as_many_rows_as_features_and_on_none():
    """As many valid steps as features: the normal equations' own factor (the kernel system
    only where the rows are fewer); no valid step at all: coefficients and predictions 0,
    as the default's."""
    import scipy.linalg
    rng = np.random.default_rng(4)
    obs, targets, mask = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5)), np.ones((2, 5))
    fast = LinearFeatureBaseline(solver='cholesky')
    fast.fit(obs, targets, mask)  # 10 rows, 10 features
    features = fast._features(obs).reshape(10, 10)
    gram = features.T @ features + 1e-5 * np.eye(10)
    expected = scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, lower=True),
                                      features.T @ targets.reshape(-1))
    assert np.array_equal(fast.coeffs, expected)
    none = np.zeros((2, 5))
    for solver in ('cholesky', 'lstsq'):
        baseline = LinearFeatureBaseline(solver=solver)
        assert np.all(baseline.fit_predict(obs, targets, none) == 0)
        assert baseline.coeffs.shape == (10, ) and np.all(baseline.coeffs == 0)


class _NaNOnThirdFit(LinearFeatureBaseline):
    """Predicts NaN from its third fit on (the third task of a processing call)."""

    def __init__(self):
        super().__init__()
        self.fits = 0

    def fit_predict(self, observations, targets, mask):
        self.fits += 1
        values = super().fit_predict(observations, targets, mask)
        return values * np.nan if self.fits >= 3 else values


@pytest.mark.parametrize('culprit', ['nan', 'huge', 'narrow', 'baseline', 'dice_baseline',
                                     'one_step'])
def test_processing_names_the_meta_batch_slot_of_the_culprit_task(culprit):
    """A part of the meta-batch processed on its own (tasks 5-7 here) names the culprit
    by its slot in the whole meta-batch: a NaN sampled, a reward beyond float32, or
    actions the sampling Gaussian cannot have drawn in float32."""
    from garage_promp.algos._batch import process_episodes  # pylint: disable=import-outside-toplevel
    episodes, n_tasks, per_task, horizon, config = _processing_inputs(
        n_tasks=3, episodes=2, horizon=5)
    task_steps = slice(2 * per_task * horizon, 3 * per_task * horizon)  # the third task
    if culprit == 'nan':
        episodes.rewards[task_steps][3] = np.nan
        error, match = ValueError, r'NaN/inf in rewards .* task 7 of the meta-batch, step 23;'
    elif culprit == 'huge':
        episodes.rewards[task_steps] = 1e200
        error, match = ValueError, 'the rewards of task 7 of the meta-batch do not fit float32'
    elif culprit == 'narrow':
        episodes.agent_infos['log_std'][task_steps] = -60.
        error, match = FloatingPointError, 'not finite in float32 for task 7 of the meta-batch'
    elif culprit in ('baseline', 'dice_baseline'):
        setattr(config, culprit, _NaNOnThirdFit())
        error, match = FloatingPointError, 'predicted NaN or inf for task 7 of the meta-batch'
    else:  # the third task's advantages standardised over one step each: named by slot
        config.normalize_adv = True
        episodes, per_task = _one_step_episodes_in_the_third_task(episodes, per_task, horizon)
        error, match = ValueError, 'task 7 of the meta-batch: .* ended at their first step'
    with np.errstate(all='ignore'), pytest.raises(error, match=match):
        process_episodes(episodes, n_tasks, per_task, horizon, config, first_task=5)


def _one_step_episodes_in_the_third_task(episodes, per_task, horizon):
    """``episodes`` (three tasks of ``per_task`` episodes of ``horizon`` steps) with the
    third task's episodes cut to one step each, and one episode per task."""
    from garage import EpisodeBatch  # pylint: disable=import-outside-toplevel
    keep = np.zeros(len(episodes.rewards), dtype=bool)
    lengths = []
    for e in range(0, 3 * per_task, per_task):  # each task's first episode
        length = 1 if e == 2 * per_task else horizon
        keep[e * horizon:e * horizon + length] = True
        lengths.append(length)
    return EpisodeBatch(
        env_spec=episodes.env_spec, episode_infos={}, observations=episodes.observations[keep],
        last_observations=episodes.last_observations[::per_task],
        actions=episodes.actions[keep], rewards=episodes.rewards[keep], env_infos={},
        agent_infos={k: v[keep] for k, v in episodes.agent_infos.items()},
        step_types=episodes.step_types[keep], lengths=np.array(lengths)), 1
