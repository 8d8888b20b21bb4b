"""Turn sampled episodes into padded per-task tensors with advantages."""
import dataclasses
from typing import List

from garage_promp._threads import processing_blas_threads
from garage_promp.baselines import Baseline
from garage_promp.objectives import (
    TooFewStepsError,
    discount_cumsum,
    discounted_rewards,
    gae_advantages,
    gaussian_log_likelihood,
    normalize_advantages,
    shift_advantages_to_positive,
)

from garage import EpisodeBatch
import numpy as np
import torch


@dataclasses.dataclass
class ProcessingConfig:
    """How rewards become advantages (original ProMP code, meta_policy_search/samplers/)."""
    discount: float
    gae_lambda: float
    normalize_adv: bool
    positive_adv: bool
    baseline: Baseline
    dice_baseline: Baseline | None = None


@dataclasses.dataclass
class MetaBatch:
    """One sampling step of the whole meta-batch, padded.

    Shapes use M tasks, R episodes per task, T = max episode length,
    O / A observation / action dims. Padded cells are 0 and ``mask`` 0.
    """
    observations: torch.Tensor  # (M, R, T, O)
    actions: torch.Tensor  # (M, R, T, A)
    mask: torch.Tensor  # (M, R, T)
    old_mean: torch.Tensor  # (M, R, T, A)
    old_log_std: torch.Tensor  # (M, R, T, A)
    old_log_probs: torch.Tensor  # (M, R, T)
    rewards: torch.Tensor  # (M, R, T)
    advantages: torch.Tensor  # (M, R, T), GAE, processed
    dice_rewards: torch.Tensor | None  # (M, R, T), γ^t r_t - b(t)
    mean_std_reward: torch.Tensor  # (M,), E-MAML's standardised reward
    episodes: EpisodeBatch

    @property
    def n_tasks(self) -> int:
        """Number of tasks M."""
        return self.mask.shape[0]

    def task(self, i: int) -> 'MetaBatch':
        """The sub-batch of task i, keeping a leading task axis of 1."""
        return self.select(slice(i, i + 1))

    def select(self, tasks) -> 'MetaBatch':
        """The sub-batch of some tasks (a slice or an index array).

        ``episodes`` is kept whole: it is only used for logging.
        """
        if isinstance(tasks, torch.Tensor):
            tasks = tasks.to(self.mask.device)
        return self._map(lambda value: value[tasks])

    @property
    def longest_episode(self) -> int:
        """The last time step any episode of the batch reaches, plus one (at least 1)."""
        steps = torch.nonzero(self.mask.flatten(0, 1).amax(dim=0))
        return int(steps.max()) + 1 if len(steps) else 1

    def cut_time_axis(self, length: int) -> 'MetaBatch':
        """The batch with every (M, R, T, ...) tensor cut to its first ``length`` steps."""
        if length >= self.mask.shape[2]:
            return self
        layout = self.mask.shape
        return self._map(lambda value: value[:, :, :length].contiguous()
                         if value.shape[:3] == layout else value)

    def to(self, device) -> 'MetaBatch':
        """The batch with its tensors on ``device`` (itself if already there)."""
        if self.mask.device == torch.device(device):
            return self
        return self._map(lambda value: value.to(device))

    def _map(self, fn) -> 'MetaBatch':
        fields = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                value = fn(value)
            fields[f.name] = value
        return MetaBatch(**fields)


def pad_episodes(flat: np.ndarray, lengths: np.ndarray,
                 horizon: int) -> np.ndarray:
    """Scatter a flat :math:`(\\sum L, ...)` array into :math:`(E, T, ...)`."""
    out = np.zeros((len(lengths), horizon) + flat.shape[1:], dtype=flat.dtype)
    start = 0
    for e, length in enumerate(lengths):
        out[e, :length] = flat[start:start + length]
        start += length
    return out


def check_finite(episodes: EpisodeBatch, episodes_per_task: int, first_task: int):
    """Raise a ValueError naming the field, task and action of a NaN/inf.

    ``first_task`` is the meta-batch slot of the episodes' first task.
    """
    task_of_step = first_task + np.repeat(np.arange(len(episodes.lengths)),
                                          episodes.lengths) // episodes_per_task
    for field in ('observations', 'rewards', 'actions'):
        values = getattr(episodes, field)
        bad = ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
        if bad.any():
            step = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f'found NaN/inf in {field} sampled from the environment, '
                f'task {int(task_of_step[step])} of the meta-batch, step '
                f'{step}; the action taken was {episodes.actions[step]!r}')


