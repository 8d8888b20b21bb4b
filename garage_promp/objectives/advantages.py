"""Returns, advantages and DiCE rewards on padded per-task batches (numpy).

Arrays are laid out :math:`(R, T)` for R episodes padded to T steps; padded
cells hold 0 and ``mask`` is 0 there. Semantics follow the reference sample
processors (original ProMP code, meta_policy_search/samplers/base.py and
meta_policy_search/samplers/meta_sample_processor.py): discounting relative to t, GAE with
:math:`b_T = 0`, per-task standardisation by the standard deviation (ddof 0).
"""
import numpy as np


def discount_cumsum(x: np.ndarray, discount: float) -> np.ndarray:
    r""":math:`y_t = \sum_{l\ge0} \gamma^l x_{t+l}` along the last axis.

    Padding zeros at the end of an episode leave the valid cells unchanged.
    """
    import scipy.signal  # pylint: disable=import-outside-toplevel  (0.6 s: at the first use)
    return scipy.signal.lfilter([1], [1, -discount], x[..., ::-1],
                                axis=-1)[..., ::-1].astype(np.float64)


def gae_advantages(rewards: np.ndarray, baselines: np.ndarray,
                   mask: np.ndarray, discount: float,
                   gae_lambda: float) -> np.ndarray:
    r"""Generalised advantage estimates with :math:`b_T := 0` (original ``SampleProcessor``).

    :math:`\delta_t = r_t + \gamma b_{t+1} - b_t`,
    :math:`\hat A_t = \sum_l (\gamma\lambda)^l \delta_{t+l}`. With
    :math:`\lambda = 1` this is :math:`R_t - b_t`.

    Args:
        rewards (np.ndarray): Rewards :math:`(R, T)`, 0 on padding.
        baselines (np.ndarray): Baseline values :math:`(R, T)`.
        mask (np.ndarray): Valid-step mask :math:`(R, T)`.
        discount (float): :math:`\gamma`.
        gae_lambda (float): :math:`\lambda`.

    Returns:
        np.ndarray: Advantages :math:`(R, T)`, 0 on padding.

    """
    values = baselines * mask
    next_values = np.zeros_like(values)
    next_values[..., :-1] = values[..., 1:]
    deltas = (rewards + discount * next_values - values) * mask
    return discount_cumsum(deltas, discount * gae_lambda) * mask


class TooFewStepsError(ValueError):
    """A task batch with fewer than the 2 valid steps that standardising its advantages
    takes (``normalize_adv=True``): its episodes all ended at their first step."""


def normalize_advantages(advantages: np.ndarray, mask: np.ndarray,
                         eps: float = 1e-8) -> np.ndarray:
    """Standardise over valid cells: ``(A - mean) / (std + eps)``, std ddof 0.

    This divides by the standard deviation. (garage's VPG divides by the
    variance, which makes the inner step size depend on the reward scale.)
    """
    valid = mask > 0
    if valid.sum() < 2:
        raise TooFewStepsError(
            'normalize_adv needs at least 2 valid steps per task batch, got '
            f'{int(valid.sum())}')
    mean = advantages[valid].mean()
    std = advantages[valid].std()
    return (advantages - mean) / (std + eps) * mask


def shift_advantages_to_positive(advantages: np.ndarray,
                                 mask: np.ndarray) -> np.ndarray:
    """``A - min(A) + 1e-8`` over the valid cells (reference ``positive_adv``)."""
    valid = mask > 0
    return (advantages - advantages[valid].min() + 1e-8) * mask


def discounted_rewards(rewards: np.ndarray, discount: float) -> np.ndarray:
    r""":math:`\gamma^t r_t` with t counted from the episode start (DiCE, §2.3)."""
    t = np.arange(rewards.shape[-1])
    return rewards * discount**t
