"""Learning curves of runs: read ``progress.csv``, group seeds, draw mean ± std bands.

Used by ``launchers/plot.py`` (users' own runs) and ``benchmarks/learning.py``
(the paper's Fig. 2 comparison). A run is a directory with ``progress.csv``
and, for grouping, ``variant.json`` (both written by garage's
``wrap_experiment``). Runs whose variants differ only in the seed (and in
settings that do not change what is computed, :data:`NOT_CONFIGURATION`) are
one configuration, drawn as the mean over seeds with a ± one standard
deviation band.
"""
import itertools
import json
import math
import pathlib
from typing import Dict, List, Sequence, Tuple

from garage_promp.experiment.run_dir import read_progress, read_variant  # noqa: F401  (re-exported)

#: variant.json keys that do not change a run's numbers: the seed (the
#: thing being averaged over), the epoch budget, the console and the
#: sampler's worker layout (episodes are identical for any worker count) and
#: the update's device (the same update to float tolerance).
NOT_CONFIGURATION = frozenset({'seed', 'epochs', 'full_table', 'sampler', 'n_workers',
                               'log_dir', 'snapshot_mode', 'device', 'max_env_steps',
                               'worker_timeout'})


def post_update_key(rows: Sequence[dict]) -> str:
    """``Step_K-AverageReturn`` for the largest K logged (the post-update return)."""
    steps = [int(k.split('-')[0][len('Step_'):]) for k in rows[0]
             if k.startswith('Step_') and k.endswith('-AverageReturn')]
    if not steps:
        raise KeyError('no Step_<k>-AverageReturn column in progress.csv')
    return f'Step_{max(steps)}-AverageReturn'


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and sample standard deviation (n - 1), ignoring NaN."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    try:
        mean = sum(values) / len(values)
        var = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)
               if len(values) > 1 else 0.)
    except OverflowError:  # a square beyond float range (|values| ~ 1e154)
        mean = var = math.inf
    if not (math.isfinite(mean) and math.isfinite(var)) and all(map(math.isfinite, values)):
        # Finite values whose squares or sum overflow: the same on values scaled to <= 1.
        scale = max(abs(v) for v in values)
        mean, std = mean_std([v / scale for v in values])
        return mean * scale, std * scale
    return mean, math.sqrt(var)


def _float(value) -> float:
    return float(value) if value not in (None, '') else math.nan


def group_runs(run_dirs) -> Dict[str, List[pathlib.Path]]:
    """Runs grouped by configuration, labelled by what differs between groups.

    Returns:
        dict: label -> run directories (seeds), in the order first seen.

    Raises:
        ValueError: If two runs have the same configuration and the same seed
            (a copy of a run, or one run resumed into another directory):
            averaged as two seeds, they would narrow the band.

    """
    configs, seeds = {}, {}
    for run in map(pathlib.Path, run_dirs):
        variant = read_variant(run)
        key = json.dumps({k: v for k, v in variant.items() if k not in NOT_CONFIGURATION},
                         sort_keys=True)
        configs.setdefault(key, []).append(run)
        seed = variant.get('seed')
        if seed is not None:  # a copy of a run (same configuration, same seed) is not a second seed
            first = seeds.setdefault((key, json.dumps(seed)), run)
            if first != run:
                raise ValueError(f'{str(first)!r} and {str(run)!r} are the same configuration '
                                 f'with the same seed ({seed!r}): the same run, which would '
                                 'count as two seeds; give one of them')
    parsed = {key: json.loads(key) for key in configs}
    fields = sorted({k for p in parsed.values() for k in p})
    differing = [k for k in fields
                 if len({json.dumps(p.get(k), sort_keys=True) for p in parsed.values()}) > 1]
    # Label by algorithm and env alone when they tell the groups apart.
    main = [k for k in ('algo', 'env') if k in differing]
    if main and len({tuple(str(p.get(k)) for k in main) for p in parsed.values()}) == len(parsed):
        differing = main
    groups = {}
    for key, runs in configs.items():
        variant = parsed[key]
        parts = [str(variant.get(k)) if k in ('algo', 'env') else f'{k}={variant.get(k)}'
                 for k in differing]
        label = ', '.join(parts) or str(variant.get('algo') or runs[0].name)
        groups[label] = runs
    return groups


#: The largest |mean ± std| drawn: matplotlib pads an axis's limits beyond its data and
#: overflows to inf on values near the float range (1.8e308).
MAX_DRAWN = 1e300


