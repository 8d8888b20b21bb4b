"""The documentation is tested: every command and code block of README.md and docs/.

Every fenced ``bash``, ``sh`` or ``python`` block carries a marker on the line
right above its opening fence, so that no block goes unchecked by accident:

- ``<!-- doc-test: run -->``: executed, page by page in page order in one
  scratch directory per page, with tiny settings (:data:`TINY` options in place of
  the launcher commands' own, :data:`SHRINK` applied to Python keyword arguments);
- ``<!-- doc-test: check -->``: every ``python <script>`` command's options are
  parsed by the script's own click command (a renamed option or a wrong choice
  fails), Python blocks are compiled;
- ``<!-- doc-test: skip: <reason> -->``: neither (installers, servers, signals);
- ``<!-- ci: install-and-run -->`` and ``<!-- ci: test -->``: the two commands
  ``.ci/run`` executes; the first is checked like a check block.
"""
import copy
import dataclasses
import importlib.util
import os
import pathlib
import re
import shlex
import subprocess
import sys
from typing import List

import click
import pytest

from tests.helpers import with_options

ROOT = pathlib.Path(__file__).parents[1]
PAGES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
LANGUAGES = ('bash', 'sh', 'python')
MARKER = re.compile(r'<!-- (doc-test: (run|check|skip: \S.*)|ci: (install-and-run|test)) -->$')

#: Options that replace a run block's own in its launcher commands (or are appended).
TINY = {
    'launchers/train.py': ['--epochs', '1', '--meta-batch-size', '2', '--episodes-per-task', '1',
                           '--max-episode-length', '10', '--n-test-tasks', '1',
                           '--hidden-sizes', '8,8'],
    'launchers/meta_test.py': ['--n-test-tasks', '1', '--n-exploration-eps', '1',
                               '--n-test-episodes', '1', '--max-episode-length', '10'],
    'launchers/plot.py': [],
}
#: Keyword arguments of a run block's Python, shrunk the same way.
SHRINK = [(re.compile(r'\b(n_epochs|n_test_tasks|episodes_per_task)=\d+'), r'\1=1'),
          (re.compile(r'\bmeta_batch_size=\d+'), 'meta_batch_size=2'),
          (re.compile(r'\bhidden_sizes=\([\d, ]+\)'), 'hidden_sizes=(8, 8)')]


@dataclasses.dataclass
class Block:
    page: pathlib.Path
    line: int
    language: str
    marker: str
    text: str

    @property
    def kind(self) -> str:
        if self.marker.startswith('<!-- ci: install-and-run'):
            return 'check'
        if self.marker.startswith('<!-- ci: test'):
            return 'skip'
        return MARKER.match(self.marker).group(2).split(':')[0]

    def __str__(self):
        return f'{self.page.relative_to(ROOT)}:{self.line}'


def blocks_of(page: pathlib.Path) -> List[Block]:
    lines = page.read_text().split('\n')
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r'^```(\S*)', lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith('```'))
        if fence.group(1) in LANGUAGES:
            marker = lines[i - 1].strip() if i else ''
            found.append(Block(page, i + 1, fence.group(1), marker,
                               '\n'.join(lines[i + 1:end])))
        i = end + 1
    return found


BLOCKS = [b for page in PAGES for b in blocks_of(page)]


def commands(text: str) -> List[List[str]]:
    """The block's commands as argument lists (continuations joined, comments and
    ``&&`` chains split)."""
    result = []
    for line in text.replace('\\\n', ' ').split('\n'):
        words = shlex.split(line, comments=True)
        while words:
            if '&&' in words:
                cut = words.index('&&')
                result.append(words[:cut])
                words = words[cut + 1:]
            else:
                result.append(words)
                words = []
    return result


def _is_python(word: str) -> bool:
    return re.fullmatch(r'(\S*/)?python(3(\.\d+)?)?', word) is not None


