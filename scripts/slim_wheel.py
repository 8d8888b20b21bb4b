"""Copy a wheel with its PNG textures downscaled, for machines reached through a small transfer.

    python scripts/slim_wheel.py WHEEL OUT_DIR [--min-side 8] [--check-metaworld]

Meta-World 3.1.1's wheel is about 37 MB, of which about 33 MB are PNG textures that only
rendering reads: MuJoCo loads a texture file when it compiles a model, but no physics
quantity (no mass, contact, observation or reward) depends on its pixels. This copies the
wheel with every PNG shrunk by the largest power of two that divides both its sides and
keeps the shorter side at ``--min-side`` pixels or more, so that a cube or skybox texture
made of stacked or gridded faces keeps its layout. Every other file is copied byte for byte,
and the wheel's RECORD is rewritten with the new hashes and sizes (PEP 376/427), so pip
installs it as it would the original. The result is about 3 MB.

``--check-metaworld`` then installs the copy in a temporary folder and steps every ML10
class (and ML1 reach-v3 and push-v3) with seeded random actions, once with the Meta-World
of the running Python and once with the copy; it fails unless every observation, reward
and info is the same bit for bit. The running Python needs Meta-World 3.1.1 installed.

Needs Pillow (a dependency of matplotlib, which the package installs).
"""
import argparse
import base64
import csv
import hashlib
import io
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

# Steps every ML10 class with seeded random actions and prints one digest of everything
# the envs returned; run once per Meta-World copy.
_DIGEST = r'''
import hashlib, numpy as np, metaworld
h = hashlib.sha256()
ml10 = metaworld.ML10(seed=0)
names = sorted(set(ml10.train_classes) | set(ml10.test_classes) | {'reach-v3', 'push-v3'})
for name in names:
    ml1 = metaworld.ML1(name, seed=0)
    env = ml1.train_classes[name]()
    env.set_task(ml1.train_tasks[0])
    obs, _ = env.reset(seed=1)
    h.update(obs.tobytes())
    rng = np.random.default_rng(0)
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(
            rng.uniform(-1, 1, env.action_space.shape))
        h.update(obs.tobytes())
        h.update(np.float64(reward).tobytes())
        h.update(repr(sorted((k, float(v)) for k, v in info.items())).encode())
print(metaworld.__file__)
print(len(names), h.hexdigest())
'''


def shrink_factor(width, height, min_side):
    """The largest power of two dividing both sides that keeps the shorter at min_side."""
    factor = 1
    while (width % (2 * factor) == 0 and height % (2 * factor) == 0
           and min(width, height) // (2 * factor) >= min_side):
        factor *= 2
    return factor


def _shrunk_png(data, min_side, name):
    from PIL import Image  # pylint: disable=import-outside-toplevel
    try:
        image = Image.open(io.BytesIO(data))
        factor = shrink_factor(*image.size, min_side)
        if factor == 1:
            return data
        out = io.BytesIO()
        image.resize((image.size[0] // factor, image.size[1] // factor)).save(
            out, format='PNG', optimize=True)
    except (OSError, ValueError, Image.DecompressionBombError) as error:  # not an image, ...
        raise ValueError(f'{name} is not a PNG this can shrink: {error}') from None
    return out.getvalue()


def _record_row(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return [name, f'sha256={digest}', str(len(data))]


def slim_wheel(wheel, out_dir, min_side=8):
    """Write the slim copy of `wheel` into `out_dir` (same file name); return its path."""
    wheel, out_dir = pathlib.Path(wheel), pathlib.Path(out_dir)
    if min_side < 1:
        raise ValueError(f'--min-side must be at least 1, got {min_side}')
    out = out_dir / wheel.name
    if out.resolve() == wheel.resolve():
        raise ValueError(f'OUT_DIR {out_dir} holds the wheel itself; name another folder')
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f'OUT_DIR {out_dir} is not a folder')
    if out.is_dir():
        raise ValueError(f'{out} is a folder; the copy would be written there')
    with zipfile.ZipFile(wheel) as source:
        infos = source.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f'{wheel} holds a file twice: {twice}')
        records = [n for n in names if n.endswith('.dist-info/RECORD') and n.count('/') == 1]
        if len(records) != 1:
            raise ValueError(f'{wheel} is not a wheel: it has {len(records)} '
                             '<name>.dist-info/RECORD files, not one')
        contents = {}
        for info in infos:
            if info.filename == records[0] or info.is_dir():
                continue
            try:
                data = source.read(info)
            except (RuntimeError, NotImplementedError, zipfile.BadZipFile) as error:
                raise ValueError(f'{wheel}: {info.filename} cannot be read: {error}') from None
            if info.filename.lower().endswith('.png'):
                data = _shrunk_png(data, min_side, info.filename)
            contents[info.filename] = (info, data)
    rows = [_record_row(name, data) for name, (_, data) in contents.items()]
    rows.append([records[0], '', ''])
    record = io.StringIO()
    csv.writer(record, lineterminator='\n').writerows(rows)  # quotes a name holding a comma
    contents[records[0]] = (zipfile.ZipInfo(records[0], (2020, 1, 1, 0, 0, 0)),
                            record.getvalue().encode())
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + '.partial')
    try:
        with zipfile.ZipFile(partial, 'w', zipfile.ZIP_DEFLATED) as target:
            for info, data in contents.values():
                # The member's own name, date and permissions (an executable stays one).
                member = zipfile.ZipInfo(info.filename, info.date_time)
                member.external_attr = info.external_attr or 0o644 << 16
                member.compress_type = zipfile.ZIP_DEFLATED
                target.writestr(member, data)
        os.replace(partial, out)
    finally:
        if partial.exists():
            partial.unlink()
    return out


