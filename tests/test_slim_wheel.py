"""scripts/slim_wheel.py: textures shrink, layouts and other files are kept, pip installs it."""
import base64
import csv
import hashlib
import importlib.util
import io
import os
import pathlib
import subprocess
import sys
import zipfile

from PIL import Image
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location('slim_wheel', ROOT / 'scripts' / 'slim_wheel.py')
slim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(slim)


def _png(width, height, seed):
    pixels = bytes((seed * 37 + i * 11) % 256 for i in range(width * height * 3))
    out = io.BytesIO()
    Image.frombytes('RGB', (width, height), pixels).save(out, format='PNG')
    return out.getvalue()


def _wheel(path, files):
    record = 'pkg-1.0.dist-info/RECORD'
    with zipfile.ZipFile(path, 'w') as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(record, ''.join(f'{name},,\n' for name in [*files, record]))
    return path


@pytest.fixture
def wheel(tmp_path):
    files = {
        'pkg/__init__.py': b'VALUE = 1\n',
        'pkg/assets/cube.png': _png(64, 384, 1),  # six faces stacked: 1 x 6 of 64 px
        'pkg/assets/odd.png': _png(30, 45, 2),  # no power of two divides both sides
        'pkg/assets/model.xml': b'<mujoco/>\n',
        'pkg-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n',
        'pkg-1.0.dist-info/WHEEL':
            b'Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
    }
    (tmp_path / 'in').mkdir()
    return _wheel(tmp_path / 'in' / 'pkg-1.0-py3-none-any.whl', files), files


@pytest.mark.parametrize('size, min_side, factor', [
    ((1024, 1024), 8, 128), ((64, 384), 8, 8), ((1300, 866), 8, 2), ((30, 45), 8, 1),
    ((16, 16), 8, 2), ((16, 16), 16, 1), ((2048, 1536), 8, 128)])
def test_shrink_factor_keeps_the_layout_and_the_shortest_side(size, min_side, factor):
    assert slim.shrink_factor(*size, min_side) == factor
    assert size[0] % factor == 0 and size[1] % factor == 0
    assert min(size) // factor >= min_side or factor == 1


def test_slim_copy_shrinks_pngs_keeps_the_rest_and_records_true_hashes(wheel, tmp_path):
    source, files = wheel
    out = slim.slim_wheel(source, tmp_path / 'out')
    assert out.name == source.name
    with zipfile.ZipFile(out) as archive:
        contents = {name: archive.read(name) for name in archive.namelist()}
    record = contents.pop('pkg-1.0.dist-info/RECORD').decode().splitlines()
    assert set(contents) == set(files)
    for name in ('pkg/__init__.py', 'pkg/assets/model.xml', 'pkg/assets/odd.png'):
        assert contents[name] == files[name], name
    cube = Image.open(io.BytesIO(contents['pkg/assets/cube.png']))
    assert cube.size == (8, 48)
    expected = Image.open(io.BytesIO(files['pkg/assets/cube.png'])).resize((8, 48))
    assert cube.tobytes() == expected.tobytes()
    assert record[-1] == 'pkg-1.0.dist-info/RECORD,,'
    for line in record[:-1]:
        name, digest, size = line.split(',')
        data = contents[name]
        assert int(size) == len(data), name
        assert digest == 'sha256=' + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b'=').decode(), name
    assert sorted(line.split(',')[0] for line in record[:-1]) == sorted(contents)


def test_pip_installs_the_slim_copy_offline(wheel, tmp_path):
    out = slim.slim_wheel(wheel[0], tmp_path / 'out')
    site = tmp_path / 'site'
    run = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps',
                          '--no-compile', '--target', str(site), str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (site / 'pkg' / '__init__.py').read_bytes() == b'VALUE = 1\n'
    assert Image.open(site / 'pkg' / 'assets' / 'cube.png').size == (8, 48)