def process_episodes(episodes: EpisodeBatch, n_tasks: int,
                     episodes_per_task: int, horizon: int,
                     config: ProcessingConfig, first_task: int = 0) -> MetaBatch:
    """Per-task returns, baselines and advantages, padded and stacked.

    The baseline is refit for every task (and, by the caller, every inner
    step) on that batch and evaluated in-sample, as the reference does.

    Args:
        episodes (EpisodeBatch): Task-major episodes, ``episodes_per_task``
            per task, with agent infos ``mean`` and ``log_std``.
        n_tasks (int): M.
        episodes_per_task (int): R.
        horizon (int): T.
        config (ProcessingConfig): Advantage settings.
        first_task (int): Meta-batch slot of the first task (for error
            messages, when a part of the meta-batch is processed).

    Returns:
        MetaBatch: The processed batch.

    """
    if len(episodes.lengths) != n_tasks * episodes_per_task:
        raise ValueError(
            f'expected {n_tasks} x {episodes_per_task} episodes, got '
            f'{len(episodes.lengths)}')
    check_finite(episodes, episodes_per_task, first_task)
    lengths = episodes.lengths
    shape = (n_tasks, episodes_per_task, horizon)

    def pad(flat):
        padded = pad_episodes(np.asarray(flat), lengths, horizon)
        return padded.reshape(shape + padded.shape[2:])

    obs = pad(episodes.observations).astype(np.float64)
    rewards = pad(episodes.rewards).astype(np.float64)
    mask = pad(np.ones(len(episodes.rewards))).astype(np.float64)
    advantages = np.zeros(shape)
    dice = np.zeros(shape) if config.dice_baseline is not None else None
    with processing_blas_threads():  # the fits round alike on every machine
        for i in range(n_tasks):
            returns = discount_cumsum(rewards[i], config.discount)
            values = _predictions(config.baseline, obs[i], returns, mask[i], first_task + i)
            adv = gae_advantages(rewards[i], values, mask[i], config.discount,
                                 config.gae_lambda)
            advantages[i] = _postprocess(adv, mask[i], config, first_task + i)
            if dice is not None:
                # Reference §2.3: r~_t = γ^t r_t − b(t), b fit on γ^t r_t.
                disc = discounted_rewards(rewards[i], config.discount) * mask[i]
                b = _predictions(config.dice_baseline, obs[i], disc, mask[i], first_task + i)
                dice[i] = _postprocess(disc - b, mask[i], config, first_task + i)
    mean_std_reward = _mean_std_reward(rewards, mask)

    def as_t(name, values):
        return _float32(name, values, first_task)

    actions = as_t('actions', pad(episodes.actions))
    old_mean = as_t('means', pad(episodes.agent_infos['mean']))
    old_log_std = as_t('log-stds', pad(episodes.agent_infos['log_std']))
    old_log_probs = gaussian_log_likelihood(actions, old_mean, old_log_std)
    task = _first_non_finite_task(old_log_probs, first_task)
    if task is not None:
        raise FloatingPointError(
            f"the sampling policy's log-likelihood of its own actions is not finite in float32 "
            f'for task {task} of the meta-batch (smallest log-std {float(old_log_std.min()):.3g}'
            '): the Gaussian that sampled them is too narrow, or its actions too far from its '
            'mean, for float32')
    return MetaBatch(
        observations=as_t('observations', obs),
        actions=actions,
        mask=torch.as_tensor(mask, dtype=torch.float32),
        old_mean=old_mean,
        old_log_std=old_log_std,
        old_log_probs=old_log_probs,
        rewards=as_t('rewards', rewards),
        advantages=as_t('advantages', advantages),
        dice_rewards=None if dice is None else as_t('DiCE rewards', dice),
        mean_std_reward=as_t("E-MAML's standardised rewards", mean_std_reward),
        episodes=episodes)


