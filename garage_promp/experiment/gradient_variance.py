"""Meta-gradient variance diagnostic (paper §7.2, Fig. 4).

After the original ProMP code's experiments/gradient_variance/ scripts (removed from its
master in commit b9e0064).

The reference resampled tasks only in the last of its 10 rounds, mixing task
variance into a measurement meant to be "same tasks, new trajectories"; here
every round uses the same tasks (see docs/algorithms.md, "Quirks of the original
implementation fixed here").
"""
import copy

from garage_promp.optimizers import flatten

import numpy as np
import torch


def sample_meta_gradients(algo, n_rounds: int, task_updates=None
                          ) -> torch.Tensor:
    """Meta-gradients of J at the current θ from fresh data, ``n_rounds`` times.

    Each round samples new pre- and post-update episodes of the same tasks at
    the current parameters and computes ∇_θ J (the ascent direction of the
    maximised meta-objective), flattened in ``algo.policy.parameters()``
    order. The policy, its gradients and the optimiser state are unchanged.

    Args:
        algo (MetaPolicySearch): A garage_promp algorithm.
        n_rounds (int): Number of gradient samples (≥ 2).
        task_updates (list or None): Tasks to use (default: a fresh
            meta-batch from the algorithm's task sampler).

    Returns:
        torch.Tensor: Gradients of shape :math:`(n\\_rounds, n\\_params)`.

    """
    if not (isinstance(n_rounds, int) and n_rounds >= 2):
        raise ValueError(f'n_rounds must be an int >= 2, got {n_rounds!r}')
    if task_updates is None:
        task_updates = algo._task_sampler.sample(algo._meta_batch_size)
    params = list(algo.policy.parameters())
    saved = [p.detach().clone() for p in params]
    saved_grads = [None if p.grad is None else p.grad.clone() for p in params]
    saved_state = copy.deepcopy(algo.__dict__.get('inner_kl_coeff'))
    grads = []
    for _ in range(n_rounds):
        batches = algo.sample_meta_batch(0, task_updates)
        objective = algo.meta_objective(batches).objective
        grads.append(flatten(torch.autograd.grad(objective, params)))
    with torch.no_grad():
        for p, value, grad in zip(params, saved, saved_grads):
            p.copy_(value)
            p.grad = grad
    if saved_state is not None:
        algo.inner_kl_coeff = saved_state
    return torch.stack(grads)


def relative_std(grads: torch.Tensor, eps: float = 1e-8) -> float:
    r"""The original ProMP code's ``Meta-GradientRStd`` (plotted in paper Fig. 4).

    :math:`\frac1P\sum_p \mathrm{std}_r(g_{r,p}) / (|\mathrm{mean}_r(g_{r,p})| + \epsilon)`,
    std with ddof 0.
    """
    g = np.asarray(grads, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] < 2:
        raise ValueError('grads must have shape (n_rounds >= 2, n_params), '
                         f'got {g.shape}')
    return float(np.mean(g.std(axis=0) / (np.abs(g.mean(axis=0)) + eps)))
