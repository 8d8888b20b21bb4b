"""The base class of the gradient-based meta-RL algorithms: construction and the outer step.

After ``MAMLAlgo`` in the original ProMP code, meta_policy_search/meta_algos/base.py.

``MetaPolicySearch`` is a garage :class:`~garage.np.algos.MetaRLAlgorithm`:
built from an env, a garage torch Gaussian policy, a
:class:`~garage_promp.sampler.MetaSampler` and a garage task sampler;
trained by ``Trainer.setup``/``Trainer.train``; meta-tested through
``get_exploration_policy``/``adapt_policy``. Subclasses define the outer
objective of every task (:meth:`_objective`) and the outer optimiser
(:meth:`_optimize`, which the public :meth:`optimize` calls on checked
arguments).

Per epoch: sample M tasks; for k = 0..K sample R episodes of every task in one
sampler call with each task's current parameters, process them, and (k < K)
take one inner step per task; then optimise the meta-objective, which is
rebuilt from θ through all K inner steps with ``create_graph=True`` so that
its gradient carries every second-order term.

The class is assembled from one mixin per job, each in its own module:

- :mod:`~garage_promp.algos.meta_objective`: policy functions, the inner steps
  and the meta-objective (the paper's math);
- :mod:`~garage_promp.algos.meta_batch`: sampling D_0..D_K with the inner steps
  between the rounds;
- :mod:`~garage_promp.algos.epoch_loop`: the epoch loop, its logging, timings,
  env-step budget and NaN guards;
- :mod:`~garage_promp.algos.meta_test_api`: garage's meta-RL API for meta-testing;
- :mod:`~garage_promp.algos.snapshot_state`: what a snapshot holds;
- :mod:`~garage_promp.algos.device`: the learner's threads and device;

and :mod:`~garage_promp.algos.options` checks the options, env and policy.
"""
import abc
import collections
from typing import Dict, List

from garage_promp.algos._batch import (
    MetaBatch,
    ProcessingConfig,
    check_batches,
    check_standardizable,
    without_trailing_padding,
)
from garage_promp.algos.device import LearnerDevice
from garage_promp.algos.epoch_loop import EpochLoop
from garage_promp.algos.meta_batch import MetaBatchSampling
from garage_promp.algos.meta_objective import INNER_ESTIMATORS, AdaptationChain
from garage_promp.algos.meta_test_api import MetaTestAPI
from garage_promp.algos.options import require
from garage_promp.algos.snapshot_state import SnapshotState
from garage_promp.baselines import Baseline, LinearFeatureBaseline, LinearTimeBaseline
from garage_promp.policies import (
    check_env_and_policy,
    check_sampler_policy,
    check_trainable,
    named_params,
)
from garage_promp.sampler import MetaSampler
from garage_promp.sampler.rollout import check_env_family
from garage_promp.validation import (
    MAX_WORKERS,
    check_batch_steps,
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    is_complex,
)

from garage.experiment import MetaEvaluator
from garage.np.algos import MetaRLAlgorithm
import numpy as np
import torch


