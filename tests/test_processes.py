"""Whole programs: the README snippet with every sampler kind, meta_test.py on a
worker-pool run, and Ctrl-C; no worker process may survive any of them."""
import os
import pathlib
import pickle
import re
import signal
import subprocess
import sys
import time
import uuid

import cloudpickle
import psutil
import pytest

ROOT = pathlib.Path(__file__).parents[1]


def _tagged_env():
    tag = uuid.uuid4().hex
    env = dict(os.environ, GARAGE_PROMP_TEST_TAG=tag, PYTHONPATH=str(ROOT))
    return env, tag


def _tagged_processes(tag):
    """Live processes (workers inherit the environment) carrying ``tag``."""
    found = []
    for proc in psutil.process_iter(['pid']):
        try:
            if proc.environ().get('GARAGE_PROMP_TEST_TAG') == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


def _assert_none_left(tag, timeout=10.):
    deadline = time.time() + timeout
    while _tagged_processes(tag) and time.time() < deadline:
        time.sleep(0.2)
    left = _tagged_processes(tag)
    assert not left, [p.cmdline() for p in left]


def _kill_if_running(proc):
    """Kill and reap ``proc`` if a test left it running (a failed assertion, a timeout)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _readme_snippet():
    text = (ROOT / 'README.md').read_text()
    block = re.search(r'```python\n(import garage_promp.*?)```', text, re.S)
    return block.group(1)


@pytest.mark.parametrize('kind', [
    'local', 'multiprocessing',
    pytest.param('ray', marks=[pytest.mark.ray, pytest.mark.slow])
])
def test_readme_snippet_runs_with_every_sampler_kind(tmp_path, kind):
    code = _readme_snippet()
    assert code.rstrip().endswith('promp_half_cheetah()')
    code = code.rstrip()[:-len('promp_half_cheetah()')] + (
        f'promp_half_cheetah(kind={kind!r}, n_workers=2, n_epochs=1, '
        'meta_batch_size=2, episodes_per_task=1)\n')
    script = tmp_path / 'snippet.py'
    script.write_text(code)
    env, tag = _tagged_env()
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                            env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / 'data' / 'local' / 'experiment').iterdir())
    _assert_none_left(tag)


def _train(tmp_path, *args, output=None, **kwargs):
    """Start a tiny training run; its output goes to a pipe, or to the file ``output``
    (for long runs: nobody reads the pipe while they train, and a full pipe would
    block the run's next write)."""
    env, tag = _tagged_env()
    log_dir = tmp_path / 'run'
    command = [
        sys.executable, str(ROOT / 'launchers' / 'train.py'), '--algo',
        'ProMP', '--env', 'PointEnvCorner', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', '5',
        '--hidden-sizes', '4', '--n-test-tasks', '1', '--log-dir',
        str(log_dir), '--sampler', 'multiprocessing', '--n-workers', '2',
        *args
    ]
    stdout = open(output, 'w') if output else subprocess.PIPE  # noqa: SIM115
    return subprocess.Popen(command, env=env, stdout=stdout,
                            stderr=subprocess.STDOUT, text=True,
                            **kwargs), log_dir, tag


def test_meta_test_on_a_worker_pool_run_starts_no_worker(tmp_path):
    proc, log_dir, tag = _train(tmp_path, '--epochs', '1')
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    _assert_none_left(tag)
    env, tag = _tagged_env()
    meta_test = subprocess.Popen(
        [sys.executable, str(ROOT / 'launchers' / 'meta_test.py'),
         str(log_dir), '--n-test-tasks', '2'], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    children = set()
    while meta_test.poll() is None:
        try:
            children.update(' '.join(p.cmdline()) for p in psutil.Process(
                meta_test.pid).children(recursive=True))
        except psutil.Error:
            pass
        time.sleep(0.05)
    out = meta_test.stdout.read()
    assert meta_test.returncode == 0, out[-3000:]
    workers = [c for c in children
               if '_worker_entry' in c or 'ray' in c.split('/')[-1]]
    assert not workers, workers
    assert (log_dir / 'meta_test.csv').exists()


@pytest.mark.parametrize('how', ['SIGKILL', 'SIGSTOP'])
def test_meta_test_ends_with_one_error_line_when_a_worker_dies_or_stops(tmp_path, how):
    """meta_test.py's worker pool: a worker killed, or stopped past ``--worker-timeout``,
    ends the meta-test with one ``Error:`` line naming it (exit 1, no traceback, no
    hang) and no process left, as in training."""
    proc, log_dir, _ = _train(tmp_path, '--epochs', '1')
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    env, tag = _tagged_env()
    meta_test = subprocess.Popen(
        [sys.executable, str(ROOT / 'launchers' / 'meta_test.py'), str(log_dir),
         '--n-test-tasks', '2000', '--n-test-episodes', '50', '--sampler', 'multiprocessing',
         '--n-workers', '2', '--worker-timeout', '2', '--csv', str(tmp_path / 'mt.csv')],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker, deadline = None, time.time() + 120
    while worker is None and meta_test.poll() is None and time.time() < deadline:
        try:
            workers = [p for p in psutil.Process(meta_test.pid).children(recursive=True)
                       if '_worker_entry' in ' '.join(p.cmdline())]
        except psutil.Error:
            workers = []
        worker = workers[0] if workers else None
        time.sleep(0.05)
    assert worker is not None, 'no worker started'
    # Past its start-up (its imports), which gets at least 120 s however short the
    # timeout; a stop that lands inside it still ends the meta-test, later.
    time.sleep(8.)
    assert meta_test.poll() is None, 'the meta-test ended before the worker was signalled'
    worker.send_signal(getattr(signal, how))
    try:
        out, err = meta_test.communicate(timeout=300)
    finally:
        if meta_test.poll() is None:
            meta_test.kill()
            meta_test.communicate()  # reaped: no zombie for later tests to count
        if how == 'SIGSTOP':
            try:
                worker.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
    assert meta_test.returncode == 1, out[-2000:] + err[-2000:]
    assert 'Traceback' not in err and err.count('Error:') == 1, err[-3000:]
    assert ('died' if how == 'SIGKILL' else 'made no progress') in err, err[-3000:]
    assert not (tmp_path / 'mt.csv').exists()
    _assert_none_left(tag)


def test_a_second_ctrl_c_while_the_workers_close_is_not_printed():
    """``MetaSampler.__del__`` closes the workers once more when a Ctrl-C interrupts their
    closing, and lets nothing out (Python would print it as an ignored exception)."""
    from garage_promp.sampler.meta_sampler import MetaSampler  # pylint: disable=import-outside-toplevel

    class Closing(MetaSampler):
        def __init__(self, interrupted):  # pylint: disable=super-init-not-called
            self.calls, self.interrupted = 0, interrupted

        def shutdown_worker(self):
            self.calls += 1
            if self.calls <= self.interrupted:
                raise KeyboardInterrupt

    once = Closing(interrupted=1)
    once.__del__()
    assert once.calls == 2
    quiet = Closing(interrupted=0)  # closes at once: closed once
    quiet.__del__()
    assert quiet.calls == 1


def _sigint_disposition(pid):
    """``'caught'``, ``'ignored'`` or ``'default'``: how process ``pid`` takes SIGINT now."""
    fields = dict(line.split(':', 1) for line in
                  pathlib.Path(f'/proc/{pid}/status').read_text().splitlines())
    bit = 1 << (signal.SIGINT - 1)
    if int(fields['SigCgt'], 16) & bit:
        return 'caught'
    return 'ignored' if int(fields['SigIgn'], 16) & bit else 'default'


def test_pool_workers_ignore_a_terminals_ctrl_c():
    """Ctrl-C at a terminal reaches the whole foreground process group: the workers
    ignore it, and the main process ends the run and closes them (one message, the
    snapshot kept), rather than each worker dying with a KeyboardInterrupt of its own."""
    from tests.helpers import make_setup  # pylint: disable=import-outside-toplevel
    _, _, sampler, _ = make_setup(1, n_workers=2, kind='multiprocessing')
    try:
        sampler.start_worker()
        pids = sampler.backend.pids
        assert len(pids) == 2
        assert [_sigint_disposition(pid) for pid in pids] == ['ignored', 'ignored']
    finally:
        sampler.shutdown_worker()


LAUNCHERS = sorted(p.name for p in (ROOT / 'launchers').glob('*.py'))


def _has_loaded(pid, library):
    return library in pathlib.Path(f'/proc/{pid}/maps').read_text()


@pytest.mark.parametrize('launcher', LAUNCHERS)
def test_ctrl_c_while_the_libraries_load_ends_without_a_traceback(tmp_path, launcher):
    """Ctrl-C during a launcher's imports (seconds of torch, garage and MuJoCo) ends it
    as Ctrl-C ends a C program (killed by SIGINT, as a shell reports it: 130), with no
    Python traceback and nothing written; an ignored SIGINT (a background job) stays
    ignored (the test below), and once the command runs Ctrl-C is Python's again
    (``test_ctrl_c_stops_every_worker_and_keeps_the_snapshot``)."""
    env, tag = _tagged_env()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / 'launchers' / launcher), '--help'], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 60
        seen = None
        # Torch loads in the middle of the imports, seconds after the launcher's first
        # statement set SIGINT to its default and seconds before run_command catches it
        # again: there, SIGINT must be at its default.
        while time.time() < deadline and proc.poll() is None:
            try:
                if _has_loaded(proc.pid, 'libtorch'):
                    seen = _sigint_disposition(proc.pid)
                    proc.send_signal(signal.SIGINT)
                    break
            except (OSError, KeyError):
                break
            time.sleep(0.005)
        out, err = proc.communicate(timeout=60)
    finally:
        _kill_if_running(proc)
    assert seen == 'default', (seen, err[-3000:])
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err[-3000:])
    assert 'Traceback' not in err and 'KeyboardInterrupt' not in err, err[-3000:]
    assert out == '' and list(tmp_path.iterdir()) == []
    _assert_none_left(tag)