def _float32(name: str, values: np.ndarray, first_task: int) -> torch.Tensor:
    """``values`` (one row per task) as a float32 tensor, the batch's dtype; a value that
    is finite in float64 but beyond float32's range (an env's reward of 1e200) is refused
    naming ``name`` and the task, not left as an inf for the update to meet."""
    tensor = torch.as_tensor(values, dtype=torch.float32)
    task = _first_non_finite_task(tensor, first_task)
    if task is not None:
        own = np.abs(np.asarray(values[task - first_task], dtype=np.float64))
        largest = float(np.max(np.where(np.isnan(own), 0., own)))
        raise ValueError(f'the {name} of task {task} of the meta-batch do not fit float32, the '
                         f'batch\'s dtype (largest |value| {largest:.3g}; float32 holds up to '
                         f'{float(np.finfo(np.float32).max):.3g})')
    return tensor


def _first_non_finite_task(values: torch.Tensor, first_task: int) -> int | None:
    """The meta-batch slot of the first task (row) of ``values`` holding a NaN or inf, or
    None where every value is finite."""
    finite = torch.isfinite(values).reshape(len(values), -1).all(dim=1)
    if bool(finite.all()):
        return None
    return first_task + int(torch.nonzero(~finite)[0])


def without_trailing_padding(batches: List[MetaBatch]) -> List[MetaBatch]:
    """The K + 1 rounds cut after the last step that any of their episodes reaches.

    Episodes are padded to the horizon T, but where they end early (a walker or
    humanoid that falls) most of the (M, R, T) cells are padding: a first
    HumanoidRandDirec meta-batch of 20 tasks x 10 episodes holds episodes of 35 steps
    on average and 82 at most, of 200.
    Every term of the meta-objective, the inner steps and TRPO's KL is a masked sum
    over the time axis, and the padded cells past the longest episode contribute exact
    zeros to it (the DiCE objective's cumulative log-probabilities run forward in time,
    so cutting the tail leaves every valid step's value as it was), so cutting them
    leaves the update the same mathematically and makes it cost the longest episode's
    length rather than the horizon (the original code's flat sample arrays,
    meta_policy_search/samplers/meta_sample_processor.py, cost the steps taken).
    Where any episode of any round runs to the horizon (always on the point envs,
    HalfCheetah and Meta-World in training) nothing is cut and the batches are
    returned as they are; otherwise the sums run over other shapes and round
    differently in their last bits. All rounds are cut to one length, so they keep
    one layout, and cutting cut batches returns them as they are.
    """
    longest = max(batch.longest_episode for batch in batches)
    return [batch.cut_time_axis(longest) for batch in batches]


