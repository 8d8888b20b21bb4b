"""Environments and task samplers of the launchers, by environment name.

One home for what ``launchers/train.py`` and ``launchers/meta_test.py`` both
need: from a name of the paper table (``HalfCheetahFwdBack``, ...) or a
Meta-World benchmark (``ML1``, ``ML10``, ``ML45``), the template training env,
the training and meta-test task samplers and the table's defaults.
"""
from typing import Any, Dict, NamedTuple, Tuple

from garage_promp.envs.metaworld import MetaWorldTaskSampler, make_benchmark
from garage_promp.experiment.paper_config import ENVS, METAWORLD, env_config, normalize_actions

from garage import Environment
from garage.experiment.task_sampler import SetTaskSampler, TaskSampler
from garage.sampler.env_update import SetTaskUpdate

#: Environment constructor arguments the launchers accept through ``--set``.
ENV_KWARGS = ('reward_type', )


class EnvSetup(NamedTuple):
    """What a launcher needs to know about one environment family.

    Attributes:
        env (garage.Environment): Template training env (spaces, horizon).
        train_tasks (TaskSampler): Meta-training tasks.
        test_tasks (TaskSampler): Meta-test tasks (Meta-World's test split;
            for the paper envs the same sampler as ``train_tasks``).
        hidden_sizes (tuple[int]): The table's policy hidden sizes.
        n_test_episodes (int): Evaluation episodes per test task.
        description (str): One line for the experiment log, e.g. the
            Meta-World reward function version.
        max_envs_per_worker (int or None): Environment copies per sampler
            worker, split over its tasks (None: one per episode). Meta-World
            envs hold ~40 MB each, so their episodes run in waves.

    """
    env: Environment
    train_tasks: TaskSampler
    test_tasks: TaskSampler
    hidden_sizes: Tuple[int, ...]
    n_test_episodes: int
    description: str
    max_envs_per_worker: int | None = None

    def check_task_counts(self,
                          meta_batch_size: int | None = None,
                          n_test_tasks: int | None = None) -> None:
        """Fail early (not after an epoch) if a sampler cannot draw these sizes.

        Args:
            meta_batch_size (int or None): Training tasks per epoch.
            n_test_tasks (int or None): Meta-test tasks per evaluation.

        Raises:
            ValueError: On Meta-World, if meta_batch_size (n_test_tasks) is
                not a multiple of the number of train (test) classes, or if
                n_test_tasks asks more goals of a class than it has (a
                meta-test would count a goal twice).

        """
        if meta_batch_size is not None and isinstance(self.train_tasks, MetaWorldTaskSampler):
            self.train_tasks.check_n_tasks(meta_batch_size, 'meta_batch_size')
        if n_test_tasks is not None and isinstance(self.test_tasks, MetaWorldTaskSampler):
            # (a multiple of the classes, and no more goals of one than it has)
            self.test_tasks.check_distinct_goals(n_test_tasks, 'n_test_tasks')


class _KwargsSetTaskUpdate(SetTaskUpdate):
    """garage's ``SetTaskUpdate`` building ``env_type(**env_kwargs)``."""

    def __init__(self, env_type: type, task: Any, wrapper_constructor,
                 env_kwargs: Dict[str, Any]):
        super().__init__(env_type, task, wrapper_constructor)
        self._env_kwargs = env_kwargs

    def _make_env(self):
        env = self._env_type(**self._env_kwargs)
        env.set_task(self._task)
        if self._wrapper_cons is not None:
            env = self._wrapper_cons(env, self._task)
        return env