def test_refusals_name_the_culprit(wheel, tmp_path):
    source, _ = wheel
    with pytest.raises(ValueError, match='holds the wheel itself'):
        slim.slim_wheel(source, source.parent)
    with pytest.raises(ValueError, match='min-side'):
        slim.slim_wheel(source, tmp_path / 'out', min_side=0)
    no_record = tmp_path / 'bare.whl'
    with zipfile.ZipFile(no_record, 'w') as archive:
        archive.writestr('pkg/__init__.py', '')
    with pytest.raises(ValueError, match=r'bare\.whl is not a wheel: it has 0'):
        slim.slim_wheel(no_record, tmp_path / 'out')
    text = tmp_path / 'notes.whl'
    text.write_text('not a zip')
    run = subprocess.run([sys.executable, str(ROOT / 'scripts' / 'slim_wheel.py'), str(text),
                          str(tmp_path / 'out')], capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 2 and 'notes.whl is not a wheel' in run.stderr, run.stderr
    assert not (tmp_path / 'out' / 'notes.whl').exists()


def test_commas_permissions_and_dates_survive_the_copy(tmp_path):
    # A name holding a comma is quoted in RECORD (csv, as pip reads it); an executable
    # stays executable.
    source = tmp_path / 'in' / 'pkg-1.0-py3-none-any.whl'
    source.parent.mkdir()
    record = 'pkg-1.0.dist-info/RECORD'
    with zipfile.ZipFile(source, 'w') as archive:
        tool = zipfile.ZipInfo('pkg/tool', (2021, 3, 4, 5, 6, 8))
        tool.external_attr = 0o100755 << 16  # a regular file, rwxr-xr-x
        archive.writestr(tool, '#!/bin/sh\n')
        archive.writestr('pkg/a,b.txt', 'comma')
        archive.writestr('pkg-1.0.dist-info/WHEEL',
                         'Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
        archive.writestr('pkg-1.0.dist-info/METADATA',
                         'Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n')
        archive.writestr(record, '')
    out = slim.slim_wheel(source, tmp_path / 'out')
    with zipfile.ZipFile(out) as archive:
        assert archive.getinfo("pkg/tool").external_attr >> 16 == 0o100755
        assert archive.getinfo('pkg/tool').date_time == (2021, 3, 4, 5, 6, 8)
        rows = list(csv.reader(io.StringIO(archive.read(record).decode())))
    assert ['pkg/a,b.txt', 3] == [rows[1][0], len(rows[1])]
    site = tmp_path / 'site'
    run = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-index', '--no-deps',
                          '--no-compile', '--target', str(site), str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0 and 'RECORD' not in run.stderr, run.stderr[-2000:]
    assert (site / 'pkg' / 'a,b.txt').read_text() == 'comma'
    assert os.access(site / 'pkg' / 'tool', os.X_OK)


@pytest.mark.parametrize('case', ['not_png', 'out_is_file', 'out_holds_folder', 'twice'])
def test_bad_members_and_places_are_named_in_one_line(wheel, tmp_path, case):
    source, files = wheel
    out_dir = tmp_path / 'out'
    if case == 'not_png':
        files = dict(files, **{'pkg/assets/fake.png': b'not an image'})
        source = _wheel(tmp_path / 'in' / 'pkg-1.0-py3-none-any.whl', files)
        expected = 'pkg/assets/fake.png is not a PNG'
    elif case == 'out_is_file':
        out_dir.write_text('')
        expected = 'is not a folder'
    elif case == 'out_holds_folder':
        (out_dir / source.name).mkdir(parents=True)
        expected = 'is a folder'
    else:
        with zipfile.ZipFile(source, 'a') as archive:
            with pytest.warns(UserWarning):
                archive.writestr('pkg/__init__.py', 'twice')
        expected = 'holds a file twice'
    run = subprocess.run([sys.executable, str(ROOT / 'scripts' / 'slim_wheel.py'), str(source),
                          str(out_dir)], capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 2 and expected in run.stderr, run.stderr
    assert 'Traceback' not in run.stderr
    assert not list(tmp_path.glob('out/*.partial'))
