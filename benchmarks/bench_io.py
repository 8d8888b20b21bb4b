"""What the benchmark scripts share: writing a result table and its JSON, with the machine."""
import copy
import json
import math
import os
import pathlib
import platform
import time


def write_results(out, stem: str, results, table: str, **settings) -> None:
    """``<stem>.json`` (the machine, its CPU, the date and time, the code measured,
    ``settings`` and ``results``) and ``<stem>.md`` (``table``) in the directory ``out``,
    made if missing.

    The code measured is the checkout's revision when this module was first imported
    (:func:`started_revision`: a benchmark imports it before measuring); where tracked
    files changed since, the revision at writing is recorded beside it
    (``revision_at_writing``), since the run loaded its modules before the change.
    """
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), machine=platform.node(),
                processor=processor_name(), cores=os.cpu_count(),
                written=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                **revisions(), **settings)
    (out / f'{stem}.json').write_text(json.dumps(dict(meta=meta, results=results), indent=1))
    (out / f'{stem}.md').write_text(table + '\n')


#: The checkout the benchmarks measure (this file's repository).
REPO = pathlib.Path(__file__).resolve().parents[1]


def code_revision(repo=REPO) -> str:
    """The commit the measured code is at (``git rev-parse --short=12 HEAD`` of ``repo``),
    with ``+changes`` where tracked files differ from it, so that a saved result says which
    code it measured; ``''`` outside a git checkout (an installed copy, no ``git``)."""
    import subprocess  # pylint: disable=import-outside-toplevel

    def git(*args):
        return subprocess.run(['git', '-C', str(repo), *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()

    try:
        commit = git('rev-parse', '--short=12', 'HEAD')
        changed = git('status', '--porcelain', '--untracked-files=no')
    except (OSError, subprocess.SubprocessError):
        return ''
    return commit + ('+changes' if changed else '')


#: :func:`code_revision` when this module was imported: before a benchmark measures.
_STARTED = code_revision()


def started_revision() -> str:
    """:func:`code_revision` as it was when this module was imported (a benchmark imports it
    first, before it measures): the checkout whose modules the benchmark loads. A module
    imported later (or ``garage_promp/envs/_cstep.c``, compiled at its first use) is read
    as it is then, so a benchmark's files should not be edited while it runs; where they
    were, :func:`write_results` records the revision at writing beside this one. (Two
    ``git`` calls at import.)"""
    return _STARTED


def revisions() -> dict:
    """The code a result measured, for its file's meta: ``revision`` (:func:`started_revision`)
    and, where tracked files changed since the benchmark started, ``revision_at_writing``
    (:func:`code_revision` now)."""
    found = dict(revision=started_revision())
    now = code_revision()
    if now != found['revision']:
        found['revision_at_writing'] = now
    return found


def processor_name(cpuinfo='/proc/cpuinfo') -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``: the same cloud machine
    name can stand for different CPUs from one day to the next), else
    ``platform.processor()`` (empty on Linux, where the file is)."""
    try:
        with open(cpuinfo, encoding='utf-8', errors='replace') as lines:
            for line in lines:
                key, _, value = line.partition(':')
                if key.strip() == 'model name' and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor()


def medians(**samples) -> dict:
    """Each named list of timings' median, under its name."""
    import statistics  # pylint: disable=import-outside-toplevel
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_envs(envs, measure, format_table, out, stem: str) -> None:
    """``measure(env_name)`` (a result row) for each of ``envs``, saying which on stderr; the
    rows' ``format_table`` printed, and written with them as ``<stem>.{json,md}`` in ``out``
    where given."""
    import click  # pylint: disable=import-outside-toplevel
    rows = []
    for env_name in envs:
        click.echo(f'measuring {env_name}', err=True)
        rows.append(measure(env_name))
    table = format_table(rows)
    click.echo(table)
    if out:
        write_results(out, stem, rows, table)


#: The largest saved results file a ``--summarize`` reads (the committed ones are < 1 MiB).
MAX_RESULTS_BYTES = 64 * 2 ** 20


def read_saved_results(path) -> dict:
    """A saved results JSON (``physics.json``, ``throughput.json``, ``workers.json``), checked
    as what a benchmark writes: a plain file of at most :data:`MAX_RESULTS_BYTES` (a named
    pipe or ``/dev/zero`` is not read), a JSON object whose ``results`` rows hold no null,
    and every number in it finite and >= 0 (times, rates, ratios and counts are; ``meta``
    may hold nulls for what was not given).

    Raises:
        ValueError: Naming what is wrong and where (``results[2].sampler_lean``).

    """
    import stat  # pylint: disable=import-outside-toplevel
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        from garage_promp._files import file_kind  # pylint: disable=import-outside-toplevel
        raise ValueError(f'not a file ({file_kind(path)})')
    if status.st_size > MAX_RESULTS_BYTES:
        raise ValueError(f'{status.st_size:,} bytes, more than any saved results '
                         f'({MAX_RESULTS_BYTES:,})')
    try:
        saved = json.loads(pathlib.Path(path).read_text(encoding='utf-8'))
    except RecursionError:
        raise ValueError('JSON nested deeper than any saved results') from None
    if not isinstance(saved, dict):
        raise ValueError(f'a JSON {type(saved).__name__}, not the object a benchmark writes')

    def check(value, where, nulls):
        if isinstance(value, dict):
            for key, item in value.items():
                check(item, f'{where}.{key}' if where else str(key), nulls and key != 'results')
        elif isinstance(value, list):
            for i, item in enumerate(value):
                check(item, f'{where}[{i}]', nulls)
        elif value is None and not nulls:
            raise ValueError(f'{where} is null')
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not (
                _finite(value) and value >= 0):
            from garage_promp.validation import shown  # pylint: disable=import-outside-toplevel
            raise ValueError(f'{where} is {shown(value)}: no benchmark measures that')

    try:
        check(saved, '', True)
    except RecursionError:
        raise ValueError('JSON nested deeper than any saved results') from None
    return saved


def _finite(value: int | float) -> bool:
    """``math.isfinite``, False for an int beyond float's range (where it raises)."""
    try:
        return math.isfinite(value)
    except OverflowError:  # JSON's 1 followed by 400 zeros is a Python int
        return False


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
                     n_workers: int = 1, baseline_solver: str = 'lstsq'):
    """A seed-1 ProMP experiment on a paper env or ``ML1:<task>`` (Meta-World's v2 rewards),
    without a meta-test: the in-process sampler for one worker, else worker processes; its
    linear baseline solving with ``baseline_solver`` (``build_experiment``'s)."""
    from garage_promp.experiment.builder import build_experiment  # pylint: disable=import-outside-toplevel
    family, _, task = env_name.partition(':')
    return build_experiment('ProMP', family, 1, task=task or None,
                            meta_batch_size=meta_batch_size,
                            episodes_per_task=episodes_per_task, n_test_tasks=None,
                            sampler='local' if n_workers == 1 else 'multiprocessing',
                            n_workers=n_workers,
                            reward_function_version='v2' if task else None,
                            baseline_solver=baseline_solver)


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
