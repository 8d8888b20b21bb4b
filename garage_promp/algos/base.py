"""Shared machinery of the gradient-based meta-RL algorithms.

After ``MAMLAlgo`` in the original ProMP code, meta_policy_search/meta_algos/base.py.

``MetaPolicySearch`` is a garage :class:`~garage.np.algos.MetaRLAlgorithm`:
built from an env, a garage torch Gaussian policy, a
:class:`~garage_promp.sampler.MetaSampler` and a garage task sampler;
trained by ``Trainer.setup``/``Trainer.train``; meta-tested through
``get_exploration_policy``/``adapt_policy``. Subclasses define the outer
objective of every task (:meth:`_objective`) and the outer optimiser
(:meth:`optimize`).

Per epoch: sample M tasks; for k = 0..K sample R episodes of every task in one
sampler call with each task's current parameters, process them, and (k < K)
take one inner step per task; then optimise the meta-objective, which is
rebuilt from θ through all K inner steps with ``create_graph=True`` so that
its gradient carries every second-order term.
"""
import abc
import collections
import contextlib
import inspect
import random
import time
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from garage_promp._allocator import keep_freed_memory
from garage_promp._console import phase
from garage_promp._threads import available_cores, learner_threads
from garage_promp.algos._batch import (
    MetaBatch,
    ProcessingConfig,
    concatenate_tasks,
    process_episodes,
)
from garage_promp.baselines import Baseline, LinearFeatureBaseline, LinearTimeBaseline
from garage_promp.objectives import (
    dice_objective,
    discount_cumsum,
    emaml_objective,
    gaussian_kl,
    gaussian_log_likelihood,
    log_likelihood_objective,
    lvc_objective,
    masked_mean,
)
from garage_promp.policies import (
    AdaptedPolicy,
    Params,
    distribution_params,
    expand_params,
    named_params,
    stack_params,
    task_distribution_params,
    unstack_params,
)
from garage_promp.sampler import MetaSampler
from garage_promp.sampler.rollout import check_same_spaces
from garage_promp.validation import (
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
)

import akro
from dowel import tabular
from garage import EpisodeBatch, log_performance
from garage.experiment import MetaEvaluator
from garage.np.algos import MetaRLAlgorithm
import numpy as np
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


def option_defaults(cls) -> Dict[str, Any]:
    """The keyword options an algorithm class takes, with their defaults.

    Its own and inherited (the most derived class's default wins); options
    listed in the class's ``FIXED_OPTIONS`` (fixed by the variant, e.g. the
    inner estimator of ``LVCVPG``) are not among them. An option without a
    default maps to ``inspect.Parameter.empty``.
    """
    defaults = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get('__init__')
        if init is None or klass is object:
            continue
        for param in inspect.signature(init).parameters.values():
            if param.kind == param.KEYWORD_ONLY:
                defaults.setdefault(param.name, param.default)
    for name in getattr(cls, 'FIXED_OPTIONS', ()):
        defaults.pop(name, None)
    return defaults


def supported_options(cls) -> List[str]:
    """The keyword options an algorithm class takes (see :func:`option_defaults`)."""
    return sorted(option_defaults(cls))


def refuse_fixed_options(cls, kwargs: dict):
    """Raise ValueError if ``kwargs`` sets an option ``cls`` fixes."""
    for name in getattr(cls, 'FIXED_OPTIONS', ()):
        if name in kwargs:
            raise ValueError(
                f'{cls.__name__} does not take {name!r} (the variant fixes it; '
                f'use TRPOMAML or MetaVPG to choose it); its options are '
                f'{supported_options(cls)}')


def _check(condition: bool, name: str, requirement: str, value):
    if not condition:
        raise ValueError(f'{name} must be {requirement}, got {value!r}')


