"""Every launcher and benchmark refuses a bad option by name, before any work.

Each script's work (training, measuring, sampling, drawing) is replaced by a
sentinel that fails the test if it is reached; each bad input must give a
non-zero exit, a message naming the option, no traceback, and nothing
created in the (temporary) working and output directories. Errors that are
not about the command line (a directory that holds no run, a file that is not
the JSON expected) give one ``Error: ...`` line without usage text. Half-built
samplers, backends and envs are collected without "Exception ignored" noise.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import garage_promp.experiment.builder

import click
from click.testing import CliRunner
import pytest

from tests.helpers import load_script, with_options

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIG = '9' * 24  # absurdly large: overflows C integers, never ends a loop
FILE = '{tmp}/a_file'  # an existing file where a directory is expected

#: script -> (its work: module attributes replaced by the sentinel, base args that
#: reach the work).
SCRIPTS = {
    'launchers/train.py': (['meta_train', 'resume_run'], [
        '--env', 'PointEnvCorner', '--epochs', '1', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '4', '--n-test-tasks', '1',
        '--log-dir', '{tmp}/out']),
    'launchers/gradient_variance.py': (['gradient_variance'], [
        '--preset', 'short', '--env', 'PointEnvCorner', '--log-dir', '{tmp}/out']),
    'launchers/plot.py': (['plot_bands', 'group_runs'], ['{tmp}', '--out', '{tmp}/out.png']),
    'launchers/smoke.py': (['smoke'], []),
    'benchmarks/learning.py': (['run_all', 'summarize'], [
        '--env', 'PointEnvCorner', '--algo', 'ProMP', '--seeds', '1', '--steps', '100',
        '--out', '{tmp}/out']),
    'benchmarks/throughput.py': (['run_isolated', 'measure_worker_scaling'], [
        '--quick', '--out', '{tmp}/out']),
    'benchmarks/physics.py': (['measure'], ['--env', 'HalfCheetahFwdBack', '--out', '{tmp}/out']),
    'benchmarks/checks_cost.py': (['sampling_seconds'], [
        '--env', 'HalfCheetahFwdBack', '--out', '{tmp}/out']),
    'benchmarks/fig6.py': (['run', 'landscape'], ['--quick', '--out', '{tmp}/out']),
    'benchmarks/fig5_trajectories.py': (['trajectories', 'draw'], [
        '--run', 'A={tmp}', '--out', '{tmp}/out']),
    'benchmarks/garage_peer.py': (['garage_maml_trpo', 'resume_run'], [
        '--env', 'PointEnvCorner', '--epochs', '1', '--log-dir', '{tmp}/out']),
    'benchmarks/shared_forwards.py': ([], []),  # its work starts with build_experiment
}

# (the Arabic-Indic 12 and a digit group, both ints to Python's int())
BAD_COUNT = ['0', '-1', 'abc', '', BIG, '\u0661\u0662', '1_0', '8.0']
BAD_RATE = ['0', '-1', 'nan', 'inf', 'abc', '\u0661.\u0665']
DANGLING = '{tmp}/dangling'  # a symbolic link to nothing
BAD_OUT = ['/proc/x', FILE, '', FILE + '/sub', DANGLING]


def _cases():
    table = {
        'launchers/train.py': [
            *[('--seed', v) for v in ['-1', BIG, '2147483648']],
            *[(opt, v) for opt in ['--epochs', '--meta-batch-size', '--episodes-per-task',
                                   '--max-episode-length', '--n-workers', '--n-test-tasks']
              for v in BAD_COUNT],
            ('--max-env-steps', '0'), ('--max-env-steps', BIG), ('--envs-per-task', '0'),
            ('--evaluate-every', '0'), ('--n-workers', '100000'),
            *[('--worker-timeout', v) for v in BAD_RATE],
            *[('--hidden-sizes', v) for v in ['0', '64,,64', '64,', 'abc', '', BIG, '100000']],
            *[('--log-dir', v) for v in BAD_OUT],
            ('--set', 'clip_eps=-1'), ('--set', 'noequals'), ('--device', 'tpu'),
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
            ('--task', ['nope-v3', '--env', 'ML1']),
        ],
        'launchers/gradient_variance.py': [
            *[(opt, v) for opt in ['--epochs', '--meta-batch-size', '--episodes-per-task']
              for v in BAD_COUNT],
            ('--n-rounds', '1'), ('--seed', '-1'), ('--seed', BIG), ('--env', 'Nope'),
            *[('--log-dir', v) for v in BAD_OUT],
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
        ],
        'launchers/plot.py': [('--out', v) for v in ['/proc/x.png', '{tmp}', '']],
        'launchers/smoke.py': [*[('--epochs', v) for v in BAD_COUNT],
                               ('--seed', '-1'), ('--seed', BIG)],
        'benchmarks/learning.py': [
            *[(opt, v) for opt in ['--seeds', '--steps', '--parallel', '--meta-batch-size']
              for v in BAD_COUNT],
            *[('--time-limit', v) for v in BAD_RATE],
            ('--algo', 'Nope'), ('--env', 'Nope'), ('--env', 'ML1'),
            ('--set', 'noequals'), ('--set', 'bogus=1'), ('--set', 'clip_eps=-1'),
            *[('--out', v) for v in BAD_OUT],
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
        ],
        'benchmarks/throughput.py': [
            *[('--worker-counts', v) for v in ['1,,2', '1,', 'abc', '0', '', '-1', BIG]],
            *[(opt, v) for opt in ['--n-workers', '--iters', '--raw-steps'] for v in BAD_COUNT],
            ('--garage-iters', '-1'), ('--env', 'Nope'), ('--env', 'ML10:x'), ('--algo', 'Nope'),
            ('--memory-env', 'Nope'), *[('--out', v) for v in BAD_OUT],
            # ML10 / ML45 cannot sample a meta-batch of 2 (--quick's); repeated values.
            ('--env', 'ML10'), ('--env', 'ML45'), ('--worker-counts', '1,1'),
            ('--env', ['PointEnvCorner', '--env', 'PointEnvCorner']),
            *[('--time-limit', v) for v in BAD_RATE],
            ('--summarize', FILE), ('--summarize', '{tmp}/missing.json'),
        ],
        'benchmarks/physics.py': [
            *[(opt, v) for opt in ['--meta-batch-size', '--episodes-per-task', '--workers',
                                   '--repeats'] for v in BAD_COUNT],
            ('--physics-steps', '5'), ('--physics-steps', BIG), ('--env', 'Nope'),
            ('--env', 'PointEnvCorner'), ('--env', 'ML10'),
            *[('--out', v) for v in BAD_OUT],
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
        ],
        'benchmarks/checks_cost.py': [
            *[(opt, v) for opt in ['--meta-batch-size', '--episodes-per-task', '--repeats']
              for v in BAD_COUNT],
            ('--env', 'Nope'), *[('--out', v) for v in BAD_OUT],
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
        ],
        'benchmarks/fig6.py': [
            *[(opt, v) for opt in ['--iters', '--tasks-per-goal', '--episodes', '--grid',
                                   '--landscape-reps', '--threads'] for v in BAD_COUNT],
            *[(opt, v) for opt in ['--lr', '--inner-lr'] for v in BAD_RATE],
            ('--seed', '-1'), ('--seed', BIG), *[('--out', v) for v in BAD_OUT],
            ('--tasks-per-goal', '10000000'),
        ],
        'benchmarks/fig5_trajectories.py': [
            *[('--n-episodes', v) for v in BAD_COUNT], ('--seed', BIG), ('--max-episodes', '0'),
            *[('--limit', v) for v in BAD_RATE], ('--itr', '-1'), ('--itr', 'abc'),
            *[('--out', v) for v in BAD_OUT],
        ],
        'benchmarks/garage_peer.py': [
            *[(opt, v) for opt in ['--epochs', '--meta-batch-size', '--episodes-per-task']
              for v in BAD_COUNT],
            ('--seed', BIG), ('--env', 'Nope'), *[('--log-dir', v) for v in BAD_OUT],
            ('--meta-batch-size', ['100000', '--episodes-per-task', '100000']),
        ],
        'benchmarks/shared_forwards.py': [
            *[('--repeats', v) for v in BAD_COUNT], ('--algo', 'Nope'), ('--env', 'Nope')],
    }
    return [(script, option, value) for script, cases in table.items()
            for option, value in cases]


CASES = _cases()


class WorkStarted(Exception):
    """A script got past its checks to its work."""


def _sentinel(*args, **kwargs):
    raise WorkStarted()


@pytest.fixture(scope='module')
def scripts():
    return {path: load_script(ROOT / path, 'option_check_' + pathlib.Path(path).stem)
            for path in SCRIPTS}


def _invoke(scripts, monkeypatch, tmp_path, script, args):
    """Run ``script``'s command on ``args`` in tmp_path, its work replaced by the sentinel."""
    module = scripts[script]
    for name in SCRIPTS[script][0]:
        monkeypatch.setattr(module, name, _sentinel)
    if script == 'benchmarks/shared_forwards.py':
        monkeypatch.setattr(garage_promp.experiment.builder, 'build_experiment', _sentinel)
    monkeypatch.chdir(tmp_path)  # default outputs (data/...) land here
    return CliRunner().invoke(module.main, [a.format(tmp=tmp_path) for a in args])


