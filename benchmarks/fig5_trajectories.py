#!/usr/bin/env python3
"""The drawing half of the paper's Fig. 5: exploration trajectories on PointEnvMomentum.

For each trained run (a ``launchers/train.py`` snapshot on ``PointEnvMomentum``,
sparse reward, K = 3 inner steps, H = 100), the learned meta-policy is put on
each of the four corner tasks, and adapts there exactly as at meta-test: the
pre-update policy samples ``n_episodes`` episodes, the algorithm takes an
inner step on them (its real adaptation, ``algo.adapt_many`` = ``adapt_policy``),
the adapted policy samples fresh episodes, and so on K times
(``algo.num_inner_grad_steps``). The positions of every episode, before and
after each inner step, are kept with their returns; the figure has one row
per algorithm and one column per adaptation step, each panel showing the
trajectories of the four tasks (one colour per task) and the goal regions
(sparse-reward radius around each corner) as circles.

    python benchmarks/fig5_trajectories.py \\
        --run LVC-TRPO=RUNS/LVC-TRPO_PointEnvMomentum_seed=1 \\
        --run MAML-TRPO=RUNS/MAML-TRPO_PointEnvMomentum_seed=1 \\
        --run E-MAML-TRPO=RUNS/E-MAML-TRPO_PointEnvMomentum_seed=1 \\
        --out benchmarks/results/fig5
    python benchmarks/fig5_trajectories.py \\
        --from-json benchmarks/results/fig5/fig5_trajectories.json \\
        --out benchmarks/results/fig5          # redraw without the snapshots

writes ``OUT/fig5_trajectories.png`` and (not with ``--from-json``)
``OUT/fig5_trajectories.json``.

Sampling goes through the package's in-process sampler
(``garage_promp.make_sampler(kind='local')``, ``MetaSampler.obtain_rounds``:
the same pipeline as ``MetaEvaluator``), with a sampler of its own seeded by
``--seed`` (``set_seed`` too): the same snapshot and seed give the same
trajectories, bit for bit.
"""
import json
import os
import pathlib
from typing import Any, Dict, List, Sequence

import garage_promp  # noqa: F401  (applies the garage compat layer first)
from garage_promp._garage_compat import check_training_snapshot
from garage_promp.envs._tasks import CORNERS
from garage_promp.envs.point_env_momentum import PointMomentumGym
from garage_promp.experiment.env_setup import KwargsSetTaskSampler, _KwargsSetTaskUpdate
from garage_promp.validation import OUTPUT_DIR, SEED, StrictCommand, count, positive, user_errors

import click
from garage.experiment import Snapshotter
from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskUpdate
import numpy as np

PNG = 'fig5_trajectories.png'
JSON = 'fig5_trajectories.json'
#: Digits kept for positions and returns in the JSON (a 1e-5 grid is far
#: finer than the figure).
DIGITS = 5
#: One colour per corner task (matplotlib's tab10), in CORNERS order.
TASK_COLOURS = ('tab:blue', 'tab:orange', 'tab:green', 'tab:red')


def task_name(goal: Sequence[float]) -> str:
    """The JSON key of a corner task, e.g. ``'(-2, 2)'``."""
    return '(' + ', '.join(f'{float(v):g}' for v in goal) + ')'


def _gym_env(env):
    """The gymnasium env under garage's wrappers (``normalize``) and our adapter."""
    inner = env.unwrapped
    return getattr(inner, 'gym_env', inner)


def _corner_update(task_sampler, goal):
    """An ``EnvUpdate`` for the corner ``goal``, built as the training task sampler builds its own.

    The training task sampler of the snapshot (its env class, constructor
    arguments such as ``reward_type`` and the horizon, and its wrapper, the
    action normalisation) makes the env; only the task is chosen here.
    """
    if isinstance(task_sampler, KwargsSetTaskSampler):
        # pylint: disable=protected-access
        return _KwargsSetTaskUpdate(task_sampler._env_constructor, np.array(goal, dtype=float),
                                    task_sampler._wrapper, task_sampler._env_kwargs)
    # garage's SetTaskSampler (an env class constructed without arguments).
    # pylint: disable=protected-access
    return SetTaskUpdate(task_sampler._env_constructor, np.array(goal, dtype=float),
                         task_sampler._wrapper)


