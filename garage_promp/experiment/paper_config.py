"""The paper's hyperparameters in one table (paper Table 1, App. D.2).

Sources: the paper and the original ProMP code's final sweeps,
experiments/all_envs_eval/*_run_all.py (removed from its master in commit b9e0064).

Launchers read their defaults from here; nothing is copied per file.
"""
from garage_promp import algos, envs

from garage.envs import normalize

#: Settings shared by every paper run (common to all the original *_run_all.py sweeps).
COMMON = dict(meta_batch_size=40, episodes_per_task=20, discount=0.99,
              gae_lambda=1., normalize_adv=True, positive_adv=False)

#: Per environment: class, horizon H, inner steps K, inner step size α,
#: hidden sizes, and ProMP overrides (experiments/all_envs_eval/*_run_all.py; α = 0.1
#: as that code ran, not the 0.01 of paper Table 1).
ENVS = {
    'HalfCheetahFwdBack': dict(env=envs.HalfCheetahFwdBackEnv, H=100, K=1, inner_lr=0.1,
                               hidden_sizes=(64, 64)),
    'AntFwdBack': dict(env=envs.AntFwdBackEnv, H=100, K=1, inner_lr=0.1,
                       hidden_sizes=(64, 64)),
    'AntRandDirec': dict(env=envs.AntRandDirecEnv, H=100, K=1, inner_lr=0.1,
                         hidden_sizes=(64, 64)),
    'AntRandGoal': dict(env=envs.AntRandGoalEnv, H=200, K=2, inner_lr=0.1,
                        hidden_sizes=(64, 64)),
    'WalkerFwdBack': dict(env=envs.WalkerFwdBackEnv, H=200, K=1, inner_lr=0.1,
                          hidden_sizes=(64, 64)),
    'HumanoidFwdBack': dict(env=envs.HumanoidFwdBackEnv, H=200, K=1, inner_lr=0.1,
                            hidden_sizes=(128, 128)),
    'HumanoidRandDirec': dict(env=envs.HumanoidRandDirecEnv, H=200, K=1, inner_lr=0.1,
                              hidden_sizes=(128, 128)),
    'HopperRandParams': dict(env=envs.HopperRandParamsEnv, H=200, K=1, inner_lr=0.05,
                             hidden_sizes=(64, 64),
                             promp=dict(num_promp_steps=3, init_inner_kl_penalty=1e-3,
                                        adaptive_inner_kl_penalty=True,
                                        target_inner_step=0.01)),
    'WalkerRandParams': dict(env=envs.WalkerRandParamsEnv, H=200, K=1, inner_lr=0.05,
                             hidden_sizes=(64, 64),
                             promp=dict(num_promp_steps=3, init_inner_kl_penalty=1e-3,
                                        adaptive_inner_kl_penalty=True,
                                        target_inner_step=0.01)),
    'PointEnvMomentum': dict(env=envs.PointEnvMomentum, H=100, K=3, inner_lr=0.1,
                             hidden_sizes=(64, 64)),
    'PointEnvCorner': dict(env=envs.PointEnvCorner, H=100, K=1, inner_lr=0.1,
                           hidden_sizes=(64, 64)),
}

#: Meta-World 3 meta-learning benchmarks (not in the ProMP paper; see docs/environments.md). H is
#: Meta-World's own ``max_path_length`` (its evaluation runs 500-step episodes);
#: hidden sizes, M = 20 tasks of R = 10 episodes and α = 0.1 follow garage's
#: ``maml_trpo_metaworld_ml1_push.py``; R = 10 and 3 evaluation episodes per test
#: task are Meta-World's ``metalearning_evaluation`` defaults. M must be a multiple
#: of the number of train classes (1, 10, 45). A Meta-World env holds ~40 MB, so
#: each sampler worker keeps 2 copies per task and runs the R episodes in waves.
METAWORLD = {
    'ML1': dict(H=500, K=1, inner_lr=0.1, hidden_sizes=(256, 256), meta_batch_size=20,
                episodes_per_task=10, n_test_episodes=3, max_envs_per_worker=40),
    'ML10': dict(H=500, K=1, inner_lr=0.1, hidden_sizes=(256, 256), meta_batch_size=20,
                 episodes_per_task=10, n_test_episodes=3, max_envs_per_worker=40),
    'ML45': dict(H=500, K=1, inner_lr=0.1, hidden_sizes=(256, 256), meta_batch_size=45,
                 episodes_per_task=10, n_test_episodes=3, max_envs_per_worker=40),
}