def click_command(script: str) -> click.Command:
    path = ROOT / script
    spec = importlib.util.spec_from_file_location(
        f'doc_test_{path.stem}', path, submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    found = [v for v in vars(module).values()
             if isinstance(v, click.Command) and getattr(v, 'callback', None) is not None
             and v.callback.__module__ == module.__name__]
    groups = [c for c in found if isinstance(c, click.Group)]
    found = groups or found
    assert len(found) == 1, f'{script}: no single click command ({found})'
    return found[0]


def _paths_need_not_exist(command: click.Command) -> click.Command:
    """A copy of ``command`` whose path parameters accept paths that do not exist
    (a documented run directory is made by an earlier command)."""
    command = copy.deepcopy(command)
    for param in command.params:
        if isinstance(param.type, click.Path):
            param.type.exists = False
    return command


def parse_options(script: str, args: List[str]):
    """Parse ``args`` as ``script``'s click command would, without running it."""
    command = _paths_need_not_exist(click_command(script))
    ctx = command.make_context(script, list(args))
    if isinstance(command, click.Group):
        rest = list(getattr(ctx, '_protected_args', [])) + list(ctx.args)
        if not rest and command.invoke_without_command:
            return
        name, sub, rest = command.resolve_command(ctx, rest)
        _paths_need_not_exist(sub).make_context(name, rest, parent=ctx)


def check_command(block: Block, words: List[str]):
    if _is_python(words[0]):
        if words[1] == '-m':
            return
        script = words[1]
        assert (ROOT / script).is_file(), f'{block}: no such script {script}'
        try:
            parse_options(script, words[2:])
        except click.ClickException as error:
            pytest.fail(f'{block}: {shlex.join(words)}\n{error.format_message()}')
    elif words[0] == 'bash':
        assert (ROOT / words[1]).is_file(), f'{block}: no such script {words[1]}'
    else:
        pytest.fail(f'{block}: {words[0]!r} is neither python nor bash: mark the block '
                    'skip with a reason, or write the command with python')


def test_every_block_is_marked():
    assert len(BLOCKS) >= 15
    unmarked = [f'{b} ({b.marker!r})' for b in BLOCKS if not MARKER.match(b.marker)]
    assert not unmarked, ('blocks without a doc-test marker on the line above the fence: '
                          f'{unmarked}')
    kinds = {b.kind for b in BLOCKS}
    assert {'run', 'check', 'skip'} <= kinds


def test_the_marker_rule_catches_an_unmarked_block(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('text\n\n```bash\npython launchers/train.py\n```\n'
                    '<!-- doc-test: run -->\n```python\nx = 1\n```\n')
    found = blocks_of(page)
    assert [bool(MARKER.match(b.marker)) for b in found] == [False, True]


@pytest.mark.parametrize('block', [b for b in BLOCKS if b.kind in ('run', 'check')], ids=str)
def test_block_options_parse_and_code_compiles(block):
    if block.language == 'python':
        compile(block.text, str(block), 'exec')
        return
    for words in commands(block.text):
        check_command(block, words)


def test_the_option_check_catches_a_stale_option():
    block = Block(ROOT / 'README.md', 0, 'bash', '<!-- doc-test: check -->', '')
    with pytest.raises(pytest.fail.Exception, match='no-such-option'):
        check_command(block, ['python', 'launchers/train.py', '--no-such-option', '1'])
    with pytest.raises(pytest.fail.Exception, match='Invalid value'):
        check_command(block, ['python', 'benchmarks/paper.py', 'run', 'fig99'])
    check_command(block, ['python', 'benchmarks/paper.py', 'status', 'fig2'])


def shrink(code: str) -> str:
    for pattern, replacement in SHRINK:
        code = pattern.sub(replacement, code)
    return code


def _run(words: List[str], cwd: pathlib.Path, block: Block):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND='Agg')
    result = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, (f'{block}: {shlex.join(words)} exited {result.returncode}\n'
                                    f'{result.stdout[-2000:]}\n{result.stderr[-3000:]}')


def run_block(block: Block, scratch: pathlib.Path):
    if block.language == 'python':
        _run([sys.executable, '-c', shrink(block.text)], scratch, block)
        return
    for words in commands(block.text):
        assert _is_python(words[0]) and words[1] in TINY, (
            f'{block}: a run block runs the launchers {sorted(TINY)} only; '
            f'mark {shlex.join(words)!r} check or skip')
        expanded = []
        for word in words[2:]:
            matches = sorted(scratch.glob(word)) if any(c in word for c in '*?[') else None
            expanded += [str(m.relative_to(scratch)) for m in matches] if matches else [word]
        _run([sys.executable, words[1], *with_options(expanded, TINY[words[1]])], scratch, block)


@pytest.mark.slow
@pytest.mark.mujoco
@pytest.mark.parametrize('page', [p for p in PAGES
                                  if any(b.kind == 'run' for b in blocks_of(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_run_blocks_run(page, tmp_path):
    for name in ('launchers', 'benchmarks', 'scripts'):
        (tmp_path / name).symlink_to(ROOT / name)
    for block in blocks_of(page):
        if block.kind == 'run':
            run_block(block, tmp_path)
