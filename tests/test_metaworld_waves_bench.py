"""benchmarks/metaworld_waves.py: its four ways of stepping are what their names say, and
the table's ratios are the measured times' ratios."""
import json
import pathlib

from click.testing import CliRunner
import numpy as np
import pytest

from tests.helpers import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.metaworld
def test_each_mode_steps_the_way_it_names_and_puts_everything_back():
    """``env_by_env``: no wave; ``wave_own_reward``: the wave with the class's own reward
    (infos per env); ``wave_array_reward``: the array reward (infos as arrays); after each,
    the kernels and the wave as shipped."""
    waves = load_script(ROOT / 'benchmarks' / 'metaworld_waves.py', 'metaworld_waves')
    from garage_promp.envs import _metaworld_batch  # pylint: disable=import-outside-toplevel
    waves.check_metaworld_names(['door-open-v3'])  # loads Meta-World
    envs = [env._env for env in waves._envs('door-open-v3', 2, 10)]  # pylint: disable=protected-access
    for env in envs:
        env.reset()
    kernels, step_batch = dict(_metaworld_batch.KERNELS), _metaworld_batch.step_batch
    parts_after = _metaworld_batch._parts_after  # pylint: disable=protected-access
    seen, read = {}, {}
    for which in waves.MODES:
        with waves.mode(type(envs[0]), which):
            plan = _metaworld_batch._plan(type(envs[0]))  # pylint: disable=protected-access
            read[which] = _metaworld_batch._parts_after(plan)  # pylint: disable=protected-access
            seen[which] = _metaworld_batch.step_batch(envs, np.zeros((2, 4)))
        assert _metaworld_batch.KERNELS == kernels and _metaworld_batch.step_batch is step_batch
        assert _metaworld_batch._parts_after is parts_after  # pylint: disable=protected-access
    assert seen['env_by_env'] is None
    assert isinstance(seen['wave_own_reward'][3], list)
    assert isinstance(seen['wave_array_reward'][3], dict)
    assert isinstance(seen['wave_reads_after'][3], dict)
    assert read['wave_array_reward'] and read['wave_reads_after'] == ()


@pytest.mark.metaworld
def test_the_table_runs_and_writes_its_ratios(tmp_path):
    waves = load_script(ROOT / 'benchmarks' / 'metaworld_waves.py', 'metaworld_waves')
    result = CliRunner().invoke(waves.main, [
        '--env', 'door-open-v3', '--env', 'drawer-open-v3', '--envs', '3', '--steps', '4',
        '--repeats', '1', '--horizon', '2', '--out', str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / 'metaworld_waves.json').read_text())
    assert written['meta']['envs'] == 3 and written['meta']['date']
    rows = written['results']
    assert [row['array_reward'] for row in rows] == [True, False]
    for row in rows:
        for key in ('physics_us', 'env_by_env_us', 'wave_own_reward_us', 'wave_array_reward_us'):
            assert row[key] > 0
        assert row['wave_speedup'] == pytest.approx(row['env_by_env_us']
                                                    / row['wave_array_reward_us'])
        assert row['array_reward_speedup'] == pytest.approx(row['wave_own_reward_us']
                                                            / row['wave_array_reward_us'])
        assert row['reads_speedup'] == pytest.approx(row['wave_reads_after_us']
                                                     / row['wave_array_reward_us'])
    table = (tmp_path / 'metaworld_waves.md').read_text()
    assert f"**{rows[0]['array_reward_speedup']:.2f}×**" in table and 'mean of the 2' in table
    bad = CliRunner().invoke(waves.main, ['--env', 'no-such-v3'])
    assert bad.exit_code != 0 and 'no-such-v3' in bad.output