def check_env_and_policy(env, policy) -> int:
    """Check that ``env`` and ``policy`` fit each other; return the horizon.

    The env needs flat Box spaces, a bounded action space (Gaussian policy)
    and a finite horizon; the policy's input and output sizes must be the
    env's observation and action sizes.

    Raises:
        ValueError: Naming ``env`` or ``policy`` and what does not fit.

    """
    spec = getattr(env, 'spec', None)
    obs_space = getattr(spec, 'observation_space', None)
    act_space = getattr(spec, 'action_space', None)
    for name, space in (('observation', obs_space), ('action', act_space)):
        if not isinstance(space, akro.Box) or len(space.shape) != 1:
            raise ValueError(f'env must have a flat (1-D) Box {name} space, '
                             f'got {space!r}')
    if not (np.isfinite(act_space.low).all()
            and np.isfinite(act_space.high).all()):
        raise ValueError('env must have a bounded action space (Gaussian '
                         f'policy), got {act_space!r}')
    horizon = spec.max_episode_length
    if horizon is None or not np.isfinite(horizon):
        raise ValueError('env must have a finite max_episode_length, got '
                         f'{horizon!r}')
    # A probe forward: works for any policy, whatever it records of its spec.
    obs_dim, act_dim = obs_space.shape[0], act_space.shape[0]
    try:
        with torch.no_grad():
            mean, _ = distribution_params(policy, None, torch.zeros(1, obs_dim))
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"policy does not take the env's observations of size "
                         f'{obs_dim}: {error}') from error
    if tuple(mean.shape) != (1, act_dim):
        raise ValueError(f'policy outputs actions of size {mean.shape[-1]} but the env '
                         f'has {act_dim}')
    return int(horizon)


def _log_step_returns(prefix: str, episodes: EpisodeBatch, discount: float):
    """Pre-/post-update return statistics under the reference's key names."""
    returns, discounted, success = [], [], []
    for eps in episodes.split():
        returns.append(float(eps.rewards.sum()))
        discounted.append(
            float(discount_cumsum(eps.rewards[None].astype(float),
                                  discount)[0, 0]))
        if 'success' in eps.env_infos:
            success.append(float(np.any(eps.env_infos['success'])))
    tabular.record(prefix + 'AverageReturn', np.mean(returns))
    tabular.record(prefix + 'AverageDiscountedReturn', np.mean(discounted))
    tabular.record(prefix + 'StdReturn', np.std(returns))
    tabular.record(prefix + 'MaxReturn', np.max(returns))
    tabular.record(prefix + 'MinReturn', np.min(returns))
    tabular.record(prefix + 'NumEpisodes', len(returns))
    if success:
        tabular.record(prefix + 'SuccessRate', np.mean(success))


def _global_rng_states() -> dict:
    return dict(python=random.getstate(), numpy=np.random.get_state(),
                torch=torch.get_rng_state())


def _set_global_rng_states(states: dict):
    random.setstate(states['python'])
    np.random.set_state(states['numpy'])
    torch.set_rng_state(states['torch'])


