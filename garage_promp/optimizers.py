"""Conjugate gradient and Hessian-vector products for TRPO-MAML.

After the original ProMP code's meta_policy_search/optimizers/conjugate_gradient_optimizer.py.
"""
from typing import Callable, Sequence

import torch


def flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Concatenate tensors into one flat vector."""
    return torch.cat([t.reshape(-1) for t in tensors])


def unflatten_like(flat: torch.Tensor,
                   like: Sequence[torch.Tensor]) -> list:
    """Split a flat vector into tensors shaped like ``like``."""
    out, start = [], 0
    for t in like:
        out.append(flat[start:start + t.numel()].view_as(t))
        start += t.numel()
    return out


def conjugate_gradient(hvp: Callable[[torch.Tensor], torch.Tensor],
                       b: torch.Tensor,
                       iters: int = 10,
                       residual_tol: float = 1e-10) -> torch.Tensor:
    """Approximately solve H x = b with at most ``iters`` CG iterations.

    Starts from x = 0 and stops early when rᵀr < ``residual_tol``, as the
    reference ``conjugate_gradients``.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = r.dot(r)
    for _ in range(iters):
        if rr < residual_tol:
            break
        hp = hvp(p)
        alpha = rr / p.dot(hp)
        x = x + alpha * p
        r = r - alpha * hp
        rr_new = r.dot(r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def exact_hvp(f_value: torch.Tensor, params: Sequence[torch.Tensor],
              damping: float = 0.) -> Callable[[torch.Tensor], torch.Tensor]:
    """Pearlmutter HVPs of a scalar by double backpropagation.

    The first gradient is built once with ``create_graph=True`` and reused by
    every product, so each HVP costs one backward pass.
    """
    grads = flatten(torch.autograd.grad(f_value, params, create_graph=True))

    def hvp(v: torch.Tensor) -> torch.Tensor:
        hv = torch.autograd.grad(grads, params, grad_outputs=v,
                                 retain_graph=True)
        return flatten(hv) + damping * v

    return hvp


def finite_difference_hvp(grad_at: Callable[[torch.Tensor], torch.Tensor],
                          theta: torch.Tensor,
                          eps: float = 1e-5,
                          damping: float = 0.) -> Callable:
    """Symmetric finite-difference HVPs, the reference's ``FiniteDifferenceHvp``.

    Hv ≈ (∇f(θ + εv) − ∇f(θ − εv)) / (2ε) with an absolute ε, as in the original
    meta_policy_search/optimizers/conjugate_gradient_optimizer.py.

    Args:
        grad_at (callable): Flat θ ↦ flat ∇f(θ).
        theta (torch.Tensor): Flat point of the product.
        eps (float): Step ε.
        damping (float): Added ``damping * v``.

    """

    def hvp(v: torch.Tensor) -> torch.Tensor:
        plus = grad_at(theta + eps * v)
        minus = grad_at(theta - eps * v)
        return (plus - minus) / (2 * eps) + damping * v

    return hvp
