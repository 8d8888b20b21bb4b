"""Plant one small bug at a time in a module and see whether its tests notice.

Every test must be able to fail; a change to the code that no test notices is either
equivalent (the same behaviour: say why) or a gap in the tests. This probe makes the
changes mechanically from the module's syntax tree, one per copy of the repository,
and runs the given tests (``pytest -x``) against each:

* a comparison flipped at its boundary or negated (``<`` and ``<=``, ``==`` and ``!=``,
  ``is`` and ``is not``, ``in`` and ``not in``);
* an arithmetic operator swapped (``+`` and ``-``, ``*`` and ``/``, ``//`` to ``/``,
  ``**`` to ``*``), ``and`` and ``or`` swapped, ``not x`` made ``+x``;
* a number changed (0 to 1, an integer n to n + 1, a float doubled), ``True`` and
  ``False`` swapped;
* a returned value replaced by ``None``.

Usage (from the repository root; each mutant's tests run in a copy, so the working
tree is never changed)::

    python scripts/mutation_probe.py garage_promp/baselines.py \\
        --tests "tests/test_baselines.py tests/test_api_inputs.py" --jobs 2

Each mutant is printed as ``killed``, ``SURVIVED`` or ``timed out`` with its line,
column and change, then the survivors again; ``--only`` reruns named ones (as printed,
after the file name), ``--lines A-B`` restricts the changes to those lines. The exit
status is 0 whatever survives: the survivors are for a person to read.
"""
import ast
import copy
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading

import click

#: Each operator and the one it becomes.
SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
         ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
         ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Add: ast.Sub, ast.Sub: ast.Add,
         ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div, ast.Pow: ast.Mult,
         ast.And: ast.Or, ast.Or: ast.And}

#: What a copy of the repository leaves out.
IGNORED = shutil.ignore_patterns('.git', '.venv', '__pycache__', '*.egg-info', 'build',
                                 '.pytest_cache', '.ruff_cache')


def _docstring_nodes(tree):
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            nodes.add(id(node.body[0].value))
    return nodes


def _changed_number(value):
    if isinstance(value, bool):
        return not value
    if value == 0:
        return 1 if isinstance(value, int) else 1.
    return value + 1 if isinstance(value, int) else value * 2


def mutants(source: str, lines=None):
    """``(description, mutated source)`` of every change the probe makes to ``source``."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    sites = []
    for index, node in enumerate(ast.walk(tree)):
        line = getattr(node, 'lineno', None)
        if line is None or (lines and not lines[0] <= line <= lines[1]):
            continue
        if isinstance(node, ast.Compare):
            sites += [(index, k) for k, op in enumerate(node.ops) if type(op) in SWAPS]
        elif isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)) and type(node.op) in SWAPS:
            sites.append((index, 0))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            sites.append((index, 0))
        elif isinstance(node, ast.Constant) and id(node) not in docstrings and \
                isinstance(node.value, (bool, int, float)):
            sites.append((index, 0))
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            sites.append((index, 0))
    for index, k in sites:
        mutated = copy.deepcopy(tree)
        node = list(ast.walk(mutated))[index]
        where = f'{node.lineno}:{node.col_offset}'
        if isinstance(node, ast.Compare):
            old = node.ops[k]
            node.ops[k] = SWAPS[type(old)]()
            change = f'{type(old).__name__} -> {type(node.ops[k]).__name__}'
        elif isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)):
            old = node.op
            node.op = SWAPS[type(old)]()
            change = f'{type(old).__name__} -> {type(node.op).__name__}'
        elif isinstance(node, ast.UnaryOp):
            node.op = ast.UAdd()
            change = 'not x -> +x'
        elif isinstance(node, ast.Constant):
            old = node.value
            node.value = _changed_number(old)
            change = f'{old!r} -> {node.value!r}'
        else:
            node.value = ast.Constant(None)
            change = 'return None'
        yield f'{where}: {change}', ast.unparse(ast.fix_missing_locations(mutated))


def _run(copy_root: pathlib.Path, path: str, source: str, tests: str, timeout: float) -> str:
    target = copy_root / path
    original = target.read_text()
    target.write_text(source)
    try:
        done = subprocess.run(
            [sys.executable, '-m', 'pytest', '-q', '-x', '-p', 'no:cacheprovider',
             *tests.split()], cwd=copy_root, capture_output=True, timeout=timeout, check=False,
            env=dict(os.environ, PYTHONPATH=str(copy_root)))
        return 'SURVIVED' if done.returncode == 0 else 'killed'
    except subprocess.TimeoutExpired:
        return 'timed out'
    finally:
        target.write_text(original)


@click.command(help=__doc__.split('\n')[0])
@click.argument('path')
@click.option('--tests', required=True, help='pytest arguments, space-separated')
@click.option('--root', default='.', show_default=True,
              type=click.Path(exists=True, file_okay=False), help='the repository')
@click.option('--jobs', default=1, show_default=True, type=click.IntRange(1),
              help='copies run side by side')
@click.option('--timeout', default=600., show_default=True, type=click.FloatRange(0, min_open=True),
              help='seconds a mutant may run')
@click.option('--lines', default=None, help='A-B: only changes on these lines')
@click.option('--only', multiple=True,
              help='a mutant as printed (e.g. "12:8: Lt -> LtE"); repeatable')
def main(path, tests, root, jobs, timeout, lines, only):
    root = pathlib.Path(root).resolve()
    if not (root / path).is_file():
        raise click.BadParameter(f'no such file under {root}', param_hint='PATH')
    bounds = None
    if lines:
        parts = lines.split('-')
        if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
            raise click.BadParameter(f'{lines!r} is not A-B', param_hint='--lines')
        bounds = (int(parts[0]), int(parts[1]))
    todo = [m for m in mutants((root / path).read_text(), bounds) if not only or m[0] in only]
    print(f'{path}: {len(todo)} mutants', flush=True)
    jobs_left = queue.Queue()
    for item in todo:
        jobs_left.put(item)
    survivors, lock = [], threading.Lock()
    with tempfile.TemporaryDirectory(prefix='mutation_probe_') as scratch:

        def work(copy_root):
            shutil.copytree(root, copy_root, ignore=IGNORED, symlinks=True)
            while True:
                try:
                    name, source = jobs_left.get_nowait()
                except queue.Empty:
                    return
                verdict = _run(copy_root, path, source, tests, timeout)
                with lock:
                    print(f'{verdict} {name}', flush=True)
                    if verdict != 'killed':
                        line, column = name.split(':')[:2]
                        survivors.append((int(line), int(column), f'{verdict} {name}'))

        threads = [threading.Thread(target=work, args=(pathlib.Path(scratch) / f'copy{j}', ))
                   for j in range(jobs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print(f'not killed: {len(survivors)} of {len(todo)}')
    for *_, text in sorted(survivors):
        print(f'  {text}')


if __name__ == '__main__':
    main()  # pylint: disable=no-value-for-parameter
