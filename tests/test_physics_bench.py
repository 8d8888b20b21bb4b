"""benchmarks/physics.py: the physics columns run and their ratios are what the table says."""
import json
import pathlib
import re

from click.testing import CliRunner
import pytest

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.mujoco
def test_physics_table_runs_and_writes_its_ratios(tmp_path):
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    result = CliRunner().invoke(physics.main, [
        '--env', 'HalfCheetahFwdBack', '-M', '2', '-R', '1', '--physics-steps', '300',
        '--out', str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / 'physics.json').read_text())['results'][0]
    assert row['env'] == 'HalfCheetahFwdBack' and row['workers'] == 1
    assert row['baseline_solver'] == 'lstsq'  # (the default: the original code's)
    for key in ('physics', 'physics_lockstep', 'wrapped', 'sampler_wrapped', 'sampler_lean',
                'sampler_mujoco', 'physics_replayed', 'learner', 'forward'):
        assert row[key] > 0
    assert row['sampler_lean_python_loop'] > 0
    assert row['ratio_lean_python_loop'] == pytest.approx(row['physics']
                                                          / row['sampler_lean_python_loop'])
    assert row['sampler_only'] == pytest.approx(row['sampler_lean'] - row['learner'])
    assert row['ratio_sampler_only'] == pytest.approx(row['physics'] / row['sampler_only'])
    assert row['package_us'] == pytest.approx(row['sampler_lean'] - row['sampler_mujoco'])
    assert row['ratio_mujoco_share'] == pytest.approx(row['sampler_mujoco'] / row['sampler_lean'])
    assert row['ratio_mujoco_physics'] == pytest.approx(row['sampler_mujoco'] / row['physics'])
    assert row['ratio_lean'] == pytest.approx(row['physics'] / row['sampler_lean'])
    assert row['ratio_lean_lockstep'] == pytest.approx(row['physics_lockstep']
                                                       / row['sampler_lean'])
    assert row['floor'] == pytest.approx(row['sampler_mujoco'] + row['forward'] + row['learner'])
    assert row['ceiling'] == pytest.approx(row['physics'] / row['floor'])
    assert row['ceiling'] > row['ratio_lean']
    table = (tmp_path / 'physics.md').read_text()
    assert f"**{row['ratio_lean']:.2f}**" in table
    assert f"| {row['floor']:.1f} | {row['sampler_lean']:.1f} | " in table


def test_physics_model_is_found_under_the_wrappers():
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    setup = physics.env_setup('HopperRandParams')
    inner = physics._mujoco_env(setup.train_tasks.sample(1)[0]())
    assert inner.frame_skip == 4 and inner.model.opt.timestep == pytest.approx(0.004)


def test_lockstep_physics_steps_every_simulation(monkeypatch):
    """The lockstep column advances ``n_envs`` distinct simulations once per round."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    import mujoco  # pylint: disable=import-outside-toplevel
    stepped = []
    real = mujoco.mj_step
    monkeypatch.setattr(mujoco, 'mj_step', lambda m, d, nstep: (stepped.append(id(d)),
                                                                   real(m, d, nstep=nstep)))
    assert physics.lockstep_physics_us('HalfCheetahFwdBack', 4, 12) > 0
    assert len(stepped) == 12 and len(set(stepped)) == 4
    assert stepped[:4] == stepped[4:8]


@pytest.mark.mujoco
def test_mujoco_clock_times_every_physics_call_of_a_meta_batch_and_restores_mujoco():
    """Every env step of the lean sampler runs ``mj_step`` through the clock (HalfCheetah:
    one call per env step, ``mj_forward`` at resets); outside ``with``, MuJoCo is itself."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    from garage_promp.envs import _cstep  # pylint: disable=import-outside-toplevel

    import mujoco  # pylint: disable=import-outside-toplevel
    originals = {name: getattr(mujoco, name) for name in physics.MUJOCO_FUNCTIONS}
    original_batch = _cstep.step_batch
    clock = physics.MujocoClock()
    elapsed, steps = physics._timed_meta_batch('HalfCheetahFwdBack', True, 2, 2, 1, clock)
    assert {name: getattr(mujoco, name) for name in physics.MUJOCO_FUNCTIONS} == originals
    assert _cstep.step_batch is original_batch
    # 2 rounds (pre- and post-update) x 2 tasks x 2 episodes of H = 100 steps, and their resets
    assert steps == 800 and steps < clock.calls <= steps + 2 * 8
    assert 0 < clock.seconds < elapsed
    # the state before every env step, by model: the wave's 4 envs step one shared model
    assert len(clock.steps) == 1
    (model, nstep, states), = clock.steps.values()
    assert isinstance(model, mujoco.MjModel) and nstep == 5 and len(states) == steps
    assert len({state.tobytes() for state in states}) == steps
    assert physics.replay_us(clock.steps) > 0