#: Per paper label: class and its arguments (paper Table 1; the original ProMP code's
#: experiments/all_envs_eval/*_run_all.py and, for DiCE-VPG, run_scripts/vpg_dice_run_sweep.py
#: of its full_code branch).
ALGOS = {
    'ProMP': (algos.ProMP, dict(learning_rate=1e-3, num_promp_steps=5, clip_eps=0.3,
                                init_inner_kl_penalty=5e-4,
                                adaptive_inner_kl_penalty=False,
                                target_inner_step=0.01)),
    'MAML-TRPO': (algos.TRPOMAML, dict(max_kl_step=0.01, inner_estimator='maml')),
    'E-MAML-TRPO': (algos.TRPOMAML, dict(max_kl_step=0.01, inner_estimator='maml',
                                         exploration=True)),
    'LVC-TRPO': (algos.TRPOMAML, dict(max_kl_step=0.01, inner_estimator='lvc')),
    'DiCE-TRPO': (algos.TRPOMAML, dict(max_kl_step=0.01, inner_estimator='dice')),
    'MAML-VPG': (algos.MAMLVPG, dict(learning_rate=1e-3)),
    'E-MAML-VPG': (algos.EMAMLVPG, dict(learning_rate=1e-3)),
    'LVC-VPG': (algos.LVCVPG, dict(learning_rate=1e-3)),
    'DiCE-VPG': (algos.DiCEVPG, dict(learning_rate=1e-3)),
}


def env_config(env: str) -> dict:
    """The row of ``env`` in :data:`ENVS` or :data:`METAWORLD`."""
    if env in ENVS:
        return ENVS[env]
    if env in METAWORLD:
        return METAWORLD[env]
    raise ValueError(f'unknown environment {env!r}; choose from '
                     f'{sorted(ENVS) + sorted(METAWORLD)}')


def check_meta_batch_fits(env: str, meta_batch_size: int, what: str = 'meta_batch_size') -> None:
    """Refuse a meta-batch size that ``env`` cannot sample, before anything is built.

    Args:
        env (str): A paper env, a Meta-World benchmark, or ``ML1:<task>``.
        meta_batch_size (int): Tasks per meta-batch.
        what (str): How the caller names the size, for the message.

    Raises:
        ValueError: On ML10 / ML45 if it is not a multiple of their train classes.

    """
    family = env.partition(':')[0]
    if family not in METAWORLD:
        return
    from garage_promp.envs.metaworld import n_train_classes  # pylint: disable=import-outside-toplevel
    n_classes = n_train_classes(family)
    if meta_batch_size % n_classes:
        raise ValueError(f'{env} samples every one of its {n_classes} train classes equally '
                         f'often: {what} must be a multiple of {n_classes}, got {meta_batch_size}')


def algo_kwargs(algo: str, env: str) -> dict:
    """The paper's constructor arguments of ``algo`` on ``env``."""
    if algo not in ALGOS:
        raise ValueError(f'unknown algorithm {algo!r}; choose from {sorted(ALGOS)}')
    cfg = env_config(env)
    kwargs = dict(COMMON, num_inner_grad_steps=cfg['K'], inner_lr=cfg['inner_lr'])
    kwargs.update({k: cfg[k] for k in ('meta_batch_size', 'episodes_per_task') if k in cfg})
    kwargs.update(ALGOS[algo][1])
    if algo == 'ProMP':
        kwargs.update(cfg.get('promp', {}))
    return kwargs


def normalize_actions(env, task=None):
    """The original ProMP code's action mapping: the policy acts in [-10, 10].

    As its ``NormalizedEnv`` (meta_policy_search/envs/normalized_env.py).

    Usable as a ``SetTaskSampler`` wrapper (``task`` is ignored).
    """
    del task
    return normalize(env, expected_action_scale=10.)
