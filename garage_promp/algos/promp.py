"""ProMP: Proximal Meta-Policy Search (paper Eq. 13).

As the original ProMP code's meta_policy_search/meta_algos/pro_mp.py.
"""
from typing import List

from garage_promp.algos._batch import MetaBatch
from garage_promp.algos.base import MetaPolicySearch
from garage_promp.algos.meta_objective import per_task
from garage_promp.algos.options import refuse_fixed_options, require
from garage_promp.objectives import clipped_objective
from garage_promp.validation import check_bool, check_float, check_int

from dowel import tabular
import numpy as np
import torch


class ProMP(MetaPolicySearch):
    r"""Proximal Meta-Policy Search.

    Its inner estimator is LVC and it has no E-MAML term, so
    ``inner_estimator`` and ``exploration`` are refused.

    Inner step: the LVC objective (Eq. 9-10), K steps. Outer objective,
    Eq. 13:

    .. math::
        J(\theta) = \frac1M\sum_i J^{CLIP}_i(\theta'_{K,i}(\theta))
        - \frac1K\sum_{k=1}^K \eta_k \bar D_{KL}(\pi_{\theta'_{o,k-1}}
        \| \pi_{\theta'_{k-1}(\theta)})

    where the clipped surrogate runs on the post-update data and the KL on the
    data of step k-1 (for K=1: KL(π_θo ‖ π_θ) on pre-update data). It is
    maximised with ``num_promp_steps`` full-batch Adam steps per epoch; Adam's
    moments persist across epochs, as in the reference.

    Args:
        env, policy, sampler, task_sampler: See :class:`MetaPolicySearch`.
        learning_rate (float): Adam step size β.
        num_promp_steps (int): Adam steps per epoch on the same data.
        num_minibatches (int): Split the meta-batch's tasks into this many
            minibatches, one Adam step each, per ProMP step (the reference
            accepted and ignored this; here it works). 1 = full batch.
        clip_eps (float): Clipping range ε of the likelihood ratio, in (0, 1].
        target_inner_step (float): KL target κ of the adaptive η rule.
        init_inner_kl_penalty (float): Initial η (one per inner step); > 0 when
            ``adaptive_inner_kl_penalty`` (the rule scales it, so 0 would stay 0).
        adaptive_inner_kl_penalty (bool): After each epoch, halve η_k if
            KL_k < κ/1.5 and double it if KL_k > 1.5κ.
        anneal_factor (float): ε is multiplied by this once per epoch
            (ε_itr = clip_eps · anneal_factor^itr; the reference accepted and
            ignored it). 1 = no annealing.
        **kwargs: :class:`MetaPolicySearch` arguments.

    The defaults are the paper's runs (the original code's ``ppo_run_all.py``:
    β = 1e-3, 5 ProMP steps, ε = 0.3, a fixed η = 5e-4, κ = 0.01), not the
    constructor defaults of its ``pro_mp.py`` (ε = 0.2, η = 1e-2), so that
    ``ProMP(...)`` in a garage pipeline is the algorithm the paper evaluates.

    """

    FIXED_OPTIONS = ('inner_estimator', 'exploration')

    def __init__(self,
                 env,
                 policy,
                 sampler,
                 task_sampler,
                 *,
                 learning_rate: float = 1e-3,
                 num_promp_steps: int = 5,
                 num_minibatches: int = 1,
                 clip_eps: float = 0.3,
                 target_inner_step: float = 0.01,
                 init_inner_kl_penalty: float = 5e-4,
                 adaptive_inner_kl_penalty: bool = False,
                 anneal_factor: float = 1.,
                 **kwargs):
        refuse_fixed_options(type(self), kwargs)
        learning_rate = check_float(learning_rate, 'learning_rate', 0.,
                                    low_open=True, float32=True)
        num_promp_steps = check_int(num_promp_steps, 'num_promp_steps', 1)
        num_minibatches = check_int(num_minibatches, 'num_minibatches', 1)
        # ε in (0, 1]: the lower clip bound 1 - ε below 0 would never bind (ratios are > 0).
        clip_eps = check_float(clip_eps, 'clip_eps', 0., 1., low_open=True, float32=True)
        target_inner_step = check_float(target_inner_step,
                                        'target_inner_step', 0.,
                                        low_open=True, float32=True)
        init_inner_kl_penalty = check_float(init_inner_kl_penalty,
                                            'init_inner_kl_penalty', 0., float32=True)
        adaptive_inner_kl_penalty = check_bool(adaptive_inner_kl_penalty,
                                               'adaptive_inner_kl_penalty')
        # The adaptive rule only halves or doubles each η_k: from 0 it would stay 0 and the
        # rule, asked for, would never act.
        require(init_inner_kl_penalty > 0 or not adaptive_inner_kl_penalty,
                'init_inner_kl_penalty',
                '> 0 with adaptive_inner_kl_penalty=True (the rule halves or doubles it, '
                'so 0 would stay 0)', init_inner_kl_penalty)
        anneal_factor = check_float(anneal_factor, 'anneal_factor', 0., 1.,
                                    low_open=True)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator='lvc', **kwargs)
        require(num_minibatches <= self._meta_batch_size, 'num_minibatches',
               f'<= meta_batch_size ({self._meta_batch_size})',
               num_minibatches)
        self._num_promp_steps = num_promp_steps
        self._num_minibatches = num_minibatches
        self._clip_eps = clip_eps
        self._anneal_factor = anneal_factor
        self._target_inner_step = target_inner_step
        self._adaptive_inner_kl_penalty = bool(adaptive_inner_kl_penalty)
        self.inner_kl_coeff = np.full(self._num_inner_grad_steps,
                                      float(init_inner_kl_penalty))
        self._current_clip_eps = clip_eps
        self._learning_rate = learning_rate
        self._optimizer = torch.optim.Adam(self.outer_parameters(),
                                           lr=learning_rate,
                                           eps=1e-8)

    def _objective(self, chain, batches, post_log_probs):
        post = batches[-1]
        eps = self._current_clip_eps
        clip = per_task(lambda lp, old, adv, mask: clipped_objective(
            lp, old, adv, eps, mask))(post_log_probs, post.old_log_probs,
                                      post.advantages, post.mask)
        inner_kls = torch.stack([
            self._kl(chain[k], batches[k])
            for k in range(self._num_inner_grad_steps)
        ], dim=-1)
        coeffs = torch.as_tensor(self.inner_kl_coeff, dtype=inner_kls.dtype,
                                 device=inner_kls.device)
        # Eq. 13: KL penalty on the policies that collected each inner batch;
        # a mean over inner steps, as the reference.
        penalty = (coeffs * inner_kls).mean(-1)
        stats = {
            f'InnerKL_Step_{k}': inner_kls[:, k]
            for k in range(self._num_inner_grad_steps)
        }
        stats['ClipObjective'] = clip
        return clip - penalty, stats

    def _check_fit(self, batches: List[MetaBatch]) -> None:
        n_tasks = batches[0].n_tasks
        if n_tasks < self._num_minibatches:  # (array_split would give an empty minibatch)
            raise ValueError(f'batches hold {n_tasks} task{"s" * (n_tasks != 1)}, fewer than '
                             f'num_minibatches ({self._num_minibatches}): a minibatch would '
                             'have none')

    def _optimize(self, itr: int, batches: List[MetaBatch]):
        self._current_clip_eps = self._clip_eps * self._anneal_factor**itr
        n_tasks = batches[0].n_tasks
        loss_before = None
        # Task minibatches come from a stream keyed by (seed, itr), not from
        # the global RNG, so that a restored run shuffles as the original.
        rng = np.random.default_rng((self._sampler.seed, itr))
        with self._timed('MetaObjective'):
            finite = True
            for _ in range(self._num_promp_steps):
                order = rng.permutation(n_tasks)
                for tasks in np.array_split(order, self._num_minibatches):
                    sub = [b.select(torch.as_tensor(np.sort(tasks)))
                           for b in batches]
                    loss = -self.meta_objective(sub).objective
                    if loss_before is None:
                        loss_before = float(loss.detach())
                    # A non-finite loss or gradient skips the rest of this
                    # batch: it counts once towards MAX_CONSECUTIVE_NAN_STEPS.
                    finite = self._adam_step(self._optimizer, loss)
                    if not finite:
                        break
                if not finite:
                    break
        with self._timed('After'):
            after = self.meta_objective(batches, create_graph=False)
        for k in range(self._num_inner_grad_steps):
            inner_kl = after.stats[f'InnerKL_Step_{k}']
            tabular.record(f'InnerKL_Step_{k}', inner_kl)
            tabular.record(f'InnerKLCoeff_Step_{k}', self.inner_kl_coeff[k])
            if self._adaptive_inner_kl_penalty:
                if inner_kl < self._target_inner_step / 1.5:
                    self.inner_kl_coeff[k] /= 2
                elif inner_kl > self._target_inner_step * 1.5:
                    self.inner_kl_coeff[k] *= 2
        loss_after = -float(after.objective.detach())
        tabular.record('LossBefore', loss_before)
        tabular.record('LossAfter', loss_after)
        tabular.record('dLoss', loss_before - loss_after)
        tabular.record('KL', float(after.kl.detach()))
        tabular.record('ClipEps', self._current_clip_eps)
