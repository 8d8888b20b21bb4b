r"""Exact Hessian-vector products of TRPO-MAML's trust-region KL, by hand.

TRPO-MAML (the original ProMP code's meta_policy_search/meta_algos/trpo_maml.py)
constrains :math:`\bar D(\theta) = \frac1M\sum_i \mathrm{KL}(\pi_{\theta'_{o,i}}
\,\|\, \pi_{\theta'_i(\theta)})` on the post-update data, where
:math:`\theta'_i(\theta)` is θ after the K inner steps
:math:`\phi_{k+1} = \phi_k + \alpha \odot \nabla_\phi J^{in}_{i,k}(\phi_k)`
(paper §4, Eq. 1). Conjugate gradient needs products of its Hessian at the
sampling parameters :math:`\theta_o` with ten directions per iteration.

At :math:`\theta_o` every post-update policy equals the one that sampled the
data, so the KL is at its minimum (zero) and its gradient with respect to the
post-update parameters vanishes. The terms of the chain rule that multiply
that gradient vanish with it, and the Hessian is exactly

.. math::
    \nabla^2 \bar D(\theta_o) = \sum_i J_i^\top F_i J_i, \qquad
    J_i = \prod_{k=K-1}^{0} (I + \operatorname{diag}(\alpha) H_{i,k}),

with :math:`F_i` the Fisher matrix of task i's post-update Gaussians on its
post-update data (:math:`1/\sigma^2` on the mean, 2 on the log-std, averaged
over the valid steps and the M tasks) and :math:`H_{i,k}` the Hessian of the
inner objective at :math:`\phi_{i,k}` on :math:`D_{i,k}` (symmetric, so
:math:`J_i^\top` is the same products in reverse order). One product costs 2K
inner-Hessian products and one Fisher product, each a forward-mode tangent
and a backward pass through the policy's MLP written out layer by layer
(Pearlmutter's R-operator, with the direction-free forward and backward
computed once per conjugate-gradient solve). Double backpropagation through
the adaptation (:func:`garage_promp.optimizers.exact_hvp`) computes the same
matrix through a third-order autograd graph, about 2-3 times slower on the
paper's HalfCheetah batch (0.36-0.49 s a product against 0.17-0.19 s on 2
cores).

The inner objective enters only through its first and second derivatives
with respect to the per-step log-likelihoods ℓ, taken by autograd on a
function of ℓ alone, so LVC, the log-likelihood (MAML) and DiCE inner
estimators all use the same code. The MLP part covers garage's
``GaussianMLPPolicy`` (:class:`~garage_promp.policies.BatchedGaussianMLP`'s
structures: any elementwise hidden and output nonlinearities, a learned or
fixed state-independent log-std with its clamp and parameterisation).
"""
import collections
from typing import Callable, Dict, List, Sequence

from garage_promp.objectives import gaussian_log_likelihood
from garage_promp.policies import BatchedGaussianMLP, Params, expand_params

import torch

# Layers with at most this many outputs compute their tangent transposed,
# (W x^T)^T: batched GEMMs with a narrow output run about 3x slower as x W^T.
_NARROW = 16

LogProbObjective = Callable[[torch.Tensor, object], torch.Tensor]


