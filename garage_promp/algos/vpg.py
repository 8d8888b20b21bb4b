"""The VPG family: one Adam step on the outer objective.

As the original ProMP code's meta_policy_search/meta_algos/vpg_maml.py and
meta_policy_search/meta_algos/vpg_dice_maml.py.

* ``LVCVPG``  — LVC inner estimator (likelihood ratio), paper "LVC-VPG".
* ``DiCEVPG`` — DiCE inner estimator, paper "DiCE-VPG" (reference
  ``VPG_DICEMAML``: DiCE inner steps, VPG outer loss on GAE advantages).
* ``MAMLVPG`` — log-likelihood inner estimator (original MAML), "MAML-VPG".
* ``EMAMLVPG`` — MAML-VPG plus the E-MAML exploration term, "E-MAML-VPG".

The outer objective is :math:`\\mathbb{E}[\\log\\pi_{\\theta'}(a|s)\\hat A]` on
the post-update data; "VPG" in the paper is Adam(1e-3), one step per epoch.
"""
from typing import List

from garage_promp.algos._batch import MetaBatch
from garage_promp.algos.base import MetaPolicySearch
from garage_promp.algos.meta_objective import per_task
from garage_promp.algos.options import refuse_fixed_options
from garage_promp.objectives import log_likelihood_objective
from garage_promp.validation import check_float

from dowel import tabular
import torch


class MetaVPG(MetaPolicySearch):
    """Meta-policy gradient with one Adam step per epoch.

    Args:
        env, policy, sampler, task_sampler: See :class:`MetaPolicySearch`.
        learning_rate (float): Adam step size.
        **kwargs: :class:`MetaPolicySearch` arguments, including
            ``inner_estimator`` and ``exploration``.

    """

    def __init__(self, env, policy, sampler, task_sampler, *,
                 learning_rate: float = 1e-3, **kwargs):
        learning_rate = check_float(learning_rate, 'learning_rate', 0.,
                                    low_open=True, float32=True)
        super().__init__(env, policy, sampler, task_sampler, **kwargs)
        self._learning_rate = learning_rate
        self._optimizer = torch.optim.Adam(self.outer_parameters(),
                                           lr=learning_rate,
                                           eps=1e-8)

    def _objective(self, chain, batches, post_log_probs):
        post = batches[-1]
        objective = per_task(log_likelihood_objective)(post_log_probs,
                                                       post.advantages,
                                                       post.mask)
        exploration = self._exploration_term(chain[0], batches)
        return objective + exploration, {'ExplorationObjective': exploration}

    def _optimize(self, itr: int, batches: List[MetaBatch]):
        del itr
        with self._timed('MetaObjective'):
            before = self.meta_objective(batches)
            self._adam_step(self._optimizer, -before.objective)
        with self._timed('After'):
            after = self.meta_objective(batches, create_graph=False)
        tabular.record('LossBefore', -float(before.objective.detach()))
        tabular.record('LossAfter', -float(after.objective.detach()))
        tabular.record('dLoss', float(after.objective.detach() - before.objective.detach()))
        tabular.record('KL', float(after.kl.detach()))


class LVCVPG(MetaVPG):
    """LVC-VPG: likelihood-ratio (LVC) inner steps, VPG outer step."""

    FIXED_OPTIONS = ('inner_estimator', 'exploration')

    def __init__(self, env, policy, sampler, task_sampler, **kwargs):
        refuse_fixed_options(type(self), kwargs)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator='lvc', **kwargs)


class DiCEVPG(MetaVPG):
    """DiCE-VPG: DiCE inner steps (time-only reward baseline), VPG outer step."""

    FIXED_OPTIONS = ('inner_estimator', 'exploration')

    def __init__(self, env, policy, sampler, task_sampler, **kwargs):
        refuse_fixed_options(type(self), kwargs)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator='dice', **kwargs)


class MAMLVPG(MetaVPG):
    """MAML-VPG: log-likelihood inner steps (no pre-update credit)."""

    FIXED_OPTIONS = ('inner_estimator', 'exploration')

    def __init__(self, env, policy, sampler, task_sampler, **kwargs):
        refuse_fixed_options(type(self), kwargs)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator='maml', **kwargs)


class EMAMLVPG(MetaVPG):
    """E-MAML-VPG: MAML-VPG plus the E-MAML exploration term."""

    FIXED_OPTIONS = ('inner_estimator', 'exploration')

    def __init__(self, env, policy, sampler, task_sampler, **kwargs):
        refuse_fixed_options(type(self), kwargs)
        super().__init__(env, policy, sampler, task_sampler,
                         inner_estimator='maml', exploration=True, **kwargs)
