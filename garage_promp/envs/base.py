"""The meta-environment interface of the ProMP library, with reproducible seeding.

:class:`MetaEnv` is the ``MetaEnv`` interface of meta_policy_search
(``sample_tasks`` / ``set_task`` / ``get_task`` / ``log_diagnostics``), written
as a mixin for gymnasium environments. The garage side sees these envs through
:class:`~garage_promp.envs.gymnasium_env.GymnasiumEnv`, which forwards the
interface, so garage's ``SetTaskSampler`` can drive them.

Seeding (a deliberate fix of the original ProMP code): the reference drew reset noise
from gym's ``np_random`` seeded by OS entropy and tasks from the global numpy
RNG, so no run was reproducible. Here every env owns two generators, one for
task sampling and one for reset noise (gymnasium's ``np_random``), both derived
from one integer by :meth:`MetaEnv.seed`. An env constructed without a seed
derives one from garage's process-wide seed (``deterministic.get_seed()``,
set by ``set_seed``) or, when none is set, from :data:`DEFAULT_SEED`, mixed
with a per-process construction counter so that distinct instances (e.g. the
training and the meta-test task samplers) draw different streams. One seed
and one program therefore give one run.
"""
import abc
import itertools
from typing import Any, Dict, List, Sequence

from garage_promp._seeding import assembled_entropy, column_words, pcg64_states, reseeded
from garage_promp.validation import MAX_BATCH_STEPS

from dowel import tabular
from garage import EpisodeBatch
from garage.experiment import deterministic
import numpy as np

DEFAULT_SEED = 0
"""Base seed of unseeded envs when garage's process-wide seed is not set."""

#: The most tasks ``sample_tasks`` draws at once: a meta-batch's env steps are capped at
#: MAX_BATCH_STEPS, so it never holds more tasks.
MAX_TASKS = MAX_BATCH_STEPS

_instance_counter = itertools.count()


def reset_construction_counter() -> None:
    """Restart the construction index of unseeded envs at 0.

    Call it right after ``set_seed`` (the launchers do) so that one seed gives
    one run even when several runs share a process.
    """
    global _instance_counter  # pylint: disable=global-statement
    _instance_counter = itertools.count()


def check_seed(seed: Any, name: str = 'seed') -> int:
    """Return ``seed`` as an int, or raise ValueError if it is not one >= 0."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
            or seed < 0:
        raise ValueError(f'{name} must be a non-negative int, got {seed!r}')
    return int(seed)


def real_array(action: Any, shape: Sequence[int]) -> np.ndarray | None:
    """``action`` as an array if it is real numbers of ``shape`` (None otherwise: text,
    complex numbers, objects, another shape). The one test of an action's form, for
    garage's wrapper (``GymnasiumEnv``) and the raw envs (:func:`check_action`)."""
    values = np.asarray(action)
    if values.dtype.kind not in 'biuf' or values.shape != tuple(shape):
        return None
    return values


def check_action(env: Any, action: Any, shape: Sequence[int]) -> np.ndarray:
    """``action`` as a float64 array, refused (ValueError naming the env and its task,
    before anything of the env changes) unless it is real numbers of ``shape``, all
    finite.

    The raw envs' ``step`` (outside garage's wrapper, which checks the same) would
    otherwise pass a NaN on into the state (the point envs) or to MuJoCo, which steps
    on with it zeroed (and a warning) or an infinite control clamped; a complex action
    would lose its imaginary part with NumPy's warning only. While the wrapper steps the
    env (:attr:`MetaEnv._action_checked`) the envs do not call this: the wrapper, or the
    sampler for it, has checked the action.
    """
    values = real_array(action, shape)
    if values is None:
        raise ValueError(f'action must be real numbers of shape {tuple(shape)}, got {action!r} '
                         f'({type(env).__name__}, task={_task_of(env)!r})')
    values = values.astype(np.float64, copy=False)
    if not np.isfinite(values).all():
        raise ValueError(f'action is not finite (NaN or inf): {action!r} '
                         f'({type(env).__name__}, task={_task_of(env)!r})')
    return values


def _task_of(env: Any) -> Any:
    """The env's task for a message (None where it has none yet)."""
    return getattr(env, '_task', None)


def stack_step_infos(infos: Sequence[Dict[str, Any]]) -> Dict[str, np.ndarray]:
    """One step's env infos of a batch of envs, key by key (``np.asarray`` of each key's
    values, as the sampler stacks per-step dicts), for a ``batch_step``.

    Raises:
        ValueError: If the envs' infos do not all have the same keys.

    """
    keys = infos[0].keys()
    if any(info.keys() != keys for info in infos):
        raise ValueError('environment infos must have the same keys at every step, got '
                         f'{sorted(keys)} and '
                         f'{sorted(next(i for i in infos if i.keys() != keys))}')
    return {k: np.asarray([info[k] for info in infos]) for k in keys}


