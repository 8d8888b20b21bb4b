"""garage's MetaEvaluator, adapting with all K inner steps."""
from garage_promp.policies import AdaptedPolicy
from garage_promp.sampler import MetaSampler
from garage_promp.validation import MAX_BATCH_STEPS, check_bool, check_int

from dowel import logger, tabular
from garage import EpisodeBatch, log_multitask_performance
from garage.experiment import MetaEvaluator as GarageMetaEvaluator
from garage.experiment.deterministic import get_seed
from garage.experiment.task_sampler import EnvPoolSampler
from garage.sampler import DefaultWorker, LocalSampler, WorkerFactory


def _check_prefix(prefix) -> None:
    """Refuse a ``prefix`` that is no text or empty: it heads every key the meta-test logs,
    and without one its ``Average/...`` keys overwrite training's own in the same row."""
    if not isinstance(prefix, str) or not prefix:
        raise ValueError('prefix must be a non-empty str (e.g. the default "MetaTest"): it '
                         "heads the meta-test's logged keys, whose 'Average/...' would "
                         f"otherwise overwrite training's own; got {prefix!r}")


class MetaEvaluator(GarageMetaEvaluator):
    """Meta-test with K inner steps and fresh episodes after each step.

    garage's ``MetaEvaluator`` explores once and calls ``adapt_policy`` once,
    so an algorithm trained with K > 1 inner steps is meta-tested with one.
    This subclass (same constructor, same ``MetaTest/...`` log keys) repeats
    explore → ``adapt_policy`` ``algo.num_inner_grad_steps`` times, each
    round sampling ``n_exploration_eps`` episodes with the latest adapted
    policy, exactly as meta-training does; then it samples
    ``n_test_episodes`` evaluation episodes per task. :meth:`evaluate` also
    returns the evaluation episodes of each task, for per-task reports
    (``launchers/meta_test.py``).

    With a :class:`~garage_promp.sampler.MetaSampler` (the ``sampler``
    argument, else the algorithm's own ``algo.sampler``), every test task is
    sampled at once through it, task-batched as in training and on the same
    workers: each adaptation step is one sampling round of
    ``n_exploration_eps`` episodes per task, and the evaluation one round of
    ``n_test_episodes`` episodes per task; a task's inner step is taken as
    soon as its episodes are back, while the workers sample other tasks.
    Otherwise it samples task by task in-process, as garage does.

    Two protocol options (with a MetaSampler) make it comparable with
    evaluations that differ from the reference's: ``deterministic`` evaluates
    the adapted policies with their mean action (exploration still samples),
    and ``before_adaptation`` first samples ``n_test_episodes`` episodes of
    every task with the meta-policy itself (θ, no inner step, acting as the
    evaluation does), kept in :attr:`last_pre_update_episodes` for reports.
    Neither changes what is logged.

    Args:
        *args: garage's ``MetaEvaluator`` arguments.
        sampler (MetaSampler or None): Samples the test tasks (default: the
            algorithm's sampler). Give one when the test tasks have another
            horizon than training, or to sample on other workers.
        deterministic (bool): Evaluation episodes act with the mean action.
        before_adaptation (bool): Also evaluate the meta-policy before any
            inner step.
        **kwargs: garage's ``MetaEvaluator`` keyword arguments.
    """

    #: Class defaults: evaluators pickled in snapshots before these options existed.
    _deterministic = False
    _before_adaptation = False

    def __init__(self, *args, sampler: MetaSampler | None = None,
                 deterministic: bool = False, before_adaptation: bool = False, **kwargs):
        # Checked here, not at the first evaluation (after a whole training epoch).
        task_sampler = kwargs.get('test_task_sampler')
        if not callable(getattr(task_sampler, 'sample', None)) or isinstance(task_sampler, type):
            raise ValueError('test_task_sampler must be a task sampler (with sample(n)), got '
                             f'{task_sampler!r}')
        # garage's own test sampler's; this evaluator samples with a MetaSampler.
        unused = {name: kwargs[name] for name in ('worker_args', 'worker_class')
                  if kwargs.get(name) not in (None, {}, DefaultWorker)}
        if unused:
            raise ValueError(', '.join(f'{k}={v!r}' for k, v in unused.items()) + ' would not '
                             "be used: the meta-test samples with the algorithm's sampler (or "
                             'sampler=), whose options are given where it is made (make_sampler)')
        super().__init__(*args, **kwargs)
        self._n_test_tasks = check_int(
            self._n_test_tasks, 'n_test_tasks' if kwargs.get('n_test_tasks') is not None
            else "n_test_tasks (None: the test task sampler's n_tasks)", 1)
        self._n_exploration_eps = check_int(self._n_exploration_eps, 'n_exploration_eps', 1)
        self._n_test_episodes = check_int(self._n_test_episodes, 'n_test_episodes', 1)
        _check_prefix(self._prefix)
        # Each round keeps every task's episodes of at least one step: a bound before the
        # horizon is known (the sampler checks the steps of the rounds once it is).
        for name in ('n_exploration_eps', 'n_test_episodes'):
            episodes = getattr(self, '_' + name) * self._n_test_tasks
            if episodes > MAX_BATCH_STEPS:
                raise ValueError(f'{name}={getattr(self, "_" + name):,} x n_test_tasks='
                                 f'{self._n_test_tasks:,} = {episodes:,} episodes of at least one '
                                 f'step sampled at once; at most {MAX_BATCH_STEPS:,} env steps '
                                 'fit in memory')
        if isinstance(task_sampler, EnvPoolSampler) and self._n_test_tasks > task_sampler.n_tasks:
            raise ValueError(f'n_test_tasks={self._n_test_tasks} but test_task_sampler (an '
                             f'EnvPoolSampler) holds {task_sampler.n_tasks} envs and samples '
                             'them without replacement (grow_pool it before making the evaluator)')
        if sampler is not None and not isinstance(sampler, MetaSampler):
            raise ValueError('sampler must be a garage_promp MetaSampler or '
                             f'None, got {sampler!r}')
        self._meta_sampler = sampler
        self._deterministic = check_bool(deterministic, 'deterministic')
        self._before_adaptation = check_bool(before_adaptation, 'before_adaptation')
        self.last_pre_update_episodes = None

    def evaluate(self, algo, test_episodes_per_task=None):
        """Adapt to each test task with K steps and log the evaluation.

        Args:
            algo (MetaRLAlgorithm): The algorithm; ``num_inner_grad_steps``
                is read if present (else 1).
            test_episodes_per_task (int or None): Evaluation episodes per
                task (default: ``n_test_episodes``).

        Returns:
            list[EpisodeBatch]: The evaluation episodes (sampled after
                adaptation) of each test task, in the order the test task
                sampler returned the tasks. What is logged is unchanged.

        """
        if not callable(getattr(algo, 'get_exploration_policy', None)):
            raise TypeError('algo must be a meta-RL algorithm (with get_exploration_policy), '
                            f'got {type(algo).__name__}')
        if test_episodes_per_task is None:
            test_episodes_per_task = self._n_test_episodes
        test_episodes_per_task = check_int(test_episodes_per_task, 'test_episodes_per_task', 1)
        _check_prefix(self._prefix)  # (an evaluator restored from a snapshot was not made)
        num_steps = getattr(algo, 'num_inner_grad_steps', 1)
        sampler = getattr(self, '_meta_sampler', None) or getattr(
            algo, 'sampler', None)
        # Before any sampling: adaptation batches the algorithm cannot process.
        check = getattr(algo, 'check_adaptation_batch', None)
        horizon = getattr(sampler, 'max_episode_length', None)
        if callable(check) and isinstance(horizon, int):
            check(self._n_exploration_eps, horizon)
        logger.log('Sampling for adaptation and meta-testing...')
        env_updates = self._test_task_sampler.sample(self._n_test_tasks)
        if isinstance(sampler, MetaSampler):
            adapted_episodes = self._evaluate_batched(
                algo, sampler, env_updates, num_steps, test_episodes_per_task)
        elif self._deterministic or self._before_adaptation:
            raise ValueError('deterministic and before_adaptation evaluation need a '
                             'garage_promp MetaSampler (the sampler argument, or the '
                             "algorithm's own)")
        else:
            adapted_episodes = self._evaluate_per_task(
                algo, env_updates, num_steps, test_episodes_per_task)
        logger.log('Finished meta-testing...')
        name_map = (None if self._test_task_names is None else dict(
            enumerate(self._test_task_names)))
        with tabular.prefix(self._prefix + '/'):
            log_multitask_performance(
                self._eval_itr,
                EpisodeBatch.concatenate(*adapted_episodes),
                getattr(algo, 'discount', 1.0),
                name_map=name_map)
        self._eval_itr += 1
        return adapted_episodes

    def _evaluate_batched(self, algo, sampler, env_updates, num_steps,
                          test_episodes_per_task):
        """All test tasks per sampling round, through the algorithm's sampler.

        The rounds are pipelined task by task (``MetaSampler.obtain_rounds``):
        a task's inner step is taken as soon as its exploration episodes are
        back, while the workers sample the other tasks.
        """
        n_tasks = len(env_updates)
        params = [_params(algo.get_exploration_policy()) for _ in env_updates]
        deterministic = self._deterministic
        before = 1 if self._before_adaptation else 0
        pre_update = [None] * n_tasks

        def on_task(step, task, episodes):
            if step < before:  # the meta-policy's own evaluation round
                pre_update[task] = episodes
                return params[task]
            step -= before
            if step == num_steps:  # the evaluation round
                return None
            if hasattr(algo, 'adapt_many'):
                params[task] = algo.adapt_many([params[task]], episodes,
                                               self._n_exploration_eps)[0]
            else:  # any meta-RL algorithm: adapt_policy
                params[task] = _params(algo.adapt_policy(
                    AdaptedPolicy(algo.policy, params[task], step), episodes))
            return params[task]

        rounds = sampler.obtain_rounds(
            env_updates, params,
            [test_episodes_per_task] * before + [self._n_exploration_eps] * num_steps
            + [test_episodes_per_task], on_task,
            deterministic=[deterministic] * before + [False] * num_steps + [deterministic])
        self.last_pre_update_episodes = pre_update if before else None
        return split_tasks(rounds[-1], n_tasks, test_episodes_per_task)

    def _evaluate_per_task(self, algo, env_updates, num_steps,
                           test_episodes_per_task):
        """Task by task in-process, with garage's LocalSampler."""
        if self._test_sampler is None:
            env = env_updates[0]()
            self._max_episode_length = env.spec.max_episode_length
            self._test_sampler = LocalSampler.from_worker_factory(
                WorkerFactory(seed=get_seed(),
                              max_episode_length=self._max_episode_length,
                              n_workers=1,
                              worker_class=DefaultWorker,
                              worker_args=self._worker_args),
                agents=algo.get_exploration_policy(),
                envs=env)
        adapted_episodes = []
        for env_up in env_updates:
            policy = algo.get_exploration_policy()
            for _ in range(num_steps):
                eps = EpisodeBatch.concatenate(*[
                    self._test_sampler.obtain_samples(self._eval_itr, 1,
                                                      policy, env_up)
                    for _ in range(self._n_exploration_eps)
                ])
                policy = algo.adapt_policy(policy, eps)
            adapted_episodes.append(
                self._test_sampler.obtain_samples(
                    self._eval_itr,
                    test_episodes_per_task * self._max_episode_length,
                    policy, env_up))
        return adapted_episodes


def _params(policy):
    if isinstance(policy, AdaptedPolicy):
        return policy.adapted_params()
    return dict(policy.named_parameters())


def split_tasks(episodes: EpisodeBatch, n_tasks: int,
                episodes_per_task: int):
    """Split a task-major meta-batch into one EpisodeBatch per task."""
    singles = episodes.split()
    return [
        EpisodeBatch.concatenate(*singles[i * episodes_per_task:(i + 1) *
                                          episodes_per_task])
        for i in range(n_tasks)
    ]