@pytest.mark.mujoco
def test_learner_clock_times_every_tasks_processing_and_inner_step_and_restores_them():
    """In a meta-batch of 2 tasks and one inner step: 4 task batches processed (2 rounds),
    2 inner steps, 2 rounds stacked; the learner's share is part of the meta-batch's time, and
    afterwards the module's functions and the algorithm's method are themselves again."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    from garage_promp.algos import meta_batch  # pylint: disable=import-outside-toplevel
    originals = {name: getattr(meta_batch, name) for name in physics.LearnerClock.FUNCTIONS}
    calls = []

    class Counting(physics.LearnerClock):
        def _timed(self, function):
            timed = super()._timed(function)

            def call(*args, **kwargs):
                calls.append(getattr(function, '__name__', '?'))
                return timed(*args, **kwargs)
            return call

    learner = Counting()
    elapsed, steps = physics._timed_meta_batch('HalfCheetahFwdBack', True, 2, 2, 1,
                                               learner=learner)
    assert {name: getattr(meta_batch, name) for name in physics.LearnerClock.FUNCTIONS} == originals
    assert sorted(calls) == sorted(['process_episodes'] * 4 + ['_inner_step'] * 2
                                   + ['concatenate_tasks'] * 2), calls
    assert steps == 800 and 0 < learner.seconds < elapsed and learner.calls == len(calls)
    assert '_inner_step' not in vars(learner.algo)


@pytest.mark.mujoco
def test_policy_clock_times_one_forward_per_lockstep_step_and_restores_the_method():
    """In a meta-batch of 2 tasks x 2 episodes of HalfCheetah (H = 100, never ends early):
    one policy forward per lockstep step, 100 a round, 2 rounds; afterwards the worker's
    method is itself again."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    from garage_promp.sampler.rollout import RolloutWorker  # pylint: disable=import-outside-toplevel
    original = RolloutWorker.__dict__['_distribution']
    policy = physics.PolicyClock()
    elapsed, steps = physics._timed_meta_batch('HalfCheetahFwdBack', True, 2, 2, 1,
                                               policy=policy)
    assert RolloutWorker.__dict__['_distribution'] is original
    assert steps == 800 and policy.calls == 200 and 0 < policy.seconds < elapsed


def _row(env, **values):
    row = dict(env=env, physics=20., wrapped=60., sampler_lean=40., ratio_raw=1 / 3,
               ratio_lean=0.5, ratio_sampler_only=0.55, ceiling=0.7)
    row.update(values)
    return row