def load_algo(run_dir: str, itr: Any = 'last'):
    """The snapshot of ``run_dir`` at ``itr``: ``(algo, env)``.

    Raises:
        ValueError: If the run's env is not PointEnvMomentum.
    """
    # snapshot_dir=run_dir: Snapshotter() would create ./data/local/experiment.
    snapshot = Snapshotter(snapshot_dir=run_dir).load(run_dir, itr)
    check_training_snapshot(snapshot, run_dir)
    algo, env = snapshot['algo'], snapshot['env']
    if not isinstance(_gym_env(env), PointMomentumGym):
        raise ValueError(f'{run_dir}: Fig. 5 is drawn on PointEnvMomentum, this run\'s env is '
                         f'{type(_gym_env(env)).__name__}')
    return algo, env


def trajectories(run_dir: str, n_episodes: int | None = None, seed: int = 1,
                 itr: Any = 'last') -> Dict[str, Any]:
    """Sample a run's meta-policy on the four corners, before and after each inner step.

    For each corner task, round 0 samples ``n_episodes`` episodes with the
    meta-policy θ; after round k < K the algorithm takes its inner step on
    round k's episodes of that task (``algo.adapt_many``, the batched
    ``adapt_policy``) and round k + 1 samples fresh episodes with the adapted
    parameters; K = ``algo.num_inner_grad_steps``. The four tasks are
    sampled together through an in-process ``MetaSampler`` of their own,
    seeded by ``seed``.

    Args:
        run_dir (str): A ``launchers/train.py`` log directory (``params.pkl``).
        n_episodes (int or None): Episodes per task and step (the inner steps
            are taken on them); None: the run's ``episodes_per_task``, the
            batch the algorithm learnt to adapt with.
        seed (int): Sampling seed (``set_seed`` and the sampler's).
        itr: Snapshot epoch, ``'last'`` (default) or ``'first'``.

    Returns:
        dict: JSON-able. ``trajectories``: ``{task: [[episode positions,
        a (H + 1) x 2 list of [x, y]: the reset position and the position
        after each step] per episode] per step 0..K]}``; ``returns``:
        ``{task: [[undiscounted return per episode] per step]}``;
        ``average_return``: per step, the mean over tasks and episodes; and
        ``goals`` (``{task: [x, y]}``), ``goal_radius`` (the sparse reward's
        radius), ``num_inner_grad_steps``, ``max_episode_length``,
        ``n_episodes``, ``seed``, ``reward_type``, ``algo`` (the class) and
        ``run_dir``. Tasks are keyed as :func:`task_name`, in the env's
        corner order.

    """
    set_seed(seed)
    algo, env = load_algo(run_dir, itr)
    num_steps = int(algo.num_inner_grad_steps)
    horizon = int(env.spec.max_episode_length)
    if n_episodes is None:
        n_episodes = int(algo._episodes_per_task)  # pylint: disable=protected-access
    gym_env = _gym_env(env)
    goals = [np.array(goal, dtype=float) for goal in CORNERS]
    updates = [_corner_update(algo._task_sampler, goal)  # pylint: disable=protected-access
               for goal in goals]
    sampler = garage_promp.make_sampler(algo.policy, env, kind='local', seed=seed,
                                        max_episode_length=horizon)
    theta = dict(algo.get_exploration_policy().adapted_params())
    params = [theta for _ in goals]

    def on_task(step, task, episodes):
        if step == num_steps:  # after the last inner step: nothing more to adapt
            return None
        params[task] = algo.adapt_many([params[task]], episodes, n_episodes)[0]
        return params[task]

    try:
        rounds = sampler.obtain_rounds(updates, params, [n_episodes] * (num_steps + 1), on_task)
    finally:
        sampler.shutdown_worker()
    names = [task_name(goal) for goal in goals]
    paths = {name: [] for name in names}
    returns = {name: [] for name in names}
    for episodes in rounds:
        singles = episodes.split()
        if len(singles) != len(goals) * n_episodes:
            raise RuntimeError(f'expected {len(goals) * n_episodes} episodes per round, '
                               f'got {len(singles)}')
        for index, name in enumerate(names):
            mine = singles[index * n_episodes:(index + 1) * n_episodes]
            paths[name].append([_positions(eps).round(DIGITS).tolist() for eps in mine])
            returns[name].append([round(float(eps.rewards.sum()), DIGITS) for eps in mine])
    return dict(
        run_dir=os.path.abspath(run_dir), algo=type(algo).__name__, seed=int(seed),
        n_episodes=int(n_episodes), num_inner_grad_steps=num_steps,
        max_episode_length=horizon, reward_type=gym_env.reward_type,
        goal_radius=float(gym_env.sparse_reward_radius),
        goals={name: goal.tolist() for name, goal in zip(names, goals)},
        trajectories=paths, returns=returns,
        average_return=[float(np.mean([returns[name][step] for name in names]))
                        for step in range(num_steps + 1)])


