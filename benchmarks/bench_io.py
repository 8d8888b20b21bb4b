"""What the benchmark scripts share: writing a result table and its JSON, with the machine."""
import copy
import json
import os
import pathlib
import platform
import time


def write_results(out, stem: str, results, table: str, **settings) -> None:
    """``<stem>.json`` (the machine, date, ``settings`` and ``results``) and ``<stem>.md``
    (``table``) in the directory ``out``, made if missing."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), machine=platform.node(),
                processor=platform.processor(), cores=os.cpu_count(), **settings)
    (out / f'{stem}.json').write_text(json.dumps(dict(meta=meta, results=results), indent=1))
    (out / f'{stem}.md').write_text(table + '\n')


def check_metaworld_names(names) -> None:
    """Load Meta-World (the package's set-up) and check each of ``names`` is a Meta-World
    v3 env name, else ``click.BadParameter`` naming ``--env`` and the name."""
    from garage_promp.envs.metaworld import _metaworld, check_env_name  # pylint: disable=import-outside-toplevel

    import click  # pylint: disable=import-outside-toplevel
    _metaworld()
    for name in names:
        try:
            check_env_name(name)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint='--env') from error


def check_env_batches(envs, meta_batch_size: int, episodes_per_task: int, make_setup,
                      check=None) -> None:
    """Before anything is measured: every env of ``envs`` built by ``make_setup(name)``
    (an ``EnvSetup``; then ``check(setup)`` if given), an error in it named as ``--env``,
    and its meta-batch within the cap on env steps sampled at once."""
    from garage_promp.validation import (  # pylint: disable=import-outside-toplevel
        check_batch_steps,
        usage_errors,
        user_errors,
    )
    for env_name in envs:
        with user_errors(f'--env {env_name}'):
            setup = make_setup(env_name)
            if check is not None:
                check(setup)
        with usage_errors():
            check_batch_steps(setup.env.spec.max_episode_length,
                              meta_batch_size=meta_batch_size,
                              episodes_per_task=episodes_per_task)


def env_setup(env_name: str):
    """The ``EnvSetup`` of a paper env or ``ML1:<task>`` (seed 1), as the benchmarks name them."""
    import garage_promp  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    from garage_promp.experiment.env_setup import make_env_setup  # pylint: disable=import-outside-toplevel
    family, _, task = env_name.partition(':')
    return make_env_setup(family, seed=1, task=task or None)


def promp_experiment(env_name: str, meta_batch_size: int, episodes_per_task: int,
                     n_workers: int = 1):
    """A seed-1 ProMP experiment on a paper env or ``ML1:<task>`` (Meta-World's v2 rewards),
    without a meta-test: the in-process sampler for one worker, else worker processes."""
    from garage_promp.experiment.builder import build_experiment  # pylint: disable=import-outside-toplevel
    family, _, task = env_name.partition(':')
    return build_experiment('ProMP', family, 1, task=task or None,
                            meta_batch_size=meta_batch_size,
                            episodes_per_task=episodes_per_task, n_test_tasks=None,
                            sampler='local' if n_workers == 1 else 'multiprocessing',
                            n_workers=n_workers,
                            reward_function_version='v2' if task else None)


def update_restorer(algorithm):
    """A function that puts back what one outer update changes: θ, the optimiser's
    state and ProMP's KL coefficients, as they are now (for timing the same update
    again)."""
    optimizer = getattr(algorithm, '_optimizer', None)
    start = copy.deepcopy((algorithm.policy.state_dict(),
                           optimizer.state_dict() if optimizer is not None else None,
                           getattr(algorithm, 'inner_kl_coeff', None)))

    def restore():
        policy_state, optimizer_state, kl_coeff = copy.deepcopy(start)
        algorithm.policy.load_state_dict(policy_state)
        if optimizer is not None:
            optimizer.load_state_dict(optimizer_state)
        if kl_coeff is not None:
            algorithm.inner_kl_coeff = kl_coeff
    return restore