def _listing(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob('*'))


@pytest.mark.parametrize('script', sorted(SCRIPTS))
def test_the_base_command_reaches_the_work(scripts, monkeypatch, tmp_path, script):
    """The cases below differ from a command that would start work by the bad option alone."""
    result = _invoke(scripts, monkeypatch, tmp_path, script, SCRIPTS[script][1])
    assert isinstance(result.exception, WorkStarted), result.output


@pytest.mark.parametrize('script, option, value', CASES,
                         ids=[f'{pathlib.Path(s).stem}{o}={v if isinstance(v, str) else v[0]}'
                              for s, o, v in CASES])
def test_a_bad_option_is_refused_by_name_before_any_work(scripts, monkeypatch, tmp_path,
                                                          script, option, value):
    (tmp_path / 'a_file').write_text('keep me')
    (tmp_path / 'dangling').symlink_to(tmp_path / 'missing')
    before = _listing(tmp_path)
    extra = [option, *value] if isinstance(value, list) else [option, value]
    result = _invoke(scripts, monkeypatch, tmp_path, script,
                     with_options(SCRIPTS[script][1], extra))
    assert not isinstance(result.exception, WorkStarted), f'work started: {result.output}'
    assert isinstance(result.exception, SystemExit), (
        f'traceback: {result.exception!r}\n{result.output}')
    assert result.exit_code == 2, result.output  # click's usage error
    assert option in result.output, result.output
    assert 'given twice' not in result.output, result.output  # refused for its value
    assert _listing(tmp_path) == before
    assert (tmp_path / 'a_file').read_text() == 'keep me'


