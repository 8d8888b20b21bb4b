"""Baselines: the checks of the original ProMP code's tests/test_baselines.py."""
import pickle

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
    obs = np.array([[[20.], [-0.5]]])
    features = LinearFeatureBaseline()._features(obs)
    # [clip(o), clip(o)^2, u, u^2, u^3, 1] with u = t/100
    np.testing.assert_allclose(features[0, 0], [10., 100., 0., 0., 0., 1.])
    np.testing.assert_allclose(features[0, 1], [-0.5, 0.25, .01, 1e-4, 1e-6, 1.])


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
