"""TRPO-MAML: a trust region on the post-update policies.

As the original ProMP code's meta_policy_search/meta_algos/trpo_maml.py with
meta_policy_search/optimizers/conjugate_gradient_optimizer.py.
"""
import collections
from typing import List

from garage_promp.algos._batch import MetaBatch
from garage_promp.algos.base import MetaPolicySearch
from garage_promp.algos.meta_objective import per_task
from garage_promp.curvature import TrustRegionCurvature, structure_of
from garage_promp.objectives import lvc_objective
from garage_promp.optimizers import (
    conjugate_gradient,
    exact_hvp,
    finite_difference_hvp,
    flatten,
    unflatten_like,
)
from garage_promp.policies import named_params
from garage_promp.validation import check_choice, check_float, check_int

from dowel import logger, tabular
import numpy as np
import torch

HVP_APPROACHES = ('exact', 'double_backprop', 'finite_difference')

# The largest gap (mean in units of σ, and log σ) between the recomputed and
# the sampling post-update Gaussians at which the Gauss-Newton form of the
# KL's Hessian (garage_promp.curvature) is used: the terms it drops scale
# with that gap, so their relative size stays near this bound; above it
# the products come from double backpropagation instead.
CURVATURE_TOLERANCE = 1e-4
# The first hand-written product of a process is checked against double
# backpropagation; a larger relative gap switches the run to the latter.
CURVATURE_CHECK_TOLERANCE = 1e-3