def _single_option(command, base):
    """An option of ``command`` that takes one value (not ``multiple``), with a value it
    accepts: the base command's, else the option's default."""
    for param in command.params:
        if (isinstance(param, click.Option) and not param.multiple and not param.is_flag
                and not param.count):
            for flag in param.opts:
                if flag in base:
                    return flag, base[base.index(flag) + 1]
    for param in command.params:
        if (isinstance(param, click.Option) and not param.multiple and not param.is_flag
                and not param.count and param.default not in (None, '')
                and not callable(param.default)):
            return param.opts[0], str(param.default)
    return None


@pytest.mark.parametrize('script', sorted(SCRIPTS))
def test_an_option_given_twice_is_refused_before_any_work(scripts, monkeypatch, tmp_path,
                                                          script):
    """click keeps the last of a repeated option silently (``--seed 1 --seed 2`` runs seed 2);
    every script refuses it instead, naming it, before any work."""
    base = SCRIPTS[script][1]
    option, value = _single_option(scripts[script].main, base)
    before = _listing(tmp_path)
    copies = 1 if option in base else 2  # the base command's own, or two here
    for once in ([option, value], [f'{option}={value}']):
        result = _invoke(scripts, monkeypatch, tmp_path, script, [*base, *once * copies])
        assert not isinstance(result.exception, WorkStarted), f'work started: {result.output}'
        assert result.exit_code == 2 and f'{option} is given twice' in result.output, \
            result.output
    assert _listing(tmp_path) == before


@pytest.mark.parametrize('script, extra', [
    ('benchmarks/physics.py', ['--env', 'HopperRandParams', '--env', 'HopperRandParams']),
    ('benchmarks/learning.py', ['--algo', 'ProMP', '--algo', 'ProMP']),
    ('launchers/plot.py', ['--key', 'post', '--key', 'post']),
    ('launchers/train.py', ['--set', 'inner_lr=0.1', '--set', 'inner_lr=0.1']),
    ('benchmarks/checks_cost.py', ['--env', 'HopperRandParams', '--env', 'HopperRandParams'])],
    ids=lambda v: v if isinstance(v, str) else v[0])