def elementwise_derivatives(fn: Callable[[torch.Tensor], torch.Tensor],
                            x: torch.Tensor):
    """``fn(x)`` with its first and second derivatives, for an elementwise ``fn``."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        y = fn(x.clone())  # a clone: ``fn`` may work in place (ELU(inplace=True))
        (d1, ) = torch.autograd.grad(y.sum(), x, create_graph=True)
        d2 = None
        if d1.requires_grad:
            (d2, ) = torch.autograd.grad(d1.sum(), x, allow_unused=True)
    d2 = torch.zeros_like(x) if d2 is None else d2
    return y.detach(), d1.detach(), d2.detach()


def _closed_form(act) -> str | None:
    """'tanh' or 'relu' where ``act`` is one, else None."""
    if act in (torch.tanh, torch.nn.functional.tanh) or isinstance(act, torch.nn.Tanh):
        return 'tanh'
    if act in (torch.relu, torch.nn.functional.relu) or isinstance(act, torch.nn.ReLU):
        return 'relu'
    return None


def _activation_derivatives(act, z: torch.Tensor | None, y: torch.Tensor,
                            second: bool):
    """act'(z) and (if ``second``) act''(z), given y = act(z).

    Closed forms in y for tanh and ReLU (z is not needed); any other
    elementwise nonlinearity by autograd (:func:`elementwise_derivatives`).
    """
    kind = _closed_form(act)
    if kind == 'tanh':
        d1 = 1. - y * y
        return d1, (-2. * y * d1 if second else None)
    if kind == 'relu':
        d1 = (y > 0).to(y.dtype)
        return d1, (torch.zeros_like(y) if second else None)
    _, d1, d2 = elementwise_derivatives(act, z)
    return d1, d2


class _Buffers:
    """Reused output tensors of the products' large intermediates.

    Products run one after another and return only freshly allocated
    parameter-sized tensors, so one buffer per (role, shape) is enough. It
    spares the allocator a fresh, page-faulting block for every
    (M, N, hidden) intermediate: about 15% of a product on 2 CPU cores.
    """

    def __init__(self):
        self._buffers = {}

    def __call__(self, role: str, like: torch.Tensor, shape) -> torch.Tensor:
        key = (role, tuple(shape), like.dtype, like.device)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = like.new_empty(shape)
        return buffer


class _MLPAt:
    """The mean network at stacked parameters on one batch, with its tangents.

    Shapes: M parameter sets (tasks), N steps each; ``x[i]`` is layer i's
    input, ``x[-1]`` the mean. Everything that does not depend on the
    direction is computed once here and in :meth:`backward`.
    """

    def __init__(self, structure: BatchedGaussianMLP, params: Params,
                 observations: torch.Tensor, buffers: _Buffers):
        self.buffers = buffers
        self.layers = structure.layers
        self.weights = [params[w] for w, _, _ in self.layers]
        self.weights_t = [w.transpose(1, 2).contiguous() for w in self.weights]
        self.x = [observations]
        self.z: List[torch.Tensor | None] = []
        self.acts = [act for _, _, act in self.layers]
        for i, (_, bias, act) in enumerate(self.layers):
            z = torch.baddbmm(params[bias].unsqueeze(1), self.x[-1], self.weights_t[i])
            # Pre-activations are kept only where no closed form exists (and
            # then cloned: an in-place nonlinearity would overwrite them).
            keep = act is not None and not _closed_form(act)
            self.z.append(z if keep else None)
            self.x.append(z if act is None else act(z.clone() if keep else z))
        self.mean = self.x[-1]
        self._d1: Dict[int, torch.Tensor] = {}
        self._d2: Dict[int, torch.Tensor] = {}
        # The plain backward pass of one cotangent (see :meth:`backward`):
        self.dz: List[torch.Tensor] | None = None  # ∂f/∂z_i
        self._dx: List[torch.Tensor] | None = None  # ∂f/∂x_{i+1}
        self._d2dx: Dict[int, torch.Tensor] = {}  # act''(z_i) ∂f/∂x_{i+1}

    def d1(self, i: int) -> torch.Tensor | None:
        """act'(z_i), or None for a linear layer (computed on first use)."""
        if self.acts[i] is None:
            return None
        if i not in self._d1:
            self._d1[i], self._d2[i] = _activation_derivatives(
                self.acts[i], self.z[i], self.x[i + 1], second=False)
        return self._d1[i]

    def d2(self, i: int) -> torch.Tensor:
        """act''(z_i) (computed on first use)."""
        if self._d2.get(i) is None:
            self._d1[i], self._d2[i] = _activation_derivatives(
                self.acts[i], self.z[i], self.x[i + 1], second=True)
        return self._d2[i]

    def backward(self, d_mean: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The plain backward pass of a cotangent on the mean: its parameter
        gradient (stacked). The pass is kept for :meth:`backward_tangent`."""
        n = len(self.layers)
        dzs, dxs, grads = [None] * n, [None] * n, {}
        dx = d_mean
        for i in reversed(range(n)):
            weight, bias, _ = self.layers[i]
            dz = dx if self.acts[i] is None else self.d1(i) * dx
            dzs[i], dxs[i] = dz, dx
            grads[weight] = self._weight_gradient(dz, i)
            grads[bias] = dz.sum(1)
            if i > 0:
                dx = torch.bmm(dz, self.weights[i])
        self.dz, self._dx, self._d2dx = dzs, dxs, {}
        return grads

    def d2dx(self, i: int) -> torch.Tensor:
        """act''(z_i) times the stored backward pass's ∂f/∂x_{i+1}."""
        if i not in self._d2dx:
            self._d2dx[i] = self.d2(i) * self._dx[i]
        return self._d2dx[i]

    def _weight_gradient(self, dz: torch.Tensor, i: int) -> torch.Tensor:
        """Σ_n dz_n x_nᵀ of layer i, in the faster GEMM layout."""
        if dz.shape[-1] > self.x[i].shape[-1]:
            # A narrow input (the observations): the transposed product.
            return torch.bmm(self.x[i].transpose(1, 2), dz).transpose(1, 2)
        return torch.bmm(dz.transpose(1, 2), self.x[i])

    def tangent(self, u: Params):
        """Forward-mode tangents along direction ``u``: (ż_i, ẋ_{i+1}) per layer."""
        zdots, xdots = [], []
        for i, (weight, bias, _) in enumerate(self.layers):
            if self.weights[i].shape[1] > _NARROW:
                zdot = torch.baddbmm(u[bias].unsqueeze(1), self.x[i],
                                     u[weight].transpose(1, 2).contiguous(),
                                     out=self.buffers(f'z{i}', self.x[i + 1],
                                                      self.x[i + 1].shape))
                if xdots:
                    zdot.baddbmm_(xdots[-1], self.weights_t[i])
            else:  # a narrow output (the mean layer, small hidden layers): transposed
                zdot = torch.baddbmm(u[bias].unsqueeze(2), u[weight],
                                     self.x[i].transpose(1, 2))
                if xdots:
                    zdot.baddbmm_(self.weights[i], xdots[-1].transpose(1, 2))
                zdot = zdot.transpose(1, 2)
            zdots.append(zdot)
            xdots.append(zdot if self.acts[i] is None else torch.mul(
                self.d1(i), zdot, out=self.buffers(f'x{i}', zdot, zdot.shape)))
        return zdots, xdots

    def backward_tangent(self, u: Params, tangents, d_mean_dot: torch.Tensor,
                         with_plain: bool) -> Dict[str, torch.Tensor]:
        """R-operator of the backward pass: the directional derivative along
        ``u`` of the parameter gradient, given the mean cotangent's own
        derivative ``d_mean_dot`` (and, ``with_plain``, the stored plain
        backward pass; without it that cotangent is taken to be zero)."""
        zdots, xdots = tangents
        grads = {}
        dxdot = d_mean_dot
        for i in reversed(range(len(self.layers))):
            weight, bias, _ = self.layers[i]
            if self.acts[i] is None:
                dzdot = dxdot
            else:
                dzdot = torch.mul(self.d1(i), dxdot,
                                  out=self.buffers(f'dz{i}', dxdot, self.x[i + 1].shape))
                if with_plain:
                    dzdot.addcmul_(self.d2dx(i), zdots[i])
            grad_w = self._weight_gradient(dzdot, i)
            if with_plain and i > 0:
                grad_w = grad_w.baddbmm(self.dz[i].transpose(1, 2), xdots[i - 1])
            grads[weight] = grad_w
            grads[bias] = dzdot.sum(1)
            if i > 0:
                dxdot = torch.bmm(dzdot, self.weights[i],
                                  out=self.buffers(f'dx{i}', dzdot, self.x[i].shape))
                if with_plain:
                    dxdot.baddbmm_(self.dz[i], u[weight])
        return grads


class _GaussianAt:
    """The policy's Gaussians at stacked parameters on one batch's (M, N) steps."""

    def __init__(self, structure: BatchedGaussianMLP, params: Params, batch,
                 buffers: _Buffers):
        m = batch.n_tasks
        obs = batch.observations
        self.shape = batch.actions.shape
        self.net = _MLPAt(structure, params, obs.reshape(m, -1, obs.shape[-1]),
                          buffers)
        self.log_std_name = structure.log_std_name
        raw = structure.raw_log_std(params, m)
        self.raw_shape = raw.shape
        log_std, self.ls_d1, self.ls_d2 = elementwise_derivatives(
            structure.log_std_of, raw)
        self.log_std = log_std.unsqueeze(1)  # (M, 1, A)
        self.ls_d1, self.ls_d2 = self.ls_d1.unsqueeze(1), self.ls_d2.unsqueeze(1)
        self.std = self.log_std.exp()
        self.actions = batch.actions.reshape(m, -1, self.shape[-1])

    @property
    def mean(self) -> torch.Tensor:
        """(M, N, A)."""
        return self.net.mean

    def log_std_dot(self, u: Params) -> torch.Tensor:
        """d log σ along ``u``, (M, 1, A)."""
        if self.log_std_name is None:
            return torch.zeros_like(self.log_std)
        return self.ls_d1 * u[self.log_std_name].unsqueeze(1)


class _InnerHessian:
    r"""Products with the Hessian of the summed per-task inner objectives
    :math:`\sum_i J^{in}_i(\phi_i)` at stacked :math:`\phi` on one batch.

    With ℓ the per-step log-likelihoods, g = ∂J/∂ℓ and e = (a − μ)/σ:
    ∂ℓ/∂μ = e/σ and ∂ℓ/∂log σ = e² − 1; the gradient is the backward pass of
    g·e/σ, and its directional derivative follows from ℓ̇, ġ = ∇²_ℓ J · ℓ̇
    and ė = −μ̇/σ − e·(log σ)˙.
    """

    def __init__(self, structure: BatchedGaussianMLP, params: Params, batch,
                 objective: LogProbObjective, buffers: _Buffers):
        self.at = at = _GaussianAt(structure, params, batch, buffers)
        self.e = (at.actions - at.mean) / at.std
        log_probs = gaussian_log_likelihood(batch.actions, at.mean.reshape(at.shape),
                                            at.log_std.unsqueeze(1))
        with torch.enable_grad():
            self.log_probs = log_probs.detach().requires_grad_(True)
            (g, ) = torch.autograd.grad(objective(self.log_probs, batch).sum(),
                                        self.log_probs, create_graph=True)
        self.g_graph = g
        self.g = g.detach().reshape(batch.n_tasks, -1, 1)
        # ∇J^in: the backward pass of g·∂ℓ/∂μ, kept for the products.
        self.gradient = at.net.backward(self.g * self.e / at.std)
        if at.log_std_name is not None:
            d_ls = (self.g * (self.e * self.e - 1.)).sum(1, keepdim=True)
            self.gradient[at.log_std_name] = (d_ls[:, 0] * at.ls_d1[:, 0]).sum_to_size(
                at.raw_shape)

    def product(self, u: Params) -> Dict[str, torch.Tensor]:
        """H u, stacked like ``u``."""
        at, e, g = self.at, self.e, self.g
        tangents = at.net.tangent(u)
        mean_dot = tangents[1][-1]
        ls_dot = at.log_std_dot(u)
        l_dot = (e / at.std * mean_dot + (e * e - 1.) * ls_dot).sum(-1)
        g_dot = None
        if self.g_graph.requires_grad:
            (g_dot, ) = torch.autograd.grad(self.g_graph, self.log_probs,
                                            l_dot.reshape(self.g_graph.shape),
                                            retain_graph=True, allow_unused=True)
        g_dot = torch.zeros_like(g) if g_dot is None else g_dot.reshape(g.shape)
        e_dot = -mean_dot / at.std - e * ls_dot
        d_mean_dot = (g_dot * e + g * (e_dot - e * ls_dot)) / at.std
        grads = at.net.backward_tangent(u, tangents, d_mean_dot, with_plain=True)
        if at.log_std_name is not None:
            # ∂J/∂raw = Σ_n g (e² − 1) f'(raw); its derivative along u.
            raw_dot = u[at.log_std_name]
            d_ls = (g_dot * (e * e - 1.) + 2. * g * e * e_dot).sum(1) * at.ls_d1[:, 0]
            d_ls = d_ls + (g * (e * e - 1.)).sum(1) * at.ls_d2[:, 0] * raw_dot
            grads[at.log_std_name] = d_ls.sum_to_size(raw_dot.shape)
        return grads


class _PostFisher:
    """Products with the mean post-update KL's Hessian where the KL is zero."""

    def __init__(self, at: _GaussianAt, batch):
        self.at = at
        mask = batch.mask.reshape(batch.n_tasks, -1, 1)
        # masked_mean per task, then the mean over tasks.
        self.weight = mask / mask.sum(1, keepdim=True).clamp(min=1.) / batch.n_tasks
        old_std = batch.old_log_std.reshape(at.mean.shape).exp()
        valid = mask.expand_as(at.mean) > 0
        gap_mean = ((at.mean - batch.old_mean.reshape(at.mean.shape)) / old_std)[valid]
        gap_std = (at.log_std - batch.old_log_std.reshape(at.mean.shape))[valid]
        self.mismatch = float(torch.cat([gap_mean.abs(), gap_std.abs(),
                                         torch.zeros(1, device=mask.device)]).max())

    def product(self, u: Params) -> Dict[str, torch.Tensor]:
        """F u, stacked like ``u``."""
        at = self.at
        tangents = at.net.tangent(u)
        d_mean_dot = self.weight * tangents[1][-1] / (at.std * at.std)
        grads = at.net.backward_tangent(u, tangents, d_mean_dot, with_plain=False)
        if at.log_std_name is not None:
            # 2 per action dimension, summed over the dimensions that share
            # one raw parameter (garage's is a single scalar by default).
            raw_dot = u[at.log_std_name]
            per_dim = 2. * self.weight.sum(1) * at.ls_d1[:, 0]**2 * raw_dot
            grads[at.log_std_name] = per_dim.expand(
                -1, at.mean.shape[-1]).sum_to_size(raw_dot.shape)
        return grads


class TrustRegionCurvature:
    r"""v ↦ ∇²D̄(θ_o) v for garage ``GaussianMLPPolicy`` policies (module docstring).

    Args:
        structure (BatchedGaussianMLP): The policy's structure.
        theta (dict): Detached θ_o by name.
        batches (list[MetaBatch]): The K+1 batches of the same tasks.
        inner_lr (dict): α by parameter name (scalars or parameter-shaped).
        objective (callable): ``(log_probs (M, R, T), batch) -> (M,)``, the
            inner objective as a function of the log-likelihoods.
        damping (float): Added ``damping * v``.

    Attributes:
        mismatch (float): Largest gap, over valid post-update steps, between
            the recomputed post-update Gaussians and the sampling ones (mean
            in units of σ, and log σ). The form above is exact when it is 0;
            callers fall back to double backpropagation above a tolerance.

    """

    def __init__(self, structure: BatchedGaussianMLP, theta: Params,
                 batches: Sequence, inner_lr: Params,
                 objective: LogProbObjective, damping: float = 0.):
        buffers = _Buffers()
        # The chain φ_0 = θ_o, ..., φ_K (detached, stacked over the tasks),
        # equal to MetaPolicySearch._adapt_chain's to float rounding.
        phi = expand_params(theta, batches[0].n_tasks)
        self.inner: List[_InnerHessian] = []
        for batch in batches[:-1]:
            self.inner.append(_InnerHessian(structure, phi, batch, objective, buffers))
            phi = collections.OrderedDict(
                (name, value + inner_lr[name] * self.inner[-1].gradient[name])
                for name, value in phi.items())
        self._fisher = _PostFisher(_GaussianAt(structure, phi, batches[-1], buffers),
                                   batches[-1])
        self._names = list(theta)
        self._shapes = {n: value.shape for n, value in theta.items()}
        self._lr = inner_lr
        self._n_tasks = batches[0].n_tasks
        self._damping = damping
        self.mismatch = self._fisher.mismatch

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        """Flat v (in ``named_parameters()`` order) ↦ flat H v."""
        u, start = {}, 0
        for name in self._names:
            shape = self._shapes[name]
            size = shape.numel()
            u[name] = v[start:start + size].view(shape).unsqueeze(0).expand(
                self._n_tasks, *shape)
            start += size
        # Forward through the chain: u_{k+1} = (I + α H_k) u_k.
        for inner in self.inner:
            hu = inner.product(u)
            u = {n: u[n] + self._lr[n] * hu[n] for n in self._names}
        w = self._fisher.product(u)
        # Back through it: w_k = (I + H_k α) w_{k+1}.
        for inner in reversed(self.inner):
            hw = inner.product({n: self._lr[n] * w[n] for n in self._names})
            w = {n: w[n] + hw[n] for n in self._names}
        return torch.cat([w[n].sum(0).reshape(-1) for n in self._names]) + \
            self._damping * v


def structure_of(policy: torch.nn.Module) -> BatchedGaussianMLP | None:
    """The policy's structure if this module covers it (every parameter), else None."""
    structure = BatchedGaussianMLP.of(policy)
    if structure is None:
        return None
    names = {name for weight, bias, _ in structure.layers for name in (weight, bias)}
    if structure.log_std_name is not None:
        names.add(structure.log_std_name)
    return structure if names == {name for name, _ in policy.named_parameters()} else None
