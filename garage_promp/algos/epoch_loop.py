"""The epoch loop: sample, update, log, meta-test; its timings, budget and NaN guards.

One epoch (garage's ``Trainer.step_epochs``) is
``optimize(itr, sample_meta_batch(itr))`` plus logging under the original code's
key names (``Step_k-AverageReturn``, ... ; meta_policy_search/meta_trainer.py) and
garage's (``Average/...``, ``TotalEnvSteps``), each phase's wall time
(``Time/...``), and a meta-test every ``evaluate_every_n_epochs``. An outer step
whose loss or gradient is not finite is skipped and counted; too many in a row
end the run naming the step sizes.

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import contextlib
import copy
import time
from typing import List

from garage_promp._allocator import keep_freed_memory
from garage_promp._console import phase
from garage_promp._threads import learner_threads
from garage_promp.algos._batch import MetaBatch, without_trailing_padding
from garage_promp.objectives import discount_cumsum, gaussian_log_likelihood, masked_mean
from garage_promp.policies import distribution_params
from garage_promp.validation import check_int

from dowel import tabular
from garage import EpisodeBatch, log_performance
import numpy as np
import torch


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


def _check_train_arguments(trainer) -> None:
    """Refuse what garage's ``Trainer`` takes without a word, before the first epoch.

    ``Trainer.train(n_epochs=2.5)`` ran 2 epochs, ``n_epochs=True`` one and ``n_epochs=-1``
    none (returning None, as if trained); ``plot=True`` ended the run after the first epoch
    (garage's plotter reads ``algo.max_episode_length``); an algorithm trained by a trainer
    that was never set up failed on a None.
    """
    arguments = getattr(trainer, '_train_args', None)
    if arguments is None:
        raise ValueError(f'{type(trainer).__name__} has no training arguments: a garage '
                         'Trainer trains the algorithm (trainer.setup(algo, env), then '
                         'trainer.train(n_epochs=N))')
    check_int(arguments.n_epochs, "the Trainer's n_epochs", 1)
    if getattr(arguments, 'plot', False):
        # garage started its plotter (a forked process) before calling train: stopped here,
        # since the exception skips the trainer's own shutdown.
        plotter = getattr(trainer, '_plotter', None)
        if plotter is not None:
            plotter.close()
        trainer._plot = False  # pylint: disable=protected-access
        raise ValueError("Trainer.train(plot=True) is not supported: garage's plotter reads "
                         "attributes of garage's own algorithms, and ended the run after its "
                         "first epoch; render a policy's episodes with the env's visualize()")


class EpochLoop:
    """``train`` (called by garage's ``Trainer``) and what each epoch records."""


    #: A budget of env steps (every sampling round counted, as garage's
    #: ``TotalEnvSteps``): when set, training ends at the first epoch
    #: boundary at or past it, before ``n_epochs`` if that comes first, so
    #: runs on envs that end episodes early get the same budget as the rest.
    #: Set by ``launchers/train.py --max-env-steps``; kept in snapshots.
    max_env_steps: int | None = None

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
        _check_train_arguments(trainer)
        self._restore_global_rng_states()
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
                # Cut before the copy to the device (optimize would cut it there, and
                # the padded batches would take device memory beside the cut ones).
                self.optimize(itr, [b.to(self._learner_device)
                                    for b in without_trailing_padding(batches)])
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

    def _log_inner_step_sizes(self):
        """Mean, min and max of each parameter's learned step sizes."""
        if not self._trainable_inner_step_size:
            return
        for name, lr in self._inner_lr.items():
            values = lr.detach()
            for stat in ('mean', 'min', 'max'):
                tabular.record(f'InnerStepSize/{name}/{stat.capitalize()}',
                               float(getattr(values, stat)()))

    def _policy_finite_at_probe(self) -> bool:
        """Whether the policy gives the probe's actions a finite log-likelihood.

        The probe is the first step of every task's first episode of the meta-batch
        being optimised (set by ``optimize``); without one, True. Parameters that are
        finite but huge (a learning rate of 1e30) give means whose distance to any
        action overflows float32: every likelihood ratio and KL of the next loss would be
        NaN, and the sampler's actions inf.
        """
        probe = getattr(self, '_probe', None)
        if probe is None:
            return True
        obs, actions = probe
        with torch.no_grad():
            mean, log_std = distribution_params(self._policy, None, obs)
            return bool(torch.isfinite(gaussian_log_likelihood(actions, mean, log_std)).all())

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
        # A finite gradient times a huge step size overflows the (float32) parameters:
        # that step is undone and counted like a non-finite gradient, so the run ends
        # naming the step sizes rather than the env that samples NaN actions next.
        before = [p.detach().clone() for p in self.outer_parameters()]
        state = copy.deepcopy(optimizer.state_dict())  # its moments would keep the overflow
        optimizer.step()
        # Finite parameters can still be so large that the policy's mean is useless (a
        # learning rate of 1e30): the policy is evaluated at a few of the batch's steps
        # too, so that such a step is undone here, not met as NaN losses later.
        finite = all(bool(torch.isfinite(p).all()) for p in self.outer_parameters())
        if not finite or not self._policy_finite_at_probe():
            with torch.no_grad():
                for p, old in zip(self.outer_parameters(), before):
                    p.copy_(old)
            optimizer.load_state_dict(state)
            self._skip_non_finite_step('the outer step (the parameters it gave)' if not finite
                                       else "the outer step (the policy's likelihood of "
                                            'sampled actions at the parameters it gave)')
            return False
        self._consecutive_nan_steps = 0
        return True
