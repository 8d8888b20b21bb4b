"""benchmarks/fig5_trajectories.py: Fig. 5's trajectories of a tiny PointEnvMomentum run, drawn."""
import json
import pathlib
import subprocess
import sys

from click.testing import CliRunner
import numpy as np
import pytest

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
K = 3  # PointEnvMomentum's paper K (paper_config), which LVC-TRPO takes
H = 10
N_EPISODES = 2


@pytest.fixture(scope='module')
def fig5():
    return load_script(ROOT / 'benchmarks' / 'fig5_trajectories.py', 'fig5_trajectories')


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
    """A one-epoch LVC-TRPO run on sparse PointEnvMomentum (tiny sizes)."""
    log_dir = tmp_path_factory.mktemp('fig5') / 'run'
    subprocess.run([
        sys.executable, str(ROOT / 'launchers' / 'train.py'), '--algo', 'LVC-TRPO',
        '--env', 'PointEnvMomentum', '--set', 'reward_type=sparse', '--meta-batch-size', '2',
        '--episodes-per-task', '2', '--max-episode-length', str(H), '--epochs', '1',
        '--hidden-sizes', '8', '--n-test-tasks', '1', '--log-dir', str(log_dir)],
        check=True, cwd=str(ROOT), capture_output=True, timeout=120)
    assert (log_dir / 'params.pkl').is_file()
    return log_dir


def test_trajectories_adapt_k_times_on_the_four_corners(fig5, run_dir, monkeypatch):
    calls = []
    load_algo = fig5.load_algo

    def counting_load_algo(*args, **kwargs):
        algo, env = load_algo(*args, **kwargs)
        adapt_many = algo.adapt_many

        def counted(params, episodes, episodes_per_task):
            calls.append((len(params), len(episodes.lengths), episodes_per_task))
            return adapt_many(params, episodes, episodes_per_task)

        algo.adapt_many = counted
        return algo, env

    monkeypatch.setattr(fig5, 'load_algo', counting_load_algo)
    data = fig5.trajectories(str(run_dir), n_episodes=N_EPISODES, seed=3)
    # K real inner steps per task, each on that task's N_EPISODES episodes.
    assert calls == [(1, N_EPISODES, N_EPISODES)] * (4 * K)
    assert data['num_inner_grad_steps'] == K and data['max_episode_length'] == H
    assert data['goal_radius'] == 2.0 and data['reward_type'] == 'sparse'
    corners = {(-2., -2.), (2., -2.), (-2., 2.), (2., 2.)}
    assert {tuple(goal) for goal in data['goals'].values()} == corners
    assert list(data['trajectories']) == list(data['goals']) == list(data['returns'])
    for task, steps in data['trajectories'].items():
        assert len(steps) == K + 1 and len(data['returns'][task]) == K + 1
        for step, episodes in enumerate(steps):
            assert len(episodes) == N_EPISODES == len(data['returns'][task][step])
            for points in episodes:
                xy = np.asarray(points)
                assert xy.shape == (H + 1, 2) and np.isfinite(xy).all()
                assert np.abs(xy[0]).max() <= 0.2  # reset position ~ U(-0.2, 0.2)^2
                # Momentum: each step moves by the velocity, which changes by at most 0.1.
                assert np.abs(np.diff(xy, 2, axis=0)).max() <= 0.1 + 1e-4
    assert len(data['average_return']) == K + 1
    assert all(np.isfinite(data['average_return']))
    # Adapted policies act differently from the meta-policy.
    first = data['trajectories']['(2, 2)']
    assert not np.allclose(first[0], first[K])
    # JSON-able, and deterministic for a seed.
    assert json.loads(json.dumps(data)) == data
    monkeypatch.setattr(fig5, 'load_algo', load_algo)
    assert fig5.trajectories(str(run_dir), n_episodes=N_EPISODES, seed=3) == data


def test_cli_writes_png_and_json_and_redraws_from_json(fig5, run_dir, tmp_path):
    out = tmp_path / 'out'
    result = CliRunner().invoke(fig5.main, [
        '--run', f'LVC-TRPO={run_dir}', '--run', f'copy={run_dir}', '--out', str(out),
        '--n-episodes', '1'], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    png, js = out / 'fig5_trajectories.png', out / 'fig5_trajectories.json'
    assert png.stat().st_size > 5000
    algos = json.loads(js.read_text())['algos']
    assert list(algos) == ['LVC-TRPO', 'copy']
    assert algos['LVC-TRPO'] == algos['copy']  # the same seed: the same episodes
    assert algos['LVC-TRPO']['n_episodes'] == 1
    redrawn = tmp_path / 'redrawn'
    result = CliRunner().invoke(fig5.main, ['--from-json', str(js), '--out', str(redrawn)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (redrawn / 'fig5_trajectories.png').stat().st_size > 5000
    assert not (redrawn / 'fig5_trajectories.json').exists()


@pytest.mark.parametrize('args, message', [
    ([], 'or --from-json'),
    (['--run', 'no-label'], 'LABEL=RUN_DIR'),
    (['--run', 'A=/nonexistent/run'], 'not a directory'),
])
def test_cli_refuses_bad_runs(fig5, tmp_path, args, message):
    result = CliRunner().invoke(fig5.main, [*args, '--out', str(tmp_path / 'out')])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / 'out').exists()
