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
from garage_promp.algos._batch import check_standardizable, process_episodes
from garage_promp.policies import (
    AdaptedPolicy,
    Params,
    check_params_of,
    named_params,
    stack_params,
    unstack_params,
)
from garage_promp.validation import check_int

from garage import EpisodeBatch
import numpy as np
import torch


class MetaTestAPI:
    """Adapting the meta-policy to a task from its exploration episodes."""

    def check_adaptation_batch(self, episodes_per_task: int, horizon: int) -> None:
        """Refuse, before any sampling, adapting on ``episodes_per_task`` episodes of at most
        ``horizon`` steps where this algorithm's advantages cannot be standardised
        (``normalize_adv`` needs 2 valid steps per task batch).

        Raises:
            ValueError: Naming ``normalize_adv``, ``n_exploration_eps`` and
                ``max_episode_length``.

        """
        check_standardizable(self._processing, episodes_per_task, horizon, 'n_exploration_eps',
                             "normalize_adv is the trained algorithm's own: adapt on more "
                             'exploration episodes, or longer ones')

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
        elif not isinstance(exploration_policy, torch.nn.Module):
            raise ValueError('exploration_policy must be the policy that sampled the episodes '
                             '(from get_exploration_policy or adapt_policy), got '
                             f'{exploration_policy!r}')
        else:
            params = collections.OrderedDict(
                (k, v.detach().clone())
                for k, v in exploration_policy.named_parameters())
            check_params_of(self._policy, params,
                            "exploration_policy must have the meta-policy's parameters")
            steps = 0
        if not isinstance(exploration_episodes, EpisodeBatch):
            raise ValueError('exploration_episodes must be an EpisodeBatch of the task, got '
                             f'{exploration_episodes!r}')
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
        self._check_adaptation_input(params, episodes, episodes_per_task)
        with learner_threads(ADAPTATION_THREADS):
            batch = process_episodes(episodes, len(params), episodes_per_task,
                                     self._horizon, self._processing)
            stacked = stack_params([
                collections.OrderedDict(
                    (k, torch.as_tensor(v).detach()) for k, v in p.items())
                for p in params
            ])
            adapted = unstack_params(self._inner_step(stacked, batch, False))
        for task, p in enumerate(adapted):
            self._check_adapted(p, None, task)
        return adapted

    def _check_adaptation_input(self, params, episodes, episodes_per_task):
        """Refuse, naming the argument, what would adapt to NaN or fail inside the inner step.

        Each task's parameters must be the meta-policy's (names and shapes); the episodes
        ``episodes_per_task`` per task of this env family, within the horizon, with the
        sampling Gaussians (``mean``, ``log_std``) and every number finite.

        Raises:
            ValueError: If not.

        """
        if not isinstance(params, (list, tuple)) or not params:
            raise ValueError(f'params must be a non-empty list of parameter dicts, got {params!r}')
        for i, p in enumerate(params):
            check_params_of(self._policy, p, f"params[{i}] must hold the meta-policy's parameters")
            bad = [k for k, v in p.items() if not bool(torch.isfinite(torch.as_tensor(v)).all())]
            if bad:
                raise ValueError(f'params[{i}] must be finite: {bad} hold NaN or inf')
        if not isinstance(episodes, EpisodeBatch):
            raise ValueError(f'episodes must be an EpisodeBatch, got {episodes!r}')
        episodes_per_task = check_int(episodes_per_task, 'episodes_per_task', 1)
        if len(episodes.lengths) != len(params) * episodes_per_task:
            raise ValueError(f'episodes must be {episodes_per_task} per task for '
                             f'{len(params)} task(s), got {len(episodes.lengths)}')
        if int(max(episodes.lengths)) > self._horizon:
            raise ValueError(f'episodes must be at most the horizon ({self._horizon} steps), '
                             f'got one of {int(max(episodes.lengths))}')
        missing = {'mean', 'log_std'} - set(episodes.agent_infos)
        if missing:
            raise ValueError(f"episodes must carry the sampling policy's agent infos "
                             f'{sorted(missing)} (sampled by a Gaussian policy)')
        sizes = (episodes.observations.shape[-1], episodes.actions.shape[-1])
        want = (self._env_spec.observation_space.flat_dim, self._env_spec.action_space.flat_dim)
        if sizes != want:
            raise ValueError(f'episodes must be of this env family (observations and actions '
                             f'of sizes {want}), got {sizes}')
        for name, values in (('observations', episodes.observations),
                             ('actions', episodes.actions), ('rewards', episodes.rewards),
                             ("agent_infos['mean']", episodes.agent_infos['mean']),
                             ("agent_infos['log_std']", episodes.agent_infos['log_std'])):
            if not np.isfinite(np.asarray(values, dtype=np.float64)).all():
                raise ValueError(f'episodes must be finite: their {name} hold NaN or inf')

