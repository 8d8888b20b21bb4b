"""One way to build an algorithm (:func:`make_algo`) and an experiment (:func:`build_experiment`).

``launchers/train.py``, ``launchers/gradient_variance.py`` and
``benchmarks/throughput.py`` all build through :func:`build_experiment`, so a
run configured the same way is the same run whichever of them starts it.
Every constructor checks its arguments, so a bad configuration is refused here,
before any work starts (the launcher calls this before the experiment's
directory exists).
"""
import difflib
import inspect
from typing import Any, NamedTuple

from garage_promp.algos.options import option_defaults, supported_options
from garage_promp.baselines import BASELINE_SOLVERS, LinearFeatureBaseline, LinearTimeBaseline
from garage_promp.envs.base import reset_construction_counter
from garage_promp.envs.gymnasium_env import check_max_episode_length
from garage_promp.experiment.env_setup import ENV_KWARGS, EnvSetup, make_env_setup
from garage_promp.experiment.meta_evaluator import MetaEvaluator
from garage_promp.experiment.paper_config import ALGOS, algo_kwargs
from garage_promp.policies import LOG_STD_KINDS, learn_log_std_per_dimension
from garage_promp.sampler import SAMPLER_KINDS, make_sampler
from garage_promp.validation import MAX_SEED, check_choice, check_hidden_sizes, check_int, shown

from garage.experiment.deterministic import set_seed
from garage.torch.policies import GaussianMLPPolicy

#: What a launcher records beside :func:`build_experiment`'s arguments (its
#: ``variant.json``), which the builder takes and leaves to the launcher.
LAUNCHER_ONLY = frozenset({'epochs', 'full_table', 'max_env_steps'})

#: Keys that ``overrides`` may not set: they have options of their own.
OWN_OPTIONS = frozenset({'meta_evaluator', 'evaluate_every_n_epochs'})

#: Options that make a paper label the variant it is (MAML-TRPO vs LVC-TRPO
#: vs E-MAML-TRPO); a label refuses other values of them.
DEFINING_OPTIONS = ('inner_estimator', 'exploration')


def make_algo(label: str, env, policy, sampler, task_sampler, **options):
    """The algorithm of a paper label, e.g. ``make_algo('LVC-TRPO', env, ...)``.

    The label (``paper_config.ALGOS``) names a class and the options that
    define the variant; its paper hyperparameters are the defaults, and
    ``options`` override them. Every label is reachable this way; the
    classes can still be built directly.

    Raises:
        ValueError: For an unknown label (listing the labels), an option
            that contradicts the label (naming the label to use instead), or
            any option the class refuses.

    """
    if label not in ALGOS:
        raise ValueError(f'unknown algorithm {label!r}; choose from {sorted(ALGOS)}')
    cls, defaults = ALGOS[label]
    class_defaults = option_defaults(cls)
    defining = {key: defaults.get(key, class_defaults[key])
                for key in DEFINING_OPTIONS if key in class_defaults}
    for key, value in defining.items():
        if key in options and options[key] != value:
            wanted = dict(defining, **{key: options[key]})
            other = [name for name, (klass, kw) in ALGOS.items() if klass is cls and all(
                kw.get(k, class_defaults[k]) == v for k, v in wanted.items())]
            hint = f'; that is {other[0]}' if other else ''
            raise ValueError(f'{label} is {cls.__name__} with {key}={value!r}, got '
                             f'{key}={options[key]!r}{hint}')
    return cls(env, policy, sampler, task_sampler, **{**defaults, **options})


class Experiment(NamedTuple):
    """What :func:`build_experiment` returns."""

    algo: Any
    """The algorithm (a garage ``RLAlgorithm``)."""
    env: Any
    """The training env (a garage ``Environment``)."""
    setup: EnvSetup
    """The env family's setup (task samplers, episode counts, description)."""


def override_keys(algo: str) -> set:
    """The keys ``overrides`` may set for ``algo``: its options and the envs'."""
    if algo not in ALGOS:
        raise ValueError(f'unknown algorithm {algo!r}; choose from {sorted(ALGOS)}')
    return (set(supported_options(ALGOS[algo][0])) | set(ENV_KWARGS)) - OWN_OPTIONS