def _positions(episode) -> np.ndarray:
    """(T + 1) x 2 positions of one episode: its observations' [x, y], then the last one's.

    PointEnvMomentum observes [position (2), velocity (2)]; the normalising
    wrapper leaves observations as they are.
    """
    obs = np.concatenate([episode.observations, episode.last_observations], axis=0)
    return np.asarray(obs[:, :2], dtype=np.float64)


def _step_title(step: int) -> str:
    return 'pre-update' if step == 0 else f'after step {step}'


def draw(data_by_algo: Dict[str, Dict[str, Any]], path: str, limit: float | None = None,
         max_episodes: int | None = None) -> str:
    """Draw Fig. 5: one row per algorithm, one column per adaptation step.

    Each panel shows the trajectories of the four corner tasks, one colour
    per task (start points as dots), the goal regions (sparse-reward radius
    around each corner) as circles in the task's colour, and the step's
    average return.

    Args:
        data_by_algo (dict): Label -> :func:`trajectories` result, in row order.
        path (str): Where to write the figure (PNG).
        limit (float or None): Axes span [-limit, limit] in x and y (None:
            the goal regions with a margin; trajectories beyond are clipped).
        max_episodes (int or None): At most this many trajectories per task
            and panel (None: all).

    Returns:
        str: ``path``.

    """
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    if not data_by_algo:
        raise ValueError('no algorithm to draw')
    n_cols = max(len(next(iter(d['trajectories'].values()))) for d in data_by_algo.values())
    n_rows = len(data_by_algo)
    if limit is None:
        limit = 1.1 * max(max(abs(v) for goal in d['goals'].values() for v in goal)
                          + d['goal_radius'] for d in data_by_algo.values())
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.2 * n_cols, 3.2 * n_rows),
                             squeeze=False, sharex=True, sharey=True)
    for row, (label, data) in enumerate(data_by_algo.items()):
        names = list(data['trajectories'])
        for col in range(n_cols):
            ax = axes[row][col]
            ax.set_xlim(-limit, limit)
            ax.set_ylim(-limit, limit)
            ax.set_aspect('equal')
            if row == 0:
                ax.set_title(_step_title(col))
            if col == 0:
                ax.set_ylabel(label, fontsize='large')
            if col >= len(data['trajectories'][names[0]]):
                ax.axis('off')  # this run has fewer inner steps
                continue
            for index, name in enumerate(names):
                colour = TASK_COLOURS[index % len(TASK_COLOURS)]
                ax.add_patch(plt.Circle(data['goals'][name], data['goal_radius'],
                                        color=colour, alpha=0.12, zorder=0))
                ax.add_patch(plt.Circle(data['goals'][name], data['goal_radius'],
                                        fill=False, color=colour, lw=1., ls='--', zorder=1))
                for points in data['trajectories'][name][col][:max_episodes]:
                    xy = np.asarray(points, dtype=float)
                    ax.plot(xy[:, 0], xy[:, 1], color=colour, lw=0.8, alpha=0.7, zorder=2)
                    ax.plot(xy[0, 0], xy[0, 1], 'o', color=colour, ms=2, zorder=3)
            ax.text(0.03, 0.97, f'return {data["average_return"][col]:.2f}',
                    transform=ax.transAxes, va='top', fontsize='small',
                    bbox=dict(facecolor='white', alpha=0.7, lw=0))
    first = next(iter(data_by_algo.values()))
    handles = [plt.Line2D([], [], color=TASK_COLOURS[i % len(TASK_COLOURS)], label=f'goal {name}')
               for i, name in enumerate(first['trajectories'])]
    fig.legend(handles=handles, loc='lower center', ncol=len(handles), frameon=False)
    fig.suptitle(f'PointEnvMomentum ({first.get("reward_type", "sparse")} reward, '
                 f'H = {first["max_episode_length"]}): trajectories before and after each '
                 f'inner step, {first["n_episodes"]} episodes per task')
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: The most episodes per task and step.
MAX_EPISODES = 10 ** 4