def test_goals_table_gives_each_goal_its_verdict():
    """A ratio at or above the goal meets it; one below does not, even where it rounds to
    the goal; an env without a goal has no verdict; the README's numbers are the rows' own."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    table = physics.goals_table([_row('HalfCheetahFwdBack', ratio_lean=0.6001),
                                 _row('HopperRandParams', ratio_lean=0.5996),
                                 _row('WalkerFwdBack', ratio_lean=0.79),
                                 _row('WalkerRandParams')]).splitlines()
    assert table[2] == ('| HalfCheetahFwdBack | 20.0 | 60.0 | 40.0 | 0.33 | **0.60** | 0.55 | '
                        '0.70 | ≥ 0.6: met |')
    assert table[3].endswith('| **0.60** | 0.55 | 0.70 | ≥ 0.6: not met |')
    assert table[4].endswith('| **0.79** | 0.55 | 0.70 | ≥ 0.8: not met |')
    assert table[5].endswith('| 0.70 |  |')


def test_an_env_of_several_runs_meets_its_goal_only_in_every_run():
    """Several saved runs of an env: the first row's numbers, and the verdict of all of
    them ("met" only where every run meets the goal, else how many did and their range)."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    table = physics.goals_table([_row('HalfCheetahFwdBack', ratio_lean=0.61),
                                 _row('AntRandDirec', ratio_lean=0.81),
                                 _row('HalfCheetahFwdBack', ratio_lean=0.5915),
                                 _row('AntRandDirec', ratio_lean=0.8),
                                 _row('HalfCheetahFwdBack', ratio_lean=0.62),
                                 _row('WalkerFwdBack', ratio_lean=0.7),
                                 _row('WalkerFwdBack', ratio_lean=0.79)]).splitlines()
    assert len(table) == 5
    assert table[2].endswith('| **0.61** | 0.55 | 0.70 | ≥ 0.6: not reliably met: met in 2 of 3 '
                             'runs (0.592-0.620) |')
    assert table[3].endswith('| **0.81** | 0.55 | 0.70 | ≥ 0.8: met (2 runs) |')
    assert table[4].endswith('| **0.70** | 0.55 | 0.70 | ≥ 0.8: not met (2 runs) |')


def test_summarize_prints_saved_results_and_names_a_bad_file(tmp_path):
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    good = tmp_path / 'physics.json'
    good.write_text(json.dumps({'results': [_row('AntRandDirec', ratio_lean=0.81,
                                                 sampler_lean=20. / 0.81)]}))
    result = CliRunner().invoke(physics.main, ['--summarize', str(good)])
    assert result.exit_code == 0 and '| **0.81** |' in result.output
    assert '≥ 0.8: met' in result.output
    old = tmp_path / 'old.json'  # a file from before the ceiling column
    old.write_text(json.dumps({'results': [{'env': 'AntRandDirec'}]}))
    partial = tmp_path / 'partial.json'  # every column but one the table reads
    partial.write_text(json.dumps({'results': [{k: v for k, v in _row('AntRandDirec').items()
                                                if k != 'wrapped'}]}))
    stale = tmp_path / 'stale.json'  # a time edited, its ratio left: shown side by side
    stale.write_text(json.dumps({'results': [_row('AntRandDirec', ratio_lean=0.81)]}))
    zero = tmp_path / 'zero.json'  # no step takes no time: a ratio of 0 or inf
    zero.write_text(json.dumps({'results': [_row('AntRandDirec', wrapped=0., ratio_raw=0.)]}))
    tiny = tmp_path / 'tiny.json'
    tiny.write_text(json.dumps({'results': [_row('AntRandDirec', physics=1e-320,
                                                 ratio_raw=1e-320 / 60, ratio_lean=0.)]}))
    for bad, named in ((stale, 'ratio_lean is 0.81 but its timings give 0.5'),
                       (zero, 'wrapped is 0.0 µs, not the time of a step'),
                       (tiny, 'physics is 1e-320 µs')):
        result = CliRunner().invoke(physics.main, ['--summarize', str(bad)])
        assert result.exit_code == 2 and named in result.output, result.output
    for bad in (old, partial, tmp_path / 'missing.json'):
        result = CliRunner().invoke(physics.main, ['--summarize', str(good),
                                                   '--summarize', str(bad)])
        assert result.exit_code == 2 and str(bad) in result.output, result.output