class KwargsSetTaskSampler(SetTaskSampler):
    """garage's ``SetTaskSampler`` for an env class built with arguments.

    garage constructs ``env_type()``; a subclass created at run time to bake
    in the arguments cannot be pickled, so ``MultiprocessingSampler`` and
    ``RaySampler`` could not ship its updates. Here the class stays the
    importable env class and the arguments travel with each update.

    Args:
        env_type (type): The env class.
        env_kwargs (dict): Its constructor arguments.
        wrapper (Callable or None): As for ``SetTaskSampler``.

    """

    def __init__(self, env_type: type, env_kwargs: Dict[str, Any], wrapper=None):
        self._env_kwargs = dict(env_kwargs)
        super().__init__(env_type, env=env_type(**self._env_kwargs), wrapper=wrapper)

    def make_env(self) -> Environment:
        """A fresh, wrapped env of the sampler's class and arguments."""
        env = self._env_constructor(**self._env_kwargs)
        return env if self._wrapper is None else self._wrapper(env, None)

    def sample(self, n_tasks, with_replacement=False):
        """``n_tasks`` updates, each building or re-tasking an env."""
        del with_replacement
        return [
            _KwargsSetTaskUpdate(self._env_constructor, task, self._wrapper, self._env_kwargs)
            for task in self._env.sample_tasks(n_tasks)
        ]


def make_env_setup(env: str,
                   *,
                   seed: int,
                   max_episode_length: int | None = None,
                   task: str | None = None,
                   reward_function_version: str | None = None,
                   env_kwargs: Dict[str, Any] | None = None,
                   test_terminate_on_success: bool = False) -> EnvSetup:
    """Build the envs and task samplers of ``env``.

    Args:
        env (str): A key of :data:`~garage_promp.experiment.paper_config.ENVS`
            or :data:`~garage_promp.experiment.paper_config.METAWORLD`.
        seed (int): Meta-World: seed of the goals (``make_benchmark``), of
            the training sampler (``seed``) and of the test sampler
            (``seed + 1``). Paper envs draw their tasks from garage's
            ``set_seed``, so call it first.
        max_episode_length (int or None): Horizon; None takes the table's H.
        task (str or None): The environment of ML1 (e.g. 'reach-v3').
        reward_function_version (str or None): Meta-World's 'v1' or 'v2'
            (None: 'v2').
        env_kwargs (dict or None): Paper-env constructor arguments
            (:data:`ENV_KWARGS`).
        test_terminate_on_success (bool): Meta-World: test episodes end at
            their first success (an evaluation protocol's choice; training
            episodes always run to the horizon).

    Returns:
        EnvSetup: The setup.

    Raises:
        ValueError: If env is unknown, or an argument does not apply to it
            (task, reward_function_version or env_kwargs).

    """
    cfg = env_config(env)
    horizon = max_episode_length or cfg['H']
    env_kwargs = dict(env_kwargs or {})
    if env in METAWORLD:
        if env_kwargs:
            raise ValueError(f'Meta-World takes no env arguments, got {sorted(env_kwargs)}')
        version = reward_function_version or 'v2'
        benchmark = make_benchmark(env, task, seed=seed)
        samplers = [
            MetaWorldTaskSampler(benchmark, kind, max_episode_length=horizon,
                                 reward_function_version=version, seed=seed + offset,
                                 terminate_on_success=kind == 'test' and test_terminate_on_success)
            for offset, kind in enumerate(('train', 'test'))
        ]
        description = (f'Meta-World {env}{f" {task}" if task else ""}: reward_function_version='
                       f'{version}, max_episode_length={horizon}, '
                       f'{len(samplers[0].class_names)} train / '
                       f'{len(samplers[1].class_names)} test classes, goals seed {seed}')
        return EnvSetup(samplers[0].make_env(), samplers[0], samplers[1], cfg['hidden_sizes'],
                        cfg['n_test_episodes'], description,
                        max_envs_per_worker=cfg['max_envs_per_worker'])
    for name, value in (('task', task), ('reward_function_version', reward_function_version),
                        ('test_terminate_on_success', test_terminate_on_success or None)):
        if value is not None:
            raise ValueError(f'{name} is a Meta-World option; {env} does not take it '
                             f'(got {value!r})')
    unknown = sorted(set(env_kwargs) - set(ENV_KWARGS))
    if unknown:
        raise ValueError(f'unknown env arguments {unknown}; accepted: {list(ENV_KWARGS)}')
    tasks = KwargsSetTaskSampler(ENVS[env]['env'], dict(env_kwargs, max_episode_length=horizon),
                                 wrapper=normalize_actions)
    return EnvSetup(tasks.make_env(), tasks, tasks, cfg['hidden_sizes'], 2,
                    f'{env}: max_episode_length={horizon}')
