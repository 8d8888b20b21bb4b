"""garage's meta-RL API: the exploration policy and its adaptation, for meta-testing.

garage's :class:`~garage.experiment.MetaEvaluator` (and ours,
:class:`garage_promp.experiment.MetaEvaluator`) meta-tests an algorithm through
``get_exploration_policy`` and ``adapt_policy``; ours adapts many test tasks at
once through :meth:`MetaTestAPI.adapt_many`.

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import collections
from typing import List, Sequence

from garage_promp._threads import ADAPTATION_THREADS, learner_threads
from garage_promp.algos._batch import process_episodes
from garage_promp.policies import AdaptedPolicy, Params, named_params, stack_params, unstack_params

from garage import EpisodeBatch
import torch


class MetaTestAPI:
    """Adapting the meta-policy to a task from its exploration episodes."""

    def get_exploration_policy(self) -> AdaptedPolicy:
        """A copy of the meta-policy (0 inner steps) to explore one task."""
        return AdaptedPolicy(self._policy, named_params(self._policy), 0)

    def adapt_policy(self, exploration_policy,
                     exploration_episodes: EpisodeBatch) -> AdaptedPolicy:
        """Take ONE inner step from ``exploration_policy`` on its episodes.

        To adapt with K steps, call this K times with fresh episodes sampled
        by the policy it returned, as :class:`garage_promp.experiment.
        MetaEvaluator` does. The meta-policy is never modified.

        Args:
            exploration_policy (Policy): A policy from
                :meth:`get_exploration_policy` or from a previous call.
            exploration_episodes (EpisodeBatch): Episodes of one task sampled
                with ``exploration_policy``; agent infos ``mean``/``log_std``.

        Returns:
            AdaptedPolicy: The adapted policy (``num_steps`` one higher).

        """
        if isinstance(exploration_policy, AdaptedPolicy):
            params = exploration_policy.adapted_params()
            steps = exploration_policy.num_steps
        else:
            params = collections.OrderedDict(
                (k, v.detach().clone())
                for k, v in exploration_policy.named_parameters())
            steps = 0
        n_eps = len(exploration_episodes.lengths)
        new_params = self.adapt_many([params], exploration_episodes, n_eps)[0]
        return AdaptedPolicy(self._policy, new_params, steps + 1)


    def adapt_many(self, params: Sequence[Params], episodes: EpisodeBatch,
                   episodes_per_task: int) -> List[Params]:
        """One inner step for each of several tasks at once.

        The batched form of :meth:`adapt_policy` (same result per task),
        used by :class:`garage_promp.experiment.MetaEvaluator`.

        Args:
            params (list[dict]): Current parameters of each task.
            episodes (EpisodeBatch): Task-major episodes, ``episodes_per_task``
                per task, sampled with ``params``.
            episodes_per_task (int): Episodes of each task.

        Returns:
            list[dict]: The adapted (detached) parameters of each task.

        It runs on the torch threads of training's inner steps
        (``ADAPTATION_THREADS``, not the outer step's ``learner_threads``),
        and leaves the thread count as it found it.

        """
        with learner_threads(ADAPTATION_THREADS):
            batch = process_episodes(episodes, len(params), episodes_per_task,
                                     self._horizon, self._processing)
            stacked = stack_params([
                collections.OrderedDict(
                    (k, torch.as_tensor(v).detach()) for k, v in p.items())
                for p in params
            ])
            return unstack_params(self._inner_step(stacked, batch, False))
