"""The throughput benchmark runs end to end (tiny batches; no timing asserted)."""
import csv
import inspect
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
import numpy as np
import pytest

from tests.helpers import invoke_script, load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'benchmarks' / 'throughput.py'


def _run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> ARGS`` from the repository root, its output captured."""
    return subprocess.run([sys.executable, str(ROOT / 'benchmarks' / script), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)


@pytest.mark.slow
def test_throughput_table_quick(tmp_path):
    proc = _run_benchmark('throughput.py', '--quick', '--algo', 'ProMP', '--algo', 'LVC-TRPO',
                          '--out', str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / 'throughput.json').read_text())['results']
    whats = [r['what'] for r in results]
    assert whats == ['raw', 'garage-MAMLTRPO', 'ProMP', 'LVC-TRPO', 'raw']  # raw before and after
    for r in results[1:-1]:
        assert r['sample_s'] > 0 and r['update_s'] > 0
        assert r['iter_s'] == pytest.approx(r['sample_s'] + r['update_s'])
        # (K + 1) x M x R x H environment steps per iteration.
        assert r['env_steps'] == 2 * 2 * 2 * 100
        assert r['peak_rss_mb'] > 0
    assert results[0]['steps_per_s'] > 0 and results[-1]['steps_per_s'] > 0
    table = proc.stdout
    assert '| PointEnvCorner | quick (2×2×100×2) | ProMP |' in table
    assert 'raw env steps' in table
    # The update's breakdown: its timed parts add up to at most the update.
    promp, trpo = results[2], results[3]
    assert set(promp['update_parts']) == {'MetaObjective', 'After'}
    assert set(trpo['update_parts']) == {'MetaObjective', 'ConjugateGradient', 'LineSearch',
                                         'After'}
    for r in (promp, trpo):
        assert 0 < sum(r['update_parts'].values()) <= r['update_s'] + 1e-9
    assert '| PointEnvCorner | quick | LVC-TRPO |' in table.split('Update breakdown')[1]


@pytest.mark.slow
def test_throughput_workers_mode_quick(tmp_path):
    """Workers mode: one row per count, each with its own raw rate; the meta names the counts."""
    proc = _run_benchmark('throughput.py', '--mode', 'workers', '--quick', '--worker-counts', '1',
                          '--out', str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = json.loads((tmp_path / 'workers.json').read_text())
    assert saved['meta']['n_workers'] == [1]  # not --n-workers, which this mode does not read
    bench_io = load_script(ROOT / 'benchmarks' / 'bench_io.py', 'bench_io_throughput_meta')
    assert saved['meta']['revision'] == bench_io.code_revision()  # the code it measured
    assert saved['meta']['processor'] == bench_io.processor_name()
    (row, ) = saved['results']
    assert row['n_workers'] == 1 and row['what'] == 'ProMP'
    assert len(row['raw_before_after']) == 2 and row['raw_steps_per_s'] == pytest.approx(
        sum(row['raw_before_after']) / 2)
    assert row['meta_test_steps'] > 0 and row['meta_test_s'] > 0
    assert '| PointEnvCorner | 1 | 2×2×100×2 |' in proc.stdout


def test_throughput_time_limit_skips_what_it_cannot_start(tmp_path):
    """Past --time-limit no measurement starts: the skipped ones are printed, and a run
    that measured nothing writes nothing, so an earlier run's file in --out is kept."""
    proc = _run_benchmark('throughput.py', '--quick', '--algo', 'ProMP', '--gpu', 'no',
                          '--time-limit', '1e-9', '--out', str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / 'throughput.json').exists()
    assert 'nothing was measured' in proc.stderr and 'is not written' in proc.stderr
    assert 'time limit: 4 measurement(s) not started' in proc.stderr
    for what in ('raw', 'garage-MAMLTRPO', 'ProMP'):
        assert f'"what": "{what}"' in proc.stderr
    earlier = (ROOT / 'benchmarks' / 'results' / 'throughput.json').read_text()
    (tmp_path / 'throughput.json').write_text(earlier)
    proc = _run_benchmark('throughput.py', '--quick', '--algo', 'ProMP', '--gpu', 'no',
                          '--time-limit', '1e-9', '--out', str(tmp_path))
    assert proc.returncode == 0 and 'is left as it was' in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / 'throughput.json').read_text() == earlier


def test_throughput_gpu_rows_follow_their_cpu_rows():
    """Each algorithm's GPU measurement right after its CPU one: a stopped run keeps whole rows."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / 'benchmarks'))
    specs = throughput.table_specs(['PointEnvCorner'], ['quick'], ['ProMP', 'LVC-VPG'], 1, 2, 2,
                                   100, gpu=True)
    assert [(s['what'], s.get('device', 'cpu')) for s in specs] == [
        ('raw', 'cpu'), ('garage-MAMLTRPO', 'cpu'), ('ProMP', 'cpu'), ('ProMP', 'cuda'),
        ('LVC-VPG', 'cpu'), ('LVC-VPG', 'cuda'), ('raw', 'cpu')]


def test_throughput_summarize_lists_what_a_time_limit_skipped(tmp_path):
    """--summarize of a run stopped before any measurement: no table, the skipped ones named;
    --summarize measures nothing, so any other option (or command) is refused by name."""
    saved = tmp_path / 'workers.json'
    saved.write_text(json.dumps(dict(meta=dict(n_workers=[4], skipped=[
        dict(env='HalfCheetahFwdBack', n_workers=4)]), results=[])))
    proc = _run_benchmark('throughput.py', '--summarize', str(saved))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith('no measurements')
    assert 'Not measured (time limit): 1\n- {"env": "HalfCheetahFwdBack", "n_workers": 4}' in \
        proc.stdout
    for extra in (['--quick'], ['--mode', 'workers'], ['_one', '{}']):
        proc = _run_benchmark('throughput.py', '--summarize', str(saved), *extra)
        assert proc.returncode == 2 and f'{extra[0]} would not be read' in proc.stderr


@pytest.mark.parametrize('name', sorted(
    p.name for p in (ROOT / 'benchmarks' / 'results').glob('*.json')
    if p.name.startswith(('throughput', 'workers'))))
def test_every_committed_throughput_file_summarizes(name):
    """Every committed throughput / workers JSON prints its tables (older layouts included),
    each row with its ratios."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        import throughput
    finally:
        sys.path.pop(0)
    text = throughput.summarize_file(ROOT / 'benchmarks' / 'results' / name)
    rows = [line for line in text.splitlines() if line.startswith('| ') and '---' not in line
            and not line.startswith('| env |')]
    assert rows and 'nan' not in text
    if name.startswith('workers'):  # sampling / raw on every row
        assert all(float(row.split('|')[7]) > 0 for row in rows)


