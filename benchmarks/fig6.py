#!/usr/bin/env python3
"""The paper's Fig. 6: formulation I (DiCE-VPG) against formulation II (E-MAML-VPG) on PointEnv1D.

Rothfuss et al., ICLR 2019, Fig. 6 and App. A: on a 1-D environment, a
two-parameter policy (mean θ0·s² + θ1, std 1) is meta-trained from
θ = (0.09, 0.05) by the formulation-I meta-gradient (DiCE, the gradient of
the post-update return through the inner step *and* the pre-update sampling
distribution) and by the formulation-II one (E-MAML: the inner step's
Jacobian plus a REINFORCE term on the pre-update trajectories weighted by
the post-update return); the θ trajectories are drawn in the θ plane.

Here both runs use the package's own algorithm classes, built directly as
garage RLAlgorithms: :class:`~garage_promp.algos.DiCEVPG` (formulation I)
and :class:`~garage_promp.algos.EMAMLVPG` (formulation II), on
:class:`~garage_promp.envs.PointEnv1D`, with the package's MetaSampler
(in-process), a task sampler giving 40 tasks of each goal (g = -1, +1) per
iteration as the reference, 100 episodes of H = 5 per task and step, K = 1
inner step, and :class:`~garage_promp.policies_two_param.QuadraticMeanPolicy`.
Every iteration is the public step API,
``algo.optimize(itr, algo.sample_meta_batch(itr))``; θ is recorded after each.

    python benchmarks/fig6.py --out benchmarks/results/fig6                # lr 1e-3, 200 iterations
    python benchmarks/fig6.py --out /tmp/fig6 --lr 5e-4 --lr 0.01 --lr 0.1  # one panel per lr
    python benchmarks/fig6.py --out /tmp/fig6 --quick                      # seconds

Writes ``OUT/fig6.png`` (one panel per outer learning rate: both θ
trajectories over a contour of the estimated post-update return) and
``OUT/fig6.json`` (settings, per run the θ trajectory, the pre-/post-update
average returns per iteration and the wall time, and per panel the landscape
grids).

How the package's algorithms differ from the reference's hand-written
gradients (experiments/env_1d/point_1d_hand_grads.py of the original ProMP
code), all recorded in the JSON under ``differences_from_reference``:

* Outer optimiser: the package's VPG family takes one **Adam** step per
  iteration (``torch.optim.Adam(lr)``, as the paper's "VPG"); the reference
  took a plain gradient-ascent step θ ← θ + lr·g. Adam's step is about lr per
  coordinate whatever the gradient's scale, so the same lr moves θ very
  differently; the default lr here is 1e-3 (the package's VPG default).
* Estimator: the package works per time step (log π(a_t|s_t) times the
  reward-to-go, averaged over the R·T steps of a task); the reference used
  per-trajectory terms (∇log π(τ) R(τ), averaged over the R trajectories).
  Both have the same expectation up to the factor T = 5, so the inner step
  size is passed to the algorithms as α·T (``--inner-lr`` is in the
  reference's units, default 0.1: the package gets 0.5) and the inner steps
  agree in expectation. No baseline (``ZeroBaseline`` for the advantages
  and for DiCE's reward baseline), γ = 1, λ = 1, no advantage normalisation,
  as the reference (which used undiscounted sums).
* Formulation I: the package's DiCE-VPG differentiates through a DiCE inner
  step, whose Hessian estimates both parts of the exact meta-gradient,
  (I + α·E[∇²log π R]) ḡ' + α·E[∇log π (∇log πᵀ ḡ') R]; the
  reference's hand-written 'dice' gradient scaled its first term by another α
  (α(I + αH) ḡ' + α·mean[∇log π R ∇log πᵀ ḡ']).
* Formulation II: the package's E-MAML term is the task's post-update mean
  reward *standardised over the meta-batch* times the mean pre-update
  log-likelihood (as the original code's vpg_maml.py with exploration=True);
  the reference's 1-D script used α·(Σ_j ∇log π(τ_j))·mean R' with the raw
  post-update return and a sum over trajectories.
* Log-likelihoods are of the action the policy drew (the env clips it); the
  reference evaluated them at the clipped action.

The landscape (what the contour shows) is the post-update return
J(θ) = ½ Σ_g E[R(τ')], τ' ~ π_θ'_g, θ'_g = θ + α·ĝ_g(θ), where ĝ_g is the
package's inner gradient on ``episodes`` pre-update episodes of goal g (the
same batch as the runs): a Monte Carlo estimate in numpy (``--landscape-reps``
inner steps per goal and grid point, each followed by as many post-update
episodes; the same random numbers at every grid point), with PointEnv1D's
dynamics (s0 ~ U(-2, 2), s' = clip(a, -2, 2), r = exp(-0.1 (s' - g)²)).
The pre-update return E[R(τ)] is estimated on the same grid and stored in the
JSON. The grid covers the paper's window
(θ0 ∈ [-0.015, 0.1], θ1 ∈ [-0.01, 0.05]) and the trajectories.
"""
import json
import pathlib
import platform
import time
import warnings