def _digest(pythonpath):
    env = dict(os.environ, MUJOCO_GL='disable')
    if pythonpath:
        env['PYTHONPATH'] = os.pathsep.join([pythonpath, env.get('PYTHONPATH', '')]).rstrip(
            os.pathsep)
    run = subprocess.run([sys.executable, '-c', _DIGEST], capture_output=True, text=True,
                         env=env, timeout=900, check=False)
    if run.returncode != 0:
        raise SystemExit(f'stepping Meta-World failed:\n{run.stderr[-3000:]}')
    where, digest = run.stdout.strip().splitlines()[-2:]
    return where, digest


def check_metaworld(slim):
    """Exit non-zero unless the slim Meta-World steps as the installed one, bit for bit."""
    if not slim.name.lower().startswith('metaworld-'):
        raise SystemExit(f'--check-metaworld checks a Meta-World wheel; {slim.name} is not one')
    with tempfile.TemporaryDirectory() as site:
        install = subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-index',
                                  '--no-deps', '--no-compile', '--target', site, str(slim)],
                                 capture_output=True, text=True, timeout=600, check=False)
        if install.returncode != 0:
            raise SystemExit(f'pip could not install {slim}:\n{install.stderr[-2000:]}')
        installed, slimmed = _digest(None), _digest(site)
    if not slimmed[0].startswith(site):
        raise SystemExit(f'the check imported {slimmed[0]}, not the slim copy in {site}')
    print(f'installed Meta-World ({installed[0]}): {installed[1]}')
    print(f'slim copy: {slimmed[1]}')
    if installed[1] != slimmed[1]:
        raise SystemExit('the slim Meta-World does not step as the installed one')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('wheel', type=pathlib.Path)
    parser.add_argument('out_dir', type=pathlib.Path)
    parser.add_argument('--min-side', type=int, default=8,
                        help='shortest side a texture keeps, in pixels (default 8)')
    parser.add_argument('--check-metaworld', action='store_true',
                        help='check that the copy steps ML10 as the installed Meta-World')
    args = parser.parse_args(argv)
    if not args.wheel.is_file():
        parser.error(f'WHEEL {args.wheel} is not a file')
    try:
        out = slim_wheel(args.wheel, args.out_dir, args.min_side)
    except ValueError as error:
        parser.error(str(error))
    except zipfile.BadZipFile as error:
        parser.error(f'WHEEL {args.wheel} is not a wheel: {error}')
    except OSError as error:  # OUT_DIR cannot be made or written, WHEEL read
        parser.error(f'{error.filename or args.out_dir}: {error.strerror or error}')
    print(f'{out}: {args.wheel.stat().st_size / 1e6:.1f} MB -> {out.stat().st_size / 1e6:.1f} MB')
    if args.check_metaworld:
        check_metaworld(out)


if __name__ == '__main__':
    main()
