#!/usr/bin/env python3
"""Instructions an env step, counted by valgrind, side by side for revisions of the package.

    python benchmarks/instructions.py --rev HEAD~1 --rev .          # the last commit against now
    python benchmarks/instructions.py --env HopperRandParams --rev main --rev . --out DIR

Wall-clock comparisons need quiet cores; on a busy host two runs of the same code
differ by more than a change of a few percent. The number of instructions a run
executes does not depend on the host: this counts them with valgrind's callgrind
(``valgrind --tool=callgrind``), for each revision, in a process that builds a
seed-1 ProMP experiment (the in-process sampler, ``--meta-batch-size`` tasks x
``--episodes`` episodes, as ``benchmarks/physics.py``), samples a start-up meta-batch
and then ``--meta-batches`` more, and in one that stops after the start-up one;
the difference of the two, per env step of the timed meta-batches, is what a
meta-batch costs (every sampling round and the learner's work between them),
split by where it runs: MuJoCo (its library's functions and what they call in the C
and maths libraries: ``memset``/``memcpy`` of its arena, ``sin``/``cos`` of its
kinematics), Python's interpreter, and the rest (NumPy, torch, the bindings, the
package's compiled loop). ``total - MuJoCo`` is the package's own work an env step
(with the policy and the learner). The child runs on one thread (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` and torch's set to 1), as
``benchmarks/physics.py`` does: an idle BLAS thread's spinning is counted by callgrind
and depends on timing.

Instructions are not time: the interpreter's run at a lower rate than MuJoCo's,
so a saving there is worth more time than its share of instructions. Read them
as a check that a change saves what it should, and that MuJoCo's count (the
physics of the same episodes) is unchanged; the timings are
``benchmarks/physics.py``'s, on quiet cores.

A revision is ``.`` (this working tree) or a git revision, checked out for the run in
a temporary ``git worktree`` that is removed afterwards. Each valgrind run takes
minutes (start-up and imports run about 50 times slower under callgrind).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List

from garage_promp.experiment.env_names import ENVS
from garage_promp.validation import IntRange, StrictCommand

from bench_io import write_results
import click

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Run in the revision's checkout (its own ``garage_promp``, its current directory first
#: on ``sys.path``): build the experiment, a start-up meta-batch, then ``n`` more; print
#: their env steps and where the package came from.
CHILD = '''
import json, sys
import torch
torch.set_num_threads(1)
import garage_promp
from garage_promp.experiment.builder import build_experiment
env, n, m, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
family, _, task = env.partition(':')
exp = build_experiment('ProMP', family, 1, task=task or None, meta_batch_size=m,
                       episodes_per_task=r, n_test_tasks=None, sampler='local', n_workers=1,
                       reward_function_version='v2' if task else None)
exp.algo.sample_meta_batch(0)
steps = 0
for itr in range(1, n + 1):
    steps += sum(int(b.episodes.lengths.sum()) for b in exp.algo.sample_meta_batch(itr))
exp.algo.sampler.shutdown_worker()
print(json.dumps(dict(steps=steps, package=garage_promp.__file__)))
'''

#: Where a function's instructions are counted, by the object file it is in.
GROUPS = (('mujoco', re.compile(r'libmujoco')), ('interpreter', re.compile(r'libpython')))
_MUJOCO = GROUPS[0][1]

#: The pseudo-function under which :func:`parse_annotate` counts the instructions of the
#: calls MuJoCo's functions make into other libraries (the C library's ``memset`` and
#: ``memcpy``, the maths library's ``sin`` and ``cos``): MuJoCo's work, though not in its
#: object file. :func:`by_group` moves them from the rest to MuJoCo.
MUJOCO_CALLS = "(MuJoCo's calls into other libraries) [libmujoco]"

_LINE = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$')
#: ``callgrind_annotate --tree=caller``: a function's line (its own instructions) and its
#: callers' lines (the instructions of their calls to it, callees included).
_SELF = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+\*\s+(.*)$')
_CALLER = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+<\s+(.*)$')
#: C++ runtime functions, which MuJoCo's library carries a copy of: callgrind puts a call
#: to ``operator delete`` in that copy or in the C++ library's from run to run (the same
#: symbol in both), so its calls (``free`` of the model compiler's objects) are not
#: counted as MuJoCo's; the engine's own calls (``memset`` of its arena, ``sin``) are.
_CXX_RUNTIME = re.compile(r'operator (new|delete)|std::')


def _count(text: str) -> int:
    return int(text.replace(',', ''))


def parse_annotate(text: str) -> Dict[str, int]:
    """``callgrind_annotate``'s function lines as ``{function [object file]: instructions}``
    (the program's total left out).

    With ``--tree=caller`` output, each function's own line is counted, and the calls that
    MuJoCo's functions make into functions of other libraries (their callers' lines, whose
    counts include everything the call ran) are summed under :data:`MUJOCO_CALLS`.
    """
    counts: Dict[str, int] = {}
    callers_in_mujoco = 0
    for line in text.splitlines():
        if 'PROGRAM TOTALS' in line:
            continue
        caller = _CALLER.match(line)
        if caller:  # a call into the function whose line ends this block
            if _MUJOCO.search(caller.group(2)) and not _CXX_RUNTIME.search(caller.group(2)):
                callers_in_mujoco += _count(caller.group(1))
            continue
        match = _SELF.match(line) or _LINE.match(line)
        if match:
            name = match.group(2).strip()
            counts[name] = counts.get(name, 0) + _count(match.group(1))
            if callers_in_mujoco and not _MUJOCO.search(name):
                counts[MUJOCO_CALLS] = counts.get(MUJOCO_CALLS, 0) + callers_in_mujoco
            callers_in_mujoco = 0
    return counts


def by_group(counts: Dict[str, int]) -> Dict[str, int]:
    """Instructions by :data:`GROUPS` (the first that names a function's object file), the
    rest under ``rest``, and all under ``total``; :data:`MUJOCO_CALLS` moved from the rest
    to MuJoCo (the functions it calls are in other libraries' object files)."""
    groups = {name: 0 for name, _ in GROUPS}
    groups['rest'] = 0
    for function, count in counts.items():
        if function == MUJOCO_CALLS:
            continue
        group = next((name for name, pattern in GROUPS if pattern.search(function)), 'rest')
        groups[group] += count
    groups['total'] = groups['mujoco'] + groups['interpreter'] + groups['rest']
    calls = counts.get(MUJOCO_CALLS, 0)
    groups['mujoco_own'] = groups['mujoco']  # its library's functions alone
    groups['mujoco'] += calls
    groups['rest'] -= calls
    return groups


def _tools() -> List[str]:
    missing = [tool for tool in ('valgrind', 'callgrind_annotate') if shutil.which(tool) is None]
    if missing:
        raise click.UsageError(f'{" and ".join(missing)} not found: install valgrind '
                               '(its callgrind tool counts the instructions)')
    return ['valgrind', '--tool=callgrind']


def callgrind(checkout: pathlib.Path, env: str, n: int, meta_batch_size: int,
              episodes: int, workdir: pathlib.Path):
    """(env steps, instructions by function) of :data:`CHILD` with ``n`` timed meta-batches
    in ``checkout``, under callgrind."""
    out = workdir / f'callgrind.{os.getpid()}.{n}.out'
    command = [*_tools(), f'--callgrind-out-file={out}', sys.executable, '-c', CHILD, env,
               str(n), str(meta_batch_size), str(episodes)]
    one_thread = dict.fromkeys(('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'),
                               '1')
    proc = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False,
                          env={**os.environ, **one_thread, 'PYTHONPATH': str(checkout)})
    if proc.returncode != 0:
        raise click.ClickException(f'{" ".join(command[:3])} ... in {checkout} failed '
                                   f'(exit {proc.returncode}): {proc.stderr[-2000:]}')
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    if not pathlib.Path(child['package']).resolve().is_relative_to(checkout.resolve()):
        raise click.ClickException(f'the run in {checkout} imported garage_promp from '
                                   f'{child["package"]}, not from that checkout')
    annotate = subprocess.run(['callgrind_annotate', '--threshold=100', '--tree=caller',
                               '--auto=no', str(out)],
                              capture_output=True, text=True, check=True)
    out.unlink()
    return child['steps'], parse_annotate(annotate.stdout)


def per_step(checkout, env, meta_batches, meta_batch_size, episodes, workdir,
             run=callgrind) -> Dict[str, float]:
    """Instructions an env step of ``meta_batches`` meta-batches, by group: the run with them
    less the run without, over their env steps."""
    _, before = run(checkout, env, 0, meta_batch_size, episodes, workdir)
    steps, after = run(checkout, env, meta_batches, meta_batch_size, episodes, workdir)
    names = set(before) | set(after)
    spent = by_group({name: after.get(name, 0) - before.get(name, 0) for name in names})
    row = {name: count / steps for name, count in spent.items()}
    row['own'] = row['total'] - row['mujoco']
    row['steps'] = steps
    return row


def _describe(rev: str) -> str:
    if rev == '.':
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'],
                               cwd=ROOT, capture_output=True, text=True, check=False).stdout
        head = _resolve('HEAD')
        return f'working tree ({head}{", modified" if dirty.strip() else ""})'
    return _resolve(rev)