def _mean_std_reward(rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """E-MAML's per-task mean reward, standardised over the whole meta-batch, (M,)."""
    valid = mask > 0
    std_rewards = (rewards - rewards[valid].mean()) / (rewards[valid].std() +
                                                       1e-8) * mask
    return std_rewards.sum(axis=(1, 2)) / mask.sum(axis=(1, 2))


def concatenate_tasks(parts: List[MetaBatch], episodes: EpisodeBatch,
                      horizon: int) -> MetaBatch:
    """One batch of the tasks of ``parts`` (in order), each processed alone.

    Processing is per task (baselines, advantages, their normalisation), so
    this equals processing ``episodes`` at once, except for E-MAML's
    ``mean_std_reward``, which standardises over the whole meta-batch and is
    recomputed here from ``episodes`` as :func:`process_episodes` does.

    Args:
        parts (list[MetaBatch]): Processed batches of consecutive tasks.
        episodes (EpisodeBatch): All their episodes, task-major.
        horizon (int): T.

    """
    fields = {}
    for f in dataclasses.fields(MetaBatch):
        if f.name in ('episodes', 'mean_std_reward'):  # given, and recomputed below
            continue
        values = [getattr(part, f.name) for part in parts]
        # None: dice_rewards without a DiCE estimator.
        fields[f.name] = None if values[0] is None else torch.cat(values)
    shape = tuple(fields['mask'].shape)
    rewards = pad_episodes(np.asarray(episodes.rewards), episodes.lengths,
                           horizon).astype(np.float64).reshape(shape)
    mask = pad_episodes(np.ones(len(episodes.rewards)), episodes.lengths,
                        horizon).astype(np.float64).reshape(shape)
    fields['mean_std_reward'] = torch.as_tensor(_mean_std_reward(rewards, mask),
                                                dtype=torch.float32)
    return MetaBatch(episodes=episodes, **fields)


#: The largest |value| a baseline may predict: float32's, the batch's dtype.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _predictions(baseline, observations, targets, mask, task: int) -> np.ndarray:
    """``baseline.fit_predict`` on one task's batch, refused (naming the baseline and the
    task) unless it is numbers of the batch's (R, T) layout, within float32's range where the
    returns are: a NaN would come out as advantages "beyond float32" of largest value 0,
    and a prediction of 1e300 would make the normalised advantages all 0 (their std
    overflows), an update that changes nothing without a word."""
    values = baseline.fit_predict(observations, targets, mask)
    name = type(baseline).__name__
    array = np.asarray(values)
    if array.shape != mask.shape or array.dtype.kind not in 'biuf':
        raise ValueError(f'the baseline {name} predicted {array.dtype} values of shape '
                         f'{array.shape} for task {task} of the meta-batch; it must predict '
                         f'real numbers of the batch\'s (episodes, steps) shape {mask.shape}')
    cells = mask > 0
    valid = array[cells]
    if not np.isfinite(valid).all():
        raise FloatingPointError(f'the baseline {name} predicted NaN or inf for task {task} '
                                 'of the meta-batch')
    largest = float(np.abs(valid).max(initial=0.))
    # (Returns beyond float32 are the rewards' doing, named where the batch is made.)
    if largest > _FLOAT32_MAX and float(np.abs(targets[cells]).max(initial=0.)) <= _FLOAT32_MAX:
        raise FloatingPointError(f'the baseline {name} predicted {largest:.3g} for task {task} '
                                 f'of the meta-batch, beyond float32 (the batch\'s dtype, up '
                                 f'to {_FLOAT32_MAX:.3g}) where the returns it was fit on are '
                                 'not')
    return values


def check_standardizable(config: ProcessingConfig, episodes: int, horizon: int,
                         episodes_name: str = 'episodes_per_task',
                         remedy: str = 'set normalize_adv=False, or give more episodes or '
                                       'steps') -> None:
    """Refuse task batches of ``episodes`` episodes of at most ``horizon`` steps where
    ``normalize_adv`` is on: the advantages are standardised over a task batch's valid
    steps (:func:`~garage_promp.objectives.normalize_advantages`), which takes 2 of them.

    Raises:
        ValueError: Naming ``normalize_adv``, ``episodes_name`` and ``max_episode_length``,
            then ``remedy``.

    """
    if config.normalize_adv and episodes * horizon < 2:
        raise ValueError(
            "normalize_adv=True standardises each task batch's advantages over its valid "
            f'steps and needs 2 of them: {episodes_name}={episodes} x max_episode_length='
            f'{horizon} gives at most 1 ({remedy})')


def _postprocess(values, mask, config, task: int):
    if config.normalize_adv:
        try:
            values = normalize_advantages(values, mask)
        except TooFewStepsError as error:  # (episodes that all ended at their first step)
            raise TooFewStepsError(
                f'task {task} of the meta-batch: {error}, its episodes having ended at their '
                'first step; set normalize_adv=False, or sample more episodes per task') from None
    if config.positive_adv:
        values = shift_advantages_to_positive(values, mask)
    return values


#: Each MetaBatch tensor's dimensions beyond the (M, R, T) layout (``mean_std_reward``: M only).
_FIELD_DIMS = {'observations': 1, 'actions': 1, 'old_mean': 1, 'old_log_std': 1, 'mask': 0,
               'old_log_probs': 0, 'rewards': 0, 'advantages': 0, 'dice_rewards': 0}


def check_batches(batches, n_rounds: int, obs_dim: int, action_dim: int,
                  dtype: torch.dtype = torch.float32) -> None:
    """Refuse what :meth:`optimize` cannot take as one meta-batch, naming ``batches``.

    They must be ``n_rounds`` (K + 1) :class:`MetaBatch`\\ es of the same tasks and
    layout (M tasks, R episodes, T steps each), with the policy's observation and
    action sizes: a list with a round missing, doubled or from another sampling would
    otherwise update θ on a chain of inner steps that was never taken.

    Raises:
        ValueError: If they are not, or hold what no sampling gives (a mask not 0/1,
            with padding before a valid step or no valid step for a task; a NaN or
            inf value: :func:`_check_values`).

    """
    if not isinstance(batches, (list, tuple)) or not all(
            isinstance(b, MetaBatch) for b in batches):
        raise ValueError('batches must be the list of MetaBatch that sample_meta_batch returns, '
                         f'got {type(batches).__name__}'
                         + (f' of {sorted({type(b).__name__ for b in batches})}'
                            if isinstance(batches, (list, tuple)) else ''))
    if len(batches) != n_rounds:
        raise ValueError(f'batches must be {n_rounds} (one per sampling round: K = '
                         f'{n_rounds - 1} inner steps, then the post-update round), got '
                         f'{len(batches)}')
    layouts = [tuple(b.mask.shape) for b in batches]
    if len(set(layouts)) != 1:
        raise ValueError('batches must be rounds of one meta-batch (the same M tasks of R '
                         f'episodes of T steps), got (M, R, T) = {layouts}')
    for k, b in enumerate(batches):  # every field in the layout of its mask, in the policy's dtype
        fields = {name: getattr(b, name) for name in (*_FIELD_DIMS, 'mean_std_reward')}
        for name, value in fields.items():
            if value is None and name == 'dice_rewards':
                continue
            want = (layouts[0][:1] if name == 'mean_std_reward'
                    else layouts[0] + (None, ) * _FIELD_DIMS[name])
            if not isinstance(value, torch.Tensor) or value.dim() != len(want) or any(
                    w is not None and w != have for w, have in zip(want, value.shape)):
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value)
                raise ValueError(f'batches[{k}].{name} must be a tensor of shape '
                                 f'{tuple("?" if w is None else w for w in want)} (the layout '
                                 f'of its mask, (M, R, T) = {layouts[0]}), got {shape}')
            if value.dtype != dtype:
                raise ValueError(f'batches[{k}].{name} must be {dtype} (the policy\'s dtype), '
                                 f'got {value.dtype}')
    sizes = {(b.observations.shape[-1], b.actions.shape[-1]) for b in batches}
    if sizes != {(obs_dim, action_dim)}:
        raise ValueError(f'batches must hold observations of size {obs_dim} and actions of '
                         f'size {action_dim} (the policy\'s), got {sorted(sizes)}')
    for k, b in enumerate(batches):
        _check_values(k, b)


