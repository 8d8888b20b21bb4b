"""Baselines of the original ProMP code (meta_policy_search/baselines/), on padded batches.

Each baseline is refit on every (task, inner step) batch and evaluated on the
same batch, as the reference's ``MetaSampleProcessor`` does. Inputs are padded
:math:`(R, T, O)` observations with a 0/1 mask :math:`(R, T)`; the time index
of a cell is its column t, so padding never shifts the time features.
"""
from typing import Tuple

from garage_promp.validation import check_choice, check_float

import numpy as np


class Baseline:
    """Interface: ``fit_predict(observations, targets, mask) -> predictions``.

    ``fit_predict`` must depend on its arguments alone: the tasks of a
    sampling round are processed one at a time, in the order their episodes
    come back from the workers (``MetaSampler.obtain_rounds``), so a baseline
    that carried state from one task to the next would make runs depend on
    worker timing.
    """

    def fit(self, observations: np.ndarray, targets: np.ndarray,
            mask: np.ndarray) -> None:
        """Fit on the valid cells of a padded batch.

        Args:
            observations (np.ndarray): :math:`(R, T, O)`.
            targets (np.ndarray): :math:`(R, T)`.
            mask (np.ndarray): :math:`(R, T)`.

        """
        raise NotImplementedError

    def predict(self, observations: np.ndarray,
                mask: np.ndarray) -> np.ndarray:
        """Predictions :math:`(R, T)`, 0 on padding."""
        raise NotImplementedError

    def fit_predict(self, observations: np.ndarray, targets: np.ndarray,
                    mask: np.ndarray) -> np.ndarray:
        """Fit on a batch, then predict on the same batch (in-sample)."""
        self.fit(observations, targets, mask)
        return self.predict(observations, mask)


def check_layout(observations: np.ndarray, mask: np.ndarray,
                 targets: np.ndarray | None = None) -> None:
    """Refuse a padded batch whose parts do not fit: observations :math:`(R, T, O)`,
    a mask :math:`(R, T)` of 0 and 1, targets :math:`(R, T)` where given.

    A mask of 2s would weigh and scale the predictions, a NaN one make them NaN, and
    shapes that differ fail deep in numpy's indexing; the batches the algorithms
    process always fit.

    Raises:
        ValueError: Naming the argument.

    """
    given = {name: value for name, value in (
        ('observations', observations), ('mask', mask), ('targets', targets))
        if value is not None}
    for name, value in given.items():
        if not isinstance(value, np.ndarray) or isinstance(value, (np.matrix,
                                                                   np.ma.MaskedArray)):
            # (a matrix's products and a masked array's hidden cells are not an array's)
            raise ValueError(f'a baseline takes numpy arrays; {name} is a '
                             f'{type(value).__module__}.{type(value).__qualname__}')
        if value.dtype.kind not in 'biuf':  # complex or object: a fit that is not real
            raise ValueError(f'{name} must hold real numbers, got dtype {value.dtype}')
    shapes = {name: value.shape for name, value in given.items()}
    if len(shapes['observations']) != 3 or shapes['mask'] != shapes['observations'][:2] or \
            shapes.get('targets', shapes['mask']) != shapes['mask']:
        raise ValueError('a baseline takes observations (R, T, O), a mask (R, T) and targets '
                         f'(R, T), got shapes {shapes}')
    values = np.asarray(mask)
    if not ((values == 0) | (values == 1)).all():
        raise ValueError(f'the mask must hold only 0 and 1, got {np.unique(values)[:5]}')


class ZeroBaseline(Baseline):
    """Predicts 0 everywhere; fitting is a no-op."""

    def fit(self, observations, targets, mask):
        check_layout(observations, mask, targets)

    def predict(self, observations, mask):
        check_layout(observations, mask)
        return np.zeros(mask.shape)


