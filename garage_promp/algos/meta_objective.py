"""The meta-objective and the adaptation chain it is built through (paper Section 4-5).

For M tasks at once (every tensor has a leading task axis): the inner step
θ'_i = θ_i + α ⊙ ∇J^in_i(θ_i) with the inner estimator of the paper's Section 5
(LVC, Eq. 12; the MAML log-likelihood; DiCE), chained K times, and the outer
objective of the algorithm at the adapted parameters (ProMP's Eq. 13, TRPO-MAML's
and the VPG family's), with ``create_graph=True`` so that its gradient carries
every second-order term. After ``MAMLAlgo`` and ``ProMP`` in the original code's
meta_policy_search/meta_algos/ (``_adapt_sym``, ``_adapt_objective_sym``,
``build_graph``).

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import abc
import collections
import contextlib
from typing import Dict, List, NamedTuple, Sequence, Tuple

from garage_promp.algos._batch import MetaBatch
from garage_promp.objectives import (
    dice_objective,
    emaml_objective,
    gaussian_kl,
    gaussian_log_likelihood,
    log_likelihood_objective,
    lvc_objective,
    masked_mean,
)
from garage_promp.policies import (
    Params,
    distribution_params,
    expand_params,
    named_params,
    task_distribution_params,
)

import torch

INNER_ESTIMATORS = ('lvc', 'maml', 'dice')

#: Apply a single-task objective (reducing over R, T) to every task of a
#: (M, R, T) batch at once: (M, R, T) tensors in, (M,) out.
per_task = torch.func.vmap


class MetaObjective(NamedTuple):
    """Value of the meta-objective at θ."""
    objective: torch.Tensor  # J(θ), to maximise
    kl: torch.Tensor  # mean KL(π_θ'o ‖ π_θ'(θ)) on post-update data
    stats: Dict[str, float]  # per-algorithm scalars, averaged over tasks


class AdaptationChain(abc.ABC):
    """Policy functions, inner steps and the meta-objective of M tasks at once."""

    # ------------------------------------------------------ policy functions
    def _dist(self, params: Params | None,
              batch: MetaBatch) -> Tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std on a batch's observations, each (M, R, T, A).

        ``params`` is stacked (a leading task axis: task i at its own
        parameters) or None (the meta-policy's parameters for every task).
        """
        cache = self.__dict__.get('_forward_cache')
        if cache is not None and params is not None:
            hit = cache.get((id(params), id(batch)))
            if hit is not None:
                return hit[2], hit[3]
        obs = batch.observations
        shape = batch.actions.shape
        if params is None:
            mean, log_std = distribution_params(
                self._policy, None, obs.reshape(-1, obs.shape[-1]))
        else:
            mean, log_std = task_distribution_params(
                self._policy, params,
                obs.reshape(obs.shape[0], -1, obs.shape[-1]),
                self._vectorize_tasks)
        mean, log_std = mean.reshape(shape), log_std.reshape(shape)
        if cache is not None and params is not None:
            # The key objects are held, so their ids stay theirs.
            cache[(id(params), id(batch))] = (params, batch, mean, log_std)
        return mean, log_std

    @contextlib.contextmanager
    def _shared_forwards(self):
        """Within the block, one policy forward per (parameters, batch) pair.

        The meta-objective evaluates π at φ_k on D_k twice: in inner step k
        and in ProMP's inner KL penalty (Eq. 13). Both uses then share one
        forward pass and its graph; values are identical, and gradients
        equal up to float summation order.
        """
        previous = self.__dict__.get('_forward_cache')
        self._forward_cache = {}
        try:
            yield
        finally:
            self._forward_cache = previous

    def _log_probs(self, params: Params | None,
                   batch: MetaBatch) -> torch.Tensor:
        """log π(a|s) of every step, (M, R, T)."""
        mean, log_std = self._dist(params, batch)
        return gaussian_log_likelihood(batch.actions, mean, log_std)

    def _kl(self, params: Params | None, batch: MetaBatch) -> torch.Tensor:
        """Per-task mean KL(π_sampling ‖ π_params) over valid steps, (M,)."""
        mean, log_std = self._dist(params, batch)
        kl = gaussian_kl(batch.old_mean, batch.old_log_std, mean, log_std)
        return per_task(masked_mean)(kl, batch.mask)

    # ------------------------------------------------------------ adaptation
    def _inner_objective(self, params: Params,
                         batch: MetaBatch) -> torch.Tensor:
        """Per-task inner objective J^in (to maximise), (M,).

        The original ProMP code's ``_adapt_objective_sym`` in meta_policy_search/meta_algos/.
        """
        return self._inner_objective_of(self._log_probs(params, batch), batch)

    def _inner_objective_of(self, log_probs: torch.Tensor,
                            batch: MetaBatch) -> torch.Tensor:
        """J^in per task, (M,), from the log-likelihoods log π(a|s), (M, R, T)."""
        if self._inner_estimator == 'lvc':
            return per_task(lvc_objective)(log_probs, batch.old_log_probs,
                                           batch.advantages, batch.mask)
        if self._inner_estimator == 'maml':
            return per_task(log_likelihood_objective)(log_probs,
                                                      batch.advantages,
                                                      batch.mask)
        return per_task(dice_objective)(log_probs, batch.dice_rewards,
                                        batch.mask)

    def _inner_step(self, params: Params, batch: MetaBatch,
                    create_graph: bool) -> Params:
        r"""θ'_i = θ_i + α ⊙ ∇J^in_i(θ_i) for every task i at once.

        ``params`` is stacked over the batch's M tasks. Task i's objective
        depends only on row i, so one backward pass of the summed objectives
        gives every task's own gradient.
        """
        if not create_graph:
            params = collections.OrderedDict(
                (k, v.detach().clone().requires_grad_(True))
                for k, v in params.items())
        objective = self._inner_objective(params, batch).sum()
        grads = torch.autograd.grad(objective,
                                    list(params.values()),
                                    create_graph=create_graph)
        new = collections.OrderedDict()
        for (name, value), grad in zip(params.items(), grads):
            step = self._inner_lr[name] * grad
            new[name] = value + step if create_graph else (value +
                                                           step).detach()
        return new

    def _adapt_chain(self, params: Params, batches: Sequence[MetaBatch],
                     create_graph: bool) -> List[Params]:
        """[φ_0, φ_1, ..., φ_K] of the batches' tasks, all stacked."""
        chain = [params]
        for k in range(self._num_inner_grad_steps):
            chain.append(
                self._inner_step(chain[-1], batches[k], create_graph))
        return chain

    # ------------------------------------------------------- meta-objective
    @abc.abstractmethod
    def _objective(self, chain: List[Params], batches: Sequence[MetaBatch],
                   post_log_probs: torch.Tensor
                   ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Per-task outer objective (to maximise), (M,), and per-task stats.

        Args:
            chain (list[dict]): [φ_0 = θ, ..., φ_K], stacked over the tasks.
            batches (list[MetaBatch]): The K+1 batches of the same M tasks.
            post_log_probs (torch.Tensor): log π_{φ_K}(a|s) on D_K,
                :math:`(M, R, T)`.

        """

    def _exploration_term(self, theta: Params,
                          batches: Sequence[MetaBatch]) -> torch.Tensor:
        """Per-task E-MAML term, or zeros, (M,) (:func:`emaml_objective`)."""
        if not self._exploration:
            return torch.zeros(batches[0].n_tasks, device=batches[0].mask.device)
        pre = batches[0]
        return per_task(emaml_objective)(self._log_probs(theta, pre),
                                         pre.mask,
                                         batches[-1].mean_std_reward)

    def _task_objectives(self, theta: Params, batches: Sequence[MetaBatch],
                         create_graph: bool):
        """Per-task objective, post-update KL and stats of the batches' tasks."""
        chain = self._adapt_chain(expand_params(theta, batches[0].n_tasks),
                                  batches, create_graph)
        post = batches[-1]
        mean, log_std = self._dist(chain[-1], post)
        post_log_probs = gaussian_log_likelihood(post.actions, mean, log_std)
        kl = per_task(masked_mean)(gaussian_kl(post.old_mean,
                                               post.old_log_std, mean,
                                               log_std), post.mask)
        objective, stats = self._objective(chain, batches, post_log_probs)
        return objective, kl, stats

    def meta_objective(self, batches: Sequence[MetaBatch],
                       theta: Params | None = None,
                       create_graph: bool = True) -> MetaObjective:
        """The meta-objective J(θ) (to maximise) and the post-update KL.

        With ``vectorize_tasks`` (default) all tasks' inner steps and outer
        objectives are computed in one batched pass; otherwise task by task.
        Both give the same values and gradients up to float rounding.

        Args:
            batches (list[MetaBatch]): The K+1 sampled batches.
            theta (dict or None): Meta-parameters (default: the policy's
                own leaf parameters, so ``backward`` fills their ``.grad``).
            create_graph (bool): Differentiate through the inner steps.

        Returns:
            MetaObjective: J, the mean KL(π_θ'o ‖ π_θ'(θ)) on the post-update
                data (both averaged over tasks), and averaged stats.

        """
        theta = named_params(self._policy) if theta is None else theta
        with self._shared_forwards():
            if self._vectorize_tasks:
                parts = [self._task_objectives(theta, batches, create_graph)]
            else:
                parts = [
                    self._task_objectives(theta, [b.task(i) for b in batches],
                                          create_graph)
                    for i in range(batches[0].n_tasks)
                ]
        objective = torch.cat([p[0] for p in parts]).mean()
        kl = torch.cat([p[1] for p in parts]).mean()
        stats = {
            key: float(torch.cat([p[2][key] for p in parts]).detach().mean())
            for key in parts[0][2]
        }
        return MetaObjective(objective, kl, stats)
