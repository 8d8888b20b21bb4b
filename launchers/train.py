#!/usr/bin/env python3
"""Meta-train any garage_promp algorithm on any paper environment.

Defaults are the paper's (garage_promp/experiment/paper_config.py); every
hyperparameter can be overridden, e.g.

    python launchers/train.py --algo ProMP --env HalfCheetahFwdBack --epochs 1000
    python launchers/train.py --algo LVC-TRPO --env AntRandGoal --set max_kl_step=0.02
    python launchers/train.py --preset demo      # the README's few-minute run
"""
import ast

import garage_promp
from garage_promp.experiment import MetaEvaluator
from garage_promp.experiment.paper_config import ALGOS, ENVS, algo_kwargs, normalize_actions

import click
from garage import wrap_experiment
from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskSampler
from garage.torch.policies import GaussianMLPPolicy
from garage.trainer import Trainer

#: A few-minute ProMP run on 2 cores (the README's first command).
PRESETS = {
    'demo': dict(algo='ProMP', env='PointEnvCorner', epochs=25, meta_batch_size=20,
                 episodes_per_task=10, max_episode_length=50, n_test_tasks=4,
                 overrides={'learning_rate': 1e-2, 'reward_type': 'dense'}),
}



def _env_class(base, horizon, env_kwargs):
    """A no-argument subclass of ``base`` with our horizon (SetTaskSampler
    constructs ``env_type()``)."""

    def __init__(self, **kwargs):
        kwargs.setdefault('max_episode_length', horizon)
        for key, value in env_kwargs.items():
            kwargs.setdefault(key, value)
        base.__init__(self, **kwargs)

    return type(base.__name__, (base, ), {'__init__': __init__})


def _parse_overrides(pairs):
    out = {}
    for pair in pairs:
        if '=' not in pair:
            raise click.BadParameter(f'expected key=value, got {pair!r}', param_hint='--set')
        key, value = pair.split('=', 1)
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


@wrap_experiment(archive_launch_repo=False, snapshot_mode='last', name_parameters='passed')
def meta_train(ctxt, algo, env, seed, epochs, meta_batch_size, episodes_per_task,
               max_episode_length, sampler, n_workers, n_test_tasks, evaluate_every,
               hidden_sizes, overrides):
    """Build everything from the paper table plus overrides and train."""
    set_seed(seed)
    cfg = ENVS[env]
    kwargs = algo_kwargs(algo, env)
    horizon = max_episode_length or cfg['H']
    env_kwargs = {k: overrides.pop(k) for k in list(overrides) if k in ('reward_type', )}
    env_class = _env_class(cfg['env'], horizon, env_kwargs)
    train_env = normalize_actions(env_class(), None)
    policy = GaussianMLPPolicy(train_env.spec, hidden_sizes=hidden_sizes or cfg['hidden_sizes'])
    task_sampler = SetTaskSampler(env_class, wrapper=normalize_actions)
    if meta_batch_size:
        kwargs['meta_batch_size'] = meta_batch_size
    if episodes_per_task:
        kwargs['episodes_per_task'] = episodes_per_task
    kwargs.update(overrides)
    evaluator = MetaEvaluator(test_task_sampler=task_sampler, n_test_tasks=n_test_tasks,
                              n_exploration_eps=kwargs['episodes_per_task'],
                              n_test_episodes=2)
    algo_class = ALGOS[algo][0]
    kwargs = {k: v for k, v in kwargs.items() if k not in ('inner_estimator', 'exploration')
              or algo_class is garage_promp.TRPOMAML}
    algorithm = algo_class(train_env, policy,
                           garage_promp.make_sampler(policy, train_env, kind=sampler,
                                                     n_workers=n_workers),
                           task_sampler, meta_evaluator=evaluator,
                           evaluate_every_n_epochs=evaluate_every, **kwargs)
    trainer = Trainer(ctxt)
    trainer.setup(algorithm, train_env)
    return trainer.train(n_epochs=epochs, batch_size=1)


@click.command()
@click.option('--preset', type=click.Choice(sorted(PRESETS)), default=None,
              help='A named configuration (options given explicitly still win).')
@click.option('--algo', type=click.Choice(sorted(ALGOS)), default='ProMP', show_default=True)
@click.option('--env', 'env_name', type=click.Choice(sorted(ENVS)), default='HalfCheetahFwdBack',
              show_default=True)
@click.option('--seed', default=1, show_default=True)
@click.option('--epochs', default=1000, show_default=True)
@click.option('--meta-batch-size', type=int, default=None, help='Tasks per epoch [paper: 40].')
@click.option('--episodes-per-task', type=int, default=None, help='[paper: 20].')
@click.option('--max-episode-length', type=int, default=None, help='[paper: per env].')
@click.option('--sampler', type=click.Choice(['local', 'multiprocessing', 'ray']), default='local',
              show_default=True)
@click.option('--n-workers', default=1, show_default=True)
@click.option('--n-test-tasks', default=10, show_default=True)
@click.option('--evaluate-every', default=1, show_default=True, help='Meta-test period (epochs).')
@click.option('--hidden-sizes', type=str, default=None, help='e.g. "64,64" [paper: per env].')
@click.option('--snapshot-mode', default='last', show_default=True)
@click.option('--log-dir', default=None, help='Default: data/local/experiment/<name>.')
@click.option('--set', 'overrides', multiple=True,
              help='Any other constructor argument, key=value (repeatable).')
@click.pass_context
def main(click_ctx, preset, algo, env_name, seed, epochs, meta_batch_size, episodes_per_task,
         max_episode_length, sampler, n_workers, n_test_tasks, evaluate_every, hidden_sizes,
         snapshot_mode, log_dir, overrides):
    """Meta-train one algorithm on one paper environment."""
    args = dict(algo=algo, env=env_name, seed=seed, epochs=epochs,
                meta_batch_size=meta_batch_size, episodes_per_task=episodes_per_task,
                max_episode_length=max_episode_length, n_test_tasks=n_test_tasks)
    parsed = _parse_overrides(overrides)
    if preset:
        explicit = {k for k in args if click_ctx.get_parameter_source(
            'env_name' if k == 'env' else k) == click.core.ParameterSource.COMMANDLINE}
        for key, value in PRESETS[preset].items():
            if key == 'overrides':
                parsed = {**value, **parsed}
            elif key not in explicit:
                args[key] = value
    options = dict(snapshot_mode=snapshot_mode)
    if log_dir:
        options['log_dir'] = log_dir
    hidden = tuple(int(h) for h in hidden_sizes.split(',')) if hidden_sizes else None
    meta_train(options, sampler=sampler, n_workers=n_workers, evaluate_every=evaluate_every,
               hidden_sizes=hidden, overrides=parsed, **args)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
