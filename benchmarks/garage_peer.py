#!/usr/bin/env python3
"""garage 2021.3's own ``MAMLTRPO``, the peer the benchmarks compare against.

``make_garage_maml_trpo`` builds it as garage's examples do (a
``GaussianMLPValueFunction`` baseline, one sampler call per task and
adaptation step) on a paper environment, with the paper table's inner step
size and number of inner steps. Run as a script, it trains the peer with the
same log layout as ``launchers/train.py``, so ``benchmarks/learning.py`` can
put it on the same figure:

    python benchmarks/garage_peer.py --env HalfCheetahFwdBack --seed 1 --epochs 50 \\
        --meta-batch-size 20 --episodes-per-task 10 --log-dir data/peer
    python benchmarks/garage_peer.py --resume data/peer --epochs 60

Besides garage's own keys it logs ``Step_<k>-AverageReturn``, the mean
undiscounted return of every task's episodes after k inner steps (garage's
``Average/AverageReturn`` is the last of them only). Resuming uses garage's
``Trainer.restore`` (through ``resume_run``, which appends to ``progress.csv``);
that re-seeds re-seeds garage's sampler, so a resumed peer run is
not bit-identical to an uninterrupted one (garage_promp's runs are).
"""
import os

import garage_promp  # noqa: F401  (compat layer before garage)
from garage_promp.experiment.env_names import EnvName
from garage_promp.experiment.env_setup import make_env_setup
from garage_promp.experiment.paper_config import env_config
from garage_promp.experiment.resume import resume_run
from garage_promp.validation import (
    OUTPUT_DIR,
    SEED,
    StrictCommand,
    check_batch_steps,
    check_output_path,
    check_run_dir,
    count,
    usage_errors,
    user_errors,
)

import click
from dowel import tabular
from garage import wrap_experiment
from garage.experiment.deterministic import set_seed
from garage.sampler import LocalSampler, MultiprocessingSampler
from garage.torch.algos import MAMLTRPO
from garage.torch.policies import GaussianMLPPolicy
from garage.torch.value_functions import GaussianMLPValueFunction
from garage.trainer import Trainer
import numpy as np


class LoggedMAMLTRPO(MAMLTRPO):
    """garage's ``MAMLTRPO``, also logging the return after every inner step."""

    def _train_once(self, trainer, all_samples, all_params):
        for step in range(self._num_grad_updates + 1):
            returns = [sum(path['rewards']) for task in all_samples
                       for path in task[step].paths]
            tabular.record(f'Step_{step}-AverageReturn', float(np.mean(returns)))
        return super()._train_once(trainer, all_samples, all_params)


def make_garage_maml_trpo(env_name, meta_batch_size, n_workers=1, seed=1):
    """garage's MAMLTRPO and its env on ``env_name`` ('ML1:reach-v3' names an ML1 task)."""
    family, _, task = env_name.partition(':')
    cfg = env_config(family)
    setup = make_env_setup(family, seed=seed, task=task or None)
    env = setup.env
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=cfg['hidden_sizes'])
    sampler_cls = LocalSampler if n_workers == 1 else MultiprocessingSampler
    sampler = sampler_cls(agents=policy, envs=env, n_workers=n_workers,
                          max_episode_length=env.spec.max_episode_length)
    algorithm = LoggedMAMLTRPO(env=env, policy=policy, sampler=sampler,
                               task_sampler=setup.train_tasks,
                               value_function=GaussianMLPValueFunction(
                                   env.spec, hidden_sizes=(32, 32)),
                               meta_batch_size=meta_batch_size, discount=0.99,
                               inner_lr=cfg['inner_lr'], num_grad_updates=cfg['K'])
    return algorithm, env


@wrap_experiment(archive_launch_repo=False, snapshot_mode='last')
def garage_maml_trpo(ctxt, env, seed, epochs, meta_batch_size, episodes_per_task,
                     algo='garage-MAMLTRPO'):
    """Train garage's MAMLTRPO (see the module docstring).

    ``algo`` only labels the run in ``variant.json``, as ``launchers/train.py`` does.
    """
    del algo
    set_seed(seed)
    algorithm, train_env = make_garage_maml_trpo(env, meta_batch_size, seed=seed)
    trainer = Trainer(ctxt)
    trainer.setup(algorithm, train_env)
    trainer.train(n_epochs=epochs,
                  batch_size=episodes_per_task * train_env.spec.max_episode_length)


@click.command(cls=StrictCommand)
@click.option('--env', type=EnvName(ml1_task=True), default='HalfCheetahFwdBack',
              show_default=True, help='A paper env, ML10, ML45 or ML1:<task>.')
@click.option('--seed', type=SEED, default=1, show_default=True)
@click.option('--epochs', type=count(), required=True)
@click.option('--meta-batch-size', type=count(), default=20, show_default=True)
@click.option('--episodes-per-task', type=count(), default=10, show_default=True)
@click.option('--log-dir', type=OUTPUT_DIR)
@click.option('--resume', 'resume_dir', type=click.Path(exists=True, file_okay=False),
              help='Continue the run in this directory up to --epochs.')
def main(env, seed, epochs, meta_batch_size, episodes_per_task, log_dir, resume_dir):
    """Train garage's MAMLTRPO on a paper environment."""
    if resume_dir:
        # Not about the command line (no run there, a corrupt snapshot): one
        # line, no usage text; unless it names an option (--epochs must be more).
        with user_errors('--resume'):
            check_run_dir(resume_dir)  # before its lock file is written there
            check_output_path(resume_dir, 'the run directory')
            resume_run(resume_dir, epochs)  # appends to progress.csv
        return
    if not log_dir:
        raise click.UsageError('--log-dir is required (or --resume)')
    if os.path.exists(os.path.join(log_dir, 'progress.csv')):
        raise click.UsageError(f'{log_dir} already holds a run; use --resume {log_dir}')
    with usage_errors():
        check_batch_steps(env_config(env.partition(':')[0])['H'],
                          meta_batch_size=meta_batch_size, episodes_per_task=episodes_per_task)
    garage_maml_trpo(dict(log_dir=log_dir), env=env, seed=seed, epochs=epochs,
                     meta_batch_size=meta_batch_size, episodes_per_task=episodes_per_task)


if __name__ == '__main__':
    # Run the importable module, not __main__: snapshots then refer to
    # garage_peer.LoggedMAMLTRPO by name (cloudpickle would copy a __main__
    # class by value, with a detached copy of dowel's tabular).
    from garage_peer import main as _main  # pylint: disable=import-self
    _main()  # pylint: disable=no-value-for-parameter