import garage_promp
from garage_promp.algos import EMAMLVPG, DiCEVPG
from garage_promp.baselines import ZeroBaseline
from garage_promp.envs import PointEnv1D
from garage_promp.envs.base import reset_construction_counter
from garage_promp.policies_two_param import QuadraticMeanPolicy
from garage_promp.validation import (
    SEED,
    WORKERS,
    OutputPath,
    StrictCommand,
    check_batch_steps,
    count,
    positive,
    usage_errors,
)

import click
from dowel import tabular
from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskUpdate, TaskSampler
import numpy as np
import torch

#: The reference's settings (experiments/env_1d/point_1d_hand_grads.py, run_1d_exp.py).
INIT_THETA = (0.09, 0.05)
HORIZON = 5
TASKS_PER_GOAL = 40
EPISODES = 100
INNER_LR = 0.1
ITERS = 200
REFERENCE_LRS = (5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1)
DEFAULT_LRS = (1e-3, )
#: The paper's plotting window (experiments/env_1d/plot_1d_exp.py).
PAPER_WINDOW = ((-0.015, 0.1), (-0.01, 0.05))
#: What --quick sets (unless given explicitly).
QUICK = dict(iters=3, tasks_per_goal=2, episodes=10, grid=9, landscape_reps=2)
#: Paper label -> formulation, algorithm class name.
FORMULATIONS = {'DiCE-VPG': 'I', 'E-MAML-VPG': 'II'}
COLORS = {'DiCE-VPG': ('Reds', 'tab:red'), 'E-MAML-VPG': ('Greens', 'tab:green')}

DIFFERENCES = {
    'outer_optimizer': 'package VPG family: one Adam step per iteration (torch.optim.Adam(lr)); '
                       'reference: plain gradient ascent theta <- theta + lr * g',
    'estimator': 'package: per-step log-likelihood times reward-to-go, averaged over the R*T '
                 'steps of a task; reference: per-trajectory grad log pi(tau) R(tau) averaged '
                 'over R; same expectation up to T, so the package inner lr is inner_lr * T',
    'formulation_I': 'package DiCE-VPG: through a DiCE inner step, an estimate of '
                     '(I + a H) g\' + a E[grad log pi (grad log pi^T g\') R]; reference: '
                     'a (I + a H) g\' + a mean[...] (first term scaled by an extra a)',
    'formulation_II': 'package E-MAML term: per-task post-update mean reward standardised over '
                      'the meta-batch times the mean pre-update log-likelihood; reference: '
                      'a * sum_j grad log pi(tau_j) * mean R\' (raw return, sum over '
                      'trajectories)',
    'log_likelihood_action': 'package: log pi of the action drawn (the env clips it); '
                             'reference: log pi of the clipped action',
}