def test_the_readme_carries_the_committed_physics_summary():
    """The README's table against the physics is ``--summarize`` of the committed results
    its marker line names (the paper's MuJoCo envs' latest full run and ML1's first, the
    other saved runs of the same code after them, for the verdicts), between its two marker
    lines: a number changed in either place fails."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    readme = (ROOT / 'README.md').read_text()
    start = readme.index('<!-- physics table: ')
    end = readme.index('<!-- end of the physics table -->')
    marker, block = readme[start:end].split('\n', 1)
    files = re.findall(r'--summarize (\S+)', marker)
    assert files[0] == 'benchmarks/results/physics.json'
    assert 'benchmarks/results/physics_ml1.json' in files
    table = physics.goals_table(physics.read_results([ROOT / f for f in files]))
    assert block.strip() == table


def test_a_run_with_another_baseline_solver_is_shown_and_counted_apart(tmp_path):
    """A row measured with the Cholesky baseline solve (``--baseline-solver``) is another
    configuration: labelled, its verdict its own rows' (the env's goal), the default's rows
    unchanged; rows saved before the option are lstsq's; an unknown solver is refused."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    table = physics.goals_table([_row('HumanoidRandDirec', ratio_lean=0.53),
                                 _row('HumanoidRandDirec', ratio_lean=0.86,
                                      baseline_solver='cholesky'),
                                 _row('HumanoidRandDirec', ratio_lean=0.54,
                                      baseline_solver='lstsq')]).splitlines()
    assert len(table) == 4
    assert table[2].startswith('| HumanoidRandDirec | ')
    assert table[2].endswith('| **0.53** | 0.55 | 0.70 | ≥ 0.85: not met (2 runs) |')
    assert table[3].startswith('| HumanoidRandDirec (cholesky baseline) | ')
    assert table[3].endswith('| **0.86** | 0.55 | 0.70 | ≥ 0.85: met |')
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps({'results': [_row('AntRandDirec', baseline_solver='qr')]}))
    result = CliRunner().invoke(physics.main, ['--summarize', str(bad)])
    assert result.exit_code == 2 and "baseline_solver is 'qr'" in result.output, result.output


def test_the_baseline_solver_reaches_the_learner_of_every_timed_meta_batch(monkeypatch):
    """``--baseline-solver`` builds every sampler pass's experiment with it (the columns
    that time the learner), and the row records it."""
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    built = []

    def recording(*args):
        built.append(args[-1])
        raise RuntimeError('built')
    monkeypatch.setattr(physics, 'promp_experiment', recording)
    for call in (lambda: physics.sampler_us('HalfCheetahFwdBack', True, 2, 1,
                                            baseline_solver='cholesky'),
                 lambda: physics.sampler_mujoco_us('HalfCheetahFwdBack', 2, 1, 'cholesky')):
        with pytest.raises(RuntimeError, match='built'):
            call()
    assert built == ['cholesky', 'cholesky']


def test_measure_times_every_sampler_column_with_the_baseline_solver(monkeypatch):
    physics = load_script(ROOT / 'benchmarks' / 'physics.py', 'physics_bench')
    solvers = []
    for name in ('physics_us', 'lockstep_physics_us', 'wrapped_us'):
        monkeypatch.setattr(physics, name, lambda *args: 10.)

    def sampler(*args, baseline_solver='lstsq', **kwargs):
        solvers.append(baseline_solver)
        return 20.

    def timed_pass(*args):
        solvers.append(args[3] if len(args) > 3 else 'lstsq')
        return 12., 11., 3., 2.
    monkeypatch.setattr(physics, 'sampler_us', sampler)
    monkeypatch.setattr(physics, 'sampler_mujoco_us', timed_pass)
    row = physics.measure('HalfCheetahFwdBack', 1, 100, 2, 1, 1, 'cholesky')
    assert solvers == ['cholesky'] * 4 and row['baseline_solver'] == 'cholesky'
    assert physics.row_label(row) == 'HalfCheetahFwdBack (cholesky baseline)'