def _resolve(rev: str) -> str:
    proc = subprocess.run(['git', 'rev-parse', '--short', '--verify', f'{rev}^{{commit}}'],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise click.BadParameter(f'{rev!r} is not a revision of {ROOT}', param_hint='--rev')
    return proc.stdout.strip()


def measure(revs, env, meta_batches, meta_batch_size, episodes, run=callgrind) -> List[dict]:
    """A row per revision (:func:`per_step`, with the revision's name and its ratios to the
    first's)."""
    names = [_describe(rev) for rev in revs]  # every revision checked before any run
    rows = []
    with tempfile.TemporaryDirectory(prefix='garage_promp-instructions-') as tmp:
        workdir = pathlib.Path(tmp)
        for rev, name in zip(revs, names):
            click.echo(f'counting {env} at {name}', err=True)
            checkout = ROOT if rev == '.' else workdir / f'rev-{len(rows)}'
            if rev != '.':
                subprocess.run(['git', 'worktree', 'add', '--detach', str(checkout),
                                name], cwd=ROOT, capture_output=True, check=True)
            try:
                row = per_step(checkout, env, meta_batches, meta_batch_size, episodes,
                               workdir, run)
            finally:
                if rev != '.':
                    subprocess.run(['git', 'worktree', 'remove', '--force', str(checkout)],
                                   cwd=ROOT, capture_output=True, check=False)
            rows.append(dict(env=env, revision=name, **row))
    for row in rows:
        row['own_ratio'] = row['own'] / rows[0]['own']
        row['total_ratio'] = row['total'] / rows[0]['total']
    return rows


def format_table(rows, meta_batch_size, episodes) -> str:
    lines = [f'Instructions an env step of an in-process ProMP meta-batch ({meta_batch_size} '
             f'tasks x {episodes} episodes, every sampling round and the learner\'s work), '
             'counted by callgrind; "own": all but MuJoCo\'s, each against the first row\'s; '
             '"MuJoCo\'s calls": of MuJoCo\'s, those of its calls into the C and maths libraries '
             '("-": counted in the rest, as the first counts did):',
             '', '| env | revision | env steps | MuJoCo | MuJoCo\'s calls | interpreter | rest | '
             'total | own | own / first | total / first |',
             '|---|---|---|---|---|---|---|---|---|---|---|']
    lines += [f'| {r["env"]} | {r["revision"]} | {r["steps"]} | {r["mujoco"]:,.0f} | '
              + (f'{r["mujoco"] - r["mujoco_own"]:,.0f}' if 'mujoco_own' in r else '-')
              + f' | {r["interpreter"]:,.0f} | {r["rest"]:,.0f} | {r["total"]:,.0f} | '
              f'{r["own"]:,.0f} | {r["own_ratio"]:.3f} | {r["total_ratio"]:.4f} |'
              for r in rows]
    return '\n'.join(lines)


@click.command(cls=StrictCommand)
@click.option('--rev', 'revs', multiple=True, default=('.',), show_default=True,
              help="A git revision, or '.' for this working tree; repeat to compare.")
@click.option('--env', type=click.Choice(sorted(ENVS)), default='HalfCheetahFwdBack',
              show_default=True)
@click.option('--meta-batches', type=IntRange(1, 100), default=1, show_default=True)
@click.option('--meta-batch-size', type=IntRange(1, 1000), default=20, show_default=True)
@click.option('--episodes', type=IntRange(1, 1000), default=10, show_default=True)
@click.option('--out', type=click.Path(file_okay=False), default=None,
              help='Write instructions.json and instructions.md here.')
def main(revs, env, meta_batches, meta_batch_size, episodes, out):
    """Print the instructions an env step of each revision in REVS."""
    _tools()
    rows = measure(revs, env, meta_batches, meta_batch_size, episodes)
    table = format_table(rows, meta_batch_size, episodes)
    click.echo(table)
    if out:
        write_results(out, 'instructions', rows, table, meta_batches=meta_batches,
                      meta_batch_size=meta_batch_size, episodes=episodes)


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