def test_an_ignored_ctrl_c_stays_ignored_while_the_libraries_load(tmp_path):
    env, _ = _tagged_env()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / 'launchers' / 'plot.py'), '--help'], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        time.sleep(0.5)  # well inside the imports
        seen = _sigint_disposition(proc.pid) if proc.poll() is None else None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        _kill_if_running(proc)
    assert seen in ('ignored', None), seen
    assert proc.returncode == 0, err[-3000:]
    assert 'Usage:' in out


#: Epochs logged before Ctrl-C (a few hundred bytes of console output each).
ROWS_BEFORE_CTRL_C = 3


def test_ctrl_c_stops_every_worker_and_keeps_the_snapshot(tmp_path):
    output = tmp_path / 'train.log'
    # A terminal's foreground job has Ctrl-C at its default; the test process may
    # ignore SIGINT (a background job of a non-interactive shell), and an ignored
    # signal stays ignored across exec, so reset it for the run.
    proc, log_dir, tag = _train(tmp_path, '--epochs', '100000', output=output,
                                start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 300
        progress = log_dir / 'progress.csv'
        while time.time() < deadline and proc.poll() is None and (
                not progress.exists()
                or len(progress.read_text().splitlines()) < ROWS_BEFORE_CTRL_C):
            time.sleep(0.2)
        assert proc.poll() is None, output.read_text()[-3000:]
        assert len(_tagged_processes(tag)) >= 3  # main + 2 workers
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the launcher dumps every thread's stack
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail('the run did not stop within 60 s of Ctrl-C:\n'
                        + output.read_text()[-6000:])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()  # reap it: a zombie would count as a left-over child
    assert proc.returncode == 130, output.read_text()[-3000:]  # 128 + SIGINT, as a shell says
    assert f'Interrupted: the newest snapshot in {log_dir} stays; --resume {log_dir}' in (
        output.read_text())
    _assert_none_left(tag)
    with open(log_dir / 'params.pkl', 'rb') as f:
        assert 'algo' in pickle.load(f)


_BUSY_POOL = '''
import sys, time
import garage_promp
from garage_promp.sampler import make_sampler
from tests.helpers import make_setup
env, policy, sampler, task_sampler = make_setup(1, n_workers=2)
sampler = make_sampler(policy, env, kind='multiprocessing', n_workers=2, seed=1)
backend = sampler.backend
print(' '.join(map(str, backend.pids)), flush=True)
time.sleep(600)
'''


@pytest.mark.parametrize('how', ['SIGKILL', 'SIGTERM'])
def test_no_worker_outlives_the_main_process(tmp_path, how):
    """Whatever the main process dies of, its workers follow within 2 s, one of
    them stopped (SIGSTOP), the other idle."""
    env, tag = _tagged_env()
    proc = subprocess.Popen([sys.executable, '-c', _BUSY_POOL], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2, proc.stderr.read()[-3000:]
        os.kill(pids[0], signal.SIGSTOP)
        os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
        deadline = time.time() + 2
        while time.time() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status()
                                             != psutil.STATUS_ZOMBIE for p in pids):
            time.sleep(0.05)
        left = [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not left
    finally:
        _kill_if_running(proc)
    _assert_none_left(tag)


_RAY_UP = '''
import time
from garage_promp.sampler import make_sampler
from tests.helpers import make_setup
env, policy, sampler, task_sampler = make_setup(1, n_workers=2)
sampler = make_sampler(policy, env, kind='ray', n_workers=2, seed=1)
sampler.start_worker()
print('up', flush=True)
time.sleep(600)
'''


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGKILL])
def test_a_ray_run_stopped_by_a_signal_ends_as_stopped_and_leaves_nothing_running(sig):
    """``ray.init`` makes SIGTERM ``sys.exit(15)``, an error exit a campaign runner counts
    as a failed run; the process's own handler is put back, so the run ends killed by
    SIGTERM as with the other backends. Ray's processes end with it within seconds, the
    raylet's agents too (on their own they outlive the run by a minute or more): the
    watcher ``init_ray`` starts ends them, after SIGKILL as well."""
    env, tag = _tagged_env()
    proc = subprocess.Popen([sys.executable, '-c', _RAY_UP], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == 'up\n', proc.stderr.read()[-3000:]
        # The agents retitle themselves over their environment, so the tag does not find
        # them: the run's whole process tree is noted instead.
        family = _agents_up(proc.pid)
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == -sig
    finally:
        _kill_if_running(proc)
    _assert_none_left(tag, timeout=10.)
    deadline = time.time() + 10
    while time.time() < deadline and any(p.is_running() for p in family):
        time.sleep(0.2)
    assert not [p.name() for p in family if p.is_running()]


def _agents_up(pid, timeout=30.):
    """The processes under ``pid`` once the raylet's agents are among them."""
    deadline = time.time() + timeout
    while True:
        family = psutil.Process(pid).children(recursive=True)
        names = [' '.join(p.cmdline()) for p in family if p.is_running()]
        if sum('Agent' in name for name in names) >= 2 or time.time() > deadline:
            assert sum('Agent' in name for name in names) >= 2, names
            return family
        time.sleep(0.5)


def _default_stop_signals():
    """The runner as started from a terminal: SIGINT, SIGHUP and SIGTERM at their default
    action. A child inherits ignored signals, and the suite may run under ``nohup`` or as a
    shell's background job (SIGHUP or SIGINT ignored), where the runner rightly ignores them
    too."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _learning_runner(tmp_path):
    """benchmarks/learning.py with two endless tiny train.py runs, once both have saved a
    snapshot."""
    env, tag = _tagged_env()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / 'benchmarks' / 'learning.py'), '--env', 'PointEnvCorner',
         '--algo', 'ProMP', '--seeds', '2', '--steps', '100000000', '--meta-batch-size', '2',
         '--episodes-per-task', '2', '--out', str(tmp_path)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_default_stop_signals)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not all(
            (tmp_path / f'ProMP_seed={s}' / 'params.pkl').exists() for s in (1, 2)):
        time.sleep(0.2)
    return proc, tag


def test_an_interrupted_learning_benchmark_leaves_nothing_running(tmp_path):
    """SIGTERM, twice, to benchmarks/learning.py stops its train.py runs (and their workers)."""
    proc, tag = _learning_runner(tmp_path)
    try:
        assert len(_tagged_processes(tag)) >= 3  # the runner and its two runs
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        if proc.poll() is None:  # an impatient second stop: no traceback
            proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        _kill_if_running(proc)
    assert 'stopping the runs' in out and 'stopped ProMP seed' in out
    # Stopped by SIGTERM: exit 143, or the signal itself where the second one came after
    # the runner had put SIGTERM's default action back (both read 143 in a shell).
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), out[-3000:]
    assert 'Traceback' not in out, out[-3000:]
    _assert_none_left(tag, timeout=5)


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGHUP, signal.SIGKILL],
                         ids=['SIGINT', 'SIGHUP', 'SIGKILL'])
def test_a_learning_benchmark_stopped_or_killed_leaves_nothing_running(tmp_path, sig):
    """Ctrl-C or a closed terminal stops benchmarks/learning.py's runs as SIGTERM does
    (each run keeping its snapshot); a runner killed outright (SIGKILL, which it cannot
    catch) leaves no run behind either: each run asked Linux for SIGTERM at its parent's
    death (``prctl(PR_SET_PDEATHSIG)``) and stops as it would on SIGTERM."""
    proc, tag = _learning_runner(tmp_path)
    try:
        runs = [p for p in _tagged_processes(tag) if 'train.py' in ' '.join(p.cmdline())]
        assert len(runs) >= 2, [p.cmdline() for p in _tagged_processes(tag)]
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        _kill_if_running(proc)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert 'stopping the runs' in out and 'stopped ProMP seed' in out, out[-3000:]
        assert proc.returncode in (128 + sig, -sig), out[-3000:]
        assert 'Traceback' not in out, out[-3000:]
    _assert_none_left(tag, timeout=60)
    for seed in (1, 2):  # each run stopped by SIGTERM's path: its snapshot is intact
        with open(tmp_path / f'ProMP_seed={seed}' / 'params.pkl', 'rb') as f:
            assert 'algo' in cloudpickle.load(f)


def test_usr1_dumps_the_stacks_of_the_main_process_and_every_worker(tmp_path):
    output = tmp_path / 'train.log'
    proc, log_dir, tag = _train(tmp_path, '--epochs', '100000', output=output)
    try:
        deadline = time.time() + 300
        progress = log_dir / 'progress.csv'
        while time.time() < deadline and proc.poll() is None and (
                not progress.exists() or len(progress.read_text().splitlines()) < 2):
            time.sleep(0.2)  # an epoch done: the workers are up
        assert proc.poll() is None, output.read_text()[-3000:]
        # Many dumps while the run trains and its threads (tensorboardX's writer,
        # the workers' heartbeats) run Python: a dump read without the GIL met a
        # half-built frame about once in a hundred and crashed the process.
        for _ in range(200):
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.02)
        workers = [child.pid for child in psutil.Process(proc.pid).children()
                   if '_worker_entry' in ' '.join(child.cmdline())]
        headers = [f'the stacks of process {pid}' for pid in [proc.pid, *workers]]
        deadline = time.time() + 20
        while time.time() < deadline and not all(h in output.read_text() for h in headers):
            time.sleep(0.2)
        text = output.read_text()
        assert proc.poll() is None, text[-3000:]  # the dumps do not stop the run
    finally:
        proc.kill()
        proc.wait()
    assert 'train.py' in text and 'most recent call first' in text
    assert len(workers) == 2 and '_worker_entry.py' in text
    assert all(h in text for h in headers), text[-4000:]  # the main process and each worker
    _assert_none_left(tag)


def test_a_worker_whose_parent_died_before_it_started_ends_at_once():
    """The parent pid on the worker's command line closes the race of a parent that died
    before the worker asked for the parent-death signal: a worker that finds another
    parent (here: it is told one that is not its own) kills itself before its imports."""
    import socket  # pylint: disable=import-outside-toplevel

    from garage_promp.sampler.backends import WORKER_ENTRY
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = subprocess.Popen([sys.executable, WORKER_ENTRY, str(theirs.fileno()), '0',
                                   '1'], pass_fds=(theirs.fileno(), ),
                                  stderr=subprocess.PIPE, text=True)
        theirs.close()
        ours.close()  # (a worker that went on would read no job and end on its own)
        try:
            assert worker.wait(timeout=60) == -signal.SIGKILL, worker.stderr.read()[-2000:]
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def test_a_worker_dies_with_its_parent_even_while_it_imports(tmp_path):
    """The parent-death signal is set before the worker's imports (seconds of torch,
    garage, MuJoCo): a worker stopped while importing, whose parent is then killed
    outright, does not stay behind stopped."""
    from garage_promp.sampler.backends import WORKER_ENTRY
    env, tag = _tagged_env()
    parent = subprocess.Popen(
        [sys.executable, '-c',
         'import os, socket, subprocess, sys, time\n'
         'a, b = socket.socketpair()\n'
         f'w = subprocess.Popen([sys.executable, {WORKER_ENTRY!r}, str(b.fileno()), "0",\n'
         '                       str(os.getpid())], pass_fds=(b.fileno(), ))\n'
         'print(w.pid, flush=True)\n'
         'time.sleep(600)\n'],
        env=env, stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.5)  # its first lines (tens of ms) have run, its imports have not ended
        os.kill(worker, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        _assert_none_left(tag, timeout=5)
    finally:
        if parent.poll() is None:
            parent.kill()
        if worker is not None:
            try:
                os.kill(worker, signal.SIGKILL)
            except OSError:
                pass
