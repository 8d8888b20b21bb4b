"""Shared test helpers: a short garage PointEnv, algorithm factories, script loading."""
import importlib.util

import garage_promp
from garage_promp.algos import EMAMLVPG, LVCVPG, MAMLVPG, TRPOMAML, DiCEVPG, ProMP
from garage_promp.experiment import MetaEvaluator

from garage.envs import PointEnv
from garage.experiment.deterministic import set_seed
from garage.experiment.task_sampler import SetTaskSampler
from garage.torch.policies import GaussianMLPPolicy
import torch

HORIZON = 5
LONG_HORIZON = 20

#: Test names (one per class) -> (class, the paper label built through).
ALGOS = {
    'ProMP': ProMP,
    'TRPOMAML': TRPOMAML,
    'LVCVPG': LVCVPG,
    'DiCEVPG': DiCEVPG,
    'MAMLVPG': MAMLVPG,
    'EMAMLVPG': EMAMLVPG,
}
LABELS = {
    'ProMP': 'ProMP',
    'TRPOMAML': 'LVC-TRPO',  # TRPOMAML's own default inner estimator
    'LVCVPG': 'LVC-VPG',
    'DiCEVPG': 'DiCE-VPG',
    'MAMLVPG': 'MAML-VPG',
    'EMAMLVPG': 'E-MAML-VPG',
}
TRPO_LABELS = {('maml', False): 'MAML-TRPO', ('maml', True): 'E-MAML-TRPO',
               ('lvc', False): 'LVC-TRPO', ('dice', False): 'DiCE-TRPO'}


class ShortPointEnv(PointEnv):
    """garage's PointEnv (a meta-env: sample_tasks/set_task), short episodes."""

    def __init__(self, **kwargs):
        kwargs.setdefault('max_episode_length', HORIZON)
        super().__init__(**kwargs)


def make_setup(seed=1, hidden_sizes=(8, ), learn_std=True, n_workers=1,
               kind='local', env_class=None, batched=True,
               envs_per_task=None, max_envs_per_worker=None):
    """Env, policy, sampler and task sampler for a tiny meta-RL run."""
    set_seed(seed)
    env_class = env_class or ShortPointEnv
    env = env_class()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=hidden_sizes,
                               learn_std=learn_std)
    sampler = garage_promp.make_sampler(policy, env, kind=kind,
                                        n_workers=n_workers, batched=batched,
                                        envs_per_task=envs_per_task,
                                        max_envs_per_worker=max_envs_per_worker)
    return env, policy, sampler, SetTaskSampler(env_class)


def make_algo(name, seed=1, evaluator=False, setup_kwargs=None, **kwargs):
    """One of the algorithms on ShortPointEnv with a tiny batch."""
    env, policy, sampler, task_sampler = make_setup(seed, **(setup_kwargs
                                                             or {}))
    kwargs.setdefault('meta_batch_size', 3)
    kwargs.setdefault('episodes_per_task', 2)
    if evaluator:
        kwargs['meta_evaluator'] = MetaEvaluator(
            test_task_sampler=task_sampler, n_test_tasks=2,
            n_exploration_eps=2, n_test_episodes=1)
    label = LABELS[name]
    if name == 'TRPOMAML':  # the label of the variant asked for, if it has one
        variant = (kwargs.get('inner_estimator', 'lvc'), kwargs.get('exploration', False))
        label = TRPO_LABELS.get(variant)
        if label is None:  # no paper label (e.g. LVC with exploration): the class
            return env, TRPOMAML(env, policy, sampler, task_sampler, **kwargs)
    return env, garage_promp.make_algo(label, env, policy, sampler, task_sampler, **kwargs)


class LongPointEnv(ShortPointEnv):
    """PointEnv with 20-step episodes: long enough to reach most goals."""

    def __init__(self, **kwargs):
        kwargs.setdefault('max_episode_length', LONG_HORIZON)
        super().__init__(**kwargs)


def perturb(policy, scale=0.3, seed=0):
    """Move every parameter of ``policy`` by ``scale`` N(0, 1), seeded: a θ away from the
    initial one, where terms that vanish at it (a KL, a clipped ratio's gradient) do not."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))


def load_script(path, name):
    """Import the script at ``path`` (a launcher, a benchmark) as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def invoke_script(path, *args, env=None, command='main'):
    """``python <path> ARGS`` in this process, for a script whose entry point is the click
    command ``command`` (no interpreter start-up, which costs seconds a call): a
    ``subprocess.CompletedProcess``-like result (``returncode``, ``stdout``, ``stderr``).
    An exception click did not turn into an exit status is appended to ``stderr`` as the
    traceback a subprocess would print."""
    import traceback  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel

    from click.testing import CliRunner  # pylint: disable=import-outside-toplevel
    # Loaded afresh each call: no module state (a launcher's built experiment, its run
    # directory) carries over from one call to the next.
    module = load_script(path, 'invoked_script')
    result = CliRunner().invoke(getattr(module, command), [str(a) for a in args], env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += ''.join(traceback.format_exception(result.exception))
    return types.SimpleNamespace(returncode=result.exit_code, stdout=result.stdout,
                                 stderr=stderr)


def with_options(base, extra):
    """``base`` command-line arguments with ``extra`` appended, an option that both give
    taking ``extra``'s value: the launchers refuse an option given twice."""
    flags = {a for a in extra if a.startswith('--') and a != '--set'}
    kept, skip = [], False
    for i, arg in enumerate(base):
        if skip:
            skip = False
            continue
        if arg in flags:
            skip = i + 1 < len(base) and not str(base[i + 1]).startswith('--')
            continue
        kept.append(arg)
    return [*kept, *extra]