class MetaPolicySearch(MetaRLAlgorithm, abc.ABC):
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
            learner_threads = check_int(learner_threads, 'learner_threads', 1)
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
        _check(callable(getattr(task_sampler, 'sample', None)),
               'task_sampler', 'a garage TaskSampler with sample(n)',
               task_sampler)
        horizon = check_env_and_policy(env, policy)
        # garage's SetTaskSampler (and ours) hold a template env: compare it now.
        template = getattr(task_sampler, '_env', None)
        if template is not None:
            check_same_spaces(template, env, 'the algorithm')
        if sampler.max_episode_length != horizon:
            raise ValueError(
                f'sampler has max_episode_length={sampler.max_episode_length}'
                f' but env has {horizon}: build the sampler for this env')

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

    def _learner_thread_count(self) -> int:
        """torch threads while the workers wait (see ``learner_threads``)."""
        if self._learner_threads is not None:
            return self._learner_threads
        if self._sampler.kind == 'local':  # no worker processes to wait for
            return torch.get_num_threads()
        return available_cores()

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
            _check(not unknown and not missing, 'inner_lr',
                   'a dict with one entry per policy parameter '
                   f'(unknown: {sorted(unknown)}, missing: {sorted(missing)})',
                   inner_lr)
            lrs = collections.OrderedDict()
            for name, param in params.items():
                try:
                    lr = torch.as_tensor(inner_lr[name], dtype=param.dtype)
                except (TypeError, ValueError, RuntimeError):
                    lr = None
                _check(lr is not None and (lr.dim() == 0
                                           or lr.shape == param.shape),
                       'inner_lr', f'a scalar or a tensor of shape '
                       f'{tuple(param.shape)} for {name}', inner_lr[name])
                _check(bool((lr > 0).all() and torch.isfinite(lr).all()),
                       'inner_lr', f'finite and > 0 for {name}',
                       inner_lr[name])
                lrs[name] = lr.detach().clone()
            return lrs
        inner_lr = check_float(inner_lr, 'inner_lr (a number, or a dict of '
                               'per-parameter step sizes)', 0.,
                               low_open=True)
        return collections.OrderedDict(
            (name, torch.tensor(inner_lr)) for name in params)

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
                     create_graph: bool = True) -> List[Params]:
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

    # -------------------------------------------------------------- training
    def sample_meta_batch(self, itr: int,
                          task_updates=None) -> List[MetaBatch]:
        """Sample D_0..D_K with fresh episodes after every inner step.

        Public step API (with :meth:`optimize`): one epoch is
        ``optimize(itr, sample_meta_batch(itr))`` plus logging.

        Args:
            itr (int): The iteration (unused; sampling rounds are counted by
                the sampler).
            task_updates (list[EnvUpdate] or None): The tasks (default: M
                fresh tasks from the task sampler).

        Returns:
            list[MetaBatch]: The K + 1 processed batches of the same tasks.

        """
        del itr
        if task_updates is None:
            task_updates = self._task_sampler.sample(self._meta_batch_size)
        n_tasks = len(task_updates)
        n_rounds = self._num_inner_grad_steps + 1
        theta = collections.OrderedDict(
            (k, v.detach().clone())
            for k, v in named_params(self._policy).items())
        params = [theta] * n_tasks  # each task's parameters for the next round
        parts = [[None] * n_tasks for _ in range(n_rounds)]
        done = [0] * n_rounds

        def on_task(k, task, episodes):
            # Task by task, while the workers sample the other tasks: process
            # D_k of this task and take its inner step (one task at a time,
            # so the result does not depend on how the work was split), on
            # one torch thread: torch's reductions round differently with
            # other thread counts, and the cores free here depend on the
            # sampler (none beside busy workers, all with the in-process one).
            if done[k] == 0 and k + 1 < n_rounds:  # round k + 1 is starting
                phase(f'sampling round {k + 2}/{n_rounds}')
            done[k] += 1
            with learner_threads(1):
                batch = process_episodes(episodes, 1, self._episodes_per_task,
                                         self._horizon, self._processing, first_task=task)
                parts[k][task] = batch
                if k < self._num_inner_grad_steps:
                    params[task] = unstack_params(self._inner_step(
                        stack_params([params[task]]), batch, False))[0]
                    self._check_adapted(params[task], k + 1, task)
                return params[task]

        phase(f'sampling round 1/{n_rounds}')
        rounds = self._sampler.obtain_rounds(task_updates, params,
                                             [self._episodes_per_task] * n_rounds, on_task)
        return [concatenate_tasks(parts[k], rounds[k], self._horizon)
                for k in range(n_rounds)]

    def _check_adapted(self, params: Params, step: int, task: int):
        """Blame the inner step, not the env, when it makes the policy non-finite.

        Otherwise the next round would sample NaN actions and the error would
        name the environment.
        """
        bad = [name for name, value in params.items() if not bool(torch.isfinite(value).all())]
        if bad:
            lrs = {name: (float(v.detach().abs().max()) if v.numel() > 1 else float(v))
                   for name, v in self._inner_lr.items()}
            raise FloatingPointError(
                f'inner step {step} of task slot {task} made the adapted policy parameters '
                f'non-finite (NaN/inf) in {bad}: the inner step size is likely too large '
                f'(inner_lr={self._inner_lr_value!r}; largest per parameter: {lrs})')

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

        """
        with learner_threads(self._learner_thread_count()):
            batch = process_episodes(episodes, len(params), episodes_per_task,
                                     self._horizon, self._processing)
            stacked = stack_params([
                collections.OrderedDict(
                    (k, torch.as_tensor(v).detach()) for k, v in p.items())
                for p in params
            ])
            return unstack_params(self._inner_step(stacked, batch, False))

    # Per-process attributes left out of snapshots.
    _TRANSIENT = ('_pending_rng_states', 'epoch_timings', 'last_timings', '_forward_cache')

    #: A budget of env steps (every sampling round counted, as garage's
    #: ``TotalEnvSteps``): when set, training ends at the first epoch
    #: boundary at or past it, before ``n_epochs`` if that comes first, so
    #: runs on envs that end episodes early get the same budget as the rest.
    #: Set by ``launchers/train.py --max-env-steps``; kept in snapshots.
    max_env_steps: int | None = None

    def __getstate__(self):
        """Pickle state, with the process's global RNG states.

        Our own randomness is keyed (the sampler's rounds, ProMP's minibatch
        stream), but task samplers such as garage's draw from the global
        numpy RNG. garage's ``Trainer.restore`` re-seeds the globals after
        unpickling, so the saved states are applied when ``train`` starts
        (see :meth:`train`): a restored run then continues exactly.
        """
        state = dict(self.__dict__)
        state['_saved_rng_states'] = _global_rng_states()
        for transient in self._TRANSIENT:
            state.pop(transient, None)
        return state

    #: Attributes added after snapshots were first written, with the value
    #: that reproduces what a run without them did: a snapshot from an older
    #: release resumes as the run it was (``launchers/train.py --resume``).
    _SNAPSHOT_DEFAULTS = {'_trainable_inner_step_size': False}

    def __setstate__(self, state):
        state = {**self._SNAPSHOT_DEFAULTS, **state}
        state['_pending_rng_states'] = state.pop('_saved_rng_states', None)
        self.__dict__.update(state)

    def train(self, trainer) -> float:
        """Meta-train; called by ``Trainer.train`` and ``Trainer.resume``.

        After a restore, the global RNG states saved in the snapshot are put
        back first (garage's ``Trainer.restore`` re-seeds them with the
        original seed, which would replay the first epochs' draws).

        Args:
            trainer (garage.trainer.Trainer): The experiment trainer.

        Returns:
            float: The average post-update return of the last epoch.

        """
        pending = self.__dict__.pop('_pending_rng_states', None)
        if pending is not None:
            _set_global_rng_states(pending)
        keep_freed_memory()
        last_return = None
        for epoch in trainer.step_epochs():
            if self.budget_reached(trainer.total_env_steps):
                break  # the previous epoch is saved; nothing of this one ran
            start = time.perf_counter()
            batches = self.sample_meta_batch(trainer.step_itr)
            self.last_timings = {'Sampling': time.perf_counter() - start}
            self.__dict__.setdefault('epoch_timings', []).append(
                self.last_timings)
            trainer.total_env_steps += sum(
                int(b.episodes.lengths.sum()) for b in batches)
            trainer.step_episode = batches[-1].episodes
            last_return = self._train_once(trainer.step_itr, epoch, batches)
            trainer.step_itr += 1
        return last_return

    def epochs_for_budget(self, max_env_steps: int) -> int:
        """Epochs that surely reach ``max_env_steps``: an upper bound for ``n_epochs``.

        Every one of an epoch's M x R x (K + 1) episodes takes at least one step.
        """
        per_epoch = self._meta_batch_size * self._episodes_per_task * (
            self._num_inner_grad_steps + 1)
        return -(-int(max_env_steps) // per_epoch)

    def budget_reached(self, total_env_steps: int) -> bool:
        """Whether ``total_env_steps`` meets :attr:`max_env_steps` (if set)."""
        return self.max_env_steps is not None and total_env_steps >= self.max_env_steps

    def _train_once(self, itr: int, epoch: int,
                    batches: List[MetaBatch]) -> float:
        self._nan_steps_this_epoch = 0
        timings = self.__dict__.setdefault('last_timings', {})
        with tabular.prefix(self._policy.name + '/'):
            start = time.perf_counter()
            phase('update')
            with learner_threads(self._learner_thread_count()), self._on_device():
                self.optimize(itr, [b.to(self._learner_device) for b in batches])
            timings['Update'] = time.perf_counter() - start
            tabular.record('Entropy', self._entropy(batches[0]))
            self._log_inner_step_sizes()
            tabular.record('NaNStepsSkipped', self._nan_steps_this_epoch)
        for k, batch in enumerate(batches):
            _log_step_returns(f'Step_{k}-', batch.episodes, self._discount)
        if callable(self._diagnostics):
            self._diagnostics(batches[-1].episodes, prefix='PostUpdate/')
        undiscounted = log_performance(itr,
                                       batches[-1].episodes,
                                       self._discount,
                                       prefix='Average')
        start = time.perf_counter()
        self._maybe_evaluate(epoch)
        timings['MetaTest'] = time.perf_counter() - start
        for key in ('Sampling', 'Update', 'MetaTest'):
            # Wall-clock seconds of this epoch's phases (Time/Sampling
            # includes the inner steps between sampling rounds).
            tabular.record(f'Time/{key}', timings.get(key, np.nan))
        for part in self.UPDATE_PARTS:  # the update's breakdown
            tabular.record(f'Time/Update/{part}', timings.get(f'Update/{part}', 0.))
        return float(np.mean(undiscounted))

    def _entropy(self, batch: MetaBatch) -> float:
        with torch.no_grad():
            _, log_std = self._dist(None, batch)
            entropy = (log_std + 0.5 * np.log(2 * np.pi * np.e)).sum(-1)
            return float(masked_mean(entropy, batch.mask))

    def _maybe_evaluate(self, epoch: int):
        """Meta-test every n epochs; NaN under the same keys otherwise."""
        if self._meta_evaluator is None:
            return
        if epoch % self._evaluate_every_n_epochs == 0 or \
                self._meta_test_keys is None:
            phase('meta-test')
            before = set(tabular.as_dict)
            self._meta_evaluator.evaluate(self)
            self._meta_test_keys = sorted(set(tabular.as_dict) - before)
        else:
            for key in self._meta_test_keys:
                tabular.record(key, np.nan)

    @property
    def _learner_device(self) -> torch.device:
        # Snapshots written before the device option hold no _device: CPU.
        return self.__dict__.get('_device', torch.device('cpu'))

    @contextlib.contextmanager
    def _on_device(self):
        """Hold θ, the optimiser's state and per-parameter step sizes on ``device``.

        The meta-update runs there; sampling, processing and the inner steps
        between sampling rounds stay on the CPU. Parameters move once each
        way per iteration. On the CPU this moves nothing.
        """
        self._move_learner(self._learner_device)
        try:
            yield
        finally:
            self._move_learner(torch.device('cpu'))

    def _move_learner(self, device):
        self._policy.to(device)
        if self._trainable_inner_step_size:
            for value in self._inner_lr.values():  # in place: the optimiser holds them
                value.data = value.data.to(device)
        else:
            self._inner_lr = collections.OrderedDict(
                (k, v.to(device)) for k, v in self._inner_lr.items())
        optimizer = getattr(self, '_optimizer', None)
        if optimizer is not None:
            for state in optimizer.state.values():
                for key, value in state.items():
                    # Adam keeps its step count on the CPU unless capturable.
                    if torch.is_tensor(value) and key != 'step':
                        state[key] = value.to(device)

    #: The parts of :meth:`optimize` timed by :meth:`_timed` (logged as
    #: ``Time/Update/<part>``): the meta-objective's forward and backward
    #: passes with the parameter steps, TRPO's conjugate gradient and line
    #: search, and the logged values after the step.
    UPDATE_PARTS = ('MetaObjective', 'After')

    @contextlib.contextmanager
    def _timed(self, part: str):
        """Add the block's wall time to ``last_timings['Update/<part>']``.

        On a GPU the block's queued kernels are waited for, so the time is
        the part's own and not the next part's.
        """
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._learner_device.type == 'cuda':
                torch.cuda.synchronize(self._learner_device)
            timings = self.__dict__.setdefault('last_timings', {})
            key = f'Update/{part}'
            timings[key] = timings.get(key, 0.) + time.perf_counter() - start

    @abc.abstractmethod
    def optimize(self, itr: int, batches: List[MetaBatch]):
        """Update θ from the sampled batches and record the losses.

        Public step API (with :meth:`sample_meta_batch`).

        Args:
            itr (int): The iteration (ProMP's ε annealing and minibatch
                stream use it).
            batches (list[MetaBatch]): From :meth:`sample_meta_batch`.

        """

    MAX_CONSECUTIVE_NAN_STEPS = 5

    def _skip_non_finite_step(self, what: str):
        """Count a skipped outer step; raise after too many in a row."""
        self._consecutive_nan_steps += 1
        self._nan_steps_this_epoch += 1
        if self._consecutive_nan_steps >= self.MAX_CONSECUTIVE_NAN_STEPS:
            suspects = ', '.join(
                f'{name}={getattr(self, attr)!r}' for name, attr in (
                    ('inner_lr', '_inner_lr_value'),
                    ('learning_rate', '_learning_rate'),
                    ('max_kl_step', '_max_kl_step'))
                if hasattr(self, attr))
            raise FloatingPointError(
                f'{what} was NaN/inf in {self._consecutive_nan_steps} '
                'consecutive epochs (the inner steps or the outer step '
                f'diverged; the step sizes are the likely culprits: {suspects});'
                ' the policy parameters were left at their last finite values')

    def outer_parameters(self) -> List[torch.Tensor]:
        """What the outer optimiser updates: θ, and the step sizes if they are learned."""
        params = list(self._policy.parameters())
        if self._trainable_inner_step_size:
            params += list(self._inner_lr.values())
        return params

    def _log_inner_step_sizes(self):
        """Mean, min and max of each parameter's learned step sizes."""
        if not self._trainable_inner_step_size:
            return
        for name, lr in self._inner_lr.items():
            values = lr.detach()
            for stat in ('mean', 'min', 'max'):
                tabular.record(f'InnerStepSize/{name}/{stat.capitalize()}',
                               float(getattr(values, stat)()))

    def _adam_step(self, optimizer: torch.optim.Optimizer,
                   loss: torch.Tensor) -> bool:
        """One optimiser step on ``loss``; skipped if loss or grads are NaN."""
        optimizer.zero_grad()
        if not torch.isfinite(loss):
            self._skip_non_finite_step('the meta-loss')
            return False
        loss.backward()
        grads = [p.grad for p in self.outer_parameters()
                 if p.grad is not None]
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            optimizer.zero_grad()
            self._skip_non_finite_step('the meta-gradient')
            return False
        optimizer.step()
        self._consecutive_nan_steps = 0
        return True

    # ---------------------------------------------------- meta-test protocol
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