def check_overrides(algo: str, overrides: dict) -> None:
    """Refuse override keys that neither the algorithm nor the envs take.

    Raises:
        ValueError: Naming the first unknown key and listing the valid ones.

    """
    valid = override_keys(algo)
    for key in overrides:
        if key not in valid:
            raise ValueError(f'{key!r} is not an option of {algo} ({ALGOS[algo][0].__name__}) '
                             f'nor an env argument that --set takes '
                             f'({", ".join(ENV_KWARGS)}); valid keys: {sorted(valid)}')


def build_experiment(algo: str, env: str, seed: int, *,
                     meta_batch_size: int | None = None,
                     episodes_per_task: int | None = None,
                     max_episode_length: int | None = None,
                     sampler: str = 'local',
                     n_workers: int = 1,
                     envs_per_task: int | None = None,
                     n_test_tasks: int | None = 10,
                     evaluate_every: int = 1,
                     hidden_sizes=None,
                     log_std: str = 'shared',
                     overrides: dict | None = None,
                     task: str | None = None,
                     reward_function_version: str | None = None,
                     device: str | None = None,
                     worker_timeout: float | None = None,
                     baseline_solver: str = 'lstsq',
                     **_ignored) -> Experiment:
    """Seed, then build ``algo`` on ``env`` from the paper table plus overrides.

    Args:
        algo (str): A paper label, e.g. 'ProMP' (``paper_config.ALGOS``).
        env (str): A paper env or a Meta-World benchmark ('ML1' needs ``task``).
        seed (int): Seeds garage's global RNGs (``set_seed``) first.
        meta_batch_size (int): Tasks per epoch [paper table].
        episodes_per_task (int): Episodes per task and round [paper table].
        max_episode_length (int): Horizon [paper table].
        sampler (str): 'local', 'multiprocessing' or 'ray'.
        n_workers (int): Sampler workers.
        envs_per_task (int): Env copies per task per worker.
        n_test_tasks (int or None): Meta-test tasks; None builds no evaluator.
        evaluate_every (int): Meta-test period in epochs.
        hidden_sizes (tuple): Policy hidden sizes [paper table].
        log_std (str): The policy's learned log-std: 'shared' by all action
            dimensions (garage's ``GaussianMLPPolicy``) or one 'per-dimension'
            (the original ProMP code's ``MetaGaussianMLPPolicy``;
            :func:`~garage_promp.policies.learn_log_std_per_dimension`).
        overrides (dict): Any other constructor argument of the algorithm,
            or an env argument (``ENV_KWARGS``).
        task (str): Meta-World ML1 environment.
        reward_function_version (str): Meta-World reward version.
        device (str or None): Where the meta-update runs ('cpu', 'cuda', 'cuda:N'; None:
            ``overrides['device']`` where given, else 'cpu'). Given here and in
            ``overrides`` with another value, it is refused as given twice.
        worker_timeout (float or None): Seconds a busy sampler worker (in
            process too) may make no progress (None: the sampler's default, 600 s).
        baseline_solver (str): How the linear baselines (``LinearFeatureBaseline``, and
            DiCE's ``LinearTimeBaseline``) solve their damped normal equations:
            'lstsq' (the original code's SVD) or 'cholesky' (the same system by a
            Cholesky factorisation; faster where the features are many, other rounding;
            :data:`~garage_promp.baselines.BASELINE_SOLVERS`).
        **_ignored: Launcher-only settings (e.g. ``epochs``), so a launcher's
            recorded options can be passed as they are.

    Returns:
        Experiment: algorithm, training env and env setup.

    """
    unknown = sorted(set(_ignored) - LAUNCHER_ONLY)
    if unknown:  # a misspelt argument would otherwise build with its default
        hints = [f'{k!r} (did you mean {m[0]!r}?)' if m else repr(k) for k, m in (
            (k, difflib.get_close_matches(k, BUILD_ARGUMENTS, n=1)) for k in unknown)]
        raise TypeError(f'build_experiment() got unexpected keyword arguments: {", ".join(hints)}')
    for name, value in (('algo', algo), ('env', env)):
        if not isinstance(value, str):  # (a list would fail as an unhashable dict key)
            raise TypeError(f'{name} must be a name (a str), got {shown(value)}')
    check_choice(sampler, 'sampler', SAMPLER_KINDS)  # (named here: make_sampler's "kind")
    check_choice(baseline_solver, 'baseline_solver', BASELINE_SOLVERS)
    evaluate_every = check_int(evaluate_every, 'evaluate_every', 1)
    seed = check_int(seed, 'seed', 0, MAX_SEED)
    max_episode_length = check_max_episode_length(max_episode_length)
    if n_test_tasks is not None:
        n_test_tasks = check_int(n_test_tasks, 'n_test_tasks', 1)
    if hidden_sizes is not None:
        hidden_sizes = check_hidden_sizes(hidden_sizes)
    if not isinstance(log_std, str) or log_std not in LOG_STD_KINDS:
        raise ValueError(f'log_std must be one of {", ".join(map(repr, LOG_STD_KINDS))}, '
                         f'got {log_std!r}')
    if overrides is not None and not isinstance(overrides, dict):
        raise ValueError(f'overrides must be a dict of constructor arguments, got {overrides!r}')
    overrides = dict(overrides or {})
    check_overrides(algo, overrides)
    set_seed(seed)
    reset_construction_counter()  # one seed, one run, even in a shared process
    env_kwargs = {k: overrides.pop(k) for k in list(overrides) if k in ENV_KWARGS}
    setup = make_env_setup(env, seed=seed, max_episode_length=max_episode_length, task=task,
                           reward_function_version=reward_function_version,
                           env_kwargs=env_kwargs)
    kwargs = algo_kwargs(algo, env)
    for key, value in (('meta_batch_size', meta_batch_size),
                       ('episodes_per_task', episodes_per_task), ('device', device)):
        if value is not None:
            if key in overrides and overrides[key] != value:
                raise ValueError(f'{key} is given twice, {value!r} and overrides[{key!r}] = '
                                 f'{overrides[key]!r}: give it once')
            kwargs[key] = value
    kwargs.update(overrides)
    if baseline_solver != 'lstsq':  # (the algorithms' own default baselines otherwise)
        kwargs.update(_linear_baselines(algo, kwargs, baseline_solver))
    # Checked here, naming it: the meta-evaluator below takes it too, under another name.
    kwargs['episodes_per_task'] = check_int(kwargs['episodes_per_task'], 'episodes_per_task', 1)
    kwargs.setdefault('device', 'cpu')
    setup.check_task_counts(kwargs['meta_batch_size'], n_test_tasks)
    train_env = setup.env
    policy = GaussianMLPPolicy(train_env.spec, hidden_sizes=hidden_sizes or setup.hidden_sizes)
    if log_std == 'per-dimension':
        learn_log_std_per_dimension(policy)
    if n_test_tasks is not None:
        kwargs['meta_evaluator'] = MetaEvaluator(
            test_task_sampler=setup.test_tasks, n_test_tasks=n_test_tasks,
            n_exploration_eps=kwargs['episodes_per_task'],
            n_test_episodes=setup.n_test_episodes)
    algorithm = make_algo(algo, train_env, policy,
                          make_sampler(policy, train_env, kind=sampler, n_workers=n_workers,
                                       envs_per_task=envs_per_task,
                                       max_envs_per_worker=setup.max_envs_per_worker,
                                       **({} if worker_timeout is None
                                          else dict(worker_timeout=worker_timeout))),
                          setup.train_tasks, evaluate_every_n_epochs=evaluate_every, **kwargs)
    return Experiment(algorithm, train_env, setup)


def _linear_baselines(algo: str, kwargs: dict, solver: str) -> dict:
    """The algorithm's linear baselines solving with ``solver``: its value baseline, and
    DiCE's time-only reward baseline where the class takes one (an algorithm whose inner
    estimator is not DiCE's keeps none).

    Raises:
        ValueError: Where ``kwargs`` (the overrides) give a baseline of their own.

    """
    options = option_defaults(ALGOS[algo][0])
    wanted = {key: make for key, make in (('baseline', LinearFeatureBaseline),
                                          ('dice_baseline', LinearTimeBaseline))
              if key in options}
    for key in wanted:
        if key in kwargs:
            raise ValueError(f'baseline_solver={solver!r} makes the linear baselines, and '
                             f'overrides give {key}={kwargs[key]!r}: give one of them')
    return {key: make(solver=solver) for key, make in wanted.items()}


#: The keyword arguments of :func:`build_experiment` (for the hint of a misspelt one).
BUILD_ARGUMENTS = [name for name, p in inspect.signature(build_experiment).parameters.items()
                   if p.kind is inspect.Parameter.KEYWORD_ONLY]