def spawned_child(entropy: int, spawn_key: Sequence[int], index: int,
                  pool_size: int = 4) -> np.random.SeedSequence:
    """Child ``index`` of ``SeedSequence(entropy, spawn_key=spawn_key, pool_size=...).spawn(n)``
    (for ``n > index``), without building the parent or the other children.

    numpy's ``spawn`` makes child ``i`` as the parent's entropy and pool size (numpy's
    default 4) with ``i`` appended to its spawn key; building that one directly gives the
    same seed material and skips hashing the parent and the siblings (a few microseconds
    each, paid at every episode).
    """
    return np.random.SeedSequence(entropy, spawn_key=(*spawn_key, index), pool_size=pool_size)


def default_seed_sequence() -> np.random.SeedSequence:
    """Seed material for an env constructed without an explicit seed.

    Returns:
        numpy.random.SeedSequence: Entropy garage's process-wide seed (or
            :data:`DEFAULT_SEED`), spawn key the construction index of the
            env in this process.

    """
    base = deterministic.get_seed()
    base = DEFAULT_SEED if base is None else base
    return np.random.SeedSequence(base, spawn_key=(next(_instance_counter), ))


class MetaEnv(abc.ABC):
    """Mixin giving a gymnasium env the ProMP meta-environment interface.

    A subclass (also a ``gymnasium.Env``) implements :meth:`_sample_tasks`
    and :meth:`_check_task`, may override :meth:`_apply_task`, draws its
    reset noise from ``self.np_random`` and lists in :attr:`diagnostic_keys`
    the ``env_info`` entries that :meth:`log_diagnostics` summarises. It calls
    :meth:`_init_meta_env` at the end of its constructor.

    The task is a plain Python / numpy object (a float, an array, or a dict of
    arrays), so it pickles and deep-copies with the env.
    """

    #: True while garage's wrapper (``GymnasiumEnv.step``) steps this env with an action
    #: it (or the sampler, for it) has checked: the env's own :func:`check_action` is not
    #: repeated on that path. A class default, so that pickled envs read False.
    _action_checked = False

    diagnostic_keys: Dict[str, str] = {}
    """Maps an ``env_info`` key to the CamelCase name it is logged under."""

    def _init_meta_env(self, seed: int | None, task: Any) -> None:
        """Seed the generators and set the initial task.

        Args:
            seed (int or None): Seed; None derives one (see module docstring).
            task (object): Initial task.

        """
        if seed is None:
            self._seed_generators(default_seed_sequence())
        else:
            self.seed(seed)
        self.set_task(task)

    def seed(self, seed: int) -> None:
        """Reseed the task-sampling and the reset-noise generators.

        Args:
            seed (int): Non-negative seed. The two generators get independent
                streams spawned from it.

        Raises:
            ValueError: If seed is not a non-negative int.

        """
        self._seed_generators(np.random.SeedSequence(check_seed(seed)))

    def _seed_generators(self, seed_seq: np.random.SeedSequence) -> None:
        # The children seed_seq.spawn(2) would give, built directly. The sampler reseeds
        # before every episode and never samples tasks from the env, so the task
        # generator and its seed material are made when first asked for (sample_tasks):
        # the same stream.
        self._task_seq = (seed_seq.entropy, (*seed_seq.spawn_key, 0), seed_seq.pool_size)
        self._task_rng = None
        # gymnasium's own generator; reset() never reseeds it (we never pass
        # reset(seed=...)), so it is the single source of reset noise.
        reset_seq = spawned_child(seed_seq.entropy, seed_seq.spawn_key, 1, seed_seq.pool_size)
        self.np_random = np.random.Generator(np.random.PCG64(reset_seq))

    def seeded_by_state(self) -> bool:
        """Whether :meth:`seed` is this class's :meth:`MetaEnv.seed`, so that
        :meth:`reset_generator_states` and :meth:`seed_with_state` reproduce it."""
        cls = type(self)
        return cls.seed is MetaEnv.seed and cls._seed_generators is MetaEnv._seed_generators

    @staticmethod
    def reset_generator_states(seeds: Sequence[int]) -> List[Dict] | None:
        """The reset-noise generator's state (``PCG64.state``) that :meth:`seed` gives for
        each of ``seeds``, computed for all at once (:mod:`garage_promp._seeding`); None
        if a seed is not one 32-bit word (then seed one by one)."""
        words = column_words(seeds)
        if words is None:
            return None
        # SeedSequence(seed) spawned child 1: entropy [seed], spawn key (1,).
        return pcg64_states(assembled_entropy(words[:, None],
                                              np.ones((len(words), 1), np.uint32)))

    def seed_with_state(self, seed: int, state: Dict) -> None:
        """What :meth:`seed` (``seed``) does, given the reset generator's ``state`` from
        :meth:`reset_generator_states` (the env's generator object re-seeded in place)."""
        self._task_seq = (check_seed(seed), (0,), 4)
        self._task_rng = None
        self.np_random = reseeded(getattr(self, '_np_random', None), state)

    def sample_tasks(self, n_tasks: int) -> List[Any]:
        """Sample tasks from the env's task distribution.

        Args:
            n_tasks (int): Number of tasks (>= 0).

        Returns:
            list: ``n_tasks`` tasks, each accepted by :meth:`set_task`.

        Raises:
            ValueError: If n_tasks is not a non-negative int, or is over MAX_TASKS.

        """
        if isinstance(n_tasks, bool) or not isinstance(
                n_tasks, (int, np.integer)) or n_tasks < 0:
            raise ValueError(
                f'n_tasks must be a non-negative int, got {n_tasks!r}')
        if n_tasks > MAX_TASKS:  # before the generator is asked for that many draws
            raise ValueError(f'n_tasks must be at most {MAX_TASKS:,} (more tasks than a '
                             f'meta-batch can hold), got {n_tasks:,}')
        if self._task_rng is None:
            seq = self._task_seq
            if not isinstance(seq, np.random.SeedSequence):  # (entropy, spawn key, pool size)
                entropy, spawn_key, pool_size = seq
                seq = np.random.SeedSequence(entropy, spawn_key=spawn_key, pool_size=pool_size)
            self._task_rng = np.random.Generator(np.random.PCG64(seq))
        return self._sample_tasks(self._task_rng, int(n_tasks))

    def set_task(self, task: Any) -> None:
        """Validate and set the task. Never resets the env.

        Args:
            task (object): A task as returned by :meth:`sample_tasks`.

        Raises:
            ValueError: If the task is malformed (the message says how).

        """
        self._task = self._check_task(task)
        self._task_vector = self._make_task_vector()
        self._apply_task()

    def get_task(self) -> Any:
        """Return the current task."""
        return self._task

    @property
    def task(self) -> Any:
        """object: The current task."""
        return self._task

    @abc.abstractmethod
    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[Any]:
        """Draw ``n_tasks`` tasks from ``rng``."""

    @abc.abstractmethod
    def _check_task(self, task: Any) -> Any:
        """Return ``task`` in canonical form, or raise ValueError."""

    def _make_task_vector(self) -> np.ndarray:
        """The task as a float64 vector (the ``task`` entry of env_infos)."""
        return np.atleast_1d(np.array(self._task, dtype=np.float64))

    def _apply_task(self) -> None:
        """Hook run after :attr:`_task` changes (e.g. write model arrays)."""

    def log_diagnostics(self,
                        episodes: EpisodeBatch | Sequence[EpisodeBatch],
                        prefix: str = '') -> None:
        """Log per-episode statistics of :attr:`diagnostic_keys` to dowel.

        For every ``env_info`` key ``k`` named ``Name`` in
        :attr:`diagnostic_keys`, each episode's mean of ``k`` is computed and
        ``{prefix}AverageName``, ``StdName``, ``MaxName`` and ``MinName`` are
        recorded over episodes (NaN when there are none, so the key set is the
        same every epoch). Call it once per task with a task prefix for
        per-task figures.

        Args:
            episodes (EpisodeBatch or list[EpisodeBatch]): Episodes collected
                in this env (e.g. one batch per task).
            prefix (str): Prefix of the tabular keys.

        """
        if isinstance(episodes, EpisodeBatch):
            episodes = [episodes]
        for key, name in self.diagnostic_keys.items():
            means = np.concatenate(
                [_episode_means(eps, key) for eps in episodes] + [[]])
            stats = (np.mean(means), np.std(means), np.max(means),
                     np.min(means)) if means.size else (np.nan, ) * 4
            for stat, value in zip(('Average', 'Std', 'Max', 'Min'), stats):
                tabular.record(f'{prefix}{stat}{name}', float(value))


def _episode_means(episodes: EpisodeBatch, key: str) -> np.ndarray:
    """Per-episode mean of a scalar ``env_info`` entry."""
    lengths = np.asarray(episodes.lengths)
    if lengths.size == 0:
        return np.zeros(0)
    values = np.asarray(episodes.env_infos[key], dtype=np.float64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.add.reduceat(values, starts) / lengths