class MetaPolicySearch(AdaptationChain, MetaBatchSampling, EpochLoop, MetaTestAPI,
                       SnapshotState, LearnerDevice, MetaRLAlgorithm, abc.ABC):
    """Base class of ProMP, TRPOMAML and the VPG family.

    Args:
        env (garage.Environment): An environment of the task family (its spec
            fixes the spaces and the episode length T).
        policy (garage.torch.policies.Policy): A garage torch Gaussian policy,
            e.g. ``GaussianMLPPolicy`` (any hidden sizes, ``learn_std`` on or
            off). Every parameter is adapted in the inner loop.
        sampler (MetaSampler): The meta-batch sampler (see
            :func:`garage_promp.sampler.make_sampler`); its module docstring
            is the sampler contract.
        task_sampler (garage.experiment.TaskSampler): Training tasks.
        meta_batch_size (int): Tasks per epoch, M.
        episodes_per_task (int): Episodes per task and step, R.
        num_inner_grad_steps (int): Inner steps K ≥ 1.
        inner_lr (float or dict[str, float or torch.Tensor]): Inner step size
            α, or one per parameter name (a tensor of the parameter's shape
            or a scalar).
        discount (float): γ in (0, 1].
        gae_lambda (float): GAE λ in [0, 1].
        normalize_adv (bool): Standardise advantages per task and step.
        positive_adv (bool): Shift advantages to be positive.
        baseline (Baseline): Refit per task and step (default
            ``LinearFeatureBaseline``).
        inner_estimator (str): ``'lvc'`` (likelihood ratio), ``'maml'``
            (log-likelihood, no pre-update credit) or ``'dice'``.
        exploration (bool): Add the E-MAML term (see
            :func:`~garage_promp.objectives.emaml_objective`).
        dice_baseline (Baseline): DiCE's time-only reward baseline (default
            ``LinearTimeBaseline``); only used with ``inner_estimator='dice'``.
        meta_evaluator (garage.experiment.MetaEvaluator or None): Meta-tester.
        evaluate_every_n_epochs (int): Evaluation period.
        trainable_inner_step_size (bool): Learn the inner step sizes
            (Meta-SGD, Li et al. 2017; the original code's
            ``trainable_inner_step_size``, which it accepted but never
            trained): one step size per policy parameter entry, initialised
            to ``inner_lr``, a parameter of the meta-objective with exact
            second-order meta-gradients, updated by the outer optimiser with
            θ. Free sign, as the reference's variables (a negative entry
            steps against the inner gradient). Kept in snapshots, used by
            the meta-test's adaptation, logged as ``InnerStepSize/*``.
        vectorize_tasks (bool): Evaluate the policy for all tasks in one
            batched forward (``torch.func.vmap`` over per-task parameters)
            and build the meta-objective of all tasks in one pass; False
            loops over the tasks (same values up to float rounding).
        learner_threads (int or None): torch threads of the learner while
            the sampler's workers wait (processing, inner steps, the outer
            step). None: every core when the sampler has worker processes
            or actors; with the in-process sampler the thread count is left
            as it is (so that runs side by side never oversubscribe).
        device (str): Where the meta-update runs: 'cpu' (default), 'cuda'
            or 'cuda:N'. Sampling, processing and the sampling-time inner
            steps stay on the CPU; θ, the optimiser's state and the batches
            move to the device for the update and θ comes back after it. A
            CUDA device without a GPU is refused at construction.

    """

    def __init__(self,
                 env,
                 policy,
                 sampler,
                 task_sampler,
                 *,
                 meta_batch_size: int = 40,
                 episodes_per_task: int = 20,
                 num_inner_grad_steps: int = 1,
                 inner_lr: float | Dict[str, object] = 0.1,
                 discount: float = 0.99,
                 gae_lambda: float = 1.,
                 normalize_adv: bool = True,
                 positive_adv: bool = False,
                 baseline: Baseline | None = None,
                 inner_estimator: str = 'lvc',
                 exploration: bool = False,
                 dice_baseline: Baseline | None = None,
                 meta_evaluator=None,
                 evaluate_every_n_epochs: int = 1,
                 trainable_inner_step_size: bool = False,
                 vectorize_tasks: bool = True,
                 learner_threads: int | None = None,
                 device: str = 'cpu'):
        device = check_device(device)
        if learner_threads is not None:
            learner_threads = check_int(learner_threads, 'learner_threads', 1, MAX_WORKERS)
        meta_batch_size = check_int(meta_batch_size, 'meta_batch_size', 1)
        episodes_per_task = check_int(episodes_per_task, 'episodes_per_task',
                                      1)
        num_inner_grad_steps = check_int(num_inner_grad_steps,
                                         'num_inner_grad_steps', 1)
        discount = check_float(discount, 'discount', 0., 1., low_open=True)
        gae_lambda = check_float(gae_lambda, 'gae_lambda', 0., 1.)
        normalize_adv = check_bool(normalize_adv, 'normalize_adv')
        positive_adv = check_bool(positive_adv, 'positive_adv')
        exploration = check_bool(exploration, 'exploration')
        vectorize_tasks = check_bool(vectorize_tasks, 'vectorize_tasks')
        trainable_inner_step_size = check_bool(trainable_inner_step_size,
                                               'trainable_inner_step_size')
        check_choice(inner_estimator, 'inner_estimator', INNER_ESTIMATORS)
        evaluate_every_n_epochs = check_int(evaluate_every_n_epochs,
                                            'evaluate_every_n_epochs', 1)
        for name, value in (('baseline', baseline), ('dice_baseline',
                                                     dice_baseline)):
            check_instance(value, name, Baseline,
                           'a garage_promp.baselines.Baseline',
                           allow_none=True)
        check_instance(meta_evaluator, 'meta_evaluator', MetaEvaluator,
                       "a garage MetaEvaluator (e.g. garage_promp's)",
                       allow_none=True)
        check_instance(policy, 'policy', torch.nn.Module,
                       'a garage torch policy (torch.nn.Module)')
        check_instance(sampler, 'sampler', MetaSampler,
                       'a garage_promp.sampler.MetaSampler '
                       '(garage_promp.make_sampler builds one)')
        require(callable(getattr(task_sampler, 'sample', None))
                and not isinstance(task_sampler, type),
               'task_sampler', 'a garage TaskSampler with sample(n)',
               task_sampler)
        horizon = check_env_and_policy(env, policy)
        # Every sampling round of a meta-batch is kept for the outer update.
        check_batch_steps(horizon, num_inner_grad_steps + 1, as_arguments=True,
                          factor_name='sampling rounds (num_inner_grad_steps + 1)',
                          meta_batch_size=meta_batch_size, episodes_per_task=episodes_per_task)
        # garage's SetTaskSampler (and ours) hold a template env: compare it now.
        template = getattr(task_sampler, '_env', None)
        if template is not None:
            check_env_family(template, env, 'the algorithm', horizon=horizon)
        if sampler.max_episode_length != horizon:
            raise ValueError(
                f'sampler has max_episode_length={sampler.max_episode_length}'
                f' but env has {horizon}: build the sampler for this env')
        check_trainable(policy)
        check_sampler_policy(policy, sampler._policy,  # pylint: disable=protected-access
                             env.spec.observation_space.flat_dim)

        self._env_spec = env.spec
        # Per-env diagnostics (e.g. forward velocity) of garage_promp.envs.
        self._diagnostics = getattr(env, 'log_diagnostics', None)
        self._policy = policy
        self._sampler = sampler
        self._task_sampler = task_sampler
        self._meta_batch_size = meta_batch_size
        self._episodes_per_task = episodes_per_task
        self._num_inner_grad_steps = num_inner_grad_steps
        self._inner_lr = self._build_inner_lr(inner_lr)
        self._trainable_inner_step_size = trainable_inner_step_size
        if trainable_inner_step_size:
            # One entry per parameter entry, leaves the outer optimiser updates.
            self._inner_lr = collections.OrderedDict(
                (name, lr.to(param.dtype).expand(param.shape).clone().requires_grad_(True))
                for (name, lr), param in zip(self._inner_lr.items(),
                                             named_params(policy).values()))
        self._inner_lr_value = inner_lr
        self._discount = discount
        self._inner_estimator = inner_estimator
        self._exploration = bool(exploration)
        self._horizon = int(horizon)
        if inner_estimator == 'dice' and dice_baseline is None:
            dice_baseline = LinearTimeBaseline()
        self._processing = ProcessingConfig(
            discount=discount,
            gae_lambda=gae_lambda,
            normalize_adv=bool(normalize_adv),
            positive_adv=bool(positive_adv),
            baseline=baseline if baseline is not None else
            LinearFeatureBaseline(),
            dice_baseline=dice_baseline if inner_estimator == 'dice' else None)
        check_standardizable(self._processing, episodes_per_task, horizon)
        # The meta-test's adaptation batches too (any garage MetaEvaluator has the count),
        # rather than at its first evaluation, after training epochs.
        n_exploration_eps = getattr(meta_evaluator, '_n_exploration_eps', None)
        test_sampler = getattr(meta_evaluator, '_meta_sampler', None) or sampler
        if isinstance(n_exploration_eps, int) and not isinstance(n_exploration_eps, bool):
            check_standardizable(self._processing, n_exploration_eps,
                                 test_sampler.max_episode_length,
                                 'meta_evaluator n_exploration_eps')
        # The meta-test's tasks likewise, rather than at its first evaluation (their horizon
        # where this package's evaluator samples them at its sampler's; garage's own samples
        # each test env at the env's).
        test_template = getattr(getattr(meta_evaluator, '_test_task_sampler', None), '_env', None)
        if test_template is not None:
            check_env_family(test_template, env, 'the algorithm',
                             task_sampler="meta_evaluator's test_task_sampler",
                             horizon=(test_sampler.max_episode_length  # (ours has a sampler)
                                      if hasattr(meta_evaluator, '_meta_sampler') else None))
        self._vectorize_tasks = bool(vectorize_tasks)
        self._learner_threads = learner_threads
        self._device = device
        self._meta_evaluator = meta_evaluator
        self._evaluate_every_n_epochs = evaluate_every_n_epochs
        self._meta_test_keys = None
        self._consecutive_nan_steps = 0
        self._nan_steps_this_epoch = 0

    # ------------------------------------------------------------ properties
    @property
    def policy(self):
        """garage torch Policy: the meta-policy (pre-update parameters θ)."""
        return self._policy

    @property
    def sampler(self) -> MetaSampler:
        """MetaSampler: the sampler (also used by our MetaEvaluator)."""
        return self._sampler

    @property
    def discount(self) -> float:
        """Discount γ (read by garage's MetaEvaluator for its logging)."""
        return self._discount

    @property
    def num_inner_grad_steps(self) -> int:
        """Inner adaptation steps K."""
        return self._num_inner_grad_steps

    def _build_inner_lr(self, inner_lr) -> Dict[str, torch.Tensor]:
        params = named_params(self._policy)
        if isinstance(inner_lr, dict):
            unknown = set(inner_lr) - set(params)
            missing = set(params) - set(inner_lr)
            require(not unknown and not missing, 'inner_lr',
                   'a dict with one entry per policy parameter '
                   f'(unknown: {sorted(unknown)}, missing: {sorted(missing)})',
                   inner_lr)
            lrs = collections.OrderedDict()
            for name, param in params.items():
                lr = _step_sizes(inner_lr[name], param.dtype)
                require(lr is not None and (lr.dim() == 0
                                           or lr.shape == param.shape),
                       'inner_lr', f'a real scalar or a real tensor of shape '
                       f'{tuple(param.shape)} for {name}', inner_lr[name])
                require(bool((lr > 0).all() and torch.isfinite(lr).all()),
                       'inner_lr', f'finite and > 0 for {name}',
                       inner_lr[name])
                lrs[name] = lr.detach().clone()
            return lrs
        what = 'inner_lr (a number, or a dict of per-parameter step sizes)'
        value = torch.tensor(check_float(inner_lr, what, 0., low_open=True))
        # Checked again as stored (float32): 1e300 would be inf, 1e-50 zero.
        require(bool(value > 0 and torch.isfinite(value)), what,
                f'finite and > 0 in {value.dtype}', inner_lr)
        return collections.OrderedDict((name, value.clone()) for name in params)

    def optimize(self, itr: int, batches: List[MetaBatch]):
        """Update θ from the sampled batches and record the losses.

        Public step API (with :meth:`sample_meta_batch`).

        Args:
            itr (int): The iteration (ProMP's ε annealing and minibatch
                stream use it).
            batches (list[MetaBatch]): From :meth:`sample_meta_batch`. The
                padding after the rounds' longest episode is cut first
                (:func:`~garage_promp.algos._batch.without_trailing_padding`).

        Raises:
            ValueError: If ``itr`` is not an int >= 0 or ``batches`` are not the
                K + 1 rounds of one meta-batch for this policy
                (:func:`~garage_promp.algos._batch.check_batches`), or hold
                fewer tasks than ProMP's ``num_minibatches``; θ is then
                untouched.

        """
        itr = check_int(itr, 'itr', 0)
        spec = self._env_spec
        check_batches(batches, self._num_inner_grad_steps + 1,
                      spec.observation_space.flat_dim, spec.action_space.flat_dim,
                      next(self._policy.parameters()).dtype)
        self._check_fit(batches)
        # Where an outer step's policy is checked (_adam_step): each task's first step.
        self._probe = (batches[0].observations[:, 0, 0], batches[0].actions[:, 0, 0])
        try:
            self._optimize(itr, without_trailing_padding(batches))
        finally:
            self._probe = None

    def _check_fit(self, batches: List[MetaBatch]) -> None:
        """Refuse checked ``batches`` that this algorithm's outer step cannot take, before
        θ moves (a ValueError naming ``batches``); every layout fits the base's."""

    def _optimize(self, itr: int, batches: List[MetaBatch]):
        """:meth:`optimize` on checked arguments: each algorithm's outer step.

        Not abstract, so that a subclass written against the older API (one
        that overrides :meth:`optimize` itself) can still be made.
        """
        raise NotImplementedError(f'{type(self).__name__} defines no outer step (_optimize)')

    def outer_parameters(self) -> List[torch.Tensor]:
        """What the outer optimiser updates: θ, and the step sizes if they are learned."""
        params = list(self._policy.parameters())
        if self._trainable_inner_step_size:
            params += list(self._inner_lr.values())
        return params


def _step_sizes(value, dtype: torch.dtype) -> torch.Tensor | None:
    """An ``inner_lr`` dict entry as a tensor of ``dtype``, or None where it is no real
    number: True is no step size, and a complex one lost its imaginary part with only a
    warning; or where torch cannot make it a tensor (a ragged list)."""
    if isinstance(value, (bool, np.bool_)) or is_complex(value) or (
            isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        return None
    try:
        return torch.as_tensor(value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError):
        return None