def test_committed_device_tables_are_their_json_summarized():
    """The 16-core / H200 tables in benchmarks/results are --summarize of the committed JSON."""
    results = ROOT / 'benchmarks' / 'results'
    page = (results / 'throughput_h200_2026-11-27.md').read_text()
    for name, row in (('throughput_h200_2026-11-27.json',
                       '| HalfCheetahFwdBack | paper (40×20×100×2) | ProMP | 1.21 |'),
                      ('workers_h200_2026-11-27.json',
                       '| HalfCheetahFwdBack | 14 | 40×20×100×2 | 1.35 |')):
        proc = _run_benchmark('throughput.py', '--summarize', str(results / name))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert row in proc.stdout
        assert proc.stdout.strip() in page


def test_throughput_table_formats_ratios():
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        import throughput
    finally:
        sys.path.pop(0)
    common = dict(env='E', batch='b', meta_batch_size=2, episodes_per_task=3, horizon=10, K=1,
                  env_steps=120, peak_rss_mb=1., worker_peak_rss_mb=2.)
    results = [
        dict(what='raw', env='E', steps_per_s=1000.),
        dict(what='garage-MAMLTRPO', iter_s=10., sample_s=8., update_s=2.,
             sample_steps_per_s=15., **common),
        dict(what='ProMP', iter_s=2., sample_s=1.5, update_s=0.5, sample_steps_per_s=80.,
             **common),
        dict(what='raw', env='E', steps_per_s=3000.),  # measured again at the end
    ]
    table = throughput.format_table(results)
    row = next(line for line in table.splitlines() if '| ProMP |' in line)
    cells = [c.strip() for c in row.split('|')[1:-1]]
    # vs raw: 80 / mean(1000, 3000)
    assert cells[2:] == ['ProMP', '2.00', '1.50', '0.50', '25%', '80', '0.04', '5.0×', '1 / 2']
    assert '1,000 – 3,000' in table
    # With a GPU measurement, its update goes into the GPU columns of the CPU row, with the
    # CPU row's sampling (1.5 + 0.1 s), not the GPU run's own, faster window (1.0 s).
    results.append(dict(what='ProMP', device='cuda', iter_s=1.1, sample_s=1.0, update_s=0.1,
                        sample_steps_per_s=120., **common))
    table = throughput.format_table(results)
    rows = [line for line in table.splitlines() if '| ProMP |' in line]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].split('|')[1:-1]]
    assert cells[-3:] == ['0.10', '6%', '6.2×']


def _write_run(path, returns_pre, returns_post):
    path.mkdir(parents=True)
    with open(path / 'progress.csv', 'w') as f:
        f.write('TotalEnvSteps,Step_0-AverageReturn,Step_1-AverageReturn\n')
        for i, (pre, post) in enumerate(zip(returns_pre, returns_post)):
            f.write(f'{(i + 1) * 100},{pre},{post}\n')


def test_learning_summary_statistics_and_figure(tmp_path):
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    runs = {}
    for seed, shift in ((1, 0.), (2, 2.)):
        _write_run(tmp_path / f'A_seed={seed}', [0, 1, 2, 3], [10 + shift, 11 + shift,
                                                              12 + shift, 13 + shift])
        _write_run(tmp_path / f'B_seed={seed}', [0, 0, 0, 0], [1 + shift, 1 + shift,
                                                              1 + shift, 1 + shift])
        runs[('A', seed)] = tmp_path / f'A_seed={seed}'
        runs[('B', seed)] = tmp_path / f'B_seed={seed}'
    text = learning.summarize(tmp_path, 'Toy', runs)
    # A: post = mean of the last 3 epochs = 12 (+ shift): 12 and 14 -> 13 ± 1.41.
    assert '| A | 2 | 400 | 2.0 ± 0.0 | 13.0 ± 1.4 |' in text
    assert '| B | 2 | 400 | 0.0 ± 0.0 | 2.0 ± 1.4 |' in text
    # Welch t = (13 - 2) / sqrt(2/2 + 2/2) = 7.78
    assert '| A |  | +7.78 |' in text
    assert learning.welch_t([1., 2., 3.], [1., 2., 3.]) == 0.
    assert (tmp_path / 'learning_Toy.png').stat().st_size > 1000