def _check_values(k: int, batch: MetaBatch) -> None:
    """Refuse round ``k``'s values that no sampling gives, naming the first culprit.

    Its mask must be 0/1 with each episode's valid steps first (the time features
    of the baselines and the inner steps read a step's column as its time), and
    give every task a step (a task's losses are means over its valid steps); its
    values must be finite: the sampler refuses NaN/inf from the env, so a
    non-finite value comes from a hand-built batch, and an outer step on it would
    only be skipped and counted as if the step sizes had diverged.
    """
    mask = batch.mask
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(f'batches[{k}].mask must hold only 0 and 1, got '
                         f'{_first(mask[(mask != 0) & (mask != 1)])}')
    holes = torch.nonzero(mask[..., 1:] > mask[..., :-1])
    if len(holes):
        task, episode, step = (int(i) for i in holes[0])
        raise ValueError(f'batches[{k}].mask must mark each episode\'s steps first, then '
                         f'padding: task {task}, episode {episode} has a valid step {step + 1} '
                         f'after padding at step {step}')
    empty = torch.nonzero(mask.flatten(1).amax(dim=1) == 0)
    if len(empty):
        raise ValueError(f'batches[{k}].mask gives task {int(empty[0])} no valid step '
                         '(every task needs one: its losses are means over them)')
    for name in (*_FIELD_DIMS, 'mean_std_reward'):
        value = getattr(batch, name)
        if value is None or bool(torch.isfinite(value).all()):
            continue
        where = tuple(int(i) for i in torch.nonzero(~torch.isfinite(value))[0])
        place = (f'task {where[0]}' if name == 'mean_std_reward' else
                 f'task {where[0]}, episode {where[1]}, step {where[2]}')
        raise ValueError(f'batches[{k}].{name} holds {_first(value[where])} at {place}: '
                         'optimize takes finite values')


def _first(values: torch.Tensor) -> str:
    """The first of ``values`` (any shape), as it prints."""
    return f'{float(values.flatten()[0]):g}'