def test_a_value_given_twice_to_a_repeatable_option_is_refused(scripts, monkeypatch, tmp_path,
                                                              script, extra):
    """``--env X --env X`` would measure X twice (``--seeds 2 --seeds 2`` run seed 2 twice):
    refused naming the option and the value, before any work."""
    result = _invoke(scripts, monkeypatch, tmp_path, script,
                     with_options(SCRIPTS[script][1], extra))
    assert not isinstance(result.exception, WorkStarted), f'work started: {result.output}'
    assert result.exit_code == 2, result.output
    assert f'{extra[0]} {extra[1]} is given twice' in result.output, result.output


def test_a_subcommands_option_given_twice_is_refused(tmp_path):
    paper = load_script(ROOT / 'benchmarks' / 'paper.py', 'option_check_paper_twice')
    result = CliRunner().invoke(paper.cli, ['status', '--results-dir', str(tmp_path / 'a'),
                                            '--results-dir', str(tmp_path / 'b')])
    assert result.exit_code == 2 and '--results-dir is given twice' in result.output, \
        result.output
    assert list(tmp_path.iterdir()) == []


def test_case_count():
    assert len(CASES) >= 200 and {s for s, _, _ in CASES} == set(SCRIPTS)


#: Errors that are not about the command line: (script, args, what the one line says).
NOT_COMMAND_LINE = [
    ('launchers/train.py', ['--resume', '{tmp}/empty'], '--resume'),
    ('benchmarks/garage_peer.py', ['--resume', '{tmp}/empty', '--epochs', '2'], '--resume'),
    ('launchers/plot.py', ['{tmp}/empty', '--out', '{tmp}/out.png'], 'RUN_DIRS'),
    ('benchmarks/fig5_trajectories.py', ['--from-json', '{tmp}/a_file', '--out', '{tmp}/out'],
     '--from-json'),
]


@pytest.mark.parametrize('script, args, subject', NOT_COMMAND_LINE,
                         ids=[f'{pathlib.Path(s).stem}-{a[0]}' for s, a, _ in NOT_COMMAND_LINE])
def test_an_error_not_about_the_command_line_is_one_line(scripts, monkeypatch, tmp_path,
                                                         script, args, subject):
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'a_file').write_text('not json')
    before = _listing(tmp_path)
    module = scripts[script]
    for name in SCRIPTS[script][0]:
        if name not in ('resume_run', 'group_runs'):  # these are what refuses here
            monkeypatch.setattr(module, name, _sentinel)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(module.main, [a.format(tmp=tmp_path) for a in args])
    assert isinstance(result.exception, SystemExit), (
        f'traceback: {result.exception!r}\n{result.output}')
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith(f'Error: {subject}'), result.output
    assert 'Usage:' not in result.output
    assert _listing(tmp_path) == before  # no lock file in a directory that holds no run


def _run(args, tmp_path):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_as_a_process_a_bad_option_gives_usage_and_no_traceback(tmp_path):
    proc = _run([str(ROOT / 'benchmarks' / 'throughput.py'), '--mode', 'workers',
                 '--worker-counts', '1,,2', '--out', str(tmp_path / 'out')], tmp_path)
    assert proc.returncode == 2
    assert 'Usage:' in proc.stderr and "Invalid value for '--worker-counts'" in proc.stderr
    assert 'Traceback' not in proc.stderr and not (tmp_path / 'out').exists()


