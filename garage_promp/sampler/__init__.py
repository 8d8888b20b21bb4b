"""Meta-batch sampling: :class:`MetaSampler` and its backends.

:class:`MetaSampler` implements garage's ``Sampler`` interface; its module
docstring is the written sampler contract. Backends: ``'local'``
(in-process), ``'multiprocessing'`` (persistent worker processes of our own)
and ``'ray'`` (Ray actors, for more than one machine).
"""
from garage_promp.sampler.backends import (
    BACKENDS,
    DEFAULT_WORKER_TIMEOUT,
    RAY_RUNTIME_ENV,
    InProcessBackend,
    ProcessPoolBackend,
    RayBackend,
    SamplerWorkerError,
    init_ray,
)
from garage_promp.sampler.meta_sampler import MetaSampler, split_episodes
from garage_promp.sampler.rollout import RolloutWorker, episode_seed_sequence

from garage.experiment.deterministic import get_seed

SAMPLER_KINDS = tuple(BACKENDS)


def make_sampler(policy, env, *, kind: str = 'local', n_workers: int = 1,
                 max_episode_length=None, seed=None, batched=True,
                 envs_per_task=None, max_envs_per_worker=None, lean=True,
                 worker_timeout=DEFAULT_WORKER_TIMEOUT) -> MetaSampler:
    """A :class:`MetaSampler` for ``policy`` on ``env``'s task family.

    Args:
        policy (garage.torch.policies.Policy): The meta-policy.
        env (garage.Environment): A template environment of the task family.
        kind (str): ``'local'``, ``'multiprocessing'`` or ``'ray'``.
        n_workers (int): Worker count; the meta-batch's episodes are split
            evenly across them.
        max_episode_length (int or None): Defaults to the env's.
        seed (int or None): Defaults to garage's ``get_seed()`` (0 if unset).
        batched (bool): One batched policy forward per step for all episodes
            (default), or one per episode and step (same episodes).
        envs_per_task (int or None): Env copies per task in each worker
            (None: one per episode).
        max_envs_per_worker (int or None): Env copies per worker in all,
            split over its tasks (None: no budget).
        worker_timeout (float or None): Seconds a busy worker (process, Ray
            actor, or the in-process sampler) may make no progress before the
            run ends naming it (default 600; None: wait forever); see
            :class:`MetaSampler`.
        lean (bool): Step garage_promp's own MuJoCo envs together without
            the per-step wrapper layers (same episodes; see
            :mod:`garage_promp.sampler.lean`); False: the wrapped path.

    Returns:
        MetaSampler: The sampler; its workers start on first use.

    """
    if seed is None:
        seed = get_seed()
        seed = 0 if seed is None else seed
    return MetaSampler(policy, env, kind=kind, n_workers=n_workers, seed=seed,
                       max_episode_length=max_episode_length,
                       envs_per_task=envs_per_task, batched=batched,
                       max_envs_per_worker=max_envs_per_worker, lean=lean,
                       worker_timeout=worker_timeout)


__all__ = [
    'BACKENDS', 'InProcessBackend', 'MetaSampler', 'ProcessPoolBackend',
    'RAY_RUNTIME_ENV', 'RayBackend', 'RolloutWorker', 'SAMPLER_KINDS',
    'SamplerWorkerError', 'episode_seed_sequence', 'init_ray', 'make_sampler',
    'split_episodes'
]
