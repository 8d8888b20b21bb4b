"""Sampling a whole meta-batch per sampler call with garage's samplers."""
from garage_promp.sampler.meta_batch_worker import (
    MetaBatchAgentUpdate,
    MetaBatchEnvUpdate,
    MetaBatchWorker,
    obtain_meta_batch,
)

from garage.experiment.deterministic import get_seed
from garage.sampler import (
    LocalSampler,
    MultiprocessingSampler,
    RaySampler,
    WorkerFactory,
)

SAMPLER_KINDS = {
    'local': LocalSampler,
    'multiprocessing': MultiprocessingSampler,
    'ray': RaySampler,
}


def make_sampler(policy, env, *, kind: str = 'local', n_workers: int = 1,
                 max_episode_length=None, seed=None, batched=True, envs_per_task=None):
    """A garage sampler whose workers are :class:`MetaBatchWorker`.

    Args:
        policy (garage.torch.policies.Policy): The meta-policy.
        env (garage.Environment): A template environment of the task family.
        kind (str): ``'local'``, ``'multiprocessing'`` or ``'ray'``.
        n_workers (int): Worker count; the meta-batch is split across them.
        max_episode_length (int or None): Defaults to the env's.
        seed (int or None): Defaults to garage's ``get_seed()``.
        batched (bool): Workers step all their slots in lockstep with one
            batched policy forward (default), or slot after slot with one
            forward per step (same episodes; for reference and benchmarks).
        envs_per_task (int or None): Environment copies per task in each
            worker (None: one per episode); see :class:`MetaBatchWorker`.

    Returns:
        garage.sampler.Sampler: The sampler.

    """
    if kind not in SAMPLER_KINDS:
        raise ValueError(f'kind must be one of {sorted(SAMPLER_KINDS)}, got '
                         f'{kind!r}')
    if not (isinstance(n_workers, int) and n_workers >= 1):
        raise ValueError(f'n_workers must be an int >= 1, got {n_workers!r}')
    if envs_per_task is not None and not (isinstance(envs_per_task, int)
                                          and envs_per_task >= 1):
        raise ValueError(f'envs_per_task must be None or an int >= 1, got {envs_per_task!r}')
    if kind == 'ray':
        init_ray()
    factory = WorkerFactory(
        seed=get_seed() if seed is None else seed,
        max_episode_length=(env.spec.max_episode_length
                            if max_episode_length is None else
                            max_episode_length),
        n_workers=n_workers,
        worker_class=MetaBatchWorker,
        worker_args=dict(batched=bool(batched), envs_per_task=envs_per_task))
    return SAMPLER_KINDS[kind].from_worker_factory(factory,
                                                   agents=policy,
                                                   envs=env)


#: Ray workers import garage before anything of ours; this hook applies the
#: compat layer first in every Ray worker process (see _garage_compat).
RAY_RUNTIME_ENV = {'worker_process_setup_hook': 'garage_promp._garage_compat.apply'}


def init_ray(**kwargs):
    """``ray.init`` with garage_promp's worker setup hook, if Ray is not running.

    If you start Ray yourself, pass ``runtime_env=RAY_RUNTIME_ENV``.
    """
    import ray
    if not ray.is_initialized():
        ray.init(runtime_env=RAY_RUNTIME_ENV, log_to_driver=False,
                 include_dashboard=False, **kwargs)


__all__ = [
    'MetaBatchAgentUpdate', 'MetaBatchEnvUpdate', 'MetaBatchWorker',
    'init_ray', 'make_sampler', 'obtain_meta_batch', 'RAY_RUNTIME_ENV', 'SAMPLER_KINDS'
]
