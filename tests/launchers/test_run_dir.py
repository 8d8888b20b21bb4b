"""One writer per run directory, and an unwritable one refused before any work."""
import contextlib
import os
import pathlib
import subprocess
import sys
import time

from garage_promp.experiment.resume import resume_run
from garage_promp.experiment.run_dir import LOCK_NAME, RunDirBusy, lock_holder, owned_run_dir
from garage_promp.validation import (
    check_default_log_dir,
    check_input_dir,
    check_output_path,
    kernel_abspath,
    normal_dir,
)

import pytest

ROOT = pathlib.Path(__file__).parents[2]
TRAIN = [sys.executable, str(ROOT / 'launchers' / 'train.py')]
TINY = ['--env', 'PointEnvCorner', '--meta-batch-size', '2', '--episodes-per-task', '2',
        '--max-episode-length', '4', '--n-test-tasks', '1', '--hidden-sizes', '4']


@contextlib.contextmanager
def _held_by_another_process(log_dir, record_pid=True):
    """A second process that holds ``log_dir``'s lock for the body; yields its pid."""
    holder = subprocess.Popen([sys.executable, '-c', (
        'import time\n'
        'from garage_promp.experiment.run_dir import owned_run_dir\n'
        f'with owned_run_dir({str(log_dir)!r}, record_pid={record_pid}):\n'
        '    print("held", flush=True); time.sleep(60)\n')],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == 'held'
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_file_names_its_holder_alone(tmp_path):
    """A longer pid left by an earlier run is replaced, not overwritten in part."""
    (tmp_path / LOCK_NAME).write_text('9999999999\n')
    with owned_run_dir(str(tmp_path)):
        assert (tmp_path / LOCK_NAME).read_text() == f'{os.getpid()}\n'
        assert lock_holder(str(tmp_path)) == os.getpid()
    assert lock_holder(str(tmp_path)) is None


def test_lock_holder_is_the_pid_in_the_file_holding_that_files_lock(tmp_path):
    """A stale pid in a lock file is no holder because its process holds another lock
    (another run's directory), nor is a holder that did not record its pid."""
    held, stale = tmp_path / 'held', tmp_path / 'stale'
    held.mkdir()
    stale.mkdir()
    with _held_by_another_process(held) as pid:
        (stale / LOCK_NAME).write_text(f'{pid}\n')
        assert lock_holder(str(held)) == pid
        assert lock_holder(str(stale)) is None
    quiet = tmp_path / 'quiet'
    quiet.mkdir()
    (quiet / LOCK_NAME).write_text(f'{os.getpid()}\n')  # a pid not holding it
    with _held_by_another_process(quiet, record_pid=False):
        assert lock_holder(str(quiet)) is None


def test_a_training_run_holds_its_directory_while_it_runs(tmp_path):
    log_dir = tmp_path / 'run'
    proc = subprocess.Popen([*TRAIN, *TINY, '--algo', 'LVC-VPG', '--epochs', '100000',
                             '--log-dir', str(log_dir)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        progress = log_dir / 'progress.csv'
        # An epoch's row, not the file alone: garage's wrap_experiment creates progress.csv
        # before the run's body takes the lock.
        while not (progress.exists() and progress.read_text().count('\n') >= 2) \
                and proc.poll() is None:
            assert time.monotonic() < deadline, 'no epoch logged in 120 s'
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert lock_holder(str(log_dir)) == proc.pid
        with pytest.raises(RunDirBusy, match=f'pid {proc.pid}'):
            with owned_run_dir(str(log_dir)):
                pass
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert lock_holder(str(log_dir)) is None


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    with owned_run_dir(str(tmp_path)):
        with pytest.raises(RunDirBusy, match=f'pid {os.getpid()}'):
            # Another open file description of the same lock, as another process has.
            with owned_run_dir(str(tmp_path)):
                pass
    with owned_run_dir(str(tmp_path)):  # released when the holder is done
        pass


@pytest.mark.parametrize('content', ['nothing', 'no snapshot'])
def test_resume_run_refuses_a_directory_without_a_snapshot_and_writes_nothing(tmp_path,
                                                                              content):
    log_dir = tmp_path / 'run'
    log_dir.mkdir()
    if content == 'no snapshot':
        (log_dir / 'progress.csv').write_text('Epoch\n0\n')
    before = sorted(p.name for p in log_dir.iterdir())
    with pytest.raises(ValueError, match=f'{str(log_dir)!r} holds no snapshot'):
        resume_run(str(log_dir), n_epochs=2)
    assert sorted(p.name for p in log_dir.iterdir()) == before  # no .lock either


@pytest.mark.parametrize('kwargs,named', [
    (dict(n_epochs=0), 'n_epochs'), (dict(n_epochs=-3), 'n_epochs'),
    (dict(n_epochs=2.5), 'n_epochs'), (dict(max_env_steps=0), 'max_env_steps'),
    (dict(snapshot_mode='sometimes'), 'snapshot_mode'), (dict(full_table='yes'), 'full_table')])
def test_resume_run_checks_its_arguments_before_the_lock(tmp_path, kwargs, named):
    """A bad argument is refused naming it, and the run's directory is left as it was."""
    log_dir = tmp_path / 'run'
    log_dir.mkdir()
    (log_dir / 'params.pkl').write_bytes(b'not read')
    with pytest.raises((TypeError, ValueError), match=named):
        resume_run(str(log_dir), **kwargs)
    assert [p.name for p in log_dir.iterdir()] == ['params.pkl']


def test_resume_run_refuses_a_missing_directory_and_creates_nothing(tmp_path):
    missing = tmp_path / 'no' / 'run'
    with pytest.raises(ValueError, match=f'{str(missing)!r} is not a directory'):
        resume_run(str(missing), n_epochs=2)
    assert list(tmp_path.iterdir()) == []


def test_resume_is_refused_while_another_process_writes(tmp_path):
    log_dir = tmp_path / 'run'
    subprocess.run([*TRAIN, *TINY, '--epochs', '1', '--log-dir', str(log_dir)], check=True,
                   capture_output=True, cwd=ROOT, timeout=300)
    rows = (log_dir / 'progress.csv').read_text()
    with _held_by_another_process(log_dir) as holder:
        proc = subprocess.run([*TRAIN, '--resume', str(log_dir), '--epochs', '2'],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1
    assert f'in use by another run (pid {holder})' in proc.stderr
    assert 'Usage:' not in proc.stderr
    assert (log_dir / 'progress.csv').read_text() == rows  # nothing appended


def test_an_unwritable_log_dir_is_refused_before_any_work(tmp_path):
    """Tried, not read from permission bits: /proc takes no new file even for root, and a
    read-only directory none for anyone else."""
    with pytest.raises(ValueError, match='cannot be written'):
        check_output_path('/proc/garage_promp_run', '--log-dir')
    locked = tmp_path / 'locked'
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root may write here, and rightly passes
            with pytest.raises(ValueError, match='cannot be written'):
                check_output_path(str(locked / 'run'), '--log-dir')
    finally:
        locked.chmod(0o700)
    assert check_output_path(str(tmp_path / 'new' / 'run'), '--log-dir')
    assert not (tmp_path / 'new').exists()  # nothing left behind


def test_names_too_long_for_the_file_system_are_refused_while_parsing(tmp_path):
    """Before any work, naming the option: not an OSError once the run (or a meta-test) is
    done and its output is to be written."""
    long_name = 'x' * 300
    for path in (tmp_path / long_name, tmp_path / long_name / 'run'):
        with pytest.raises(ValueError, match='--log-dir .* 300 bytes long'):
            check_output_path(str(path), '--log-dir')
        with pytest.raises(ValueError, match='--csv .* 300 bytes long'):
            check_output_path(str(path), '--csv', directory=False)
        with pytest.raises(ValueError, match='GARAGE_PROMP_RUNS .* 300 bytes long'):
            check_input_dir(str(path), 'GARAGE_PROMP_RUNS')
    deep = tmp_path.joinpath(*['y' * 200] * 25)  # every name fits, the whole path does not
    with pytest.raises(ValueError, match='the path is .* bytes long'):
        check_output_path(str(deep), '--log-dir')
    fits = tmp_path / ('z' * 255)
    assert check_output_path(str(fits), '--log-dir') and check_input_dir(str(fits), 'x')
    assert not fits.exists()
    proc = subprocess.run([*TRAIN, *TINY, '--epochs', '1', '--log-dir', str(tmp_path / long_name)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert '--log-dir' in proc.stderr and '300 bytes long' in proc.stderr
    assert os.listdir(tmp_path) == []


def test_a_directory_only_read_must_be_a_path_and_a_directory(tmp_path):
    """A missing one reads as empty; an empty string or a file is refused, naming it."""
    assert check_input_dir(str(tmp_path / 'missing'), '--runs-dir')
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    with pytest.raises(ValueError, match="--runs-dir '.*file' exists and is not a directory"):
        check_input_dir(str(blocker), '--runs-dir')
    for empty in ('', '  ', None):
        with pytest.raises(ValueError, match='--runs-dir must be a path'):
            check_input_dir(empty, '--runs-dir')


def test_a_log_dir_under_a_file_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    proc = subprocess.run([*TRAIN, *TINY, '--epochs', '1', '--log-dir', str(blocker / 'run')],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2
    assert 'cannot be written' in proc.stderr and '--log-dir' in proc.stderr
    assert not (tmp_path / 'file').is_dir()


def test_a_fresh_run_into_a_live_runs_directory_touches_nothing(tmp_path):
    log_dir = tmp_path / 'run'
    subprocess.run([*TRAIN, *TINY, '--epochs', '1', '--log-dir', str(log_dir)], check=True,
                   capture_output=True, cwd=ROOT, timeout=300)
    before = {p.name: p.read_bytes() for p in log_dir.iterdir() if p.is_file()}
    with _held_by_another_process(log_dir):
        proc = subprocess.run([*TRAIN, *TINY, '--epochs', '1', '--log-dir', str(log_dir)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1 and 'in use by another run' in proc.stderr
    after = {p.name: p.read_bytes() for p in log_dir.iterdir() if p.is_file()}
    assert {k: v for k, v in after.items() if k != '.lock'} == {
        k: v for k, v in before.items() if k != '.lock'}


def test_read_progress_leaves_out_a_row_cut_short_and_names_a_damaged_one(tmp_path):
    from garage_promp.experiment.run_dir import DamagedRunFile, env_steps_done, read_progress
    path = tmp_path / 'progress.csv'
    path.write_text('TotalEnvSteps,Return\r\n100,1.5\r\n200,2.5\r\n30')  # dowel's line ends
    assert read_progress(tmp_path) == [{'TotalEnvSteps': '100', 'Return': '1.5'},
                                       {'TotalEnvSteps': '200', 'Return': '2.5'}]
    assert env_steps_done(tmp_path) == 200  # not 30, the start of a cut row
    path.write_text('TotalEnvSteps,Return\n100,1.5\n200\n300,3.5\n')
    with pytest.raises(DamagedRunFile, match=r'progress.csv, line 3: 1 fields where its '
                                             r'header has 2'):
        read_progress(tmp_path)
    path.write_text('foo,bar\n1,2\n')
    with pytest.raises(DamagedRunFile, match='no TotalEnvSteps column'):
        env_steps_done(tmp_path)
    path.write_text('TotalEnvSteps\nabc\n')
    with pytest.raises(DamagedRunFile, match="'abc', not a number"):
        env_steps_done(tmp_path)
    path.write_bytes(b'\xaf\xfe\n')
    with pytest.raises(DamagedRunFile, match='not a text file'):
        read_progress(tmp_path)
    path.write_text('')
    assert read_progress(tmp_path) == [] and env_steps_done(tmp_path) == 0
    path.unlink()
    assert read_progress(tmp_path) == []


@pytest.mark.parametrize('rows, match', [
    (['100,1.5', '1e400,2.5'], "TotalEnvSteps is '1e400', not a whole number"),
    (['100,1.5', 'inf,2.5'], "TotalEnvSteps is 'inf'"),
    (['100,1.5', '50,2.5'], "TotalEnvSteps is '50', not a whole number of env steps at least "
                            "the row before's \\(100\\)"),
    (['-5,1.5'], "TotalEnvSteps is '-5'"),
    (['100.5,1.5'], "TotalEnvSteps is '100.5'"),
    (['100,abc'], "line 2: Step_1-AverageReturn is 'abc', not a number"),
    (['100,inf'], "line 2: Step_1-AverageReturn is 'inf'; a run logs finite returns"),
    (['100,1e400'], "Step_1-AverageReturn is '1e400'")])
def test_read_progress_refuses_fields_a_run_cannot_have_logged(tmp_path, rows, match):
    from garage_promp.experiment.run_dir import DamagedRunFile, env_steps_done, read_progress
    (tmp_path / 'progress.csv').write_text('\n'.join(['TotalEnvSteps,Step_1-AverageReturn',
                                                      *rows, '']))
    for read in (read_progress, env_steps_done):
        with pytest.raises(DamagedRunFile, match=match):
            read(tmp_path)
    # NaN returns (none logged) and blank fields (a column added later) are a run's.
    (tmp_path / 'progress.csv').write_text('TotalEnvSteps,Step_1-AverageReturn,New\n'
                                           '100,nan,\n200,2.5,1\n')
    assert env_steps_done(tmp_path) == 200


def test_a_progress_csv_that_is_not_a_file_is_damaged(tmp_path):
    from garage_promp.experiment.run_dir import DamagedRunFile, read_progress
    (tmp_path / 'progress.csv').mkdir()
    with pytest.raises(DamagedRunFile, match='progress.csv is not a file'):
        read_progress(tmp_path)


@pytest.mark.parametrize('data, match', [
    (b'\xef\xbb\xbfTotalEnvSteps\r\n100\r\n', 'starts with a byte-order mark'),
    (b'TotalEnvSteps\r\r\n100\r\r\n', 'line 1: a carriage return that ends no line'),
    (b'TotalEnvSteps\r\n100\r200\r\n', 'line 2: a carriage return that ends no line')],
    ids=['BOM', 'doubled CR', 'lone CR'])
def test_read_progress_refuses_line_ends_a_run_does_not_write(tmp_path, data, match):
    """A BOM split the first column on --resume (the old rows under '\\ufeff' + name); a
    doubled CR lost a row and glued the resumed rows onto another."""
    from garage_promp.experiment.run_dir import DamagedRunFile, read_progress
    path = tmp_path / 'progress.csv'
    path.write_bytes(data)
    with pytest.raises(DamagedRunFile, match=match):
        read_progress(tmp_path)
    for good in (b'TotalEnvSteps\r\n100\r\n200\r', b'TotalEnvSteps\n100\n'):  # a cut row; LF
        path.write_bytes(good)
        assert [row['TotalEnvSteps'] for row in read_progress(tmp_path)] == ['100']


def test_read_variant_refuses_json_nested_too_deeply_or_too_large(tmp_path):
    """A RecursionError traceback (--resume, meta_test.py, plot.py) before."""
    from garage_promp.experiment.run_dir import MAX_VARIANT_BYTES, DamagedRunFile, read_variant
    path = tmp_path / 'variant.json'
    path.write_text('{"x": ' + '[' * 100000 + ']' * 100000 + '}')
    with pytest.raises(DamagedRunFile, match='nested too deeply'):
        read_variant(tmp_path)
    path.write_text('{"x": "' + 'a' * MAX_VARIANT_BYTES + '"}')
    with pytest.raises(DamagedRunFile, match='bytes, not the options of a run'):
        read_variant(tmp_path)
    path.write_text('{"x": ' + '[' * 50 + ']' * 50 + '}')
    nested = read_variant(tmp_path)['x']
    for _ in range(49):
        nested = nested[0]
    assert nested == []  # 50 levels: read


@pytest.mark.parametrize('text, match', [('{"algo": ', 'not valid JSON'),
                                         ('[1, 2]', 'holds a JSON list'),
                                         ('"ProMP"', 'holds a JSON str')])
def test_read_variant_refuses_what_is_not_an_object_of_options(tmp_path, text, match):
    from garage_promp.experiment.run_dir import DamagedRunFile, read_variant
    (tmp_path / 'variant.json').write_text(text)
    with pytest.raises(DamagedRunFile, match=match):
        read_variant(tmp_path)
    (tmp_path / 'variant.json').write_text('{"algo": "ProMP"}')
    assert read_variant(tmp_path) == {'algo': 'ProMP'}


def test_read_variant_refuses_a_variant_that_is_not_a_file(tmp_path):
    from garage_promp.experiment.run_dir import DamagedRunFile, read_variant
    assert read_variant(tmp_path) == {}  # none: a run made without the launcher
    (tmp_path / 'variant.json').mkdir()
    with pytest.raises(DamagedRunFile, match='variant.json is not a file'):
        read_variant(tmp_path)


def test_a_lock_that_is_not_a_file_is_refused_and_nothing_is_written_through_it(tmp_path):
    """The lock records the writer's pid: through a symbolic link that would overwrite
    what the link points to (a snapshot, a file outside the run). A link, a named pipe
    (whose open would block) or a directory is refused by name, and its target kept."""
    import os

    from garage_promp.experiment.run_dir import DamagedRunFile, owned_run_dir
    run = tmp_path / 'run'
    run.mkdir()
    snapshot = run / 'params.pkl'
    snapshot.write_bytes(b'snapshot bytes')
    (run / '.lock').symlink_to('params.pkl')
    with pytest.raises(DamagedRunFile, match=r'\.lock is not a file \(a symbolic link to a file\)'):
        with owned_run_dir(str(run)):
            pass
    assert snapshot.read_bytes() == b'snapshot bytes'
    (run / '.lock').unlink()
    os.mkfifo(run / '.lock')
    with pytest.raises(DamagedRunFile, match=r'not a file \(a named pipe\)'):
        with owned_run_dir(str(run)):
            pass
    (run / '.lock').unlink()
    (run / '.lock').mkdir()
    with pytest.raises(DamagedRunFile, match=r'not a file \(a directory\)'):
        with owned_run_dir(str(run)):
            pass
    (run / '.lock').rmdir()
    with owned_run_dir(str(run)):  # a plain lock file is made and holds the pid
        assert (run / '.lock').read_text() == f'{os.getpid()}\n'


def test_an_output_path_that_is_a_link_loop_is_named_as_one(tmp_path):
    """A link to nothing and a link loop are both refused, each said as what it is."""
    (tmp_path / 'a').symlink_to('b')
    (tmp_path / 'b').symlink_to('a')
    (tmp_path / 'dangling').symlink_to('missing')
    with pytest.raises(ValueError, match=r"'.*/a' is a symbolic link loop \(through 'b'\)"):
        check_output_path(str(tmp_path / 'a'), '--log-dir')
    with pytest.raises(ValueError, match="symbolic link to 'missing', which does not exist"):
        check_output_path(str(tmp_path / 'dangling'), '--log-dir')


def test_a_path_below_a_link_loop_or_a_dangling_link_is_refused_naming_the_link(
        tmp_path, monkeypatch):
    """``os.path.exists`` is False for a looping or dangling link, so a walk up to the nearest
    existing directory passed it by and accepted a path ``os.makedirs`` then failed on
    (after the experiment was built): the link on the way is named while parsing, for
    outputs, inputs and garage's default ``data/local/experiment``."""
    (tmp_path / 'a').symlink_to('b')
    (tmp_path / 'b').symlink_to('a')
    (tmp_path / 'dangling').symlink_to('missing')
    for directory in (True, False):
        with pytest.raises(ValueError, match=r"cannot be written: '.*/a' is a symbolic link "
                                             r"loop \(through 'b'\)"):
            check_output_path(str(tmp_path / 'a' / 'x' / 'y'), '--out', directory=directory)
        with pytest.raises(ValueError, match=r"cannot be written: '.*/dangling' is a symbolic "
                                             "link to 'missing', which does not exist"):
            check_output_path(str(tmp_path / 'dangling' / 'x'), '--out', directory=directory)
    with pytest.raises(ValueError, match=r"cannot be a directory: '.*/a' is a symbolic link"):
        check_input_dir(str(tmp_path / 'a' / 'x'), '--runs-dir')
    (tmp_path / 'data' / 'local').mkdir(parents=True)
    (tmp_path / 'data' / 'local' / 'experiment').symlink_to('nowhere')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match='the default log directory .*experiment.* is a '
                                         'symbolic link to'):
        check_default_log_dir()
    (tmp_path / 'data' / 'local' / 'experiment').unlink()
    assert check_default_log_dir().endswith('data/local/experiment')  # not there yet: made


def test_dot_dot_after_a_link_is_resolved_as_the_kernel_resolves_it(tmp_path, monkeypatch):
    """``l/../run`` with ``l -> real/deep`` is ``real/run`` to the kernel (the link first, then
    its target's parent); taking ``..`` as text put the run in ``./run`` and a later
    ``meta_test.py l/../run`` found nothing."""
    (tmp_path / 'real' / 'deep').mkdir(parents=True)
    (tmp_path / 'l').symlink_to(tmp_path / 'real' / 'deep')
    given = str(tmp_path / 'l' / '..' / 'run')
    assert kernel_abspath(given) == str(tmp_path / 'real' / 'run')
    assert normal_dir(given) == str(tmp_path / 'real' / 'run')
    assert normal_dir(given + '/./') == str(tmp_path / 'real' / 'run')
    assert normal_dir(str(tmp_path / 'l' / '..')) == str(tmp_path / 'real')
    monkeypatch.chdir(tmp_path)
    assert kernel_abspath('l/../run') == str(tmp_path / 'real' / 'run')
    assert normal_dir('run/') == 'run' and normal_dir('./run/.') == 'run'  # as before
    assert normal_dir('.') == str(tmp_path)
    # Without '..' a link stays as written (the run is named as the user named it).
    assert kernel_abspath('l/run') == str(tmp_path / 'l' / 'run')
    os.makedirs(normal_dir(given))
    assert (tmp_path / 'real' / 'run').is_dir() and not (tmp_path / 'run').exists()
    # Where the kernel cannot follow the '..' (the component before it is a file, a link to
    # nothing, a link loop, or missing) the path is refused, not cancelled as text.
    (tmp_path / 'loop').symlink_to('loop')
    (tmp_path / 'dangling').symlink_to('nothing')
    (tmp_path / 'afile').write_text('')
    for name, why in (('loop', r"is a symbolic link loop \(through 'loop'\)"),
                      ('dangling', "is a symbolic link to 'nothing', which does not exist"),
                      ('afile', 'is not a directory'), ('missing', 'does not exist')):
        with pytest.raises(ValueError, match=f"'{name}/../x' cannot be written: '.*/{name}' "
                                             f'{why}, so the .. after it cannot be followed'):
            check_output_path(f'{name}/../x', '--out')
        with pytest.raises(ValueError, match='cannot be a directory: .* cannot be followed'):
            check_input_dir(f'{name}/../x', '--runs-dir')


def test_run_files_written_turns_only_a_refusing_disk_into_one_error(capsys, tmp_path):
    """A full disk (or quota, a read-only remount...) becomes RunWriteError naming the run
    dir; another OSError, and a snapshot's own error (which names its file), pass as they
    are; a logging thread that meets the full disk is one warning line."""
    import errno  # pylint: disable=import-outside-toplevel
    import threading  # pylint: disable=import-outside-toplevel

    from garage_promp._garage_compat import SnapshotWriteError  # pylint: disable=import-outside-toplevel
    from garage_promp.experiment.run_dir import RunWriteError, run_files_written  # pylint: disable=import-outside-toplevel
    with pytest.raises(RunWriteError, match=r"^the run's logs in .* could not be written \(No "
                                             r'space left on device\); no snapshot was saved '
                                             'yet, so the run starts again'):
        with run_files_written(str(tmp_path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    (tmp_path / 'itr_0.pkl').write_bytes(b'')
    for number in (errno.ENOSPC, errno.EDQUOT):
        with pytest.raises(RunWriteError, match=r"^the run's logs in .* could not be written "
                                                 r'\(.*\); the snapshots saved so far are '
                                                 f'kept: make room, then --resume {tmp_path}'):
            with run_files_written(str(tmp_path)):
                raise OSError(number, os.strerror(number))
    with pytest.raises(RunWriteError, match=r'\(Read-only file system: /x/progress.csv\); '
                                             r'the snapshots .* kept: once the disk takes '
                                             'writes again, --resume'):
        with run_files_written(str(tmp_path)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), '/x/progress.csv')
    with pytest.raises(PermissionError):
        with run_files_written('/r'):
            raise PermissionError(errno.EACCES, 'Permission denied')
    with pytest.raises(SnapshotWriteError, match='itr_3.pkl'):
        with run_files_written('/r'):
            raise SnapshotWriteError(errno.ENOSPC, 'could not write the snapshot itr_3.pkl',
                                     'itr_3.pkl')
    before = threading.excepthook
    with run_files_written('/r'):
        def full():
            raise OSError(errno.ENOSPC, 'No space left on device')
        thread = threading.Thread(target=full, name='writer')
        thread.start()
        thread.join()
    assert threading.excepthook is before
    err = capsys.readouterr().err
    assert err == ('Warning: a logging thread (writer) stopped: [Errno 28] No space left on '
                   'device\n')


@pytest.mark.parametrize('kind', ['KeyError', 'UnicodeDecodeError', 'SyntaxError', 'ValueError'])
def test_a_workers_traceback_goes_to_a_regular_debug_log_only(tmp_path, kind):
    """The whole message, traceback included, is appended to the run's debug.log and the
    error names the file; a built-in type whose str() is its own (a KeyError quotes it, a
    UnicodeDecodeError formats its fields) keeps the message as written. A debug.log that
    is a named pipe or a link is not written (nor waited on): the message keeps it all."""
    from garage_promp.experiment.run_dir import worker_tracebacks_logged  # pylint: disable=import-outside-toplevel
    from garage_promp.sampler.backends import FailureReport, worker_error  # pylint: disable=import-outside-toplevel
    from garage_promp.validation import _message  # pylint: disable=import-outside-toplevel

    def raised(log_dir):
        error = worker_error(FailureReport(1, 'builtins', kind, 'boom', 'TB line\n', 'ctx'))
        with pytest.raises(type(error)) as info:
            with worker_tracebacks_logged(str(log_dir)):
                raise error
        return info.value

    error = raised(tmp_path)
    assert _message(error) == (f'sampler worker 1 raised {kind}: boom\n  while sampling ctx\n'
                               f"  (the worker's traceback is in {tmp_path / 'debug.log'})")
    assert 'worker traceback:\nTB line' in (tmp_path / 'debug.log').read_text()
    for odd in ('fifo', 'link'):
        log_dir = tmp_path / odd
        log_dir.mkdir()
        if odd == 'fifo':
            os.mkfifo(log_dir / 'debug.log')
        else:
            (log_dir / 'debug.log').symlink_to(tmp_path / 'elsewhere.log')
        error = raised(log_dir)
        assert not hasattr(error, 'traceback_file')
        assert _message(error).endswith('worker traceback:\nTB line\n')
    assert not (tmp_path / 'elsewhere.log').exists()