# ----------------------------------------------------------------- tasks
class AlternatingGoals(TaskSampler):
    """garage TaskSampler: ``sample(n)`` gives goals -1, +1, -1, +1, ... (n/2 of each).

    The reference's task order (``for g in [-1., 1] * num_meta_tasks``), instead
    of PointEnv1D's own random signs.
    """

    def __init__(self):
        self._env = PointEnv1D(max_episode_length=HORIZON)  # template (spaces are compared)

    @property
    def n_tasks(self):
        """int: Two tasks, g = -1 and g = +1."""
        return 2

    def sample(self, n_tasks, with_replacement=False):
        """``n_tasks`` (even) updates, alternating goals."""
        del with_replacement
        if n_tasks % 2:
            raise ValueError(f'n_tasks must be even (as many tasks of each goal), got {n_tasks}')
        return [SetTaskUpdate(PointEnv1D, goal, None) for goal in [-1., 1.] * (n_tasks // 2)]


# ------------------------------------------------------------- the runs
def build_algo(label, *, lr, inner_lr, tasks_per_goal, episodes, seed):
    """``label`` ('DiCE-VPG' or 'E-MAML-VPG') on PointEnv1D with the two-parameter policy."""
    set_seed(seed)
    reset_construction_counter()
    env = PointEnv1D(max_episode_length=HORIZON)
    policy = QuadraticMeanPolicy(env.spec, init_theta=INIT_THETA)
    sampler = garage_promp.make_sampler(policy, env, kind='local')
    options = dict(meta_batch_size=2 * tasks_per_goal, episodes_per_task=episodes,
                   num_inner_grad_steps=1, inner_lr=inner_lr * HORIZON, learning_rate=lr,
                   discount=1., gae_lambda=1., normalize_adv=False, positive_adv=False,
                   baseline=ZeroBaseline())
    if label == 'DiCE-VPG':
        algo = DiCEVPG(env, policy, sampler, AlternatingGoals(),
                       dice_baseline=ZeroBaseline(), **options)
    elif label == 'E-MAML-VPG':
        algo = EMAMLVPG(env, policy, sampler, AlternatingGoals(), **options)
    else:
        raise ValueError(f'unknown label {label!r}; choose from {sorted(FORMULATIONS)}')
    return algo, policy


def _average_return(batch):
    """Mean undiscounted episode return of a MetaBatch."""
    return float((batch.rewards * batch.mask).sum(-1).mean())


def run(label, *, lr, iters, inner_lr, tasks_per_goal, episodes, seed, log=None):
    """Meta-train ``label`` for ``iters`` iterations; θ before and after each."""
    algo, policy = build_algo(label, lr=lr, inner_lr=inner_lr, tasks_per_goal=tasks_per_goal,
                              episodes=episodes, seed=seed)
    thetas = [policy.theta.detach().numpy().astype(float).tolist()]
    pre, post = [], []
    start = time.perf_counter()
    for itr in range(iters):
        batches = algo.sample_meta_batch(itr)
        algo.optimize(itr, batches)
        with warnings.catch_warnings():  # the algorithm's logged values: no logger here
            warnings.simplefilter('ignore')
            tabular.clear()
        thetas.append(policy.theta.detach().numpy().astype(float).tolist())
        pre.append(_average_return(batches[0]))
        post.append(_average_return(batches[-1]))
        if log is not None and (itr + 1) % max(1, iters // 10) == 0:
            log(f'{label} lr={lr:g} itr {itr + 1}/{iters}: theta=({thetas[-1][0]:.4f}, '
                f'{thetas[-1][1]:.4f}) pre {pre[-1]:.3f} post {post[-1]:.3f} '
                f'({time.perf_counter() - start:.0f} s)')
    return dict(label=label, formulation=FORMULATIONS[label], algo=type(algo).__name__,
                lr=lr, theta=thetas, pre_update_return=pre, post_update_return=post,
                seconds=time.perf_counter() - start)


# ------------------------------------------------------------ landscape
def rollouts(theta, goals, s0, noise):
    """PointEnv1D episodes of the policy at each θ, all at once.

    Args:
        theta (np.ndarray): (P, 2) parameters.
        goals (np.ndarray): (P,) goals.
        s0 (np.ndarray): (P, N) initial states.
        noise (np.ndarray): (P, N, T) standard normal action noise.

    Returns:
        tuple: observations s_t, actions a_t (as drawn, unclipped) and rewards,
            each (P, N, T).

    """
    s = s0
    obs, acts, rews = (np.empty(noise.shape) for _ in range(3))
    for t in range(noise.shape[-1]):
        mean = theta[:, :1] * s**2 + theta[:, 1:]
        a = mean + noise[..., t]
        nxt = np.clip(a, -2., 2.)
        obs[..., t], acts[..., t] = s, a
        rews[..., t] = np.exp(-0.1 * (nxt - goals[:, None])**2)
        s = nxt
    return obs, acts, rews


def inner_gradient(theta, obs, acts, rews):
    """The package's inner gradient (DiCE and MAML alike here: no baseline, γ = 1).

    ∇_θ of the mean over the N·T steps of log π_θ(a_t|s_t)·Σ_{t'≥t} r_t',
    std 1: ∇ log π = (a - θ0 s² - θ1)·(s², 1).

    Args:
        theta (np.ndarray): (P, 2).
        obs, acts, rews (np.ndarray): (P, N, T).

    Returns:
        np.ndarray: (P, 2).

    """
    resid = acts - (theta[:, :1, None] * obs**2 + theta[:, 1:, None])
    to_go = np.flip(np.cumsum(np.flip(rews, -1), -1), -1)
    weight = resid * to_go
    return np.stack([(weight * obs**2).mean((1, 2)), weight.mean((1, 2))], -1)


#: Grid points evaluated at once in the landscape.
LANDSCAPE_CHUNK = 64
#: The most landscape grid points per axis.
MAX_GRID = 1001


def landscape(theta0s, theta1s, *, inner_lr, episodes, reps, seed,
              chunk_points=LANDSCAPE_CHUNK):
    """Pre- and post-update return over the θ grid, each (len(theta1s), len(theta0s)).

    Post-update: for each grid θ and goal, ``reps`` inner steps θ' = θ + α·T·ĝ
    (``inner_lr`` α in the reference's units; ĝ the package's inner gradient
    on ``episodes`` pre-update episodes), each followed by ``episodes``
    episodes at θ'; averaged over the goals and the reps. Every grid point
    uses the same random numbers (initial states and action noise), so the
    estimate is a smooth function of θ whose differences between grid points
    carry far less noise than its value.
    """
    grid = np.stack(np.meshgrid(theta0s, theta1s), -1).reshape(-1, 2)
    rng = np.random.default_rng(seed)
    n_sets = 2 * reps  # (goal, rep) pairs
    goals = np.repeat([-1., 1.], reps)
    draws = [(rng.uniform(-2., 2., (n_sets, episodes)),
              rng.standard_normal((n_sets, episodes, HORIZON))) for _ in range(2)]
    pre, post = np.empty(len(grid)), np.empty(len(grid))
    for lo in range(0, len(grid), chunk_points):
        points = grid[lo:lo + chunk_points]
        th = np.repeat(points, n_sets, axis=0)
        g = np.tile(goals, len(points))
        (s0, noise), (s0_post, noise_post) = (
            (np.tile(a, (len(points), 1)), np.tile(b, (len(points), 1, 1))) for a, b in draws)
        obs, acts, rews = rollouts(th, g, s0, noise)
        pre[lo:lo + chunk_points] = rews.sum(-1).mean(-1).reshape(len(points), -1).mean(-1)
        adapted = th + inner_lr * HORIZON * inner_gradient(th, obs, acts, rews)
        ret = rollouts(adapted, g, s0_post, noise_post)[2].sum(-1).mean(-1)
        post[lo:lo + chunk_points] = ret.reshape(len(points), -1).mean(-1)
    shape = (len(theta1s), len(theta0s))
    return pre.reshape(shape), post.reshape(shape)


def grid_axes(trajectories, n_points):
    """θ0 and θ1 grid axes covering the paper's window and every trajectory (10% margin)."""
    points = np.concatenate([np.asarray(t) for t in trajectories] +
                            [np.array(PAPER_WINDOW).T])
    axes = []
    for dim in range(2):
        lo, hi = points[:, dim].min(), points[:, dim].max()
        pad = 0.1 * (hi - lo)
        axes.append(np.linspace(lo - pad, hi + pad, n_points))
    return axes


# ----------------------------------------------------------------- plot
def plot(panels, path):
    """One panel per lr: the post-update landscape and both θ trajectories."""
    # pylint: disable=import-outside-toplevel
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 5.2 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis('off')
    for ax, panel in zip(axes.flat, panels):
        t0, t1 = np.asarray(panel['theta0']), np.asarray(panel['theta1'])
        post = np.asarray(panel['post_update_return'])
        filled = ax.contourf(t0, t1, post, levels=20, cmap='Blues', alpha=0.85)
        ax.contour(t0, t1, post, levels=10, colors='k', linewidths=0.3, alpha=0.5)
        fig.colorbar(filled, ax=ax, label='post-update return (MC estimate)')
        for result in panel['runs']:
            theta = np.asarray(result['theta'])
            cmap, line = COLORS[result['label']]
            shade = matplotlib.colormaps[cmap](np.linspace(0.35, 1., len(theta)))
            ax.plot(theta[:, 0], theta[:, 1], '-', color=line, lw=0.8, alpha=0.7)
            ax.scatter(theta[:, 0], theta[:, 1], c=shade, s=14, edgecolors='k',
                       linewidths=0.3, zorder=3,
                       label=f"{result['formulation']}-VPG ({result['label']})")
        best = np.unravel_index(np.argmax(post), post.shape)
        ax.scatter([t0[best[1]]], [t1[best[0]]], marker='^', s=160, color='gold',
                   edgecolors='k', zorder=4, label='landscape max (estimate)')
        ax.scatter([0.], [0.], marker='*', s=160, color='white', edgecolors='k', zorder=4,
                   label="the paper's optimum (0, 0)")
        ax.scatter([INIT_THETA[0]], [INIT_THETA[1]], marker='o', s=60, facecolors='none',
                   edgecolors='k', zorder=4, label='start (0.09, 0.05)')
        ax.set_xlabel(r'$\theta_0$')
        ax.set_ylabel(r'$\theta_1$')
        ax.set_title(f"outer lr {panel['lr']:g} (Adam), {len(panel['runs'][0]['theta']) - 1} "
                     'iterations')
        ax.legend(fontsize=7, loc='best')
    fig.suptitle('Fig. 6: formulation I (DiCE-VPG) vs II (E-MAML-VPG) on PointEnv1D')
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------ CLI
@click.command(cls=StrictCommand)
@click.option('--out', required=True, type=OutputPath(path_type=pathlib.Path),
              help='Directory for fig6.png and fig6.json.')
@click.option('--iters', type=count(), default=ITERS, show_default=True,
              help='Meta-iterations of each run.')
@click.option('--lr', 'lrs', type=positive(), multiple=True,
              help=f'Outer (Adam) learning rate; repeat for a sweep, one panel each '
                   f'[default {DEFAULT_LRS[0]:g}; the reference swept {REFERENCE_LRS}].')
@click.option('--inner-lr', type=positive(), default=INNER_LR,
              show_default=True,
              help="Inner step size in the reference's per-trajectory units (the "
                   'algorithms get inner_lr x H).')
@click.option('--tasks-per-goal', type=count(), default=TASKS_PER_GOAL,
              show_default=True, help='Tasks of each goal per iteration (M = 2x this).')
@click.option('--episodes', type=count(), default=EPISODES, show_default=True,
              help='Episodes per task and step (R).')
@click.option('--seed', type=SEED, default=1, show_default=True)
@click.option('--grid', type=count(3, MAX_GRID), default=41, show_default=True,
              help='Landscape grid points per axis.')
@click.option('--landscape-reps', type=count(), default=32, show_default=True,
              help='Inner steps per goal and grid point in the landscape estimate.')
@click.option('--threads', type=WORKERS, default=1, show_default=True,
              help='torch threads.')
@click.option('--quick', is_flag=True,
              help=f'A tiny run in seconds (unless given: {QUICK}).')
@click.pass_context
def main(ctx, out, iters, lrs, inner_lr, tasks_per_goal, episodes, seed, grid, landscape_reps,
         threads, quick):
    """Train DiCE-VPG and E-MAML-VPG on PointEnv1D; draw their θ over the landscape."""
    settings = dict(iters=iters, tasks_per_goal=tasks_per_goal, episodes=episodes, grid=grid,
                    landscape_reps=landscape_reps)
    if quick:
        for key, value in QUICK.items():
            if ctx.get_parameter_source(key) is not click.core.ParameterSource.COMMANDLINE:
                settings[key] = value
    lrs = tuple(lrs) or DEFAULT_LRS
    with usage_errors():  # what one iteration and one landscape chunk sample at once
        check_batch_steps(HORIZON, factor=2, tasks_per_goal=settings['tasks_per_goal'],
                          episodes=settings['episodes'])
        check_batch_steps(HORIZON, factor=2 * LANDSCAPE_CHUNK,
                          landscape_reps=settings['landscape_reps'], episodes=settings['episodes'])
    torch.set_num_threads(threads)
    warnings.filterwarnings('ignore', message='Converting a tensor with requires_grad=True')
    out.mkdir(parents=True, exist_ok=True)
    log = lambda text: click.echo(text, err=True)  # noqa: E731
    panels, start = [], time.perf_counter()
    for lr in lrs:
        runs = [run(label, lr=lr, iters=settings['iters'], inner_lr=inner_lr,
                    tasks_per_goal=settings['tasks_per_goal'], episodes=settings['episodes'],
                    seed=seed, log=log) for label in FORMULATIONS]
        theta0s, theta1s = grid_axes([r['theta'] for r in runs], settings['grid'])
        t = time.perf_counter()
        pre, post = landscape(theta0s, theta1s, inner_lr=inner_lr,
                              episodes=settings['episodes'], reps=settings['landscape_reps'],
                              seed=seed)
        log(f'landscape lr={lr:g}: {settings["grid"]}x{settings["grid"]} grid in '
            f'{time.perf_counter() - t:.1f} s')
        panels.append(dict(lr=lr, runs=runs, theta0=theta0s.tolist(), theta1=theta1s.tolist(),
                           pre_update_return=pre.tolist(), post_update_return=post.tolist()))
    plot(panels, out / 'fig6.png')
    record = dict(
        figure='ProMP paper (arXiv:1810.06784) Fig. 6: formulation I vs II on PointEnv1D',
        settings=dict(
            env='PointEnv1D', horizon=HORIZON, init_theta=list(INIT_THETA),
            policy='QuadraticMeanPolicy: mean theta0 s^2 + theta1, log-std fixed at 0',
            tasks_per_goal=settings['tasks_per_goal'],
            meta_batch_size=2 * settings['tasks_per_goal'], episodes_per_task=settings['episodes'],
            iters=settings['iters'], outer_lrs=list(lrs), outer_optimizer='Adam',
            inner_lr_reference_units=inner_lr, inner_lr_package=inner_lr * HORIZON,
            num_inner_grad_steps=1, baseline='ZeroBaseline', dice_baseline='ZeroBaseline',
            discount=1., gae_lambda=1., normalize_adv=False, sampler='local', seed=seed,
            quick=quick,
            landscape=dict(grid=settings['grid'], reps_per_goal=settings['landscape_reps'],
                           episodes=settings['episodes'],
                           estimate='post-update return: mean over goals +-1 and reps of the '
                                    'mean return of `episodes` episodes at theta + '
                                    'inner_lr_package * (package inner gradient on `episodes` '
                                    'pre-update episodes); pre-update: mean return at theta'),
            reference_lr_sweep=list(REFERENCE_LRS)),
        differences_from_reference=DIFFERENCES,
        panels=panels,
        seconds=time.perf_counter() - start,
        python=platform.python_version())
    (out / 'fig6.json').write_text(json.dumps(record, indent=1))
    click.echo(f'wrote {out / "fig6.png"} and {out / "fig6.json"} '
               f'({record["seconds"]:.0f} s)')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
