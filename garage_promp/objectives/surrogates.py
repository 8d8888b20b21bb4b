"""Surrogate objectives of ProMP and its family, as pure tensor functions.

Every function takes tensors and returns a tensor; none touches a policy or an
optimizer. Objectives are quantities to **maximise** (the algorithms negate
them into losses). Data are laid out padded, :math:`(..., R, T)` for R
episodes of at most T steps, with a 0/1 ``mask`` marking valid steps; every
mean runs over the valid steps only.

Equation numbers refer to Rothfuss et al., "ProMP: Proximal Meta-Policy
Search", ICLR 2019 (arXiv:1810.06784).
"""
import math

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the cells where ``mask`` is 1.

    Args:
        values (torch.Tensor): Values of shape :math:`(..., R, T)`.
        mask (torch.Tensor): 0/1 mask of the same shape.

    Returns:
        torch.Tensor: Scalar mean over the valid cells.

    """
    return (values * mask).sum() / mask.sum().clamp(min=1.)


def gaussian_log_likelihood(actions: torch.Tensor, mean: torch.Tensor,
                            log_std: torch.Tensor) -> torch.Tensor:
    r"""Log-density of a diagonal Gaussian, summed over the action dimensions.

    :math:`\log p(a) = -\sum_j \log\sigma_j - \tfrac12\sum_j ((a_j-\mu_j)/\sigma_j)^2
    - \tfrac d2 \log 2\pi` (original ProMP code,
    meta_policy_search/policies/distributions/diagonal_gaussian.py).

    Args:
        actions (torch.Tensor): Actions of shape :math:`(..., A)`.
        mean (torch.Tensor): Means of shape :math:`(..., A)`.
        log_std (torch.Tensor): Log standard deviations, broadcastable.

    Returns:
        torch.Tensor: Log-likelihoods of shape :math:`(...)`.

    """
    z = (actions - mean) * torch.exp(-log_std)
    log_std = log_std.expand_as(mean)
    return (-log_std - 0.5 * z.pow(2)).sum(-1) - 0.5 * actions.shape[-1] * \
        math.log(2 * math.pi)


def gaussian_kl(old_mean: torch.Tensor, old_log_std: torch.Tensor,
                new_mean: torch.Tensor,
                new_log_std: torch.Tensor) -> torch.Tensor:
    r"""KL(old ‖ new) of two diagonal Gaussians, summed over action dims.

    :math:`\sum_j \frac{(\mu_o-\mu_n)^2 + \sigma_o^2 - \sigma_n^2}{2\sigma_n^2}
    + \log\sigma_n - \log\sigma_o` (original ProMP code,
    meta_policy_search/policies/distributions/diagonal_gaussian.py, without its 1e-8 fudge in
    the denominator, so the KL is exactly 0 at equal arguments).

    Returns:
        torch.Tensor: KL divergences of shape :math:`(...)`.

    """
    old_var = torch.exp(2 * old_log_std)
    new_var = torch.exp(2 * new_log_std)
    kl = ((old_mean - new_mean).pow(2) + old_var - new_var) / (2 * new_var) \
        + new_log_std - old_log_std
    return kl.sum(-1)


def likelihood_ratio(log_probs: torch.Tensor,
                     old_log_probs: torch.Tensor) -> torch.Tensor:
    r"""Importance ratio :math:`\pi_\theta(a|s) / \pi_{old}(a|s)`."""
    return torch.exp(log_probs - old_log_probs)


def lvc_objective(log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                  advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r"""Low-variance curvature (LVC) objective, Eq. 9-10.

    :math:`J^{LVC}(\theta) = \mathbb{E}[\frac{\pi_\theta(a|s)}{\pi_{old}(a|s)} \hat A]`
    with :math:`\pi_{old}` constant. At :math:`\theta = \theta_{old}` its
    value is the mean advantage and its gradient is the policy gradient; its
    Hessian carries both the :math:`\nabla^2 \log\pi` and the
    :math:`\nabla\log\pi\nabla\log\pi^\top` terms, so differentiating through
    an LVC inner step credits the pre-update sampling distribution.

    Args:
        log_probs (torch.Tensor): :math:`\log\pi_\theta(a|s)`, :math:`(..., R, T)`.
        old_log_probs (torch.Tensor): Log-probs under the sampling policy.
        advantages (torch.Tensor): Advantages :math:`\hat A`.
        mask (torch.Tensor): Valid-step mask.

    Returns:
        torch.Tensor: Scalar objective.

    """
    ratio = likelihood_ratio(log_probs, old_log_probs.detach())
    return masked_mean(ratio * advantages, mask)


def log_likelihood_objective(log_probs: torch.Tensor, advantages: torch.Tensor,
                             mask: torch.Tensor) -> torch.Tensor:
    r"""The original MAML / VPG objective :math:`\mathbb{E}[\log\pi_\theta(a|s)\hat A]`.

    Differentiating through an inner step on this objective yields only the
    :math:`\nabla^2\log\pi\,\hat A` curvature term: no credit is assigned to
    the pre-update sampling distribution (paper §5, App. B.3).
    """
    return masked_mean(log_probs * advantages, mask)


def magic_box(x: torch.Tensor) -> torch.Tensor:
    r"""DiCE's magic box :math:`\boxdot(x) = \exp(x - \bot x)`.

    Equals 1 in value; its gradient is :math:`\nabla x`.
    """
    return torch.exp(x - x.detach())


def cumulative_log_probs(log_probs: torch.Tensor,
                         mask: torch.Tensor) -> torch.Tensor:
    r"""Per-episode cumulative log-probabilities :math:`\sum_{t'\le t}\log\pi(a_{t'}|s_{t'})`.

    Args:
        log_probs (torch.Tensor): Log-probs of shape :math:`(..., R, T)`.
        mask (torch.Tensor): Valid-step mask; padding never enters a sum.

    Returns:
        torch.Tensor: Cumulative sums along T, shape :math:`(..., R, T)`.

    """
    return torch.cumsum(log_probs * mask, dim=-1)


def dice_objective(log_probs: torch.Tensor, adjusted_rewards: torch.Tensor,
                   mask: torch.Tensor) -> torch.Tensor:
    r"""DiCE objective :math:`\mathbb{E}[\sum_t \boxdot(\sum_{t'\le t}\log\pi)\,\tilde r_t]`.

    ``adjusted_rewards`` are :math:`\gamma^t r_t - b(t)` with a time-only
    baseline (original ProMP code, meta_policy_search/meta_algos/dice_maml.py and
    meta_policy_search/samplers/dice_sample_processor.py). The mean runs over valid
    steps only (the reference divided by all padded cells; see docs/algorithms.md,
    "Quirks of the original implementation fixed here").
    """
    boxes = magic_box(cumulative_log_probs(log_probs, mask))
    return masked_mean(boxes * adjusted_rewards, mask)


def clipped_objective(log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                      advantages: torch.Tensor, clip_eps: float,
                      mask: torch.Tensor) -> torch.Tensor:
    r"""PPO's clipped surrogate, ProMP's outer objective (Eq. 13, first term).

    :math:`\mathbb{E}[\min(\rho\hat A, \mathrm{clip}(\rho, 1-\epsilon, 1+\epsilon)\hat A)]`
    with :math:`\rho = \pi_{\theta'}/\pi_{\theta'_o}`.
    """
    ratio = likelihood_ratio(log_probs, old_log_probs.detach())
    clipped = torch.clamp(ratio, 1. - clip_eps, 1. + clip_eps)
    return masked_mean(torch.min(ratio * advantages, clipped * advantages),
                       mask)


def emaml_objective(pre_update_log_probs: torch.Tensor,
                    pre_update_mask: torch.Tensor,
                    post_update_mean_reward: torch.Tensor) -> torch.Tensor:
    r"""E-MAML exploration term (paper §3, formulation II).

    :math:`\bar r_{post}\cdot\mathbb{E}_{D_0}[\log\pi_\theta(a|s)]`: a
    REINFORCE term on the pre-update policy whose "reward" is the task's mean
    standardised post-update reward (a constant), as ``exploration=True`` in the
    original ProMP code's meta_policy_search/meta_algos/trpo_maml.py and
    meta_policy_search/meta_algos/vpg_maml.py.
    """
    return post_update_mean_reward.detach() * masked_mean(
        pre_update_log_probs, pre_update_mask)
