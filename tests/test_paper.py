"""benchmarks/paper.py: the campaign's bookkeeping, its report, each figure's pipeline."""
import csv
import json
import math
import os
import pathlib
import pickle
import re
import statistics
import subprocess
import sys
import time

import pytest

from tests.helpers import invoke_script, load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'benchmarks' / 'paper.py'


@pytest.fixture(scope='module')
def paper():
    return load_script(SCRIPT, 'paper_bench')


def _write_progress(run_dir, steps, pre=0., post=1., run=None):
    """A run's log of ``steps``; with ``run``, its ``variant.json`` too (as train.py writes)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if run is not None:
        (run_dir / 'variant.json').write_text(json.dumps(run.variant))
    with open(run_dir / 'progress.csv', 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['TotalEnvSteps', 'Step_0-AverageReturn', 'Step_1-AverageReturn',
                         'Time/Sampling', 'Time/Update', 'Time/MetaTest'])
        for i, s in enumerate(steps):
            writer.writerow([s, pre, post + i, 1.0, 0.5, 0.])


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_campaign_order_and_budgets(paper):
    runs = paper.fig2_runs()
    # Three 2e7-step HalfCheetah seeds of ProMP and MAML-TRPO first.
    first = runs[:6]
    assert {(r.env, r.algo) for r in first} == {('HalfCheetahFwdBack', 'ProMP'),
                                                ('HalfCheetahFwdBack', 'MAML-TRPO')}
    assert sorted(r.seed for r in first) == [1, 1, 2, 2, 3, 3]
    assert all(r.steps == 20_000_000 for r in first)
    # Then one seed of every env before any second seed of the 1e7-step runs.
    middle = runs[6:-6]
    seeds = [r.seed for r in middle]
    assert seeds.index(2) > max(i for i, s in enumerate(seeds) if s == 1)
    assert {r.env for r in middle if r.seed == 1} == set(paper.FIG2_ENVS)
    assert all(r.steps == 10_000_000 for r in middle)
    # HalfCheetah's seeds 4 to 6 (2e7 steps) last.
    assert sorted((r.seed, r.algo) for r in runs[-6:]) == sorted(
        (s, a) for s in (4, 5, 6) for a in ('ProMP', 'MAML-TRPO'))
    assert all(r.steps == 20_000_000 and r.env == 'HalfCheetahFwdBack' for r in runs[-6:])
    # Every (env, algo) of Fig. 2 has 3 seeds of at least 1e7 steps.
    counts = {}
    for r in runs:
        counts[(r.env, r.algo)] = counts.get((r.env, r.algo), 0) + 1
        assert r.steps >= 10_000_000
    assert all(n >= 3 for n in counts.values())
    assert {e for e, a in counts if a == 'ProMP'} == set(paper.FIG2_ENVS)
    assert len({r.name for r in runs}) == len(runs)
    for r in paper.fig5_runs():
        assert ('--set', 'reward_type=sparse') == r.options[:2]


def test_status_counts_done_partial_missing_and_deleted(paper, tmp_path):
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    runs = paper.runs_of('fig5')
    done, partial, finished = runs[0], runs[1], runs[2]
    _write_progress(campaign.result_dir(done), [done.steps // 2, done.steps], run=done)
    _write_progress(campaign.run_dir(partial), [1000, 2000], run=partial)
    _write_progress(campaign.run_dir(finished), [finished.steps], run=finished)
    assert campaign.state(done) == ('done', done.steps)
    assert campaign.state(partial) == ('partial', 2000)
    assert campaign.state(finished)[0] == 'finished'
    text, counts = paper.status_table(campaign, ['fig5'])
    assert counts == {'done': 1, 'partial': 1, 'finished': 1, 'missing': len(runs) - 3}
    assert 'core-hours left' in text
    # A deleted result is missing again; a collected finished run is done.
    (campaign.result_dir(done) / 'progress.csv').unlink()
    assert campaign.state(done)[0] == 'missing'
    assert campaign.collect(finished)
    assert campaign.state(finished)[0] == 'done'
    assert not campaign.collect(partial)


def test_a_live_pid_file_is_running_a_stale_one_is_not(paper, tmp_path):
    """A pid file names the run's process while the process's command line names a
    training script and the run's dir; a pid since reused by another run's train.py (or
    anything else) is not the run."""
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    run, other = paper.runs_of('fig5')[:2]
    for r in (run, other):
        _write_progress(campaign.run_dir(r), [1000], run=r)
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'train.py',
                             '--resume', str(campaign.run_dir(run))])
    _wait_for_exec(proc, b'sleep')
    try:
        for r in (run, other):
            campaign.pid_file(r).write_text(str(proc.pid))
        assert campaign.state(run)[0] == 'running'
        assert campaign.state(other)[0] == 'partial'  # another run's train.py
    finally:
        proc.kill()
        proc.wait()
    assert campaign.state(run)[0] == 'partial'


def test_durations(paper):
    assert paper.parse_duration('2h') == 7200
    assert paper.parse_duration('1h30m') == 5400
    assert paper.parse_duration('45m') == 2700
    assert paper.parse_duration('600') == 600
    for bad in ('soon', '0', '-1h', 'h'):
        with pytest.raises(Exception, match='--time-limit|duration|positive'):
            paper.parse_duration(bad)


def test_report_on_partial_results_draws_what_exists(paper, tmp_path):
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    runs = [r for r in paper.fig2_runs() if r.env == 'HalfCheetahFwdBack']
    promp = [r for r in runs if r.algo == 'ProMP'][:3]
    maml = [r for r in runs if r.algo == 'MAML-TRPO'][:3]
    for i, r in enumerate(promp):  # ProMP clearly ahead, seeds differ a little
        _write_progress(campaign.result_dir(r), [r.steps // 8 * j for j in (1, 2, 4, 8)],
                        post=100. + i, run=r)
    for i, r in enumerate(maml[:2]):
        _write_progress(campaign.result_dir(r), [r.steps // 8 * j for j in (1, 2, 4, 8)],
                        post=10. + 2 * i, run=r)
    # partial:
    _write_progress(campaign.run_dir(maml[2]), [maml[2].steps // 4], post=0., run=maml[2])
    ant = [r for r in paper.fig2_runs() if r.env == 'AntRandDirec']
    ant_promp = next(r for r in ant if r.algo == 'ProMP')
    ant_maml = next(r for r in ant if r.algo == 'MAML-TRPO')
    _write_progress(campaign.result_dir(ant_promp),
                    [ant_promp.steps // 10, ant_promp.steps // 2, ant_promp.steps], post=50.,
                    run=ant_promp)
    _write_progress(campaign.run_dir(ant_maml), [ant_maml.steps // 10, ant_maml.steps // 5],
                    post=40., run=ant_maml)  # in progress, and MAML-TRPO's only Ant run
    hopper = {r.algo: r for r in paper.fig2_runs()
              if r.env == 'HopperRandParams' and r.seed == 1}
    _write_progress(campaign.result_dir(hopper['ProMP']), [hopper['ProMP'].steps // 2,
                                                           hopper['ProMP'].steps],
                    run=hopper['ProMP'])
    _write_progress(campaign.run_dir(hopper['MAML-TRPO']), [hopper['MAML-TRPO'].steps // 10],
                    run=hopper['MAML-TRPO'])
    text = paper.report(campaign, ['fig2'])
    assert (campaign.results_dir / 'fig2' / 'fig2.png').stat().st_size > 5000
    assert (campaign.results_dir / 'report.md').read_text() == text
    assert 'Missing: ' in text and 'fig2/WalkerFwdBack/ProMP_seed=1' in text
    lines = text.splitlines()
    # A run stopped part-way is under way with its steps, not missing.
    under_way = next(line for line in lines if line.startswith('Under way: '))
    missing = next(line for line in lines if line.startswith('Missing: '))
    assert f'{ant_maml.name} ({ant_maml.steps // 5:,} steps)' in under_way
    assert ant_maml.name not in missing and 'fig2/WalkerFwdBack/ProMP_seed=1' not in under_way
    claim = next(line for line in lines
                 if line.startswith('| Fig. 2 HalfCheetahFwdBack: ProMP > MAML-TRPO'))
    # MAML-TRPO's run in progress does not count beside its finished ones: the
    # comparison is at the finished runs' 2e7 steps, three seeds against two.
    assert '(3 seeds)' in claim and '(2) at 20,000,000 env steps' in claim
    assert 'reproduced' in claim
    assert '| HalfCheetahFwdBack | MAML-TRPO | 2 (+1 in progress) | 20,000,000 |' in text
    # Where an algorithm has only a run in progress, it counts, at the steps it reached.
    ant_claim = next(line for line in lines
                     if line.startswith('| Fig. 2 AntRandDirec: ProMP > MAML-TRPO'))
    assert f'at {ant_maml.steps // 5:,} env steps' in ant_claim
    assert f'| AntRandDirec | MAML-TRPO | 1 (in progress) | {ant_maml.steps // 5:,} |' in text
    # ... and where that run has not reached the other's first logged epoch, nothing is
    # compared (the report is still written).
    hopper_claim = next(line for line in lines
                        if line.startswith('| Fig. 2 HopperRandParams: ProMP > MAML-TRPO'))
    assert 'no epoch of ProMP logged by 1,000,000 env steps' in hopper_claim
    assert hopper_claim.endswith('| not measured yet |')
    walker = next(line for line in lines
                  if line.startswith('| Fig. 2 WalkerFwdBack: ProMP > MAML-TRPO'))
    assert 'not run yet' in walker
    assert '| WalkerFwdBack | ProMP | 0 | - | - | - |' in text


def test_verdicts(paper):
    assert paper._verdict(3., 0.01, 3).startswith('reproduced')
    assert paper._verdict(-3., 0.99, 3).startswith('not reproduced')
    # The other direction's test, with its p, and the two-sided p (twice the smaller one).
    assert paper._verdict(-3.6, 0.971, 3).endswith(
        'the opposite is significant (its one-sided p = 0.029 < 0.05; two-sided p = 0.058)')
    # A claim of the package's own (not the paper's) holds or does not.
    assert paper._verdict(3., 0.01, 3, paper=False).startswith('holds')
    assert paper._verdict(-3., 0.99, 3, paper=False).startswith('does not hold')
    assert '8 seeds' in paper._verdict(1., 0.2, 8)
    assert 'other way' not in paper._verdict(1., 0.2, 8)
    against = paper._verdict(-2.9, 0.93, 2)  # two seeds a side can leave |t| = 2.9 undecided
    assert against.startswith('not significant') and 'runs the other way' in against
    assert '2 seeds each would make the other way significant' in against
    t, p = paper.welch([3., 4., 5.], [0., 1., 2.])
    assert t == pytest.approx(3 / (2 / 3) ** 0.5) and p < 0.05
    # Welch's t = 3.67 with 3 seeds each (p < 0.05): 3 seeds each, not fewer; the normal
    # rule 2 (2.5 / d)^2 would say 2, where t = 3 over two degrees of freedom is p = 0.05.
    assert paper.seeds_needed([3., 4., 5.], [0., 1., 2.]) == 3
    # Two seeds each at t = -3.1 (about one degree of freedom, p = 0.9): more than the two
    # already run, though the normal rule would say 2.
    assert paper.seeds_needed([0.1446, 0.2114], [0.278, 0.289]) == 4
    assert paper.seeds_needed([1., 2.], [1., 2.]) == math.inf  # no difference
    assert paper.seeds_needed([1., 1.], [2., 2.]) == math.inf  # no spread: nothing to decide
    # At many seeds' worth it is the usual rule, n ≈ 2 (2.49 / d)^2 (d ≈ 0.39: about 83).
    wide = paper.seeds_needed([0.1, -0.1, 0.3, -0.3], [0., 0.2, -0.2, 0.4])
    d = 0.1 / statistics.stdev([0.1, -0.1, 0.3, -0.3])
    assert abs(wide - 2 * (2.486 / d) ** 2) < 0.05 * wide
    assert paper._pm([0.1446, 0.2114]) == '0.178 ± 0.047'  # two significant digits below 1
    assert paper._pm([225.5, 300., 150.]) == '225.2 ± 75.0' and paper._pm([0.5]) == '0.50'


def test_family_note_holds_the_verdicts_to_all_claims_at_once(paper):
    """Holm's step-down over every tested paper claim: the k-th smallest p (from 0) must be at
    most 0.05 / (m - k), and the first that is not ends the list."""
    tested = [('a', 0.0008), ('b', 0.0013), ('c', 0.011), ('d', 0.013)] + [
        (f'x{i}', 0.5) for i in range(15)]  # 19 claims, as in the committed report
    note, blank = paper.family_note(tested)
    assert blank == '' and 'over all 19 tested together' in note
    assert '2 of the 4 with p < 0.05 stay significant; not: c (p = 0.011); d (p = 0.013).' in note
    # Few claims: 0.02 <= 0.05 / 2 and 0.04 <= 0.05 / 1, so both stay.
    note, _ = paper.family_note([('a', 0.04), ('b', 0.02)])
    assert '2 of the 2 with p < 0.05 stay significant.' in note
    # The step-down stops at the first failure, even where a later p would pass its own bound.
    note, _ = paper.family_note([('a', 0.03), ('b', 0.04)])
    assert '0 of the 2' in note and 'not: a (p = 0.030); b (p = 0.040)' in note
    assert paper.family_note([]) == []
    # p exactly 0.05 passes neither its own test nor Holm's.
    note, _ = paper.family_note([('a', 0.05)])
    assert '0 of the 0 with p < 0.05' in note and 'opposite' not in note


def test_family_note_holds_the_opposite_verdicts_to_every_test_made(paper):
    """A claim whose difference runs against it at one-sided p' = 1 - p < 0.05 is called
    "the opposite is significant": a second test, so the note puts it in the family of every
    test made and says whether it stays (the committed report's Hopper claim: p' = 0.029
    among 20 tests, whose smallest bound is 0.05 / 20)."""
    tested = [('a', 0.0008), ('b', 0.0013), ('h', 0.971)] + [(f'x{i}', 0.5) for i in range(16)]
    note, _ = paper.family_note(tested)
    assert 'over all 19 tested together' in note and '2 of the 2 with p < 0.05' in note
    assert ('with those in the family (20 tests), h, the opposite (p = 0.029) does not stay '
            'significant.') in note
    # With few tests it stays: 0.01 < 0.05 / 2 after a (0.001 < 0.05 / 3).
    note, _ = paper.family_note([('a', 0.001), ('h', 0.99)])
    assert 'family (3 tests), h, the opposite (p = 0.010) stays significant.' in note
    # The claims' own p-values count in that family: h's 0.01 comes first (under 0.05 / 3)
    # and b's 0.015 second (under 0.05 / 2); below, 0.02 is over 0.05 / 4, which ends the
    # step-down before h's 0.04 is reached.
    note, _ = paper.family_note([('b', 0.015), ('h', 0.99)])
    assert '1 of the 1 with p < 0.05 stay significant.' in note
    assert 'family (3 tests), h, the opposite (p = 0.010) stays significant.' in note
    note, _ = paper.family_note([('b', 0.02), ('c', 0.03), ('h', 0.96)])
    assert 'family (4 tests), h, the opposite (p = 0.040) does not stay significant.' in note


def test_a_claim_on_a_sparsely_logged_column_names_where_it_was_logged(paper, tmp_path):
    """ML10's held-out success is logged every 10 epochs: "at 20,000,000 env steps" would
    hide that its last three values are from earlier epochs, so the row says where."""
    def rows(shift):
        return [{'TotalEnvSteps': str(1000 * (i + 1)), 'Step_1-AverageReturn': str(i + shift),
                 'MetaTest/Average/SuccessRate': str((i + shift) / 100) if i % 10 == 0 else ''}
                for i in range(30)]
    data = {('ML10', 'ProMP'): {1: rows(3), 2: rows(4)},
            ('ML10', 'MAML-TRPO'): {1: rows(0), 2: rows(2)}}
    (row, ) = paper.comparison_rows(data, 'Meta-World', 'ML10', 'ProMP', ['MAML-TRPO'],
                                    'MetaTest/Average/SuccessRate', paper=False)
    assert 'at 30,000 env steps (each seed\'s last 3 logged values, at 1,000-21,000 env ' \
        'steps)' in row[2]
    (row, ) = paper.comparison_rows(data, 'Meta-World', 'ML10', 'ProMP', ['MAML-TRPO'])
    assert 'at 30,000 env steps; t' in row[2]  # every epoch's: the stated rule, unsaid
    tested = []
    paper.comparison_rows(data, 'Fig. 2', 'ML10', 'ProMP', ['MAML-TRPO'], tested=tested)
    paper.comparison_rows(data, 'Meta-World', 'ML10', 'ProMP', ['MAML-TRPO'], paper=False,
                          tested=tested)
    assert [claim for claim, _ in tested] == ['Fig. 2 ML10: ProMP > MAML-TRPO']  # paper's only


def _wait_for_exec(proc, name, limit=30.):
    """Until a child has exec'd its command line is empty or pytest's (on a loaded host a
    check right after ``Popen`` can see either); wait until it names ``name``."""
    deadline = time.monotonic() + limit
    while name not in pathlib.Path(f'/proc/{proc.pid}/cmdline').read_bytes():
        assert time.monotonic() < deadline, f'the child never ran {name!r}'
        time.sleep(0.01)


def _paper_here(*args):
    """``paper.py ARGS`` in this process, for the commands that only read and write files
    (``status``, ``report``): exit status 0, no traceback."""
    proc = invoke_script(SCRIPT, *args, command='cli')
    assert proc.returncode == 0 and 'Traceback' not in proc.stderr, (
        proc.stdout[-2000:] + proc.stderr[-3000:])
    return proc


def _paper(*args, cwd=ROOT):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _numbers(rows):
    """The rows without wall-clock columns (which differ between any two runs)."""
    return [{k: v for k, v in r.items() if not k.startswith('Time') and 'Time' not in k}
            for r in rows]


def _half_run(campaign, run):
    """Train ``run`` in ``campaign`` to half its budget, as a run stopped by --time-limit is
    left; return its rows."""
    first = campaign.command(run)
    first[first.index('--max-env-steps') + 1] = str(run.steps // 2)
    subprocess.run(first, check=True, capture_output=True, cwd=ROOT, timeout=600)
    assert campaign.state(run)[0] == 'partial'
    return _rows(campaign.run_dir(run) / 'progress.csv')


def _assert_rows_of_an_uninterrupted_run(run, tmp_path, resumed):
    """``resumed`` has the rows (wall-clock columns aside) of ``run`` trained straight
    through in runs and results directories of its own."""
    _paper('run', 'fig5', '--quick', '--only', run.name, '--runs-dir', str(tmp_path / 'b'),
           '--results-dir', str(tmp_path / 'b-results'))
    straight = _rows(tmp_path / 'b-results' / run.name / 'progress.csv')
    assert len(resumed) == len(straight) >= 2
    assert _numbers(resumed) == _numbers(straight)


@pytest.mark.slow
def test_an_interrupted_run_continues_with_the_rows_of_an_uninterrupted_one(paper, tmp_path):
    run = paper.quick_runs('fig5')[0]
    # --quick puts the runs in RUNS_DIR/quick.
    campaign = paper.Campaign(tmp_path / 'a' / 'quick', tmp_path / 'a-results')
    before = _half_run(campaign, run)  # interrupted: part of its budget done
    args = ['--runs-dir', str(tmp_path / 'a'), '--results-dir', str(tmp_path / 'a-results')]
    out = _paper('run', 'fig5', '--quick', '--only', run.name, *args).stdout
    assert 'done' in out
    resumed = _rows(campaign.result_dir(run) / 'progress.csv')
    assert resumed[:len(before)] == before  # continued: the first epochs' rows, times and all
    _assert_rows_of_an_uninterrupted_run(run, tmp_path, resumed)


@pytest.mark.slow
@pytest.mark.mujoco
@pytest.mark.parametrize('fig', ['fig2', 'fig3', 'fig5', 'stepsize', 'logstd',
                                 pytest.param('ml10', marks=pytest.mark.metaworld)])
def test_quick_pipeline_end_to_end(tmp_path, fig, paper):
    args = ['--quick', '--runs-dir', str(tmp_path)]
    _paper('run', fig, *args)
    # status and report read files: in this process (the interpreter's start-up costs more).
    status = _paper_here('status', fig, *args).stdout
    n = len(paper.quick_runs(fig))
    assert f'{n} done' in status
    report = _paper_here('report', fig, *args).stdout
    assert f'{n} of {n} runs done' in report
    assert (tmp_path / 'quick' / 'results' / fig / f'{fig}.png').stat().st_size > 5000
    if fig == 'fig5':  # the paper's picture, from the seed-1 snapshots
        assert (tmp_path / 'quick' / 'results' / 'fig5' / 'fig5_trajectories.png').exists()
        assert 'fig5_trajectories.png' in report
    for run in paper.quick_runs(fig):
        variant = json.loads((tmp_path / 'quick' / 'results' / run.name / 'variant.json')
                             .read_text())
        assert variant['algo'] == run.algo and variant['max_env_steps'] == run.steps
    if fig == 'stepsize':  # the learned arm trains its step sizes; the fixed arm is Fig. 2's
        learned = [r for r in paper.quick_runs(fig) if r.label]
        assert learned and all(r.name.startswith('stepsize/') for r in learned)
        for run in learned:
            variant = json.loads((tmp_path / 'quick' / 'results' / run.name / 'variant.json')
                                 .read_text())
            assert variant['overrides'] == {'trainable_inner_step_size': True}
        assert f'| Learned step sizes HalfCheetahFwdBack: {paper.LEARNED_STEP} > ProMP |' in report
    if fig == 'logstd':  # the per-dimension arms learn one log-std per action dimension
        per_dim = [r for r in paper.quick_runs(fig) if r.label]
        assert sorted(r.algo for r in per_dim) == ['MAML-TRPO', 'ProMP']
        for run in per_dim:
            variant = json.loads((tmp_path / 'quick' / 'results' / run.name / 'variant.json')
                                 .read_text())
            assert variant['log_std'] == 'per-dimension'
        for claim in ('ProMP-std-per-dim > MAML-TRPO-std-per-dim', 'ProMP-std-per-dim > ProMP',
                      'MAML-TRPO-std-per-dim > MAML-TRPO'):
            assert f'| Log-std per dimension HalfCheetahFwdBack: {claim} |' in report
    if fig == 'ml10':  # the success claims, measured on the meta-test's held-out classes
        assert ('| Meta-World ML10 held-out success (the periodic meta-test): ProMP > MAML-TRPO |'
                in report)
        assert 'not run yet' not in report.split('## Claims')[1]
        _ml10_final_evaluation(tmp_path, args, paper)


def _ml10_final_evaluation(tmp_path, args, paper):
    """The next ``run ml10`` evaluates each finished run by the baselines' protocol, once,
    and the report puts the per-class tables side by side."""
    results = tmp_path / 'quick' / 'results'
    out = _paper('run', 'ml10', *args).stderr
    runs = paper.quick_runs('ml10')
    assert f'0 runs to do, {len(runs)} final evaluations' in out
    for run in runs:
        rows = _rows(results / run.name / paper.FINAL_EVALUATION_CSV)
        assert [r['task'] for r in rows][-1] == 'Average' and len(rows) == 6  # 5 classes
        assert all('metaworld-algorithms' in r['protocol'] for r in rows)
        assert not (results / run.name / (paper.FINAL_EVALUATION_CSV + '.partial')).exists()
    assert '0 runs to do\n' in _paper('run', 'ml10', *args).stderr  # nothing left to evaluate
    report = _paper_here('report', 'ml10', *args).stdout
    header = '| held-out class | ' + ' | '.join(f'{r.tag} seed 1' for r in runs) + ' |'
    table = report.split(header)[1].split('\n\n')[0].splitlines()[2:]
    assert len(table) == 6 and table[-1].startswith('| Average | ')  # 5 classes and overall
    assert all(row.count(' → ') == len(runs) for row in table)


def test_a_final_evaluation_waits_for_its_run_and_needs_its_snapshot(paper, tmp_path):
    """Only finished ML10 runs are evaluated, only once, and only where their snapshot is."""
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    ml10 = paper.ml10_runs()
    done, elsewhere, partial = ml10[0], ml10[1], ml10[2]
    for run in (done, elsewhere):
        _write_progress(campaign.run_dir(run), [run.steps], run=run)
        campaign.collect(run)
    (campaign.run_dir(done) / 'params.pkl').write_bytes(b'snapshot')
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.rmtree(campaign.run_dir(elsewhere))  # finished on another machine
    _write_progress(campaign.run_dir(partial), [partial.steps // 2], run=partial)
    specs, away = paper.final_evaluations(campaign, ml10 + paper.fig2_runs())
    assert [name for name, *_ in specs] == [f'{done.name} final evaluation'] and away == [
        elsewhere.name]
    name, command, _, target = specs[0]
    assert command[2:] == [str(campaign.run_dir(done)), '--protocol', 'metaworld-algorithms',
                           '--csv', str(target) + '.partial']
    target.write_text('task\n')
    assert paper.final_evaluations(campaign, ml10)[0] == []


@pytest.mark.slow
@pytest.mark.mujoco
def test_quick_fig8_draws_the_bars(tmp_path):
    args = ['--quick', '--runs-dir', str(tmp_path)]
    _paper('run', 'fig8', *args)
    report = _paper_here('report', 'fig8', *args).stdout
    assert '| ProMP |' in report and '| MAML-TRPO |' in report and '| LVC-VPG |' in report
    assert (tmp_path / 'quick' / 'results' / 'fig8' / 'fig8.png').stat().st_size > 5000


@pytest.mark.slow
def test_quick_fig6_runs_and_reports(tmp_path):
    args = ['--quick', '--runs-dir', str(tmp_path)]
    _paper('run', 'fig6', *args)
    assert 'fig6: done' in _paper_here('status', 'fig6', *args).stdout
    report = _paper_here('report', 'fig6', *args).stdout
    assert '| DiCE-VPG |' in report and '| E-MAML-VPG |' in report
    assert '(0.090, 0.050)' in report  # both start at the paper's theta
    assert (tmp_path / 'quick' / 'results' / 'fig6' / 'fig6.png').stat().st_size > 5000


def test_fig5_report_shows_the_trajectories_once_drawn(paper, tmp_path):
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    text = paper.report(campaign, ['fig5'])
    assert 'fig5_trajectories.png' not in text
    (campaign.results_dir / 'fig5').mkdir(parents=True, exist_ok=True)
    (campaign.results_dir / 'fig5' / 'fig5_trajectories.png').write_bytes(b'png')
    assert '![fig5 trajectories](fig5/fig5_trajectories.png)' in paper.report(campaign, ['fig5'])


def test_each_claim_compares_its_own_pair_at_their_common_steps(paper, tmp_path):
    """A third algorithm's shorter runs do not cut the ProMP vs MAML-TRPO comparison short."""
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    runs = [r for r in paper.fig2_runs() if r.env == 'HalfCheetahFwdBack' and r.seed <= 2]
    for r in runs:
        post = {'ProMP': 50., 'MAML-TRPO': 10., 'E-MAML-TRPO': 20.}[r.algo]
        _write_progress(campaign.result_dir(r), [r.steps // 4 * j for j in (1, 2, 3, 4)],
                        post=post + r.seed, run=r)
    text = paper.report(campaign, ['fig2'])
    lines = text.splitlines()
    maml = next(x for x in lines if x.startswith('| Fig. 2 HalfCheetahFwdBack: ProMP > MAML-TRPO'))
    emaml = next(x for x in lines
                 if x.startswith('| Fig. 2 HalfCheetahFwdBack: ProMP > E-MAML-TRPO'))
    assert 'at 20,000,000 env steps' in maml and 'at 10,000,000 env steps' in emaml
    # The table: each algorithm at its own seeds' steps (ProMP's last 3 rows: 51.5 + 2 ...).
    promp_row = next(x for x in lines if x.startswith('| HalfCheetahFwdBack | ProMP |'))
    assert '| 20,000,000 |' in promp_row and '53.50 ± 0.71' in promp_row
    # The comparison along the way: none before the first logged epoch (5e6), then the
    # first row only (post + 0) at 5e6, the mean of the last 3 at 2e7.
    along = [x for x in lines if x.startswith('| HalfCheetahFwdBack | ') and x.count('|') == 6]
    assert not any('| 2,500,000 |' in x for x in along)
    assert '| HalfCheetahFwdBack | 5,000,000 | 51.50 ± 0.71 | 11.50 ± 0.71 |' in along[0]
    assert '| HalfCheetahFwdBack | 20,000,000 | 53.50 ± 0.71 | 13.50 ± 0.71 |' in along[-1]


def test_fig2_report_compares_at_equal_iterations_as_the_papers_axis(paper, tmp_path):
    """Where one algorithm's episodes end sooner, equal env steps are unequal iterations:
    the report also compares at the iterations every seed of both reached (the
    reference's x-axis), with each one's seeds and env steps per iteration."""
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    runs = [r for r in paper.fig2_runs() if r.env == 'HumanoidRandDirec' and r.seed <= 2]
    for r in runs:
        if r.algo == 'ProMP':  # finished: 8 iterations of a budget's eighth
            _write_progress(campaign.result_dir(r), [r.steps // 8 * (j + 1) for j in range(8)],
                            post=100. + r.seed, run=r)
        else:  # MAML-TRPO: 16 iterations of a sixteenth, the same budget in all
            _write_progress(campaign.result_dir(r), [r.steps // 16 * (j + 1) for j in range(16)],
                            post=10. + r.seed, run=r)
    going = next(r for r in paper.fig2_runs() if r.env == 'HumanoidRandDirec' and r.seed == 3
                 and r.algo == 'ProMP')
    # drawn, not counted:
    _write_progress(campaign.run_dir(going), [going.steps // 8], post=0., run=going)
    ant = {r.algo: r for r in paper.fig2_runs() if r.env == 'AntRandDirec' and r.seed == 1}
    _write_progress(campaign.result_dir(ant['ProMP']), [ant['ProMP'].steps // 2,
                                                        ant['ProMP'].steps], run=ant['ProMP'])
    _write_progress(campaign.run_dir(ant['MAML-TRPO']), [ant['MAML-TRPO'].steps // 10],
                    post=5., run=ant['MAML-TRPO'])  # MAML-TRPO's only Ant run, in progress:
    # counted, and said so
    lines = paper.report(campaign, ['fig2']).splitlines()
    # At equal env steps (the budget) MAML-TRPO has had 16 iterations: post + 13..15.
    claim = next(x for x in lines if x.startswith('| Fig. 2 HumanoidRandDirec: ProMP > MAML-TRPO'))
    assert '107.50 ± 0.71 (2 seeds) vs 25.50 ± 0.71 (2) at 10,000,000 env steps' in claim
    # At equal iterations (8): MAML-TRPO's post + 5..7, at 625,000 env steps an iteration.
    start = next(i for i, x in enumerate(lines) if 'at equal iterations' in x)
    table = lines[start + 4:lines.index('', start + 2)]  # its rows, up to the blank line
    assert table[0] == ('| AntRandDirec | 1 | 1 / 1 (in progress) | 5,000,000 | 1,000,000 | '
                        '1.0 | 5.0 | - |')
    assert table[1].startswith('| HumanoidRandDirec | 8 | 2 / 2 | 1,250,000 | 625,000 | '
                               '107.50 ± 0.71 | 17.50 ± 0.71 | +')
    assert len(table) == 2
    assert paper.value_at_iteration(
        [{'k': '1'}, {'k': ''}, {'k': '3'}, {'k': '5'}, {'k': '100'}], 'k', 4) == 3.


def test_stepsize_reuses_fig2s_fixed_step_runs(paper):
    """The fixed-step arm is Fig. 2's ProMP on HalfCheetahFwdBack (seeds 1-3, same budget
    and batch), so only the learned runs are new; they differ by the option alone."""
    runs = paper.stepsize_runs()
    fig2 = {r.name: r for r in paper.fig2_runs()}
    fixed = [r for r in runs if not r.label]
    learned = [r for r in runs if r.label]
    assert [fig2[r.name] for r in fixed] == fixed and len(fixed) == 3
    assert [r.seed for r in learned] == [1, 2, 3]
    for a, b in zip(fixed, learned):
        assert (a.env, a.algo, a.steps, a.batch) == (b.env, b.algo, b.steps, b.batch)
        assert b.options == ('--set', 'trainable_inner_step_size=true')
        assert b.name == f'stepsize/HalfCheetahFwdBack/{paper.LEARNED_STEP}_seed={b.seed}'


def test_logstd_reuses_fig2s_shared_std_runs(paper):
    """The shared-std arms are Fig. 2's 2e7-step HalfCheetahFwdBack runs of ProMP and
    MAML-TRPO (seeds 1-3); the per-dimension runs differ from them by the option alone."""
    runs = paper.logstd_runs()
    fig2 = {r.name: r for r in paper.fig2_runs()}
    shared = [r for r in runs if not r.label]
    per_dim = [r for r in runs if r.label]
    assert [fig2[r.name] for r in shared] == shared and len(shared) == 6
    for a, b in zip(shared, per_dim):
        assert (a.env, a.algo, a.seed, a.steps, a.batch) == (b.env, b.algo, b.seed, b.steps,
                                                               b.batch)
        assert b.options == ('--log-std', 'per-dimension')
        assert b.name == f'logstd/HalfCheetahFwdBack/{b.algo}-std-per-dim_seed={b.seed}'


def _paper_fails(*args):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_a_run_dir_with_a_snapshot_continues_whatever_its_log(paper, tmp_path):
    """A snapshot is never deleted, even beside an empty or missing progress.csv: the run
    continues (and train.py --resume checks the log against the snapshot)."""
    run = paper.quick_runs('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    run_dir = campaign.run_dir(run)
    run_dir.mkdir(parents=True)
    (run_dir / 'params.pkl').write_bytes(b'snapshot')
    (run_dir / 'progress.csv').write_text('TotalEnvSteps\n')
    (run_dir / 'variant.json').write_text(json.dumps(
        dict(algo=run.algo, env=run.env, seed=run.seed, meta_batch_size=run.batch[0],
             episodes_per_task=run.batch[1])))
    command = campaign.command(run)
    assert '--resume' in command
    assert (run_dir / 'params.pkl').read_bytes() == b'snapshot'


def test_a_snapshot_of_another_run_is_refused_not_trained_on(paper, tmp_path):
    run = paper.quick_runs('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    run_dir = campaign.run_dir(run)
    run_dir.mkdir(parents=True)
    (run_dir / 'params.pkl').write_bytes(b'snapshot')
    with pytest.raises(paper.click.ClickException, match='has no variant.json'):
        campaign.command(run)  # no variant.json: nothing says whose snapshot it is
    (run_dir / 'variant.json').write_text(json.dumps(dict(algo='ProMP', env=run.env, seed=1)))
    with pytest.raises(paper.click.ClickException, match="not this run's"):
        campaign.command(run)
    assert sorted(p.name for p in run_dir.iterdir()) == ['params.pkl', 'variant.json']
    # status says so too (it listed such a directory as partial, which run then refused)
    assert campaign.state(run)[0] == 'damaged'
    assert "not this run's" in campaign.damage[run.name]


def test_a_start_that_never_saved_is_cleared_and_foreign_files_set_aside(paper, tmp_path):
    run = paper.quick_runs('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    run_dir = campaign.run_dir(run)
    run_dir.mkdir(parents=True)
    for name in ('progress.csv', 'variant.json', 'debug.log', '.lock',
                 'events.out.tfevents.1.vm'):
        (run_dir / name).write_text('x')
    assert '--resume' not in campaign.command(run)
    assert not run_dir.exists()  # only what a start writes: removed
    run_dir.mkdir(parents=True)
    (run_dir / 'progress.csv').write_text('x')
    (run_dir / 'notes.txt').write_text('mine')
    assert '--resume' not in campaign.command(run)
    assert not run_dir.exists()
    aside = list(run_dir.parent.glob(run_dir.name + '.set-aside-*'))
    assert len(aside) == 1 and (aside[0] / 'notes.txt').read_text() == 'mine'


def test_a_damaged_log_is_named_by_status_and_report_and_refused_by_run(paper, tmp_path):
    run = next(r for r in paper.quick_runs('fig5') if r.tag == 'MAML-TRPO')
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    _write_progress(campaign.run_dir(run), [100], run=run)
    with open(campaign.run_dir(run) / 'progress.csv', 'a') as f:
        f.write('1,2\n')  # a row that does not fit the header
    assert campaign.state(run)[0] == 'damaged'
    args = ['--quick', '--runs-dir', str(tmp_path / 'runs'), '--results-dir',
            str(tmp_path / 'results')]
    # run: refused before any work, naming the file and line.
    campaign = paper.Campaign(tmp_path / 'runs' / 'quick', tmp_path / 'results')
    _write_progress(campaign.run_dir(run), [100], run=run)
    with open(campaign.run_dir(run) / 'progress.csv', 'a') as f:
        f.write('1,2\n')
    err = _paper_fails('run', 'fig5', *args).stderr
    assert 'progress.csv, line 3' in err and str(campaign.run_dir(run)) in err
    assert sorted(p.name for p in campaign.run_dir(run).iterdir()) == ['progress.csv',
                                                                      'variant.json']
    status = _paper_here('status', 'fig5', *args).stdout
    assert f'damaged  {run.name}' in status and 'line 3' in status
    # LVC-TRPO's runs finished: its claims lack only the other side's numbers.
    for other in (r for r in paper.quick_runs('fig5') if r.tag == 'LVC-TRPO'):
        _write_progress(campaign.result_dir(other), [other.steps], run=other)
        assert campaign.state(other)[0] == 'done'
    text = paper.report(campaign, ['fig5'])
    assert 'line 3' in text
    # Named once, as damaged: not also missing or under way; a claim that lacks numbers
    # only for its algorithm says why, rather than 'not run yet' (E-MAML-TRPO's has not run).
    lists = [line for line in text.splitlines() if line.startswith(('Missing:', 'Under way:'))]
    assert lists and not any(run.name in line for line in lists), lists
    pairs = {}
    for row in (line for line in text.splitlines() if line.startswith('| Fig. 5')):
        pair = row.split(' |')[0].rsplit(': ', 1)[-1]
        if ' > ' in pair:  # a comparison (not the trajectories' claim)
            pairs[row] = pair.split(' > ')
    assert {run.tag in compared for compared in pairs.values()} == {True, False}, pairs
    for row, compared in pairs.items():
        assert ('left out: a damaged log' in row) == (run.tag in compared), row


@pytest.mark.parametrize('variant, why', [
    (None, 'has no variant.json'), ('{not json', 'not valid JSON'),
    ('[1, 2]', 'holds a JSON list'), ('{"algo": "ProMP"}', "is not this run's")])
def test_a_finished_log_without_its_runs_variant_is_damaged_and_not_copied(
        paper, tmp_path, variant, why):
    # Its numbers would otherwise be counted, copied and reported as the run's.
    run = next(r for r in paper.quick_runs('fig5') if r.algo != 'ProMP')
    campaign = paper.Campaign(tmp_path / 'runs' / 'quick', tmp_path / 'results')
    for directory in (campaign.result_dir(run), campaign.run_dir(run)):
        _write_progress(directory, [run.steps])
        if variant is not None:
            (directory / 'variant.json').write_text(variant)
        assert campaign.state(run)[0] == 'damaged'
        assert why in campaign.damage[run.name] and str(directory) in campaign.damage[run.name]
        (directory / 'variant.json').write_text(_variant(run))
        assert campaign.state(run)[0] in ('done', 'finished')
        (directory / 'variant.json').unlink()
        if directory == campaign.result_dir(run):
            (directory / 'progress.csv').unlink()
    # run: refused before any work; the finished run's files are not copied to the results.
    if variant is not None:
        (campaign.run_dir(run) / 'variant.json').write_text(variant)
    err = _paper_fails('run', 'fig5', '--quick', '--only', run.tag, '--runs-dir',
                       str(tmp_path / 'runs'), '--results-dir', str(tmp_path / 'results')).stderr
    assert why in err
    assert not (campaign.result_dir(run) / 'variant.json').exists()


def test_a_second_runner_of_a_figure_is_refused(paper, tmp_path):
    # Two `run`s of one figure would each start the runs the other has not started yet.
    from garage_promp.experiment.run_dir import owned_run_dir
    runs = tmp_path / 'runs' / 'quick'
    with owned_run_dir(str(runs / 'fig5')):  # the first runner
        err = _paper_fails('run', 'fig5', '--quick', '--runs-dir', str(tmp_path / 'runs'),
                           '--results-dir', str(tmp_path / 'results')).stderr
    assert f'another paper.py run is running fig5 in --runs-dir {runs}' in err
    assert f'pid {os.getpid()}' in err
    assert sorted(p.name for p in (runs / 'fig5').iterdir()) == ['.lock']  # nothing started


def test_a_row_cut_short_by_a_kill_is_not_read(paper, tmp_path):
    run = paper.quick_runs('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    _write_progress(campaign.run_dir(run), [100, 200], run=run)
    with open(campaign.run_dir(run) / 'progress.csv', 'a') as f:
        f.write('30')  # the start of a row of 300 steps, cut by a kill
    assert campaign.state(run) == ('partial', 200)


def test_run_refuses_one_place_for_runs_and_results(tmp_path):
    err = _paper_fails('run', 'fig5', '--quick', '--runs-dir', str(tmp_path),
                       '--results-dir', str(tmp_path / 'quick')).stderr
    assert 'in one place' in err
    assert not (tmp_path / 'quick' / 'fig5').exists()


def test_a_done_scripted_figure_is_not_computed_again(tmp_path):
    results = tmp_path / 'quick' / 'results' / 'fig6'
    results.mkdir(parents=True)
    (results / 'fig6.json').write_text('{"kept": true}')
    out = _paper('run', 'fig6', '--quick', '--runs-dir', str(tmp_path)).stderr
    assert 'fig6: done' in out
    assert (results / 'fig6.json').read_text() == '{"kept": true}'
    (results / 'fig6.json').unlink()
    # --only fig5 leaves fig6 out (and, naming no run of fig6, is refused before any work).
    err = _paper_fails('run', 'fig6', '--quick', '--only', 'fig5', '--runs-dir',
                       str(tmp_path)).stderr
    assert "'fig5' is in no run name of fig6" in err
    assert not (results / 'fig6.json').exists()


@pytest.mark.skipif(not pathlib.Path('/proc/sys').is_dir(), reason='needs Linux /proc')
def test_status_only_reads_the_runs_dir(tmp_path):
    """status needs no writable runs or results dir (/proc/sys takes no new file); run does."""
    out = _paper_here('status', 'fig6', '--runs-dir', '/proc/sys', '--results-dir',
                 str(tmp_path)).stdout
    assert 'fig6: missing' in out
    out = _paper_here('status', 'fig6', '--runs-dir', str(tmp_path), '--results-dir',
                 '/proc/sys').stdout
    assert 'fig6: missing' in out
    err = _paper_fails('report', 'fig6', '--runs-dir', str(tmp_path), '--results-dir',
                       '/proc/sys').stderr
    assert 'cannot be written' in err
    err = _paper_fails('run', 'fig6', '--runs-dir', '/proc/sys', '--results-dir',
                       str(tmp_path)).stderr
    assert 'cannot be written' in err


def _variant(run):
    return json.dumps(run.variant)


def _stopped_run(campaign, run, steps, snapshot=b'snapshot'):
    """A run dir as a run stopped part-way leaves it (a fake snapshot)."""
    run_dir = campaign.run_dir(run)
    _write_progress(run_dir, steps)
    (run_dir / 'variant.json').write_text(_variant(run))
    (run_dir / 'params.pkl').write_bytes(_snap(snapshot))
    return run_dir


def _snap(content):
    """A stand-in snapshot: one whole pickle, as ``park`` requires."""
    return pickle.dumps(content)


def test_a_parked_snapshot_is_counted_and_restored_on_another_machine(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    here = paper.Campaign(tmp_path / 'here', tmp_path / 'results')
    assert here.park(run) == 0  # nothing to park
    _stopped_run(here, run, [1000, 2000], b'snapshot at 2000')
    assert here.park(run) == 2000
    assert here.park(run) == 0  # nothing newer
    parked = here.parked_dir(run)
    assert sorted(p.name for p in parked.iterdir()) == [
        'params.pkl.xz', 'progress.csv', 'variant.json']
    # Another machine: an empty runs dir. status counts the parked steps, and says so.
    there = paper.Campaign(tmp_path / 'there', tmp_path / 'results')
    assert there.state(run) == ('partial', 2000)
    text, _ = paper.status_table(there, ['fig5'])
    assert f'{run.name}' in text and '(parked)' in text
    command = there.command(run)
    assert '--resume' in command
    assert (there.run_dir(run) / 'params.pkl').read_bytes() == _snap(b'snapshot at 2000')
    assert paper.read_progress(there.run_dir(run)) == paper.read_progress(parked)
    assert not list(there.run_dir(run).parent.glob('*.unparking'))
    # Here the run dir is as far along as the parked copy: it is used as it is.
    assert here.unpark(run) is False


def test_a_run_dir_behind_its_parked_snapshot_is_set_aside(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    ahead = paper.Campaign(tmp_path / 'ahead', tmp_path / 'results')
    _stopped_run(ahead, run, [1000, 2000, 3000], b'snapshot at 3000')
    ahead.park(run)
    behind = paper.Campaign(tmp_path / 'behind', tmp_path / 'results')
    _stopped_run(behind, run, [1000], b'snapshot at 1000')
    assert behind.state(run) == ('partial', 3000)
    behind.command(run)
    assert (behind.run_dir(run) / 'params.pkl').read_bytes() == _snap(b'snapshot at 3000')
    aside = list(behind.run_dir(run).parent.glob(behind.run_dir(run).name + '.set-aside-*'))
    assert len(aside) == 1 and (aside[0] / 'params.pkl').read_bytes() == _snap(b'snapshot at 1000')
    # A run dir further along than the parked copy is parked over it, and kept.
    _stopped_run(ahead, run, [1000, 2000, 3000, 4000], b'snapshot at 4000')
    assert ahead.park(run) == 4000
    assert ahead.unpark(run) is False
    assert (ahead.run_dir(run) / 'params.pkl').read_bytes() == _snap(b'snapshot at 4000')


def test_a_damaged_parked_snapshot_is_refused_naming_it(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    here = paper.Campaign(tmp_path / 'here', tmp_path / 'results')
    _stopped_run(here, run, [1000], b'x' * 10000)
    here.park(run)
    snapshot = here.parked_dir(run) / 'params.pkl.xz'
    snapshot.write_bytes(snapshot.read_bytes()[:40])  # cut short
    there = paper.Campaign(tmp_path / 'there', tmp_path / 'results')
    with pytest.raises(paper.click.ClickException, match='params.pkl.xz is not a whole'):
        there.command(run)
    assert not there.run_dir(run).exists()
    assert not list(there.run_dir(run).parent.glob('*.unparking'))


def test_a_finished_run_drops_its_parked_snapshot(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    _stopped_run(campaign, run, [1000])
    campaign.park(run)
    _stopped_run(campaign, run, [1000, run.steps])
    assert campaign.park(run) == 0  # a finished run is collected, not parked
    assert campaign.collect(run)
    assert not campaign.parked_dir(run).exists()
    assert campaign.state(run) == ('done', run.steps)


@pytest.mark.slow
def test_a_run_stopped_by_the_time_limit_continues_on_another_machine(paper, tmp_path):
    """``run`` parks the run it stops; a clone with an empty runs dir continues it from
    the parked snapshot, to the rows of a run that was never stopped."""
    run = paper.quick_runs('fig5')[0]
    results = tmp_path / 'results'
    here = paper.Campaign(tmp_path / 'here' / 'quick', results)  # --quick: RUNS_DIR/quick
    before = _half_run(here, run)
    assert 0 < here.state(run)[1] < run.steps
    err = _paper('run', 'fig5', '--quick', '--only', run.name, '--time-limit', '1',
                 '--runs-dir', str(tmp_path / 'here'), '--results-dir', str(results)).stderr
    assert f'parked {run.name}' in err
    there = ['--runs-dir', str(tmp_path / 'there'), '--results-dir', str(results)]
    status = _paper_here('status', 'fig5', '--quick', *there).stdout
    assert re.search(rf'partial +{re.escape(run.name)} .*\(parked\)', status)
    err = _paper('run', 'fig5', '--quick', '--only', run.name, *there).stderr
    assert 'continues from its parked snapshot' in err
    assert not here.parked_dir(run).exists()
    resumed = _rows(results / run.name / 'progress.csv')
    assert resumed[:len(before)] == before  # continued: the first epochs' rows, times and all
    _assert_rows_of_an_uninterrupted_run(run, tmp_path, resumed)


def test_parking_deletes_nothing_it_did_not_write(paper, tmp_path):
    """A link, a file or a foreign file where the parked copy goes: refused, naming it,
    before anything is deleted or written."""
    run = paper.runs_of('fig5')[0]
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    _stopped_run(campaign, run, [1000])
    other = tmp_path / 'other'
    other.mkdir()
    for name in ('progress.csv', 'variant.json', 'keep.txt'):
        (other / name).write_text('mine')
    campaign.result_dir(run).mkdir(parents=True)
    campaign.parked_dir(run).symlink_to(other)
    with pytest.raises(paper.click.ClickException, match='is in the way'):
        campaign.park(run)
    assert sorted(p.read_text() for p in other.iterdir()) == ['mine'] * 3
    assert campaign.state(run)[0] == 'damaged'
    campaign.parked_dir(run).unlink()
    assert campaign.park(run) == 1000
    (campaign.parked_dir(run) / 'NOTES.md').write_text('mine')
    _stopped_run(campaign, run, [1000, 2000], b'snapshot at 2000')
    with pytest.raises(paper.click.ClickException, match='NOTES.md, which this tool did not'):
        campaign.park(run)
    assert paper.learning.steps_done(campaign.parked_dir(run)) == 1000  # the old copy, whole
    assert not campaign.parked_dir(run).with_name('parked.new').exists()
    assert campaign.collect(run) is False


def test_a_parked_copy_is_checked_whole_before_the_run_dir_is_touched(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    ahead = paper.Campaign(tmp_path / 'ahead', tmp_path / 'results')
    _stopped_run(ahead, run, [1000, 2000])
    ahead.park(run)
    parked = ahead.parked_dir(run)
    behind = paper.Campaign(tmp_path / 'behind', tmp_path / 'results')
    run_dir = _stopped_run(behind, run, [1000], b'snapshot at 1000')
    # A snapshot that is not xz: refused, and the run dir here stays where it is.
    good = (parked / 'params.pkl.xz').read_bytes()
    (parked / 'params.pkl.xz').write_bytes(b'not xz')
    with pytest.raises(paper.click.ClickException, match='params.pkl.xz is not a whole'):
        behind.command(run)
    assert (run_dir / 'params.pkl').read_bytes() == _snap(b'snapshot at 1000')
    assert not list(run_dir.parent.glob('*.set-aside-*'))
    assert not list(run_dir.parent.glob('*.unparking'))
    # Another run's options: refused, naming the parked copy.
    (parked / 'params.pkl.xz').write_bytes(good)
    (parked / 'variant.json').write_text(json.dumps(dict(algo='ProMP', env=run.env, seed=1)))
    with pytest.raises(paper.click.ClickException, match=f'{parked} is a parked snapshot'):
        behind.command(run)
    assert (run_dir / 'params.pkl').read_bytes() == _snap(b'snapshot at 1000')
    # A file missing: damaged, named by status and refused by run before any work.
    (parked / 'variant.json').unlink()
    assert behind.state(run)[0] == 'damaged'
    assert 'lacks variant.json' in behind.damage[run.name]


def test_a_train_py_writing_a_run_dir_is_running_without_a_pid_file(paper, tmp_path):
    """A process holding the run dir's lock is its run; the pid a lock file keeps after its
    run ended (here: a live train.py's, not holding the lock) is not, and a check takes
    no lock (a run starting beside it would find its dir busy)."""
    campaign = paper.Campaign(tmp_path / 'runs', tmp_path / 'results')
    run = paper.runs_of('fig5')[0]
    run_dir = _stopped_run(campaign, run, [1000])
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time\n'
         'from garage_promp.experiment.run_dir import owned_run_dir\n'
         'with owned_run_dir(sys.argv[1]):\n    print("held", flush=True); time.sleep(30)',
         str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == 'held\n'
        assert campaign.state(run)[0] == 'running'
        assert paper.lock_holder(str(run_dir)) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert campaign.state(run)[0] == 'partial'
    stranger = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)',
                                 'train.py', str(run_dir)])
    _wait_for_exec(stranger, b'sleep')
    try:
        (run_dir / '.lock').write_text(f'{stranger.pid}\n')
        assert campaign.state(run)[0] == 'partial'
        with paper.owned_run_dir(str(run_dir)):  # what a run starting now does
            assert paper.lock_holder(str(run_dir)) == os.getpid()
    finally:
        stranger.kill()
        stranger.wait()


def test_run_all_waits_for_every_run_whatever_on_done_raises(paper, tmp_path):
    ended = []

    def on_done(name, code):
        ended.append(name)
        if name == 'a':
            raise OSError('cannot write a')
    specs = [(n, ['sleep', '30'], tmp_path / f'{n}.log') for n in ('a', 'b')]
    with pytest.raises(OSError, match='cannot write a'):
        paper.learning.run_all(specs, 2, time.time() + 1, on_done=on_done)
    assert sorted(ended) == ['a', 'b']


def test_a_snapshot_that_is_not_a_whole_pickle_is_neither_parked_nor_unparked(paper, tmp_path):
    run = paper.runs_of('fig5')[0]
    here = paper.Campaign(tmp_path / 'here', tmp_path / 'results')
    run_dir = _stopped_run(here, run, [1000, 2000])
    (run_dir / 'params.pkl').write_bytes(_snap(b'snapshot')[:-3])  # cut short
    with pytest.raises(paper.click.ClickException, match='params.pkl is not a whole snapshot'):
        here.park(run)
    assert not here.parked_dir(run).exists()
    # A parked copy whose snapshot decompresses but is no pickle is refused on arrival.
    parked = here.parked_dir(run)
    parked.mkdir(parents=True)
    for name in ('progress.csv', 'variant.json'):
        (parked / name).write_bytes((run_dir / name).read_bytes())
    with paper.lzma.open(parked / 'params.pkl.xz', 'wb') as file:
        file.write(b'garbage, not a pickle')
    there = paper.Campaign(tmp_path / 'there', tmp_path / 'results')
    with pytest.raises(paper.click.ClickException, match='params.pkl.xz is not a whole'):
        there.command(run)
    assert not there.run_dir(run).exists()


@pytest.mark.slow
def test_run_exits_non_zero_naming_a_run_that_failed(paper, tmp_path):
    """A run that ends in an error makes ``run`` end with exit 1 and the run's name."""
    campaign_dir = tmp_path / 'runs'
    run = paper.quick_runs('fig5')[0]
    quick = paper.Campaign(campaign_dir / 'quick', tmp_path / 'results')
    _stopped_run(quick, run, [10], b'a pickle, but no snapshot')
    proc = subprocess.run([sys.executable, str(SCRIPT), 'run', 'fig5', '--quick', '--only',
                           run.name, '--runs-dir', str(campaign_dir), '--results-dir',
                           str(tmp_path / 'results')],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f'FAILED {run.name}' in proc.stderr
    assert f'Error: 1 run(s) failed: {run.name}' in proc.stderr


def test_usage_errors_name_their_culprit_before_any_work(tmp_path):
    """A figure given twice (its runs would run and count twice), an --only that is empty
    or selects nothing, an empty --runs-dir and a GARAGE_PROMP_RUNS that is a file are
    refused while parsing, naming what is wrong; nothing is written."""
    dirs = ['--runs-dir', str(tmp_path / 'runs'), '--results-dir', str(tmp_path / 'results')]
    cases = [
        (['status', 'fig2', 'fig6', 'fig2', *dirs], 'FIGS: fig2 given more than once'),
        (['run', 'fig5', 'fig5', '--quick', *dirs], 'FIGS: fig5 given more than once'),
        (['run', 'fig5', '--quick', '--only', '', *dirs], "'--only': must be some text"),
        (['run', 'fig5', '--quick', '--only', 'zzz', *dirs],
         "'zzz' is in no run name of fig5 (e.g. fig5/"),
        (['park', 'fig2', '--only', 'Walker/LVC', *dirs], "'Walker/LVC' is in no run name"),
        (['status', '--runs-dir', '', '--results-dir', str(tmp_path / 'results')],
         "'--runs-dir': must be a path, got ''"),
        (['report', 'fig6', '--runs-dir', '', '--results-dir', str(tmp_path / 'results')],
         "'--runs-dir': must be a path, got ''"),
    ]
    for i, (args, message) in enumerate(cases):
        # The first through the interpreter, as a user runs it; the rest (parsing only) in
        # this process.
        proc = _paper_fails(*args) if i == 0 else invoke_script(SCRIPT, *args, command='cli')
        assert proc.returncode == 2, (args, proc.stderr[-1000:])
        assert message in proc.stderr and 'Traceback' not in proc.stderr, (
            args, proc.stderr[-1000:])
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    for command in (['status', 'fig6'], ['run', 'fig6', '--quick']):
        proc = subprocess.run([sys.executable, str(SCRIPT), *command, '--results-dir',
                               str(tmp_path / 'results')], capture_output=True, text=True,
                              cwd=ROOT, timeout=300, check=False,
                              env=dict(os.environ, GARAGE_PROMP_RUNS=str(blocker)))
        assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
        assert f"GARAGE_PROMP_RUNS '{blocker}' exists and is not a directory" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ['file']


# ------------------------------------------------- the paper's claims table
def test_the_readme_carries_the_committed_reports_claims_table(paper, tmp_path):
    """The README's claims table is the one ``report`` computes from the committed results
    (rows for Figs. 2-6 and 8, the paper's evidence beside each)."""
    text = paper.report(paper.Campaign(tmp_path / 'runs', paper.RESULTS), paper.FIGURES,
                        write=False)
    assert not list(tmp_path.iterdir())  # write=False writes nothing
    readme = paper.README.read_text()
    assert paper.readme_with_claims(readme, text) == readme, (
        'README.md\'s claims table is not the committed results\': run '
        '`benchmarks/paper.py report`')
    table = readme.split(paper.CLAIMS_BEGIN)[1].split(paper.CLAIMS_END)[0]
    for fig in paper.PAPER_FIGS:
        assert f'\n| {fig} ' in table
        assert table.count(f'| {paper.EVIDENCE[fig]} |') == table.count(f'\n| {fig} ')
    assert 'not in the paper' not in table and 'Meta-World' not in table


def test_readme_with_claims_replaces_only_the_table_and_needs_its_markers(paper):
    report = '\n'.join(['# r', '', *paper.claims_table([('Fig. 2 X: A > B', 'curves', '1 vs 0',
                                                          'reproduced')]), '## next', 'x'])
    readme = (f'intro\n{paper.CLAIMS_BEGIN}\n| old |\n{paper.CLAIMS_END}\noutro\n')
    new = paper.readme_with_claims(readme, report)
    assert new == (f'intro\n{paper.CLAIMS_BEGIN}\n| claim | the paper\'s evidence | measured here '
                   f'| verdict |\n|---|---|---|---|\n| Fig. 2 X: A > B | curves | 1 vs 0 | '
                   f'reproduced |\n{paper.CLAIMS_END}\noutro\n')
    assert paper.readme_with_claims(new, report) == new
    with pytest.raises(Exception, match='must hold the lines'):
        paper.readme_with_claims('no markers\n', report)


def test_sign_test(paper):
    assert paper.sign_test(9, 10) == 11 / 1024
    assert paper.sign_test(0, 4) == 1.
    assert paper.sign_test(4, 4) == 1 / 16


def _fig4_csv(results_dir, ratios):
    path = results_dir.parent / paper_fig4_csv()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['Epoch', 'RStdRatio'])
        writer.writerows(enumerate(ratios))
    return path


def paper_fig4_csv():
    return pathlib.Path('gradient_variance') / 'short_HalfCheetahFwdBack_seed35.csv'


def test_fig4_claim_counts_the_epochs_where_dice_varies_more(paper, tmp_path):
    results = tmp_path / 'results' / 'paper'
    assert paper.FIG4_CSV == paper_fig4_csv()
    assert 'not measured yet' in paper.fig4_claims(results)[0][2]
    _fig4_csv(results, [2., 3., 0.5, 1.5, 4., 1.2, 1.1, 2.5, 'nan', 3.])
    (claim, evidence, measured, verdict), = paper.fig4_claims(results)
    assert claim.startswith('Fig. 4 ') and evidence == paper.EVIDENCE['Fig. 4']
    assert "above LVC's in 8 of 9 epochs (ratio median 2.00, 0.50-4.00)" in measured
    assert verdict.startswith('reproduced in direction') and f'p = {10 / 512:.3f}' in verdict
    _fig4_csv(results, [0.5, 2., 0.9, 1.5])  # 2 of 4: no direction
    assert paper.fig4_claims(results)[0][3].startswith('not significant')
    _fig4_csv(results, [0.5, 0.2, 0.9, 0.7, 0.3, 0.8])  # DiCE's the lower in all 6
    assert paper.fig4_claims(results)[0][3].startswith(
        f"not reproduced: DiCE's relative std is the lower (one-sided sign test over the epochs "
        f'of one run, p = {1 / 64:.3f})')
    _fig4_csv(results, ['a lot'])
    with pytest.raises(paper.DamagedRunFile, match='RStdRatio'):
        paper.fig4_claims(results)


def _fig5_json(directory, reached):
    """Trajectories whose episodes end inside the goal regions of the first ``reached[algo]
    = (pre, post)`` corners, and far from the others."""
    goals = {'(-2, -2)': [-2., -2.], '(2, -2)': [2., -2.], '(-2, 2)': [-2., 2.],
             '(2, 2)': [2., 2.]}
    algos = {}
    for algo, (pre, post) in reached.items():
        trajectories = {}
        for k, (task, goal) in enumerate(goals.items()):
            steps = []
            for n in (pre, post, post, post):  # before adaptation, after each inner step
                end = goal if k < n else [0., 0.]
                steps.append([[[0., 0.], end]] * 2)  # 2 episodes of 2 points
            trajectories[task] = steps
        algos[algo] = dict(seed=1, n_episodes=2, num_inner_grad_steps=3, goal_radius=0.5,
                           goals=goals, trajectories=trajectories)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'fig5_trajectories.json').write_text(json.dumps({'algos': algos}))


def test_fig5_goal_claim_counts_the_goal_regions_entered(paper, tmp_path):
    assert paper.fig5_goal_claims(tmp_path)[0][2] == 'not drawn yet'
    _fig5_json(tmp_path, {'LVC-TRPO': (3, 4), 'MAML-TRPO': (2, 2), 'E-MAML-TRPO': (3, 3)})
    (claim, _, measured, verdict), = paper.fig5_goal_claims(tmp_path)
    assert ('pre-update / after step 3: LVC-TRPO 3/4, MAML-TRPO 2/2, E-MAML-TRPO 3/3 '
            '(seed 1, 2 episodes a corner)') in measured
    assert verdict.startswith('seen in the one policy')
    _fig5_json(tmp_path, {'LVC-TRPO': (2, 4), 'MAML-TRPO': (2, 3)})  # no more exploration
    assert paper.fig5_goal_claims(tmp_path)[0][3].startswith('not seen')
    _fig5_json(tmp_path, {'LVC-TRPO': (4, 3), 'MAML-TRPO': (1, 1)})  # misses a goal
    assert paper.fig5_goal_claims(tmp_path)[0][3].startswith('not seen')


def _fig6_json(directory, ends, bump=False):
    """A landscape peaked at (0.1, 0.2) (minus the distance; with ``bump``, the start is
    higher than the points between it and the peak), runs from (0.3, 0.2)."""
    import numpy as np
    t0, t1 = np.linspace(-0.1, 0.5, 13), np.linspace(0., 0.6, 13)  # steps of 0.05
    grid = -np.hypot(t0[None, :] - 0.1, t1[:, None] - 0.2)  # rows θ1, columns θ0
    if bump:
        grid[4, 4], grid[4, 8] = 10., -0.01  # the peak, and (0.3, 0.2)
    runs = [dict(label=label, theta=[[0.3, 0.2], [0.25, 0.2], list(end)])
            for label, end in ends.items()]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'fig6.json').write_text(json.dumps({'panels': [dict(
        theta0=t0.tolist(), theta1=t1.tolist(), post_update_return=grid.tolist(), runs=runs)]}))


def test_fig6_claim_measures_the_distance_to_the_landscapes_maximum(paper, tmp_path):
    assert paper.fig6_claims(tmp_path)[0][2] == 'not run yet'
    _fig6_json(tmp_path, {'DiCE-VPG': (0.15, 0.2), 'E-MAML-VPG': (0.45, 0.5)})
    (_, _, measured, verdict), = paper.fig6_claims(tmp_path)
    assert "maximum (0.10, 0.20) and the landscape at θ, first → last of 2 iterations" in measured
    assert 'DiCE-VPG 0.200 → 0.050 (landscape -0.200 → -0.050)' in measured
    assert verdict.startswith('reproduced in direction')
    _fig6_json(tmp_path, {'DiCE-VPG': (0.45, 0.2), 'E-MAML-VPG': (0.45, 0.5)})
    assert paper.fig6_claims(tmp_path)[0][3].startswith('not reproduced')
    _fig6_json(tmp_path, {'DiCE-VPG': (0.15, 0.2), 'E-MAML-VPG': (0.12, 0.2)})
    assert paper.fig6_claims(tmp_path)[0][3].startswith('not reproduced')
    # Nearer the maximum but lower on the landscape is not "towards" (a flat top).
    _fig6_json(tmp_path, {'DiCE-VPG': (0.15, 0.2), 'E-MAML-VPG': (0.45, 0.5)}, bump=True)
    (_, _, measured, verdict), = paper.fig6_claims(tmp_path)
    assert 'DiCE-VPG 0.200 → 0.050 (landscape -0.010 → -0.050)' in measured
    assert verdict.startswith('not reproduced')
    (tmp_path / 'fig6.json').write_text('{"panels": [{"runs": []}]}')
    with pytest.raises(paper.DamagedRunFile, match='fig6.json: not the output of '
                                                   'benchmarks/fig6.py'):
        paper.fig6_claims(tmp_path)


def test_landscape_is_bilinear_between_grid_points(paper):
    import numpy as np
    t0, t1 = np.array([0., 1., 2.]), np.array([0., 10.])

    def f(x, y):  # bilinear, with a cross term: exact between the grid's points
        return 3 * x + 0.5 * y + 0.2 * x * y + 1

    grid = f(t0[None, :], t1[:, None])  # rows θ1, columns θ0
    panel = dict(theta0=t0.tolist(), theta1=t1.tolist(), post_update_return=grid.tolist())
    for theta in ((0.25, 2.), (1.5, 7.5), (2., 10.), (0., 0.), (0.7, 9.)):
        assert paper._landscape_at(panel, theta) == pytest.approx(f(*theta), abs=1e-12)


def test_fig8_claim_compares_the_update_and_the_iteration(paper, tmp_path):
    assert paper.fig8_claims(tmp_path)[0][2] == 'not measured yet'

    def write(promp, trpo):
        results = [dict(what=name, sample_s=s, update_s=u, iter_s=s + u, batch='paper')
                   for name, (s, u) in (('ProMP', promp), ('MAML-TRPO', trpo))]
        (tmp_path / 'throughput.json').write_text(json.dumps({'results': results}))

    write((20., 10.), (20., 20.))
    (_, _, measured, verdict), = paper.fig8_claims(tmp_path)
    assert ('update 10.00 s vs 20.00 s (0.50×), iteration 30.00 s vs 40.00 s (0.75×; '
            'sampling 67% and 50% of them)') in measured
    assert verdict == ('reproduced for the update; and for the whole iteration (one '
                       'measurement each)')
    write((31., 10.), (21., 20.))
    assert paper.fig8_claims(tmp_path)[0][3] == (
        'reproduced for the update; not for the whole iteration, where sampling dominates '
        'here (one measurement each)')
    write((20., 25.), (20., 20.))
    assert paper.fig8_claims(tmp_path)[0][3].startswith('not reproduced for the update')
    write((20., float('nan')), (20., 20.))
    with pytest.raises(paper.DamagedRunFile, match="ProMP's update_s is nan"):
        paper.fig8_claims(tmp_path)


def test_a_pid_file_that_is_not_a_file_is_not_read(paper, tmp_path):
    """A run's pid or lock file that is a named pipe (whose read would block) or a link
    to a device (whose read would not end) names no live run; a real one does."""
    import os
    run_dir = tmp_path / 'run'
    os.mkfifo(tmp_path / 'fifo')
    (tmp_path / 'zero').symlink_to('/dev/zero')
    assert not paper._alive(tmp_path / 'fifo', run_dir)
    assert not paper._alive(tmp_path / 'zero', run_dir)
    assert not paper._alive(tmp_path / 'missing', run_dir)
    for kind in ('fifo', 'zero'):
        run_dir.mkdir(exist_ok=True)
        (run_dir / '.lock').unlink(missing_ok=True)
        os.replace(tmp_path / kind, run_dir / '.lock')
        assert paper.lock_holder(str(run_dir)) is None
    (tmp_path / 'pid').write_text(f'{os.getpid()}\n')
    assert not paper._alive(tmp_path / 'pid', run_dir)  # this process is pytest, not train.py
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'train.py',
                             '--log-dir', str(run_dir)])
    try:
        (tmp_path / 'pid').write_text(f'{proc.pid}\n')
        _wait_for_exec(proc, b'train.py')
        assert paper._alive(tmp_path / 'pid', run_dir)
        assert not paper._alive(tmp_path / 'pid', tmp_path / 'another run')
    finally:
        proc.kill()
        proc.wait()


def test_figures_sharing_runs_run_each_once_under_their_own_figures_lock(paper, tmp_path):
    """stepsize and logstd include Fig. 2's HalfCheetah runs: named with them, each run is
    selected once, and a runner of stepsize takes fig2's lock too (a runner of fig2 beside
    it would start the same runs)."""
    runs = paper._selected(['fig2', 'stepsize', 'logstd'], None, False)
    names = [r.name for r in runs]
    assert len(names) == len(set(names))
    assert set(names) == {r.name for f in ('fig2', 'stepsize', 'logstd')
                          for r in paper.runs_of(f)}
    assert len(names) < sum(len(paper.runs_of(f)) for f in ('fig2', 'stepsize', 'logstd'))
    runs_dir = tmp_path / 'runs' / 'quick'
    with paper.owned_run_dir(str(runs_dir / 'fig2')):  # a runner of fig2
        err = _paper_fails('run', 'stepsize', '--quick', '--runs-dir', str(tmp_path / 'runs'),
                           '--results-dir', str(tmp_path / 'results')).stderr
    assert 'another paper.py run is running fig2' in err
    assert not (runs_dir / 'stepsize').exists()


def test_a_time_limit_ending_in_a_bare_number_is_refused(paper):
    for ambiguous in ('1h30', '2m 5', '1h30m15'):
        with pytest.raises(Exception, match='without its unit'):
            paper.parse_duration(ambiguous)
    assert paper.parse_duration('1h30s') == 3630
    assert paper.parse_duration('90') == 90


def test_a_named_pipe_where_a_run_s_log_goes_is_refused_before_any_work(paper, tmp_path):
    run = paper.quick_runs('fig5')[0]
    quick = paper.Campaign(tmp_path / 'runs' / 'quick', tmp_path / 'results')
    log = quick.log_file(run)
    log.parent.mkdir(parents=True)
    os.mkfifo(log)
    err = _paper_fails('run', 'fig5', '--quick', '--only', run.name, '--runs-dir',
                       str(tmp_path / 'runs'), '--results-dir', str(tmp_path / 'results')).stderr
    assert f'{log} is in the way (a named pipe' in err
    assert not quick.run_dir(run).exists() and not quick.pid_file(run).exists()


def test_a_scripted_figure_that_fails_or_overruns_is_one_error_line(paper):
    with pytest.raises(paper.click.ClickException, match='fig6: -c ended with exit 3'):
        paper._script('fig6', [sys.executable, '-c', 'raise SystemExit(3)'], None)
    start = time.time()
    with pytest.raises(paper.click.ClickException, match='fig8: the time limit was reached'):
        paper._script('fig8', [sys.executable, '-c', 'import time; time.sleep(60)'],
                      time.time() + 1)
    assert time.time() - start < 30


def test_a_run_that_fails_as_the_runner_stops_is_counted_failed(paper, tmp_path, capsys):
    """A run that ended on its own while the runner was being stopped (here: Ctrl-C as the
    first one's end is handled) is reported and counted, not taken for a stopped one."""
    mark = tmp_path / 'b ends'

    def on_done(name, code):
        if name == 'a':
            while not mark.exists():  # b is ending on its own
                time.sleep(0.01)
            time.sleep(0.2)
            raise KeyboardInterrupt
    specs = [('a', ['true'], tmp_path / 'a.log'),
             ('b', ['sh', '-c', 'sleep 1.5; touch "$0"; exit 3', str(mark)], tmp_path / 'b.log'),
             # (SIGINT set to its default first: under a runner started with it ignored, as
             # `nohup ... &` does, a shell's own `kill -INT $$` is ignored and it ends with 0)
             ('c', [sys.executable, '-c', 'import os, signal, time; time.sleep(1.2); '
                    'signal.signal(signal.SIGINT, signal.SIG_DFL); '
                    'os.kill(os.getpid(), signal.SIGINT); time.sleep(60)'], tmp_path / 'c.log')]
    outcome = paper.learning.run_all(specs, 3, None, on_done=on_done)
    assert outcome.ended == 'KeyboardInterrupt'
    assert outcome.failed == ['b']  # c, ended by SIGINT (as Ctrl-C ends it), was stopped
    err = capsys.readouterr().err
    assert 'FAILED b (exit 3)' in err and 'stopped c (Ctrl-C)' in err


def test_runs_are_not_started_past_the_time_limit(paper, tmp_path, capsys):
    specs = [('a', ['touch', str(tmp_path / 'started')], tmp_path / 'a.log')]
    outcome = paper.learning.run_all(specs, 1, time.time() - 1)
    assert outcome.ended == 'time limit' and not (tmp_path / 'started').exists()
    assert 'start a' not in capsys.readouterr().err


def test_a_scripted_figure_that_fails_leaves_no_done_marker(paper, tmp_path):
    """Fig. 8's throughput.py rewrites its JSON after every measurement: one stopped
    half-way would count as done at the next run; the marker goes with the failure."""
    marker = tmp_path / 'throughput.json'
    write_then_fail = f'open({str(marker)!r}, "w").write("{{}}"); raise SystemExit(4)'
    with pytest.raises(paper.click.ClickException, match='ended with exit 4'):
        paper._script('fig8', [sys.executable, '-c', write_then_fail], None, marker)
    assert not marker.exists()
    write_then_hang = f'open({str(marker)!r}, "w").write("{{}}"); import time; time.sleep(60)'
    with pytest.raises(paper.click.ClickException, match='partial numbers removed'):
        paper._script('fig8', [sys.executable, '-c', write_then_hang], time.time() + 2, marker)
    assert not marker.exists()
    paper._script('fig8', [sys.executable, '-c', f'open({str(marker)!r}, "w").write("{{}}")'],
                  None, marker)
    assert marker.exists()


def test_a_pid_files_run_dir_is_compared_as_a_path(paper, tmp_path):
    """A run started with a relative --runs-dir from another working directory is the run
    its pid file names."""
    run_dir = tmp_path / 'runs' / 'fig5' / 'r'
    run_dir.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'train.py',
                             '--resume', 'runs/./fig5/r'], cwd=tmp_path)
    _wait_for_exec(proc, b'sleep')
    try:
        (tmp_path / 'pid').write_text(f'{proc.pid}\n')
        assert paper._alive(tmp_path / 'pid', run_dir)
        assert not paper._alive(tmp_path / 'pid', tmp_path / 'runs' / 'fig5')
    finally:
        proc.kill()
        proc.wait()