def _common_x(runs, key: str | None, x_key: str, label: str = ''):
    """``(xs, curves)``: each run's ``key`` (None: its post-update return) interpolated
    linearly onto the x values at which any run logged a number, between the largest
    first and the smallest last x of the runs' logged points (no run is extrapolated).
    A run with no number in that range gives NaN (left out of the mean)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    logged = []
    for rows in runs:
        points = [(_float(r.get(x_key)), _float(r.get(key or post_update_key(rows))))
                  for r in rows]
        points = [(x, y) for x, y in points if math.isfinite(x) and not math.isnan(y)]
        logged.append(sorted(points))
    spans = [(p[0][0], p[-1][0]) for p in logged if p]
    if not spans:
        return [], [[] for _ in runs]
    lo, hi = max(a for a, _ in spans), min(b for _, b in spans)
    if lo > hi:
        ranges = ', '.join(f'{a:g}-{b:g}' for a, b in spans)
        raise ValueError(f'{label}: its runs logged {key or "the post-update return"} over '
                         f'{x_key} ranges that do not overlap ({ranges}): there is no '
                         f'{x_key} at which to average them')
    xs = sorted({x for points in logged for x, _ in points if lo <= x <= hi})
    curves = [list(np.interp(xs, [x for x, _ in p], [y for _, y in p])) if p
              else [math.nan] * len(xs) for p in logged]
    return xs, curves


def _drawn_points(xs, means, stds):
    """The points of a line that have a number at both coordinates: a column logged only
    every few epochs (``MetaTest/*`` with ``--evaluate-every N``) is empty in the rows
    between, and its line joins the epochs that have one."""
    return [(x, m, s) for x, m, s in zip(xs, means, stds)
            if not (math.isnan(x) or math.isnan(m))]


def _check_drawable(label: str, key: str, n_runs: int, xs, stats, x_key: str) -> None:
    """Refuse, naming the group and column, a line with nothing to draw (every value
    empty or NaN: a column the runs never logged a number in, or none in a row whose
    ``x_key`` has one) or one beyond :data:`MAX_DRAWN`, before anything is drawn.

    Raises:
        ValueError: As above.

    """
    points = _drawn_points(xs, [m for m, _ in stats], [s for _, s in stats])
    bands = [(m - s, m + s) for _, m, s in points]
    if not bands:
        where = ('every row empty or NaN' if all(math.isnan(m) for m, _ in stats)
                 else f'none in a row with a number in {x_key!r}')
        raise ValueError(f'{label}: its {n_runs} run(s) have no number in {key!r} ({where}): '
                         'nothing to draw')
    largest = max(abs(v) for band in bands for v in band)
    if not largest <= MAX_DRAWN:
        raise ValueError(f'{label}: {key!r} mean ± std reaches {largest:.3g}, beyond what '
                         f'the figure can draw (|value| <= {MAX_DRAWN:g})')


def plot_bands(path, groups: Dict[str, List[Sequence[dict]]], keys: Sequence[str | None],
               x_key: str = 'TotalEnvSteps', title: str = '', ylabel: str = 'average return'):
    """Mean ± std bands of each group's runs, one colour per group, one line style per key.

    Args:
        path: The PNG to write.
        groups (dict): label -> the runs' progress rows (one list per seed).
        keys (list): Columns to draw; None stands for the post-update return
            (:func:`post_update_key` of each run).
        x_key (str): The x column. Where every seed logged the same x at each
            row (fixed-length episodes: the same env steps each epoch), a row's
            seeds are averaged at that x, the runs cut to the shortest; where
            they differ (episodes that end early), each seed is interpolated
            onto the x values the seeds logged, between the largest first and
            the smallest last x among them (:func:`_common_x`): a mean at equal
            x, whatever the order of the runs.
        title (str): Figure title.
        ylabel (str): y axis label.

    Returns:
        dict: label -> {line name -> (x, mean, std)}, a value per row (NaN where a row
            has none: those points are not drawn).

    """
    drawn = {}
    for label, runs in groups.items():
        runs = [rows for rows in runs if rows]
        if not runs:
            continue
        n = min(len(rows) for rows in runs)
        same_x = all([r[x_key] for r in rows[:n]] == [r[x_key] for r in runs[0][:n]]
                     for rows in runs)
        for key in keys:
            if same_x:
                xs = [_float(r[x_key]) for r in runs[0][:n]]
                curves = [[_float(r.get(key or post_update_key(rows))) for r in rows[:n]]
                          for rows in runs]
            else:
                xs, curves = _common_x(runs, key, x_key, label)
            stats = [mean_std([c[i] for c in curves]) for i in range(len(xs))]
            name = {None: 'post-update', 'Step_0-AverageReturn': 'pre-update'}.get(key, key)
            _check_drawable(label, key or post_update_key(runs[0]), len(runs), xs, stats,
                            x_key)
            drawn.setdefault(label, {})[name] = (xs, [m for m, _ in stats],
                                                 [sd for _, sd in stats])
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = itertools.cycle(plt.rcParams['axes.prop_cycle'].by_key()['color'])
    styles = ['-', '--', ':', '-.']
    for label, lines in drawn.items():
        color = next(colors)
        for style, (name, line) in zip(itertools.cycle(styles), lines.items()):
            xs, means, stds = zip(*_drawn_points(*line))
            ax.plot(xs, means, style, color=color,
                    label=f'{label}: {name}' if len(keys) > 1 else label)
            ax.fill_between(xs, [m - s for m, s in zip(means, stds)],
                            [m + s for m, s in zip(means, stds)], color=color, alpha=0.15)
    ax.set_xlabel(x_key)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn
