"""Sampling a meta-batch: D_0..D_K of M tasks with the inner steps between the rounds.

The sampler runs the K + 1 rounds pipelined
(:meth:`garage_promp.sampler.MetaSampler.obtain_rounds`): as a task's episodes
of round k arrive they are processed and its inner step is taken, and its round
k + 1 starts with the adapted parameters while the workers still sample the
other tasks of round k. The original code samples round by round
(meta_policy_search/meta_trainer.py).

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import collections
from typing import List

from garage_promp._console import phase
from garage_promp._threads import ADAPTATION_THREADS, learner_threads
from garage_promp.algos._batch import MetaBatch, concatenate_tasks, process_episodes
from garage_promp.policies import Params, named_params, stack_params, unstack_params
from garage_promp.validation import check_int

import torch


class MetaBatchSampling:
    """:meth:`sample_meta_batch`, the first half of the public step API."""

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
        check_int(itr, 'itr', 0)  # not used here; checked as optimize's is
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
            # ADAPTATION_THREADS torch threads, as meta-test adapts (the
            # cores free here depend on the sampler).
            if done[k] == 0 and k + 1 < n_rounds:  # round k + 1 is starting
                phase(f'sampling round {k + 2}/{n_rounds}')
            done[k] += 1
            with learner_threads(ADAPTATION_THREADS):
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

    def _check_adapted(self, params: Params, step: int | None, task: int):
        """Blame the inner step, not the env, when it makes the policy non-finite.

        Otherwise the next round would sample NaN actions and the error would
        name the environment (and meta-test would act with NaN). ``step``: the
        inner step's number, where known (meta-training's rounds).
        """
        bad = [name for name, value in params.items() if not bool(torch.isfinite(value).all())]
        if bad:
            lrs = {name: (float(v.detach().abs().max()) if v.numel() > 1 else float(v))
                   for name, v in self._inner_lr.items()}
            raise FloatingPointError(
                (f'inner step {step}' if step is not None else 'the inner step')
                + f' of task slot {task} made the adapted policy parameters '
                f'non-finite (NaN/inf) in {bad}: the inner step size is likely too large '
                f'(inner_lr={self._inner_lr_value!r}; largest per parameter: {lrs})')