def least_squares(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """The minimum-norm least-squares solution, as the reference's ``np.linalg.lstsq(...,
    rcond=-1)``; None if LAPACK finds none.

    ``np.linalg.lstsq`` uses LAPACK's divide-and-conquer SVD (``gelsd``), which can
    fail to converge on ordinary, finite, well-conditioned matrices: a 26 x 26
    HopperRandParams Gram matrix of condition number 2e8 ended a MAML-TRPO run with
    "SVD did not converge in Linear Least Squares" (numpy 1.26's OpenBLAS, 2026-11-25;
    ``tests/data/gelsd_fails.npz``). Only then is the same solution computed by the
    plain SVD (SciPy's ``gelss``), so every batch ``gelsd`` solves gives the same
    numbers as before.
    """
    try:
        return np.linalg.lstsq(matrix, rhs, rcond=-1)[0]
    except np.linalg.LinAlgError:
        import scipy.linalg  # pylint: disable=import-outside-toplevel
        try:
            return scipy.linalg.lstsq(matrix, rhs, lapack_driver='gelss')[0]
        except np.linalg.LinAlgError:  # (scipy's LinAlgError is numpy's)
            return None


def cholesky_solve(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """The solution of ``matrix x = rhs`` for a symmetric positive-definite ``matrix``,
    by its Cholesky factor (LAPACK's ``potrf``/``potrs``); None where the factorisation
    fails (the matrix is not numerically positive definite)."""
    import scipy.linalg  # pylint: disable=import-outside-toplevel
    try:
        factor = scipy.linalg.cho_factor(matrix, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    return scipy.linalg.cho_solve(factor, rhs, check_finite=False)


#: How a linear baseline solves its damped normal equations
#: :math:`(\Phi^\top\Phi + \lambda I) c = \Phi^\top y` (:math:`\Phi`: the valid steps'
#: features, one row each):
#:
#: * ``'lstsq'`` (the default): the minimum-norm least-squares solution by an SVD
#:   (:func:`least_squares`), as the original code's ``linear_baseline.py`` does; the
#:   numbers every recorded run holds.
#: * ``'cholesky'``: the same system by a Cholesky factorisation (:func:`cholesky_solve`):
#:   the damped matrix is symmetric positive definite for every :math:`\lambda > 0`. Where
#:   the rows are fewer than the features (HumanoidRandDirec's 756 features early in
#:   training, when a task's episodes hold a few hundred steps), the smaller kernel system
#:   :math:`(\Phi\Phi^\top + \lambda I)\,a = y`, :math:`c = \Phi^\top a`, gives the same
#:   solution (the push-through identity). Where the factorisation fails (the matrix is not
#:   numerically positive definite), that damping is solved as ``'lstsq'`` solves it.
#:   Other rounding: on such ill-conditioned systems (condition numbers 1e12-5e12) the
#:   predictions differ from ``'lstsq'``'s by up to about 1e-4 of the largest return, so a
#:   run's numbers differ from the default's after its first fit.
BASELINE_SOLVERS = ('lstsq', 'cholesky')


class _LinearBaseline(Baseline):
    r"""Damped least squares on hand-made features, as the original ProMP baselines.

    Args:
        reg_coeff (float): The damping :math:`\lambda > 0`, multiplied by 10 (up to four
            times) while a solve gives no finite coefficients, as in the original code.
        solver (str): How the damped normal equations are solved, one of
            :data:`BASELINE_SOLVERS` (default ``'lstsq'``, the original code's).

    """

    _solver = 'lstsq'  # (what a baseline pickled before the option had)

    def __init__(self, reg_coeff: float = 1e-5, solver: str = 'lstsq'):
        self._reg_coeff = check_float(reg_coeff, 'reg_coeff', 0., low_open=True)
        self._solver = check_choice(solver, 'solver', BASELINE_SOLVERS)
        self.coeffs = None

    @property
    def solver(self) -> str:
        """How the damped normal equations are solved (:data:`BASELINE_SOLVERS`)."""
        return self._solver

    def _features(self, observations: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, observations, targets, mask):
        check_layout(observations, mask, targets)
        self._fit_on(self._features(observations), targets, mask)

    def fit_predict(self, observations, targets, mask):
        own = type(self)
        if own.fit is not _LinearBaseline.fit or own.predict is not _LinearBaseline.predict:
            return super().fit_predict(observations, targets, mask)  # a subclass's own fit/predict
        check_layout(observations, mask, targets)
        # The features once for both (the same arrays fit and predict would build).
        features = self._features(observations)
        self._fit_on(features, targets, mask)
        return _on_valid(features @ self.coeffs, mask)

    def _fit_on(self, features, targets, mask):
        valid = mask > 0
        features = features[valid]
        y = targets[valid]
        if not (np.isfinite(features).all() and np.isfinite(y).all()):
            raise FloatingPointError(
                f'{type(self).__name__} fit on NaN/inf observations or '
                'returns')
        reg = self._reg_coeff
        kernel = self._solver == 'cholesky' and len(features) < features.shape[1]
        gram, rhs = self._normal_equations(features, y, kernel)
        for _ in range(5):
            coeffs = self._solve(features, y, gram, rhs, reg, kernel)
            if coeffs is not None and np.all(np.isfinite(coeffs)):
                break
            reg *= 10
        else:
            raise FloatingPointError(
                f'{type(self).__name__} fit found no finite coefficients at 5 '
                f'damping strengths ({self._reg_coeff:g} to {reg / 10:g})')
        self.coeffs = coeffs

    def _normal_equations(self, features: np.ndarray, y: np.ndarray,
                          kernel: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """Phi^T Phi and Phi^T y (the normal equations), or Phi Phi^T and y (the kernel
        system of :data:`BASELINE_SOLVERS`' push-through identity) where ``kernel``;
        refused (``FloatingPointError``) where they overflow, before LAPACK sees them."""
        with np.errstate(over='ignore', invalid='ignore'):  # checked just below
            if kernel:
                gram, rhs = features @ features.T, y
            else:
                gram, rhs = features.T @ features, features.T @ y
        if not (np.isfinite(gram).all() and np.isfinite(rhs).all()):
            raise FloatingPointError(
                f'{type(self).__name__} fit: the normal equations overflow (largest '
                f'|return| {np.abs(y).max():.3g}, largest |feature| {np.abs(features).max():.3g})')
        return gram, rhs

    def _solve(self, features: np.ndarray, y: np.ndarray, gram: np.ndarray, rhs: np.ndarray,
               reg: float, kernel: bool) -> np.ndarray | None:
        """The coefficients at damping ``reg`` (None where LAPACK finds none): ``gram`` and
        ``rhs`` are the normal equations' (the kernel system's where ``kernel``; then the
        fallback builds the normal equations from ``features`` and ``y``)."""
        damped = gram + reg * np.eye(gram.shape[0])
        if self._solver == 'lstsq':
            return least_squares(damped, rhs)
        solution = cholesky_solve(damped, rhs)
        if solution is None:  # not positive definite to LAPACK: solved as the default
            if not kernel:
                return least_squares(damped, rhs)
            normal, normal_rhs = self._normal_equations(features, y)  # (rare: not kept)
            return least_squares(normal + reg * np.eye(normal.shape[0]), normal_rhs)
        if not kernel:
            return solution
        with np.errstate(over='ignore', invalid='ignore'):  # (not finite: the next damping)
            return features.T @ solution

    def predict(self, observations, mask):
        check_layout(observations, mask)
        if self.coeffs is None:
            return np.zeros(mask.shape)
        features = self._features(observations)
        if features.shape[-1] != len(self.coeffs):
            raise ValueError(f'{type(self).__name__} was fit on observations of another size: '
                             f'{features.shape[-1]} features of observations (R, T, '
                             f'{observations.shape[-1]}), {len(self.coeffs)} fitted')
        predictions = _on_valid(features @ self.coeffs, mask)
        if not np.isfinite(predictions).all():  # (fit refuses such observations too)
            raise FloatingPointError(f'{type(self).__name__} predict on NaN/inf observations')
        return predictions


def _on_valid(predictions: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The predictions on valid cells, 0 on padding, whatever the padding's observations
    (a NaN there times a mask of 0 would be NaN)."""
    return np.where(mask > 0, predictions, 0.)


def _time_features(n_episodes: int, horizon: int) -> np.ndarray:
    u = np.arange(horizon, dtype=np.float64)[:, None] / 100.
    u = np.broadcast_to(u, (n_episodes, horizon, 1))
    return np.concatenate([u, u**2, u**3], axis=-1)


class LinearFeatureBaseline(_LinearBaseline):
    r"""Linear in :math:`\phi_t = [o, o^2, u, u^2, u^3, 1]`.

    :math:`o = clip(s_t, \pm10)` and :math:`u = t/100`, as in the original ProMP code's
    meta_policy_search/baselines/linear_baseline.py.
    """

    def _features(self, observations):
        obs = np.clip(observations, -10, 10)
        n_episodes, horizon = obs.shape[:2]
        ones = np.ones((n_episodes, horizon, 1))
        return np.concatenate(
            [obs, obs**2,
             _time_features(n_episodes, horizon), ones], axis=-1)


class LinearTimeBaseline(_LinearBaseline):
    r"""Linear in time-only features :math:`[u, u^2, u^3, 1]`, :math:`u = t/100`.

    DiCE's reward baseline (original ProMP code,
    meta_policy_search/samplers/dice_sample_processor.py).
    """

    def _features(self, observations):
        n_episodes, horizon = observations.shape[:2]
        return np.concatenate([
            _time_features(n_episodes, horizon),
            np.ones((n_episodes, horizon, 1))
        ], axis=-1)