class TRPOMAML(MetaPolicySearch):
    r"""MAML with a TRPO outer step, and its LVC / DiCE / E-MAML variants.

    Unlike garage's own ``MAMLTRPO`` — which uses the log-likelihood inner
    loss (no pre-update credit), a log-likelihood outer loss in the line
    search, advantages divided by the variance and a value function that
    never trains — this class maximises the importance-sampled surrogate
    :math:`\frac1M\sum_i \mathbb{E}_{D_{K,i}}[\frac{\pi_{\theta'_{K,i}(\theta)}}
    {\pi_{\theta'_o}}\hat A]` subject to the mean KL of the post-update
    policies, seen as functions of θ through all K inner steps, staying
    below ``max_kl_step``; the inner estimator is selectable.

    The step is the reference's (§5): conjugate gradient on the Hessian of
    that KL, step length √(2δ / xᵀHx), backtracking line search accepting the
    first step that improves the surrogate with KL ≤ δ, otherwise θ reverts.
    Hessian-vector products are exact by default: for garage's
    ``GaussianMLPPolicy`` written out by hand in the Gauss-Newton form that
    is exact at the sampling parameters (:mod:`garage_promp.curvature`,
    2-3× faster on the paper's HalfCheetah batch), otherwise by double backpropagation through the
    adaptation (``hvp_approach='double_backprop'`` forces it);
    ``hvp_approach='finite_difference'`` reproduces the reference's symmetric
    finite differences.

    Paper labels: MAML-TRPO = ``inner_estimator='maml'``; E-MAML-TRPO =
    ``'maml'`` with ``exploration=True``; LVC-TRPO = ``'lvc'``; DiCE-TRPO =
    ``'dice'`` (which the reference accepted but could not run).

    Args:
        env, policy, sampler, task_sampler: See :class:`MetaPolicySearch`.
        max_kl_step (float): Trust-region size δ (0.01, the original code's
            ``step_size`` in its MAML runs, ``maml_run_mujoco.py``).
        inner_estimator (str): ``'lvc'``, ``'maml'`` or ``'dice'``.
        exploration (bool): Add the E-MAML term.
        cg_iters (int): Conjugate-gradient iterations.
        backtrack_ratio (float): Line-search shrink factor in (0, 1).
        max_backtracks (int): Line-search trials, at most: the search ends early at a
            trial that is θ itself (a zero gradient, or a step shrunk below θ's
            precision), as every later trial would be.
        hvp_approach (str): ``'exact'``, ``'double_backprop'`` or
            ``'finite_difference'``.
        fd_eps (float): Finite-difference step ε.
        cg_damping (float): Added to every HVP (``reg_coeff``; 0 as the
            reference's paper runs).
        hvp_subsample (float): Fraction of the meta-batch's tasks whose KL
            the Hessian-vector products use (1: all, exact, the default).
            An approximation, as rllab's ``subsample_factor``: the CG
            direction comes from the KL curvature of a random subset of
            tasks (drawn per iteration from a stream keyed by the seed and
            iteration), so each HVP costs that fraction. The step length
            and the line search still use every task, so every accepted step
            keeps the full meta-batch's KL within ``max_kl_step``; only the
            direction, and so the meta-gradient step, is approximate.
        **kwargs: :class:`MetaPolicySearch` arguments.

    """

    def __init__(self,
                 env,
                 policy,
                 sampler,
                 task_sampler,
                 *,
                 max_kl_step: float = 0.01,
                 inner_estimator: str = 'lvc',
                 exploration: bool = False,
                 cg_iters: int = 10,
                 backtrack_ratio: float = 0.8,
                 max_backtracks: int = 15,
                 hvp_approach: str = 'exact',
                 fd_eps: float = 1e-5,
                 cg_damping: float = 0.,
                 hvp_subsample: float = 1.,
                 **kwargs):
        max_kl_step = check_float(max_kl_step, 'max_kl_step', 0.,
                                  low_open=True, float32=True)
        cg_iters = check_int(cg_iters, 'cg_iters', 1)
        # (a ratio that is 0 in float32 would shrink every tried step to nothing)
        backtrack_ratio = check_float(backtrack_ratio, 'backtrack_ratio', 0.,
                                      1., low_open=True, high_open=True, float32=True)
        max_backtracks = check_int(max_backtracks, 'max_backtracks', 1)
        check_choice(hvp_approach, 'hvp_approach', HVP_APPROACHES)
        fd_eps = check_float(fd_eps, 'fd_eps', 0., low_open=True, float32=True)
        cg_damping = check_float(cg_damping, 'cg_damping', 0., float32=True)
        hvp_subsample = check_float(hvp_subsample, 'hvp_subsample', 0., 1., low_open=True)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator=inner_estimator,
                         exploration=exploration, **kwargs)
        self._max_kl_step = max_kl_step
        self._cg_iters = cg_iters
        self._backtrack_ratio = backtrack_ratio
        self._max_backtracks = max_backtracks
        self._hvp_approach = hvp_approach
        self._fd_eps = fd_eps
        self._cg_damping = cg_damping
        self._hvp_subsample = hvp_subsample

    def _objective(self, chain, batches, post_log_probs):
        post = batches[-1]
        surrogate = per_task(lvc_objective)(post_log_probs,
                                            post.old_log_probs,
                                            post.advantages, post.mask)
        exploration = self._exploration_term(chain[0], batches)
        return surrogate + exploration, {'ExplorationObjective': exploration}

    def hvp_function(self, batches: List[MetaBatch], meta=None):
        """The HVP of the post-update KL at the current θ, as configured.

        Args:
            batches (list[MetaBatch]): Sampled batches.
            meta (MetaObjective or None): A meta-objective already built with
                ``create_graph=True`` at the current θ (exact HVPs reuse it).

        Returns:
            callable: flat v ↦ flat H v.

        """
        params = self.outer_parameters()
        # The hand-written products cover θ alone: with learned step sizes in the
        # parameter vector, double backpropagation (exact too) takes over.
        if self._hvp_approach == 'exact' and not self._trainable_inner_step_size:
            curvature = self._hand_written_curvature(batches)
            if curvature is not None and not self.__dict__.get('_curvature_checked'):
                meta = self.meta_objective(batches) if meta is None else meta
                self._check_curvature(curvature, exact_hvp(meta.kl, params))
                if not self._curvature_checked[0]:
                    curvature = None
            if curvature is not None:
                return curvature
        if self._hvp_approach in ('exact', 'double_backprop'):
            if meta is None:
                meta = self.meta_objective(batches)
            return exact_hvp(meta.kl, params, self._cg_damping)
        theta0 = flatten([p.detach() for p in params])

        def kl_grad_at(flat_theta):
            self._set_flat_params(flat_theta)
            kl = self.meta_objective(batches).kl
            grad = flatten(torch.autograd.grad(kl, params))
            self._set_flat_params(theta0)
            return grad

        return finite_difference_hvp(kl_grad_at, theta0, self._fd_eps,
                                     self._cg_damping)

    def _hand_written_curvature(self, batches: List[MetaBatch]):
        """The Gauss-Newton HVPs of :mod:`garage_promp.curvature`, or None.

        None where the policy is not a garage ``GaussianMLPPolicy``, where
        checking showed a gap, or where the post-update Gaussians at θ are
        not the sampling ones (so the KL is not at its minimum).
        """
        checked = self.__dict__.get('_curvature_checked')
        if checked is not None and not checked[0]:
            return None
        structure = structure_of(self._policy)
        if structure is None:
            return None
        theta = collections.OrderedDict(
            (k, v.detach()) for k, v in named_params(self._policy).items())
        try:
            curvature = TrustRegionCurvature(structure, theta, batches, self._inner_lr,
                                             self._inner_objective_of, self._cg_damping)
        except RuntimeError as error:  # e.g. a nonlinearity autograd cannot differentiate twice
            logger.log(f'Hand-written Hessian-vector products failed ({error}); '
                       'using double backpropagation')
            self._curvature_checked = (False, float('nan'))
            return None
        if not curvature.mismatch <= CURVATURE_TOLERANCE:  # NaN included
            logger.log(f'Post-update policies differ from the sampling ones by '
                       f'{curvature.mismatch:.1e} (> {CURVATURE_TOLERANCE:.0e}); '
                       'Hessian-vector products by double backpropagation')
            return None
        return curvature

    def _check_curvature(self, curvature, reference):
        """Compare one hand-written product with double backpropagation."""
        flat = flatten([p.detach() for p in self._policy.parameters()])
        generator = torch.Generator().manual_seed(0)
        v = torch.randn(flat.shape, generator=generator).to(flat)
        # Without the damping, which would hide a wrong Hessian if large.
        fast = curvature(v) - self._cg_damping * v
        exact = reference(v)
        gap = float((fast - exact).norm() / exact.norm().clamp(min=1e-30))
        ok = bool(torch.isfinite(exact).all()) and gap <= CURVATURE_CHECK_TOLERANCE
        if not ok:
            logger.log(f'Hand-written Hessian-vector products differ from double '
                       f'backpropagation by {gap:.1e} (relative); using the latter')
        self._curvature_checked = (ok, gap)

    def _set_flat_params(self, flat: torch.Tensor):
        params = self.outer_parameters()
        with torch.no_grad():
            for p, value in zip(params, unflatten_like(flat, params)):
                p.copy_(value)

    UPDATE_PARTS = ('MetaObjective', 'ConjugateGradient', 'LineSearch', 'After')
    # The curvature check is redone in each process.
    _TRANSIENT = MetaPolicySearch._TRANSIENT + ('_curvature_checked', )

    def _curvature_batches(self, itr: int, batches: List[MetaBatch]):
        """The tasks whose KL the HVPs use: all, or a ``hvp_subsample`` share."""
        n_tasks = batches[0].n_tasks
        n_sub = max(1, round(self._hvp_subsample * n_tasks))
        if n_sub >= n_tasks:
            return None
        rng = np.random.default_rng((self._sampler.seed, itr, 1))
        tasks = torch.as_tensor(np.sort(rng.choice(n_tasks, n_sub, replace=False)))
        return [b.select(tasks) for b in batches]

    def _optimize(self, itr: int, batches: List[MetaBatch]):
        # θ, and the inner step sizes when they are learned: the trust region
        # (gradient, CG, the post-update KL, the line search) acts on both.
        params = self.outer_parameters()
        with self._timed('MetaObjective'):
            meta = self.meta_objective(batches)
            objective_before = float(meta.objective.detach())
            grad = flatten(
                torch.autograd.grad(meta.objective, params, retain_graph=True))
        theta_prev = flatten([p.detach() for p in params])
        accepted = False
        n_backtracks = 0
        after = None
        if torch.isfinite(grad).all() and torch.isfinite(meta.objective):
            with self._timed('ConjugateGradient'):
                curvature = self._curvature_batches(itr, batches)
                hvp = (self.hvp_function(batches, meta) if curvature is None
                       else self.hvp_function(curvature))
                direction = conjugate_gradient(hvp, grad, self._cg_iters)
                # The step length from the full batch's curvature.
                full_hvp = hvp if curvature is None else self.hvp_function(batches, meta)
                step_size = torch.sqrt(2 * self._max_kl_step /
                                       (direction.dot(full_hvp(direction)) + 1e-8))
            with self._timed('LineSearch'):  # its last evaluation is the logged "after"
                if torch.isfinite(step_size):
                    for n_backtracks in range(self._max_backtracks):
                        ratio = self._backtrack_ratio**n_backtracks
                        trial = theta_prev + ratio * step_size * direction
                        if torch.equal(trial, theta_prev):
                            # The step is zero in θ's precision (a zero gradient, or a step
                            # shrunk below θ's last digit): every later trial is θ again.
                            break
                        self._set_flat_params(trial)
                        after = self.meta_objective(batches, create_graph=False)
                        objective, kl = float(after.objective.detach()), float(after.kl.detach())
                        if objective > objective_before and \
                                kl <= self._max_kl_step:
                            accepted = True
                            break
        if accepted:
            self._consecutive_nan_steps = 0
        else:
            self._set_flat_params(theta_prev)
            logger.log('Line search found no step that improves the '
                       'surrogate within the trust region; step rejected')
            if not (torch.isfinite(grad).all()
                    and torch.isfinite(meta.objective)):
                self._skip_non_finite_step('the meta-objective or gradient')
            with self._timed('After'):
                after = self.meta_objective(batches, create_graph=False)
        tabular.record('LossBefore', -objective_before)
        tabular.record('LossAfter', -float(after.objective.detach()))
        tabular.record('dLoss', float(after.objective.detach()) - objective_before)
        tabular.record('KL', float(after.kl.detach()))
        tabular.record('LineSearchBacktracks', n_backtracks)
        tabular.record('StepAccepted', float(accepted))
