#!/usr/bin/env python3
"""Smoke launcher: garage's own torch MAMLTRPO, 2 epochs on garage's PointEnv.

Shows that garage 2021.3 trains on this stack through garage_promp's compat
layer (no TensorFlow, torch 2, numpy 1.26).
"""
import signal
import threading

# Ctrl-C while the libraries load ends the launcher quietly (an ignored SIGINT stays
# ignored); run_command restores Python's handler before the run starts.
if (__name__ == '__main__' and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)


import garage_promp  # noqa: F401  (applies the garage compat layer)
from garage_promp.validation import (
    SEED,
    StrictCommand,
    check_default_log_dir,
    count,
    run_command,
    usage_errors,
)

import click
from garage import wrap_experiment
from garage.envs import PointEnv, normalize
from garage.experiment import MetaEvaluator
from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskSampler
from garage.sampler import LocalSampler
from garage.torch.algos import MAMLTRPO
from garage.torch.policies import GaussianMLPPolicy
from garage.torch.value_functions import GaussianMLPValueFunction
from garage.trainer import Trainer

max_episode_length = 20


class ShortPointEnv(PointEnv):
    """garage's PointEnv with a finite episode length (its default is inf)."""

    def __init__(self, **kwargs):
        super().__init__(max_episode_length=max_episode_length, **kwargs)


@wrap_experiment(snapshot_mode='last', archive_launch_repo=False)
def smoke(ctxt, seed, epochs):
    """Train garage's MAMLTRPO on PointEnv for a couple of epochs."""
    set_seed(seed)
    env = normalize(PointEnv(max_episode_length=max_episode_length))
    task_sampler = SetTaskSampler(
        ShortPointEnv,
        wrapper=lambda env, _: normalize(env))
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(16, 16))
    value_function = GaussianMLPValueFunction(env.spec, hidden_sizes=(16, ))
    sampler = LocalSampler(agents=policy, envs=env,
                           max_episode_length=max_episode_length)
    evaluator = MetaEvaluator(test_task_sampler=task_sampler, n_test_tasks=2,
                              n_exploration_eps=2, n_test_episodes=2)
    algo = MAMLTRPO(env=env, policy=policy, sampler=sampler,
                    task_sampler=task_sampler, value_function=value_function,
                    meta_batch_size=4, discount=0.99, inner_lr=0.1,
                    num_grad_updates=1, meta_evaluator=evaluator)
    trainer = Trainer(ctxt)
    trainer.setup(algo, env)
    trainer.train(n_epochs=epochs, batch_size=2 * max_episode_length)


@click.command(cls=StrictCommand)
@click.option('--seed', type=SEED, default=1, show_default=True)
@click.option('--epochs', type=count(), default=2, show_default=True)
def main(seed, epochs):
    """Train garage's MAMLTRPO on PointEnv for a couple of epochs (data/local/experiment/smoke)."""
    with usage_errors():  # before wrap_experiment creates the run's directory
        check_default_log_dir('the log directory')
    smoke(seed=seed, epochs=epochs)


if __name__ == '__main__':
    run_command(main)
