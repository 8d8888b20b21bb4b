"""``scripts/mutation_probe.py``: each planted change is run against the tests in a copy
of the repository, and the ones no test notices are named."""
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / 'scripts' / 'mutation_probe.py'


def _toy(tmp_path, test_body):
    (tmp_path / 'calc.py').write_text('def scale(x, factor=1):\n    return x * factor\n')
    (tmp_path / 'tests_toy').mkdir()
    (tmp_path / 'tests_toy' / 'test_calc.py').write_text(
        f'from calc import scale\n\n\ndef test_scale():\n    {test_body}\n')
    return tmp_path


def _probe(root, *extra):
    done = subprocess.run([sys.executable, str(SCRIPT), 'calc.py', '--tests',
                           'tests_toy/test_calc.py', '--root', str(root), *extra],
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


@pytest.mark.parametrize('jobs', ['1', '2'])
def test_an_untested_default_survives_and_the_tested_changes_are_killed(tmp_path, jobs):
    out = _probe(_toy(tmp_path, 'assert scale(3, 2) == 6'), '--jobs', jobs)
    assert 'calc.py: 3 mutants' in out
    assert 'killed 2:11: Mult -> Div' in out and 'killed 2:4: return None' in out
    assert out.rstrip().endswith('not killed: 1 of 3\n  SURVIVED 1:20: 1 -> 2')
    assert (tmp_path / 'calc.py').read_text().endswith('return x * factor\n')  # untouched


def test_a_test_of_the_default_kills_it_and_only_reruns_the_named(tmp_path):
    out = _probe(_toy(tmp_path, 'assert scale(3, 2) == 6 and scale(3) == 3'),
                 '--only', '1:20: 1 -> 2')
    assert 'calc.py: 1 mutants' in out and 'killed 1:20: 1 -> 2' in out
    assert 'not killed: 0 of 1' in out


def test_a_mutant_that_hangs_is_named_as_timed_out(tmp_path):
    root = _toy(tmp_path, 'assert scale(3, 2) == 6')
    (root / 'calc.py').write_text('def scale(x, factor=1):\n'
                                  '    while factor > 1 and False:\n'
                                  '        pass\n'
                                  '    return x * factor\n')
    out = _probe(root, '--only', '2:25: False -> True', '--timeout', '10')
    assert 'timed out 2:25: False -> True' in out and 'not killed: 1 of 1' in out
