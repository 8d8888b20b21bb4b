"""ProMP's adaptive inner KL penalty: η_k per inner step, as ``adapt_kl_coeff``.

The original ProMP code (meta_policy_search/meta_algos/pro_mp.py) halves
η_k when the measured inner KL of step k is below ``target / 1.5``, doubles
it when above ``target * 1.5`` and leaves it otherwise, each step on its own.
These tests run the real ``ProMP.optimize`` on a tiny fixed batch; only the
inner KLs that ``optimize`` reads after its update (the ``create_graph=False``
``meta_objective`` call) are replaced by chosen values, so each branch of
the rule is reached for each step independently.
"""
from garage_promp.algos.meta_objective import MetaObjective

from dowel import tabular
import numpy as np
import pytest

from tests.helpers import make_algo

TARGET = 0.01
ETA0 = 0.1
BELOW = TARGET / 1.5 * 0.5
ABOVE = TARGET * 1.5 * 2
BETWEEN = TARGET


def _promp(adaptive=True):
    _, algo = make_algo('ProMP', num_inner_grad_steps=2, num_promp_steps=1,
                        adaptive_inner_kl_penalty=adaptive,
                        target_inner_step=TARGET, init_inner_kl_penalty=ETA0)
    return algo, algo.sample_meta_batch(0)


def _control_after_kls(algo, kls, seen):
    """Make ``optimize``'s after-update ``meta_objective`` report ``kls``.

    The objective itself is computed for real; ``seen`` gets the real and the
    reported inner KLs of every after-update call.
    """
    real = algo.meta_objective

    def meta_objective(batches, theta=None, create_graph=True):
        out = real(batches, theta, create_graph)
        if create_graph:  # the update's own objectives: untouched
            return out
        keys = [f'InnerKL_Step_{k}' for k in range(algo.num_inner_grad_steps)]
        assert set(keys) <= set(out.stats)
        stats = dict(out.stats)
        if kls is not None:
            stats.update({key: float(kl) for key, kl in zip(keys, kls)})
        seen.append(([out.stats[key] for key in keys],
                     [stats[key] for key in keys]))
        return MetaObjective(out.objective, out.kl, stats)

    algo.meta_objective = meta_objective


@pytest.mark.parametrize('kls, factors', [
    ((BELOW, ABOVE), (0.5, 2.)),
    ((ABOVE, BELOW), (2., 0.5)),
    ((BETWEEN, BETWEEN), (1., 1.)),
    ((BETWEEN, ABOVE), (1., 2.)),
    ((BELOW, BETWEEN), (0.5, 1.)),
    # the bounds themselves are "in between" (strict comparisons, as the
    # reference's ``kl < target / 1.5`` / ``kl > target * 1.5``)
    ((TARGET / 1.5, TARGET * 1.5), (1., 1.)),
    # just inside each side of the bounds: the thresholds are κ/1.5 and 1.5κ, not κ/2
    # and 2κ (or any looser pair)
    ((TARGET / 1.5 * 0.99, TARGET * 1.5 * 1.01), (0.5, 2.)),
    ((TARGET / 1.5 * 1.01, TARGET * 1.5 * 0.99), (1., 1.)),
])
def test_eta_halves_below_doubles_above_per_inner_step(kls, factors):
    algo, batches = _promp()
    seen = []
    _control_after_kls(algo, kls, seen)
    np.testing.assert_array_equal(algo.inner_kl_coeff, [ETA0, ETA0])
    algo.optimize(0, batches)
    assert len(seen) == 1  # the rule read the after-update KLs once
    np.testing.assert_allclose(algo.inner_kl_coeff,
                               [ETA0 * f for f in factors], rtol=0, atol=0)
    # the logged coefficient is the one the epoch used (before the rule)
    assert tabular.as_dict['InnerKLCoeff_Step_0'] == ETA0
    assert tabular.as_dict['InnerKLCoeff_Step_1'] == ETA0
    assert tabular.as_dict['InnerKL_Step_0'] == kls[0]
    assert tabular.as_dict['InnerKL_Step_1'] == kls[1]


def test_eta_compounds_over_epochs_per_step():
    """Two epochs: step 0 stays below (η/4), step 1 above (4η)."""
    algo, batches = _promp()
    _control_after_kls(algo, (BELOW, ABOVE), [])
    algo.optimize(0, batches)
    algo.optimize(1, batches)
    np.testing.assert_array_equal(algo.inner_kl_coeff, [ETA0 / 4, ETA0 * 4])


def test_eta_rule_on_the_measured_kls():
    """Without any replaced value, η follows the rule on the real inner KLs."""
    algo, batches = _promp()
    seen = []
    _control_after_kls(algo, None, seen)
    algo.optimize(0, batches)
    (real, reported), = seen
    assert real == reported and all(kl > 0 for kl in real)
    for k, kl in enumerate(real):
        expected = (ETA0 / 2 if kl < TARGET / 1.5 else
                    ETA0 * 2 if kl > TARGET * 1.5 else ETA0)
        assert algo.inner_kl_coeff[k] == expected, (k, kl)


def test_eta_fixed_without_adaptive_penalty():
    algo, batches = _promp(adaptive=False)
    _control_after_kls(algo, (BELOW, ABOVE), [])
    algo.optimize(0, batches)
    np.testing.assert_array_equal(algo.inner_kl_coeff, [ETA0, ETA0])