def test_as_a_process_a_directory_without_a_run_is_one_error_line(tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    proc = _run([str(ROOT / 'launchers' / 'train.py'), '--resume', str(empty)], tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"Error: --resume: {str(empty)!r} holds no snapshot (params.pkl or itr_N.pkl): it is "
        'not a run directory'], proc.stderr
    assert list(empty.iterdir()) == []  # no .lock left behind


#: Half-built objects: constructors that raise part-way; then a pool left running
#: at exit. Their destructors (and the exit hooks) must print nothing.
HALF_BUILT = textwrap.dedent('''
    import gc
    import garage_promp
    from garage_promp.envs import HalfCheetahFwdBackEnv, PointEnvCorner
    from garage_promp.envs.gymnasium_env import GymnasiumEnv
    from garage_promp.experiment.builder import build_experiment
    from garage_promp.sampler.backends import InProcessBackend, ProcessPoolBackend
    from garage_promp.sampler.meta_sampler import MetaSampler
    from garage.envs import PointEnv
    from garage.torch.policies import GaussianMLPPolicy

    env = PointEnv(max_episode_length=5)
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
    attempts = [
        lambda: MetaSampler(policy, env, kind='bogus'),
        lambda: MetaSampler(policy, env, n_workers=0),
        lambda: MetaSampler(policy, env, worker_timeout=float('nan')),
        lambda: MetaSampler(policy, PointEnv()),  # no finite horizon
        lambda: MetaSampler(None, None),
        lambda: ProcessPoolBackend({}, 'x'),
        lambda: ProcessPoolBackend({'x': (i for i in [])}, 1),  # unpicklable
        lambda: InProcessBackend({'bogus': 1}, 1),
        lambda: GymnasiumEnv(None),
        lambda: PointEnvCorner(max_episode_length=0),
        lambda: HalfCheetahFwdBackEnv(bogus=1),
        lambda: build_experiment('ProMP', 'PointEnvCorner', 1, sampler='multiprocessing',
                                 n_workers=2, overrides={'clip_eps': -1.}),
        lambda: build_experiment('ProMP', 'PointEnvCorner', 1, device='tpu'),
    ]
    for attempt in attempts:
        try:
            attempt()
        except Exception:  # every one is refused
            pass
        else:
            raise SystemExit(f'accepted: {attempt}')
        gc.collect()
    # A half-used sampler: its pool started, never shut down; collected at exit.
    sampler = MetaSampler(policy, env, kind='multiprocessing', n_workers=1)
    sampler.start_worker()
    print('done', flush=True)
''')


def test_half_built_objects_are_collected_quietly(tmp_path):
    script = tmp_path / 'half_built.py'
    script.write_text(HALF_BUILT)
    proc = _run([str(script)], tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == 'done', proc.stdout + proc.stderr
    assert 'Exception ignored' not in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr, proc.stderr


def test_run_command_ends_a_launcher_as_click_would_but_ctrl_c_with_130(capsys, monkeypatch):
    """Ctrl-C: one ``Interrupted`` line and status 130 (click alone: "Aborted!", status 1,
    the status of an error); usage errors, ``Error:`` lines, ``--help``, an end of input
    and a return are click's own."""
    from garage_promp.validation import INTERRUPTED_STATUS, run_command

    import click

    @click.command()
    @click.option('--what', type=click.Choice(['ok', 'rows', 'one', 'ctrl-c', 'eof', 'error']))
    def command(what):
        if what == 'ctrl-c':
            raise KeyboardInterrupt
        if what == 'eof':  # what click.prompt meets at the end of its input
            raise EOFError
        if what == 'error':
            raise click.ClickException('a damaged run')
        return {'rows': [1, 2], 'one': 1}.get(what)  # a return is not an exit status

    assert INTERRUPTED_STATUS == 130
    for args, code, out, err in (
            (['--what', 'ok'], 0, '', ''), (['--what', 'rows'], 0, '', ''),
            (['--what', 'one'], 0, '', ''),
            (['--what', 'ctrl-c'], 130, '', 'Interrupted: the snapshot is kept'),
            (['--what', 'eof'], 1, '', 'Aborted!'),
            (['--what', 'error'], 1, '', 'Error: a damaged run'),
            (['--what', 'nope'], 2, '', "Invalid value for '--what'"),
            (['--help'], 0, 'launcher [OPTIONS]', '')):
        monkeypatch.setattr(sys, 'argv', ['launcher', *args])
        with pytest.raises(SystemExit) as exited:
            run_command(command, 'the snapshot is kept')
        assert exited.value.code == code, args
        captured = capsys.readouterr()
        assert out in captured.out and err in captured.err, (args, captured)
        assert ('Interrupted' in captured.err) == (code == 130), (args, captured.err)
        assert 'Aborted' not in captured.err or args == ['--what', 'eof']
        assert 'Traceback' not in captured.err