@pytest.mark.slow
def test_learning_benchmark_end_to_end_with_garage_peer_and_resume(tmp_path):
    """A tiny budget runs garage_promp and garage's MAMLTRPO, then a larger one
    resumes the same runs and appends their epochs."""
    script = ROOT / 'benchmarks' / 'learning.py'
    common = [sys.executable, str(script), '--env', 'PointEnvCorner', '--algo', 'ProMP',
              '--algo', 'garage-MAMLTRPO', '--seeds', '1', '--meta-batch-size', '2',
              '--episodes-per-task', '2', '--out', str(tmp_path)]
    per_epoch = 2 * 2 * 100 * 2  # M x R x H x (K + 1)
    for epochs in (1, 2):
        proc = subprocess.run([*common, '--steps', str(epochs * per_epoch)], capture_output=True,
                              text=True, cwd=ROOT, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        for algo in ('ProMP', 'garage-MAMLTRPO'):
            with open(tmp_path / f'{algo}_seed=1' / 'progress.csv') as f:
                rows = list(csv.DictReader(f))
            assert [int(r['TotalEnvSteps']) for r in rows] == [
                per_epoch * (i + 1) for i in range(epochs)]
            assert all(r['Step_0-AverageReturn'] and r['Step_1-AverageReturn'] for r in rows)
    summary = (tmp_path / 'summary.md').read_text()
    assert f'| ProMP | 1 | {2 * per_epoch:,} |' in summary
    assert f'| garage-MAMLTRPO | 1 | {2 * per_epoch:,} |' in summary
    assert (tmp_path / 'learning_PointEnvCorner.png').stat().st_size > 1000


def test_shared_forwards_ab_runs_and_ends_at_the_same_theta():
    proc = _run_benchmark('shared_forwards.py', '--env', 'PointEnvCorner', '--repeats', '1')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'ProMP update, shared forwards:' in proc.stdout
    assert 'ProMP update, separate forwards:' in proc.stdout
    gap = float(proc.stdout.strip().splitlines()[-1].split(':')[-1])
    assert gap < 1e-4


@pytest.mark.slow
def test_padding_cut_ab_cuts_the_rounds_and_times_both_updates():
    proc = _run_benchmark('padding_cut.py', '--env', 'HopperRandParams', '--meta-batch-size', '2',
                          '--episodes-per-task', '5', '--repeats', '1')
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    kept = lines[0].split('(')[-1].split()
    assert int(kept[0]) < int(kept[2])  # early falls: most of a round is padding
    assert any(line.startswith('MAML-TRPO update, padded rounds:') for line in lines)
    assert any(line.startswith('MAML-TRPO update, cut rounds:') for line in lines)
    assert float(lines[-2].split(':')[-1]) > 0
    assert lines[-1].startswith('largest |θ_cut - θ_padded| after one update:')


@pytest.mark.metaworld
def test_metaworld_speedups_benchmark_side_by_side(tmp_path):
    result = _run_benchmark('metaworld_speedups.py', '--env', 'push-v3', '--steps', '200',
                            '--repeats', '1', '--horizon', '100', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((tmp_path / 'metaworld_speedups.json').read_text())
    assert [r['env'] for r in rows] == ['push-v3']
    row = rows[0]
    assert row['speedup'] == pytest.approx(row['metaworld_us'] / row['speedups_us'])
    assert 0 < row['physics_fraction_before'] < row['physics_fraction_after']
    assert '| push-v3 |' in (tmp_path / 'metaworld_speedups.md').read_text()


def test_wave_constants_benchmark_side_by_side(tmp_path):
    result = _run_benchmark('wave_constants.py', '--env', 'AntRandDirec', '--envs', '4',
                            '--steps', '3', '--repeats', '2', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((tmp_path / 'wave_constants.json').read_text())['results']
    assert [r['env'] for r in rows] == ['AntRandDirec']
    row = rows[0]
    assert row['gathered_us'] > 0 and row['kept_us'] > 0
    assert row['speedup'] == pytest.approx(row['gathered_us'] / row['kept_us'])
    assert row['reads_speedup'] == pytest.approx(row['reads_after_us'] / row['kept_us'])
    assert row['parts_taken_us'] > 0 and row['parts_computed_us'] > 0
    assert row['parts_speedup'] == pytest.approx(row['parts_computed_us']
                                                 / row['parts_taken_us'])
    assert '| AntRandDirec | 4 |' in (tmp_path / 'wave_constants.md').read_text()


def test_wave_seeding_benchmark_side_by_side(tmp_path):
    result = _run_benchmark('wave_seeding.py', '--env', 'HopperRandParams', '--envs', '5',
                            '--repeats', '1', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((tmp_path / 'wave_seeding.json').read_text())['results']
    assert [r['env'] for r in rows] == ['HopperRandParams']
    row = rows[0]
    assert row['seeding_each_us'] > 0 and row['seeding_at_once_us'] > 0
    assert row['seeding_speedup'] == pytest.approx(row['seeding_each_us']
                                                   / row['seeding_at_once_us'])
    assert row['meta_batch_speedup'] == pytest.approx(row['meta_batch_each_us']
                                                      / row['meta_batch_at_once_us'])
    assert '| HopperRandParams | 5 |' in (tmp_path / 'wave_seeding.md').read_text()


def test_startup_benchmark_side_by_side(tmp_path):
    result = _run_benchmark('startup.py', '--repeats', '1', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    (row, ) = json.loads((tmp_path / 'startup.json').read_text())['results']
    assert row['deferred_modules'] == ['cma', 'matplotlib.pyplot', 'ray', 'scipy.signal',
                                       'scipy.stats']
    assert row['deferred_s'] > 0 and row['eager_peak_mib'] > 0
    assert row['time_ratio'] == pytest.approx(row['deferred_s'] / row['eager_s'])
    assert row['memory_ratio'] == pytest.approx(row['deferred_peak_mib'] / row['eager_peak_mib'])
    assert '| today / every module |' in (tmp_path / 'startup.md').read_text()


def test_wave_seeding_one_by_one_takes_numpys_objects_and_puts_the_sampler_back():
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        wave_seeding = load_script(ROOT / 'benchmarks' / 'wave_seeding.py', 'wave_seeding_bench')
    finally:
        sys.path.remove(str(ROOT / 'benchmarks'))
    from garage_promp.sampler import rollout  # pylint: disable=import-outside-toplevel
    with wave_seeding.one_by_one():
        _, noise = rollout.wave_seeds(1, (0, ), [(0, 0)])
        assert isinstance(noise[0], np.random.SeedSequence)
    _, noise = rollout.wave_seeds(1, (0, ), [(0, 0)])
    assert isinstance(noise[0], dict)


@pytest.mark.mujoco
def test_wave_constants_reads_after_the_steps_only_in_that_column(monkeypatch):
    """The third column steps without the parts read next to each step (gathered after);
    the others with them, and everything is as shipped afterwards."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        bench = load_script(ROOT / 'benchmarks' / 'wave_constants.py', 'wave_constants_bench')
    finally:
        sys.path.remove(str(ROOT / 'benchmarks'))
    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel
    from garage_promp.envs._mujoco import MujocoMetaEnv  # pylint: disable=import-outside-toplevel
    if _cstep.library() is None:
        pytest.skip(f'no compiled stepping library: {_cstep.reason}')
    gym_cls = bench.ENVS['AntRandDirec']['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(2)]
    shipped, real = MujocoMetaEnv.__dict__['_parts_spec'], _cstep.step_batch
    seen = []

    def spy(*args, **kwargs):
        bound = inspect.signature(real).bind(*args, **kwargs)
        seen.append(bound.arguments.get('after') is not None)
        return real(*args, **kwargs)
    monkeypatch.setattr(_cstep, 'step_batch', spy)
    actions = np.zeros((1, 2, 8))
    for gather, reads_after in ((True, False), (False, False), (False, True)):
        seen.clear()
        assert bench._time(gym_cls, envs, actions, gather, reads_after) > 0  # pylint: disable=protected-access
        assert seen == [not reads_after]
        assert MujocoMetaEnv.__dict__['_parts_spec'] is shipped
    from garage_promp.envs import _mujoco, _robots  # pylint: disable=import-outside-toplevel
    assert _mujoco.wave_constant is _robots.wave_constant is bench._KEPT  # pylint: disable=protected-access


@pytest.mark.mujoco
@pytest.mark.parametrize('part_computed', [False, True])
def test_wave_constants_ending_parts_step_only_the_part(part_computed, monkeypatch):
    """The ending columns step each step's part of the wave, fewer envs as they end, and
    count the steps of the parts; the part's constants are taken out of the wave's or
    computed from its envs, as the column says."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        bench = load_script(ROOT / 'benchmarks' / 'wave_constants.py', 'wave_constants_bench')
    finally:
        sys.path.remove(str(ROOT / 'benchmarks'))
    parts = bench.ending_parts(200, 40)
    assert [len(p) for p in parts[:3]] == [200, 192, 184]
    assert all(set(b) < set(a) for a, b in zip(parts, parts[1:]) if len(b) < len(a))
    assert 0 < len(parts[-1]) < 50
    gym_cls = bench.ENVS['HopperRandParams']['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(5)]
    stepped, takes = [], []
    real_step, real_constant = gym_cls.batch_step.__func__, bench._KEPT  # pylint: disable=protected-access

    def spy_step(cls, envs_, actions_):
        stepped.append(len(envs_))
        return real_step(cls, envs_, actions_)

    def spy_constant(envs_, name, compute, take=None):
        takes.append(take)
        return real_constant(envs_, name, compute, take)
    monkeypatch.setattr(gym_cls, 'batch_step', classmethod(spy_step))
    monkeypatch.setattr(bench, '_KEPT', spy_constant)
    monkeypatch.setattr(bench, '_each_part_computed',
                        lambda e, n, c, take=None: spy_constant(e, n, c))
    parts = [np.arange(5), np.array([0, 2, 4]), np.array([2])]
    actions = np.zeros((3, 5, 3))
    assert bench._time(gym_cls, envs, actions, False, parts=parts,  # pylint: disable=protected-access
                       part_computed=part_computed) > 0
    assert stepped == [5, 3, 1]
    assert takes and any(t is not None for t in takes) != part_computed


def test_the_runner_reports_a_killed_run_as_failed_not_done(tmp_path, capsys):
    """A run killed by a signal (the out-of-memory killer sends SIGKILL) or ending in an
    error is reported as FAILED with its log, and ``on_done`` still gets its exit code."""
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    specs = [('ok', [sys.executable, '-c', 'pass'], tmp_path / 'ok.log'),
             ('killed', [sys.executable, '-c', 'import os, signal; os.kill(os.getpid(), 9)'],
              tmp_path / 'killed.log'),
             ('error', [sys.executable, '-c', 'raise SystemExit(3)'], tmp_path / 'error.log')]
    codes = {}
    outcome = learning.run_all(specs, 3, None, on_done=codes.__setitem__)
    assert outcome and outcome.ended == 'done'
    assert codes == {'ok': 0, 'killed': -9, 'error': 3}
    assert sorted(outcome.failed) == ['error', 'killed']
    with pytest.raises(learning.click.ClickException, match=r'2 run\(s\) failed'):
        outcome.exit()
    err = capsys.readouterr().err
    assert 'done ok' in err and 'done killed' not in err and 'done error' not in err
    assert "FAILED killed: killed by SIGKILL" in err and str(tmp_path / 'killed.log') in err
    assert f"FAILED error (exit 3); log: {tmp_path / 'error.log'}" in err


def test_a_second_stop_while_the_runs_save_does_not_cut_the_runner_short(tmp_path, capsys):
    """The deadline stops a run that takes a while to save; a SIGTERM to the runner meanwhile
    is acknowledged, the run is waited for, and ``on_done`` gets its exit code."""
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    saving = ('import signal, sys, time\n'
              'signal.signal(signal.SIGTERM, lambda *a: (time.sleep(3), sys.exit(5)))\n'
              'print("up", flush=True)\n'
              'time.sleep(60)\n')
    specs = [('slow', [sys.executable, '-c', saving], tmp_path / 'slow.log')]
    codes = {}

    def on_done(name, code):
        codes[name] = code

    timer = threading.Timer(4.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        outcome = learning.run_all(specs, 1, time.time() + 2.5, on_done=on_done)
    finally:
        timer.cancel()
    assert not outcome and outcome.ended == 'time limit' and outcome.failed == []
    outcome.exit()  # a time limit is a normal end: no error, no exit
    assert codes == {'slow': 5}
    err = capsys.readouterr().err
    assert 'time limit reached' in err and 'SIGTERM: already stopping the runs' in err
    assert signal.getsignal(signal.SIGTERM) is not learning._already_stopping  # restored


@pytest.mark.mujoco
def test_checks_cost_turns_every_check_off_and_back_on(tmp_path):
    """benchmarks/checks_cost.py: its 'off' arm really has no checks (the env's own and the
    sampler's), everything is back on afterwards, and the table and JSON are written."""
    bench = load_script(ROOT / 'benchmarks' / 'checks_cost.py', 'checks_cost_bench')
    from garage_promp.experiment.builder import build_experiment
    from garage_promp.sampler.rollout import RolloutWorker
    exp = build_experiment('ProMP', 'HalfCheetahFwdBack', 1, meta_batch_size=2,
                           episodes_per_task=1, max_episode_length=5, n_test_tasks=None)
    try:
        exp.algo.sample_meta_batch(0)
        backend = exp.algo.sampler.backend
        worker = backend._workers[0]
        layers = [layer for env in worker._pool for layer in bench._gymnasium_envs(env)]
        assert layers and all(layer._check_finite for layer in layers)
        real = RolloutWorker._check_wave_finite
        with bench.checks_off(backend):
            assert not any(layer._check_finite for layer in layers)
            assert RolloutWorker._check_wave_finite is not real
            # A NaN reward passes unchecked.
            assert worker._check_wave_finite(None, None, np.arange(1), np.array([np.nan]),
                                             np.zeros((1, 17)), 1) is None
        assert all(layer._check_finite for layer in layers)
        assert RolloutWorker._check_wave_finite is real
    finally:
        exp.algo.sampler.shutdown_worker()
    result = CliRunner().invoke(bench.main, ['--env', 'HalfCheetahFwdBack', '--repeats', '1',
                                             '-M', '2', '-R', '1', '--out', str(tmp_path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / 'checks_cost.json').read_text())['results']
    assert [r['path'] for r in rows] == ['lean', 'wrapped']
    for row in rows:
        assert row['cost'] == pytest.approx(row['on_all'][0] / row['off_all'][0] - 1)
        assert 0 < row['heartbeat_s'] < 0.01
    assert 'Watchdog' in (tmp_path / 'checks_cost.md').read_text()


@pytest.mark.mujoco
def test_throughput_checks_mode_writes_the_checks_table(tmp_path):
    """throughput.py --mode checks: the checks' cost table of checks_cost.py, at the batch
    given, written next to the other throughput results."""
    bench = load_script(SCRIPT, 'throughput_bench')
    result = CliRunner().invoke(bench.main, ['--mode', 'checks', '--env', 'HalfCheetahFwdBack',
                                             '--batch', 'quick', '--check-pairs', '1',
                                             '--out', str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / 'checks_cost.json').read_text())
    assert saved['meta']['meta_batch_size'] == 2 and saved['meta']['episodes_per_task'] == 2
    assert [(r['env'], r['path'], r['repeats']) for r in saved['results']] == [
        ('HalfCheetahFwdBack', 'lean', 1), ('HalfCheetahFwdBack', 'wrapped', 1)]
    assert '| HalfCheetahFwdBack | wrapped |' in result.output


def test_saved_results_name_the_cpu_and_when_they_were_written(tmp_path):
    """Every benchmark's JSON records the CPU's model (read from /proc/cpuinfo: the machine's
    name alone does not tell the CPUs of one day from another's) and when it was written."""
    bench_io = load_script(ROOT / 'benchmarks' / 'bench_io.py', 'bench_io_meta')
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text('processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n'
                       'processor\t: 1\nmodel name\t: AMD EPYC 9B14\n')
    assert bench_io.processor_name(cpuinfo) == 'AMD EPYC 9B14'
    cpuinfo.write_text('processor\t: 0\nmodel name\t: \n')
    assert bench_io.processor_name(cpuinfo) == bench_io.platform.processor()
    assert bench_io.processor_name(tmp_path / 'missing') == bench_io.platform.processor()
    bench_io.write_results(tmp_path / 'out', 'r', [dict(x=1.)], '| x |', setting=2)
    meta = json.loads((tmp_path / 'out' / 'r.json').read_text())['meta']
    assert meta['processor'] == bench_io.processor_name() and meta['setting'] == 2
    assert re.fullmatch(r'\d{4}-\d\d-\d\d \d\d:\d\d UTC', meta['written']), meta
    if pathlib.Path('/proc/cpuinfo').exists():
        assert meta['processor']
    assert meta['revision'] == bench_io.code_revision()


def test_saved_results_name_the_code_they_measured(tmp_path):
    """The commit of the checkout, marked where tracked files were changed; nothing outside
    a git checkout."""
    bench_io = load_script(ROOT / 'benchmarks' / 'bench_io.py', 'bench_io_revision')
    repo = tmp_path / 'repo'
    repo.mkdir()
    assert bench_io.code_revision(repo) == ''
    git = ['git', '-C', str(repo), '-c', 'user.name=t', '-c', 'user.email=t@t']
    subprocess.run([*git, 'init', '-q'], check=True)
    (repo / 'f').write_text('1')
    subprocess.run([*git, 'add', 'f'], check=True)
    subprocess.run([*git, 'commit', '-qm', 'c'], check=True)
    head = subprocess.run([*git, 'rev-parse', '--short=12', 'HEAD'], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert bench_io.code_revision(repo) == head
    (repo / 'untracked').write_text('x')  # not the code that ran: not counted
    assert bench_io.code_revision(repo) == head
    (repo / 'f').write_text('2')
    assert bench_io.code_revision(repo) == head + '+changes'


def test_saved_results_name_the_code_loaded_when_the_benchmark_started(tmp_path, monkeypatch):
    """A file edited while a benchmark runs does not change the code it loaded: the result
    names the revision at its start, and the one at writing beside it where they differ."""
    bench_io = load_script(ROOT / 'benchmarks' / 'bench_io.py', 'bench_io_started')
    started = bench_io.started_revision()
    assert started == bench_io.code_revision()  # (nothing edited since it was loaded)
    bench_io.write_results(tmp_path, 'same', [dict(x=1.)], '| x |')
    meta = json.loads((tmp_path / 'same.json').read_text())['meta']
    assert meta['revision'] == started and 'revision_at_writing' not in meta
    monkeypatch.setattr(bench_io, 'code_revision', lambda: started + 'x+changes')
    bench_io.write_results(tmp_path, 'edited', [dict(x=1.)], '| x |')
    meta = json.loads((tmp_path / 'edited.json').read_text())['meta']
    assert meta['revision'] == started and meta['revision_at_writing'] == started + 'x+changes'


def test_learning_says_set_does_not_reach_garages_own_mamltrpo(tmp_path, capsys):
    """garage's MAMLTRPO takes no --set: refused when it is the only algorithm, said when
    it runs beside garage_promp's (before any run starts)."""
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    out = tmp_path / 'out'
    result = CliRunner().invoke(learning.main, [
        '--env', 'PointEnvCorner', '--algo', 'garage-MAMLTRPO', '--seeds', '1', '--steps',
        '1000', '--set', 'clip_eps=0.2', '--out', str(out)])
    assert result.exit_code == 2, result.output
    assert "--set applies to the garage_promp algorithms; garage-MAMLTRPO" in result.output
    assert not out.exists()
    learning._check_runs('PointEnvCorner', ['ProMP', 'garage-MAMLTRPO'], 2, 2,
                         ['clip_eps=0.2'])
    assert 'not to garage-MAMLTRPO' in capsys.readouterr().err


@pytest.mark.parametrize('variant, why', [
    (dict(algo='ProMP', env='PointEnvCorner', seed=1, meta_batch_size=2, episodes_per_task=2),
     "its variant.json is not this run's"),
    (dict(algo='ProMP', env='HalfCheetahFwdBack', seed=2, meta_batch_size=2,
          episodes_per_task=2), "its variant.json is not this run's"),
    (None, 'it has no variant.json'),
], ids=['other env', 'other seed', 'no variant'])
def test_learning_refuses_a_run_dir_of_another_run_before_any_run(tmp_path, variant, why):
    """A run directory holding another run (a PointEnvCorner run copied under ProMP_seed=1
    of a HalfCheetahFwdBack benchmark) was continued, counted as done and summarised as
    this benchmark's run: refused, naming it, before any run starts or summary is written."""
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    out = tmp_path / 'out'
    _write_run(out / 'ProMP_seed=1', [0, 1], [1, 2])
    if variant is not None:
        (out / 'ProMP_seed=1' / 'variant.json').write_text(json.dumps(variant))
    before = sorted(p.name for p in out.rglob('*'))
    for extra in (['--steps', '1000'], ['--summarize-only']):
        result = CliRunner().invoke(learning.main, [
            '--env', 'HalfCheetahFwdBack', '--algo', 'ProMP', '--seeds', '1',
            '--meta-batch-size', '2', '--episodes-per-task', '2', '--out', str(out), *extra])
        assert result.exit_code == 1, (extra, result.output)
        assert f"{out / 'ProMP_seed=1'}: {why}" in result.output, result.output
        assert 'not the run of ProMP seed 1 on HalfCheetahFwdBack at 2 x 2' in result.output
        assert sorted(p.name for p in out.rglob('*')) == before
    ours = dict(algo='ProMP', env='HalfCheetahFwdBack', seed=1, meta_batch_size=2,
                episodes_per_task=2)
    (out / 'ProMP_seed=1' / 'variant.json').write_text(json.dumps(ours))
    result = CliRunner().invoke(learning.main, [
        '--env', 'HalfCheetahFwdBack', '--algo', 'ProMP', '--seeds', '1', '--meta-batch-size',
        '2', '--episodes-per-task', '2', '--out', str(out), '--summarize-only'])
    assert result.exit_code == 0, result.output
    assert learning.run_variant('ProMP', 'ML1:reach-v3', 3, (4, 5)) == dict(
        algo='ProMP', env='ML1', task='reach-v3', seed=3, meta_batch_size=4, episodes_per_task=5)


def test_learning_refuses_a_set_size_that_contradicts_its_option(tmp_path):
    """Every run gets --meta-batch-size and --episodes-per-task: a --set of either that
    differs would fail in every run's log, so it is refused before any run starts."""
    learning = load_script(ROOT / 'benchmarks' / 'learning.py', 'learning_bench')
    out = tmp_path / 'out'
    result = CliRunner().invoke(learning.main, [
        '--env', 'PointEnvCorner', '--algo', 'ProMP', '--seeds', '1', '--steps', '1000',
        '--meta-batch-size', '20', '--set', 'meta_batch_size=40', '--out', str(out)])
    assert result.exit_code == 2, result.output
    assert '--set meta_batch_size=40 contradicts --meta-batch-size 20' in result.output
    assert not out.exists()


@pytest.mark.parametrize('args, message', [
    (['--quick', '--batch', 'paper'], '--quick sets --batch itself'),
    (['--quick', '--iters', '5'], '--quick sets --iters itself'),
    (['--mode', 'scaling', '--worker-counts', '1'],
     '--worker-counts is read in --mode workers only, not in --mode scaling'),
    (['--mode', 'workers', '--check-pairs', '3'], '--check-pairs is read in --mode checks only'),
    (['--mode', 'workers', '--batch', 'small'], '--batch is read in --mode table/checks only'),
    (['--mode', 'checks', '--garage-iters', '0'], '--garage-iters is read in --mode table only'),
    (['--mode', 'checks', '--n-workers', '4'], '--n-workers is read in --mode table only'),
    (['--mode', 'workers', '--n-workers', '4'], '--n-workers is read in --mode table only'),
    (['--mode', 'scaling', '--n-workers', '4'], '--n-workers is read in --mode table only'),
    (['--mode', 'checks', '--iters', '5'], '--iters is read in --mode table/workers/scaling'),
    (['--mode', 'checks', '--raw-steps', '5'], '--raw-steps is read in --mode table/workers'),
    (['--mode', 'checks', '--algo', 'ProMP'], '--algo is read in --mode table/workers/scaling'),
    (['--mode', 'workers', '--algo', 'ProMP', '--algo', 'MAML-TRPO'],
     '--mode workers measures one --algo: give it once, not 2 times'),
    (['--mode', 'scaling', '--env', 'PointEnvCorner', '--env', 'HalfCheetahFwdBack'],
     '--mode scaling measures one --env')])
def test_throughput_refuses_an_option_its_run_would_not_read(tmp_path, args, message):
    bench = load_script(SCRIPT, 'throughput_bench')
    result = CliRunner().invoke(bench.main, [*args, '--out', str(tmp_path / 'out')])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / 'out').exists()


def test_every_campaign_command_gives_each_option_once(tmp_path):
    """train.py refuses an option given twice: each figure's runs (quick ones too) pass their
    own options in place of the defaults (ML10's --n-test-tasks 10 for the default 2)."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        import learning
        import paper
    finally:
        sys.path.pop(0)
    from garage_promp.validation import _repeated_option
    train = load_script(ROOT / 'launchers' / 'train.py', 'train_launcher_once')
    commands = 0
    for fig in paper.FIGURES:
        for quick in (False, True):
            for run in paper.runs_of(fig, quick=quick):
                command = learning._run_command(run.algo, run.env, run.seed, run.steps,
                                                run.batch, tmp_path / 'run', False,
                                                list(run.options))
                args = command[2:]
                assert _repeated_option(train.main, args) is None, (fig, quick, args)
                own = dict(zip(run.options[::2], run.options[1::2]))  # the last of each
                for flag, value in own.items():
                    if flag != '--set':  # the run's own value, not the default
                        assert args[args.index(flag) + 1] == value, (fig, flag, args)
                commands += 1
    assert commands > 50
    ml10 = [r for r in paper.runs_of('ml10') if r.env == 'ML10'][0]
    args = learning._run_command(ml10.algo, ml10.env, ml10.seed, ml10.steps, ml10.batch,
                                 tmp_path / 'run', False, list(ml10.options))
    assert args[args.index('--n-test-tasks') + 1] == '10'
    with pytest.raises(ValueError, match='flag-value pairs'):
        learning._run_command('ProMP', 'PointEnvCorner', 1, 100, (2, 2), tmp_path, False,
                              ['--set'])


@pytest.mark.parametrize('script', ['physics.py', 'throughput.py'])
def test_summarize_refuses_what_no_benchmark_writes(tmp_path, script):
    """--summarize reads a plain file of a benchmark's results: a device or named pipe is
    not read, and text, null, NaN or a negative number where a measurement belongs is
    refused naming the field; each benchmark refuses the options it would not read."""
    import copy
    import os
    source = 'physics.json' if script == 'physics.py' else 'workers_2core.json'
    saved = json.loads((ROOT / 'benchmarks' / 'results' / source).read_text())
    field = 'physics' if script == 'physics.py' else 'sample_s'
    cases = {'text': 'fast', 'null': None, 'negative': -1.0,
             'beyond float': 10**400}  # (JSON's 1 and 400 zeros: an int float() refuses)
    script_path = ROOT / 'benchmarks' / script
    for name, value in cases.items():
        damaged = copy.deepcopy(saved)
        damaged['results'][0][field] = value
        path = tmp_path / f'{name}.json'
        path.write_text(json.dumps(damaged))
        # The first through the interpreter, as a user runs it; the rest in this process.
        proc = (_run_benchmark(script, '--summarize', str(path)) if name == 'text'
                else invoke_script(script_path, '--summarize', str(path)))
        assert proc.returncode == 2 and str(path) in proc.stderr, (name, proc.stderr)
        assert 'Traceback' not in proc.stderr
        if name != 'text':
            assert f'results[0].{field} is' in proc.stderr, (name, proc.stderr)
    path = tmp_path / 'nan.json'
    path.write_text(json.dumps(saved).replace(f'"{field}": ', f'"{field}": NaN, "was": ', 1))
    proc = invoke_script(script_path, '--summarize', str(path))
    assert proc.returncode == 2 and f'results[0].{field} is nan' in proc.stderr, proc.stderr
    os.mkfifo(tmp_path / 'pipe')
    for path in ('/dev/zero', str(tmp_path / 'pipe')):
        proc = invoke_script(script_path, '--summarize', path)
        assert proc.returncode == 2 and 'not a file (a' in proc.stderr, proc.stderr
    extra = ['--repeats', '2'] if script == 'physics.py' else ['--iters', '2']
    proc = invoke_script(script_path, '--summarize',
                         str(ROOT / 'benchmarks' / 'results' / source), *extra)
    assert proc.returncode == 2 and f'{extra[0]} would not be read' in proc.stderr, proc.stderr


def test_throughput_summarize_refuses_no_runs_and_truth_values(tmp_path):
    """``{"runs": {}}`` printed nothing with status 0, and ``true`` where a time belongs
    was read as 1 (an update share of 1013%)."""
    saved = json.loads((ROOT / 'benchmarks' / 'results' / 'workers_2core.json').read_text())
    saved['results'][0]['sample_s'] = True
    for name, content, message in (('empty', {'runs': {}}, 'hold no run'),
                                   ('bool', saved, 'results[0].sample_s is true')):
        path = tmp_path / f'{name}.json'
        path.write_text(json.dumps(content))
        proc = _run_benchmark('throughput.py', '--summarize', str(path))
        assert proc.returncode == 2 and message in proc.stderr, (name, proc.stderr)


def _measure_or_die(code, barrier, results):
    """A measurement process for ``at_barrier``: dies with ``code`` before the barrier, or
    puts 0."""
    if code:
        os._exit(code)
    barrier.wait()
    results.put(0)


def test_a_measurement_process_that_dies_ends_the_measurement_naming_it():
    import click
    import psutil
    bench = load_script(SCRIPT, 'throughput_bench')
    assert bench.at_barrier(_measure_or_die, [(0, ), (0, )]) == [0, 0]
    before = {p.pid for p in psutil.Process().children()}  # (multiprocessing's own helper)
    start = time.monotonic()
    with pytest.raises(click.ClickException, match='ended with exit status 3 before giving'):
        bench.at_barrier(_measure_or_die, [(0, ), (3, )])  # the other waits at the barrier
    assert time.monotonic() - start < 60
    assert not [p for p in psutil.Process().children()
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_measurements_end_with_the_benchmark_that_started_them(tmp_path):
    """A benchmark ended by SIGTERM (``kill PID``) takes its measurement processes along:
    the ``_one`` process it runs, and the processes that one forked."""
    import psutil
    parent = subprocess.Popen([sys.executable, '-c', (
        'import sys; sys.path.insert(0, "benchmarks"); from tests.helpers import load_script; '
        'bench = load_script("benchmarks/throughput.py", "throughput_bench"); '
        'bench.run_isolated(dict(what="raw", env="PointEnvCorner", n_workers=2, '
        'n_steps=10**9))')], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # _one and its two forked raw processes
            descendants = psutil.Process(parent.pid).children(recursive=True)
            if len(descendants) >= 3:
                break
            time.sleep(0.5)
        assert len(descendants) >= 3, descendants
        time.sleep(2)
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        gone, alive = psutil.wait_procs(descendants, timeout=30)
        assert not alive, alive
    finally:
        for process in psutil.Process(parent.pid).children(recursive=True) \
                if parent.poll() is None else []:
            process.kill()
        parent.kill()


def test_physics_refuses_more_workers_than_episodes():
    result = CliRunner().invoke(load_script(ROOT / 'benchmarks' / 'physics.py',
                                            'physics_bench').main,
                                ['--env', 'HalfCheetahFwdBack', '-M', '1', '-R', '1',
                                 '--workers', '2'])
    assert result.exit_code == 2 and '--workers 2 is more than the 1 x 1 episodes' in \
        result.output, result.output


ANNOTATE = '''--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
46,820,283,049 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                      file:function
--------------------------------------------------------------------------------
2,000 ( 4.84%)  Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.11.so.1.0]
1,500 ( 2.51%)  ???:mj_kinematics [/site-packages/mujoco/libmujoco.so.3.3.0]
  700 ( 2.01%)  ???:mj_step [/site-packages/mujoco/libmujoco.so.3.3.0]
  300 ( 1.55%)  ./string/memset.S:__memset_avx2_unaligned_erms [/lib/libc.so.6]
'''


def _instructions_bench():
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    try:
        return load_script(ROOT / 'benchmarks' / 'instructions.py', 'instructions_bench')
    finally:
        sys.path.remove(str(ROOT / 'benchmarks'))


def test_instructions_parse_callgrinds_functions_and_group_them_by_library():
    bench = _instructions_bench()
    counts = bench.parse_annotate(ANNOTATE)
    assert len(counts) == 4 and sum(counts.values()) == 4500  # the program's total left out
    assert bench.by_group(counts) == dict(mujoco=2200, mujoco_own=2200, interpreter=2000, rest=300,
                                         total=4500)


TREE = '''--------------------------------------------------------------------------------
Ir                      file:function
--------------------------------------------------------------------------------
46,820,283,049 (100.0%)  PROGRAM TOTALS

 9,000 (19.2%)  < Python/ceval.c:_PyEval_EvalFrameDefault (2x) [/lib/libpython3.11.so.1.0]
 2,000 ( 4.84%)  *  Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.11.so.1.0]

 3,100 ( 2.51%)  < ???:cstep_loop (10x) [/site-packages/garage_promp/envs/cstep.so]
 1,500 ( 2.51%)  *  ???:mj_step [/site-packages/mujoco/libmujoco.so.3.3.0]

   500 ( 2.51%)  < ???:mj_step (10x) [/site-packages/mujoco/libmujoco.so.3.3.0]
   400 ( 2.51%)  *  ???:mj_kinematics [/site-packages/mujoco/libmujoco.so.3.3.0]

   250 ( 1.55%)  < ???:mj_step (10x) [/site-packages/mujoco/libmujoco.so.3.3.0]
    40 ( 1.55%)  < ???:mj_kinematics (3x) [/site-packages/mujoco/libmujoco.so.3.3.0]
    30 ( 1.55%)  < ???:torch_zeros (3x) [/site-packages/torch/lib/libtorch_cpu.so]
   320 ( 1.55%)  *  ./string/memset.S:__memset_avx2_unaligned_erms [/lib/libc.so.6]

    60 ( 1.55%)  < ???:mj_kinematics (6x) [/site-packages/mujoco/libmujoco.so.3.3.0]
    60 ( 1.55%)  *  ./math/s_sin.c:__cos_fma [/lib/libm.so.6]

 1,000 ( 1.55%)  *  ???:cstep_loop [/site-packages/garage_promp/envs/cstep.so]

   700 ( 1.55%)  < ???:operator delete(void*) (9x) [/site-packages/mujoco/libmujoco.so.3.3.0]
   700 ( 1.55%)  *  ./malloc/malloc.c:free [/lib/libc.so.6]
'''


def test_instructions_count_what_mujoco_calls_in_other_libraries_as_mujocos():
    """From ``--tree=caller`` output: each function's own instructions, and MuJoCo's calls
    into the C and maths libraries (memset from mj_step and mj_kinematics, cos from
    mj_kinematics) moved from the rest to MuJoCo; a memset torch calls stays in the rest, and
    so does a free from the C++ runtime's operator delete, which callgrind puts in MuJoCo's
    library in some runs and in the C++ library's in others."""
    bench = _instructions_bench()
    counts = bench.parse_annotate(TREE)
    assert counts[bench.MUJOCO_CALLS] == 250 + 40 + 60
    assert sum(v for k, v in counts.items() if k != bench.MUJOCO_CALLS) == 2000 + 1500 + 400 + \
        320 + 60 + 1000 + 700
    groups = bench.by_group(counts)
    assert groups == dict(mujoco=1500 + 400 + 350, mujoco_own=1500 + 400, interpreter=2000,
                          rest=320 + 60 + 1000 + 700 - 350, total=5980)


def test_instructions_are_the_timed_runs_less_the_start_up_per_env_step(tmp_path):
    """Each revision's row is the run with the timed meta-batches less the one without, per
    env step of the timed ones; a revision other than this tree is run in a checkout of it."""
    bench = _instructions_bench()
    seen = []

    def run(checkout, env, n, meta_batch_size, episodes, workdir):
        seen.append((checkout, n))
        assert (checkout / 'garage_promp' / '__init__.py').is_file()
        cost = 2 if checkout == bench.ROOT else 1  # this tree's meta-batch costs twice as much
        counts = bench.parse_annotate(ANNOTATE)
        return 40 * n, {name: 10 + cost * n * count for name, count in counts.items()}
    rows = bench.measure(['HEAD', '.'], 'HalfCheetahFwdBack', 1, 2, 2, run=run)
    assert [n for _, n in seen] == [0, 1, 0, 1]
    assert seen[0][0] != bench.ROOT and seen[2][0] == bench.ROOT
    assert not seen[0][0].exists()  # the revision's checkout is removed
    first, second = rows
    assert first['mujoco'] == 2200 / 40 and first['interpreter'] == 2000 / 40
    assert first['own'] == 2300 / 40 and second['own'] == 2 * 2300 / 40
    assert second['own_ratio'] == 2 and second['total_ratio'] == 2
    assert second['revision'].startswith('working tree')
    table = bench.format_table(rows, 2, 2)
    assert '| HalfCheetahFwdBack | working tree' in table and '| 2.000 |' in table
    with pytest.raises(Exception, match='not a revision'):
        bench.measure(['no-such-revision'], 'HalfCheetahFwdBack', 1, 2, 2, run=run)


def test_instructions_child_samples_the_meta_batches_it_is_asked_for():
    """The process callgrind counts: a start-up meta-batch and then N more, their env steps
    printed, with this checkout's package."""
    bench = _instructions_bench()
    proc = subprocess.run([sys.executable, '-c', bench.CHILD, 'HalfCheetahFwdBack', '1', '2',
                           '2'], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    assert child['steps'] == 2 * 2 * 2 * 100  # tasks x episodes x rounds x horizon
    assert pathlib.Path(child['package']).is_relative_to(ROOT)


@pytest.mark.parametrize('name', sorted(
    p.name for p in (ROOT / 'benchmarks' / 'results').glob('instructions*.json')))
def test_committed_instruction_counts_are_their_table(name):
    """Each committed instruction count's table is its JSON's, and each row adds up: the
    groups sum to the total, "own" is the total less MuJoCo's, the ratios against the first."""
    bench = _instructions_bench()
    saved = json.loads((ROOT / 'benchmarks' / 'results' / name).read_text())
    rows, meta = saved['results'], saved['meta']
    for row in rows:
        assert row['mujoco'] + row['interpreter'] + row['rest'] == pytest.approx(row['total'])
        assert row['own'] == pytest.approx(row['total'] - row['mujoco'])
        assert row['own_ratio'] == pytest.approx(row['own'] / rows[0]['own'])
    table = bench.format_table(rows, meta['meta_batch_size'], meta['episodes'])
    assert (ROOT / 'benchmarks' / 'results' / name).with_suffix('.md').read_text() == table + '\n'