def _parse_runs(values: Sequence[str]) -> List[tuple]:
    runs = []
    for value in values:
        label, sep, run_dir = value.partition('=')
        if not sep or not label or not run_dir:
            raise click.BadParameter(f'expected LABEL=RUN_DIR, got {value!r}', param_hint='--run')
        if not os.path.isdir(run_dir):
            raise click.BadParameter(f'{run_dir!r} is not a directory', param_hint='--run')
        if label in [r[0] for r in runs]:
            raise click.BadParameter(f'label {label!r} given twice', param_hint='--run')
        runs.append((label, run_dir))
    return runs


@click.command(cls=StrictCommand)
@click.option('--run', 'runs', multiple=True, metavar='LABEL=RUN_DIR',
              help='A train.py run (repeatable; one figure row each, in this order).')
@click.option('--from-json', 'from_json', type=click.Path(exists=True, dir_okay=False),
              default=None, help='Redraw from a fig5_trajectories.json (no snapshots needed).')
@click.option('--out', required=True, type=OUTPUT_DIR,
              help='Directory for fig5_trajectories.png (and .json).')
@click.option('--n-episodes', type=count(1, MAX_EPISODES), default=None,
              help="Episodes per task and step [default: each run's episodes_per_task].")
@click.option('--seed', type=SEED, default=1, show_default=True,
              help='Sampling seed.')
@click.option('--itr', default='last', show_default=True,
              help="Snapshot epoch, 'last' or 'first'.")
@click.option('--max-episodes', type=count(), default=None,
              help='Draw at most this many trajectories per task and panel [default: all].')
@click.option('--limit', type=positive(), default=None,
              help='Axes span [-LIMIT, LIMIT] [default: the goal regions and a margin].')
def main(runs, from_json, out, n_episodes, seed, itr, max_episodes, limit):
    """Sample the runs' trajectories on the four corners and draw the paper's Fig. 5."""
    if bool(runs) == bool(from_json):
        raise click.UsageError('give --run LABEL=RUN_DIR (one or more) or --from-json, not both')
    if itr not in ('last', 'first'):
        if not (itr.isascii() and itr.isdigit()):
            raise click.BadParameter(f"expected 'last', 'first' or an epoch number, got {itr!r}",
                                     param_hint='--itr')
        itr = int(itr)
    out_dir = pathlib.Path(out)
    if from_json:
        with user_errors('--from-json', expected=(ValueError, KeyError, TypeError, OSError)):
            with open(from_json) as f:
                data = json.load(f)['algos']
            if not isinstance(data, dict) or not data:
                raise ValueError(f'{from_json} holds no runs: not a {JSON}')
    else:
        parsed = _parse_runs(runs)
        data = {}
        for label, run_dir in parsed:
            click.echo(f'{label}: sampling {run_dir} ...')
            # No snapshot, a corrupt one, another env: not a usage error.
            with user_errors(f'--run {label}', expected=(ValueError, OSError)):
                data[label] = trajectories(run_dir, n_episodes=n_episodes, seed=seed, itr=itr)
            returns = ', '.join(f'{r:.2f}' for r in data[label]['average_return'])
            click.echo(f'{label}: average return per step [{returns}]')
    out_dir.mkdir(parents=True, exist_ok=True)
    if not from_json:
        json_path = out_dir / JSON
        with open(json_path, 'w') as f:
            json.dump(dict(figure='ProMP paper Fig. 5 (trajectories)', algos=data), f)
        click.echo(f'wrote {json_path}')
    # Only a --from-json file can hold what draw() cannot read.
    with user_errors('--from-json', expected=(ValueError, KeyError, TypeError, IndexError)
                     if from_json else ()):
        png = draw(data, str(out_dir / PNG), limit=limit, max_episodes=max_episodes)
    click.echo(f'wrote {png}')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
