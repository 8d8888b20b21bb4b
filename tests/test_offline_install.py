"""The offline wheelhouse builds the packages without upstream wheels; they install offline."""
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheelhouse_builds_and_installs_without_an_index(tmp_path):
    house, site = tmp_path / 'wheels', tmp_path / 'site'
    env = dict(os.environ, PYTHON=sys.executable)
    build = subprocess.run(['bash', str(ROOT / 'scripts' / 'offline_wheelhouse.sh'), str(house),
                            '3.11', '--built-only'], capture_output=True, text=True, env=env,
                           timeout=900, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    wheels = sorted(p.name.split('-')[0].lower() for p in house.glob('*.whl'))
    assert wheels == ['akro', 'dowel', 'garage', 'gym']
    # Built by the script's pinned setuptools, not this Python's or the newest.
    pinned = re.search(r"'setuptools==([^']+)'",
                       (ROOT / 'scripts' / 'offline_wheelhouse.sh').read_text()).group(1)
    for wheel in house.glob('*.whl'):
        with zipfile.ZipFile(wheel) as archive:
            (meta, ) = [n for n in archive.namelist() if n.endswith('.dist-info/WHEEL')]
            assert f'Generator: setuptools ({pinned})' in archive.read(meta).decode(), wheel.name
    # --no-index: nothing may come from a package index.
    install = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-index',
                              '--no-deps', '--target', str(site), *map(str, house.glob('*.whl'))],
                             capture_output=True, text=True, timeout=600, check=False)
    assert install.returncode == 0, install.stderr[-3000:]
    probe = subprocess.run(
        [sys.executable, '-c', 'import garage_promp, garage, akro, dowel, gym\n'
         'print(garage.__file__); print(akro.__file__); print(gym.__file__)'],
        capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, PYTHONPATH=f'{site}{os.pathsep}{ROOT}'))
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert all(line.startswith(str(site)) for line in probe.stdout.split())
