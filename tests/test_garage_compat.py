"""Tests for garage_promp._garage_compat: garage 2021.3 on Python 3.11 / torch 2."""
import copy
import json
import os
import struct
import subprocess
import sys

from garage_promp import _garage_compat

import cloudpickle
import numpy as np
import pytest

needs_no_tf = pytest.mark.skipif(
    _garage_compat.tensorflow_available(),
    reason='checks the TensorFlow-free import path; TensorFlow is installed')


def _run_python(code):
    return subprocess.run([sys.executable, '-c', code],
                          capture_output=True,
                          text=True,
                          check=False,
                          timeout=120)


@needs_no_tf
def test_import_garage_without_tensorflow():
    result = _run_python(
        'import sys, garage_promp, garage, garage.sampler, garage.experiment\n'
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "print('ok')")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith('ok')


_BLOCK = ('import sys, importlib.abc\n'
          'class Block(importlib.abc.MetaPathFinder):\n'
          '    def find_spec(self, name, path, target=None):\n'
          '        if name.split(".")[0] in {blocked!r}:\n'
          '            raise ModuleNotFoundError(name)\n'
          'sys.meta_path.insert(0, Block())\n')


def test_import_garage_without_ray_and_a_clear_error_on_use():
    """Without Ray everything imports; the Ray sampler is refused when made (not at its
    first sample, after the envs are built), and init_ray says what to install."""
    result = _run_python(
        _BLOCK.format(blocked=('ray',)) +
        'import garage_promp, garage.sampler\n'
        'from garage_promp.sampler import init_ray\n'
        'from garage_promp.envs import PointEnvCorner\n'
        'from garage.torch.policies import GaussianMLPPolicy\n'
        "print('imported')\n"
        'env = PointEnvCorner()\n'
        'policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4,))\n'
        'try:\n'
        "    garage_promp.make_sampler(policy, env, kind='ray', n_workers=2)\n"
        'except ImportError as error:\n'
        "    print('refused:', error)\n"
        'init_ray()\n')
    assert 'imported' in result.stdout, result.stderr
    assert "refused: the sampler kind='ray' needs Ray, which is not installed" in result.stdout
    assert result.returncode != 0
    assert 'ray.is_initialized needs Ray' in result.stderr
    assert 'pip install "garage_promp[ray]"' in result.stderr


def test_launchers_refuse_the_ray_sampler_without_ray_while_parsing(tmp_path):
    """``--sampler ray`` without Ray: a usage error (exit 2) naming the option, before the
    run dir is made (it used to fail at the first sampling round)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for script, args in (('train.py', ['--env', 'PointEnvCorner', '--log-dir',
                                       str(tmp_path / 'run')]),
                         ('meta_test.py', [str(tmp_path / 'run')])):
        result = _run_python(
            _BLOCK.format(blocked=('ray',)) +
            f'import runpy\nsys.argv = [{script!r}, "--sampler", "ray", *{args!r}]\n'
            f'runpy.run_path({os.path.join(root, "launchers", script)!r}, run_name="__main__")\n')
        assert result.returncode == 2, (script, result.stderr[-2000:])
        assert "Invalid value for '--sampler'" in result.stderr, result.stderr[-2000:]
        assert 'needs Ray, which is not installed' in result.stderr
        assert not (tmp_path / 'run').exists()


def test_import_prints_nothing():
    """No banner from garage's dependencies (cma, gym) or from garage itself."""
    result = _run_python('import garage_promp, garage, garage.torch, garage.np.algos\n'
                         'from garage.experiment.deterministic import set_seed\n'
                         'import torch\n'
                         'set_seed(1)\n'
                         # cma's import (deferred, workaround 13) once garage's CMA-ES uses it
                         'from garage.np.algos import cma_es\n'
                         'cma_es.cma.CMAOptions\n')
    assert result.returncode == 0, result.stderr
    assert result.stdout == '' and result.stderr == ''


@pytest.mark.mujoco
def test_minimal_install_trains_without_ray_and_metaworld(tmp_path):
    """Without the optional extras a MuJoCo-free run works end to end, and a
    Meta-World env says which extra to install."""
    train = os.path.join(os.path.dirname(__file__), os.pardir, 'launchers', 'train.py')
    run_dir = str(tmp_path / 'run')
    result = _run_python(
        _BLOCK.format(blocked=('ray', 'metaworld')) +
        'import runpy\n'
        f'sys.argv = [{train!r}, "--preset", "demo", "--epochs", "1", "--meta-batch-size", "2",'
        f' "--episodes-per-task", "2", "--n-test-tasks", "2", "--log-dir", {run_dir!r}]\n'
        'try:\n'
        '    runpy.run_path(sys.argv[0], run_name="__main__")\n'
        'except SystemExit as e:\n'
        '    assert not e.code, e.code\n'
        "assert 'metaworld' not in sys.modules\n"
        'from garage_promp.envs import make_benchmark\n'
        'try:\n'
        "    make_benchmark('ML1', task='reach-v3')\n"
        'except ImportError as e:\n'
        '    print("refused:", e)\n')
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / 'run' / 'progress.csv').exists()
    assert 'refused: Meta-World environments need' in result.stdout
    assert 'garage_promp[metaworld]' in result.stdout


@needs_no_tf
def test_garage_tf_submodule_gives_clear_import_error():
    result = _run_python('import garage_promp\nfrom garage.tf.algos import PPO')
    assert result.returncode != 0
    assert 'ImportError' in result.stderr
    assert 'pip install tensorflow' in result.stderr
    assert 'garage.tf.algos' in result.stderr


@needs_no_tf
def test_garage_tf_attribute_and_tf_worker_raise_import_error():
    import garage.tf
    from garage.tf.samplers import TFWorkerClassWrapper
    with pytest.raises(ImportError, match='install tensorflow'):
        garage.tf.TFPolicy  # noqa: B018
    with pytest.raises(ImportError, match='TFWorkerClassWrapper'):
        TFWorkerClassWrapper(object)


@needs_no_tf
def test_worker_factory_rejects_tf_worker_clearly():
    from garage.sampler import WorkerFactory
    with pytest.raises(ImportError, match='TensorFlow'):
        WorkerFactory(max_episode_length=5, n_workers=1, is_tf_worker=True)


def test_apply_is_idempotent():
    n_hooks = len(sys.meta_path)
    _garage_compat.apply()
    _garage_compat.apply()
    assert len(sys.meta_path) == n_hooks


def test_trainer_local_sampler_wrap_experiment_and_json_dump(tmp_path):
    """A tiny garage algorithm trains through Trainer and writes experiment.json."""
    from garage import wrap_experiment
    from garage.envs import PointEnv
    from garage.experiment.deterministic import set_seed
    from garage.np.algos import RLAlgorithm
    from garage.sampler import LocalSampler
    from garage.torch.policies import GaussianMLPPolicy
    from garage.trainer import Trainer

    class _CountSteps(RLAlgorithm):

        def __init__(self, env, policy):
            self.policy = policy
            self._sampler = LocalSampler(agents=policy,
                                         envs=env,
                                         max_episode_length=5)
            self.steps = []

        def train(self, trainer):
            for _ in trainer.step_epochs():
                eps = trainer.obtain_episodes(trainer.step_itr, batch_size=10)
                self.steps.append(len(eps.rewards))
                trainer.step_itr += 1
            return float(np.mean(eps.rewards))

    log_dir = str(tmp_path / 'exp')
    holder = {}

    @wrap_experiment(log_dir=log_dir, archive_launch_repo=False)
    def run(ctxt=None):
        set_seed(1)
        env = PointEnv(max_episode_length=5)
        policy = GaussianMLPPolicy(env.spec, hidden_sizes=(4, ))
        algo = _CountSteps(env, policy)
        trainer = Trainer(ctxt)
        trainer.setup(algo, env)
        holder['result'] = trainer.train(n_epochs=2, batch_size=10)
        holder['algo'] = algo

    run()
    assert holder['algo'].steps == [10, 10]
    assert np.isfinite(holder['result'])
    with open(os.path.join(log_dir, 'experiment.json')) as f:
        summary = json.load(f)
    assert summary['_train_args']['n_epochs'] == 2
    assert os.path.isfile(os.path.join(log_dir, 'params.pkl'))


def _snapshotter(tmp_path, mode='last'):
    from garage.experiment import Snapshotter
    return Snapshotter(str(tmp_path), snapshot_mode=mode, snapshot_gap=1)


def test_snapshot_write_is_atomic(tmp_path, monkeypatch):
    snap = _snapshotter(tmp_path)
    snap.save_itr_params(0, {'epoch': 0})

    def failing_dump(obj, file):
        file.write(b'partial')
        raise OSError('disk full')

    monkeypatch.setattr(cloudpickle, 'dump', failing_dump)
    with pytest.raises(OSError, match='disk full'):
        snap.save_itr_params(1, {'epoch': 1})
    monkeypatch.undo()
    assert snap.load(str(tmp_path))['epoch'] == 0
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.tmp')]


def test_a_snapshot_is_written_through_a_link_keeping_its_permissions(tmp_path):
    """A ``params.pkl`` that is a symbolic link (snapshots kept on another disk) has the
    file it names replaced, the link kept; the file keeps its permissions; a leftover
    ``params.pkl.tmp`` (a directory even) is not in the way."""
    elsewhere = tmp_path / 'disk'
    elsewhere.mkdir()
    run = tmp_path / 'run'
    run.mkdir()
    snap = _snapshotter(run)
    (elsewhere / 'params.pkl').write_bytes(b'')
    os.chmod(elsewhere / 'params.pkl', 0o640)
    (run / 'params.pkl').symlink_to(elsewhere / 'params.pkl')
    (run / 'params.pkl.tmp').mkdir()
    snap.save_itr_params(3, {'epoch': 3})
    assert (run / 'params.pkl').is_symlink()
    assert os.readlink(run / 'params.pkl') == str(elsewhere / 'params.pkl')
    assert os.stat(elsewhere / 'params.pkl').st_mode & 0o777 == 0o640
    with open(elsewhere / 'params.pkl', 'rb') as f:
        assert cloudpickle.load(f) == {'epoch': 3}
    assert snap.load(str(run))['epoch'] == 3
    assert sorted(p.name for p in run.iterdir()) == ['params.pkl', 'params.pkl.tmp']
    assert sorted(p.name for p in elsewhere.iterdir()) == ['params.pkl']


def test_the_temporary_files_a_killed_snapshot_left_are_removed(tmp_path):
    """Each write has a temporary file of its own name: those of processes killed while
    writing (a dead pid) are removed at the next snapshot, a living process's kept."""
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True, check=True).stdout.strip()
    left = tmp_path / f'.params.pkl.{dead}.0a1b2c3d.tmp'
    alive = tmp_path / f'.params.pkl.{os.getppid()}.0a1b2c3d.tmp'
    other = tmp_path / f'.itr_1.pkl.{dead}.0a1b2c3d.tmp'  # another file's: not this write's
    for path in (left, alive, other):
        path.write_bytes(b'partial')
    _snapshotter(tmp_path).save_itr_params(1, {'epoch': 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, other.name, 'params.pkl'])


def test_snapshot_load_last_sorts_epochs_numerically(tmp_path):
    snap = _snapshotter(tmp_path, mode='all')
    for epoch in (2, 9, 10):
        snap.save_itr_params(epoch, {'epoch': epoch})
    assert snap.load(str(tmp_path), 'last')['epoch'] == 10
    assert snap.load(str(tmp_path), 'first')['epoch'] == 2
    assert snap.load(str(tmp_path), 9)['epoch'] == 9


def test_corrupt_snapshot_names_file_and_falls_back(tmp_path):
    snap = _snapshotter(tmp_path, mode='all')
    snap.save_itr_params(1, {'epoch': 1})
    snap.save_itr_params(2, {'epoch': 2})
    with open(tmp_path / 'itr_2.pkl', 'r+b') as f:
        f.truncate(5)
    with pytest.warns(UserWarning, match='itr_2.pkl.*; trying itr_1.pkl$'):
        assert snap.load(str(tmp_path), 'last')['epoch'] == 1
    with pytest.raises(_garage_compat.CorruptSnapshotError, match='itr_2.pkl'):
        snap.load(str(tmp_path), 2)


def test_a_fallback_is_announced_only_where_there_is_one(tmp_path):
    """Each corrupt snapshot's warning names the file tried next; the last one has no
    warning of its own (the error names every file), and a newer itr_N.pkl that is
    corrupt falls back to params.pkl, named with its epoch."""
    import types
    import warnings
    snap = _snapshotter(tmp_path, mode='all')
    snap.save_itr_params(1, {'epoch': 1})
    (tmp_path / 'itr_2.pkl').write_bytes(b'\x80\x04garbage')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert snap.load(str(tmp_path), 'first')['epoch'] == 1
    assert not caught  # the first file loaded: nothing to say
    (tmp_path / 'itr_1.pkl').write_bytes(b'\x80\x04garbage')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(_garage_compat.CorruptSnapshotError, match='no intact snapshot'):
            snap.load(str(tmp_path), 'last')
    assert [str(w.message).rsplit('; ', 1)[1] for w in caught] == ['trying itr_1.pkl']
    # params.pkl holds epoch 1 (a run continued in 'all' mode), itr_3 and itr_2 are newer.
    for name in ('itr_1.pkl', 'itr_2.pkl'):
        (tmp_path / name).unlink()
    stats = types.SimpleNamespace(total_epoch=1)
    _snapshotter(tmp_path).save_itr_params(1, {'epoch': 1, 'stats': stats})
    for epoch in (2, 3):
        (tmp_path / f'itr_{epoch}.pkl').write_bytes(b'\x80\x04garbage')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert snap.load(str(tmp_path), 'last')['epoch'] == 1
    assert [str(w.message).rsplit('; ', 1)[1] for w in caught] == [
        'trying itr_2.pkl', 'trying params.pkl (epoch 1)']


@pytest.mark.parametrize('length', [2**64 - 1, 2**62], ids=['OverflowError', 'MemoryError'])
def test_a_snapshot_with_a_garbage_length_falls_back(tmp_path, length):
    """Damaged bytes can make unpickling raise OverflowError or MemoryError (a BINBYTES8
    opcode with an impossible length): the file is corrupt like any other, and the
    older snapshot is loaded."""
    snap = _snapshotter(tmp_path, mode='all')
    snap.save_itr_params(1, {'epoch': 1})
    (tmp_path / 'itr_2.pkl').write_bytes(b'\x80\x04\x8e' + struct.pack('<Q', length))
    with pytest.warns(UserWarning, match='itr_2.pkl is corrupt'):
        assert snap.load(str(tmp_path), 'last')['epoch'] == 1


def test_all_snapshots_corrupt_raises(tmp_path):
    (tmp_path / 'params.pkl').write_bytes(b'\x80\x04garbage')
    snap = _snapshotter(tmp_path)
    with pytest.raises(_garage_compat.CorruptSnapshotError, match='params.pkl'):
        snap.load(str(tmp_path))


def test_snapshot_load_bad_arguments(tmp_path):
    snap = _snapshotter(tmp_path)
    with pytest.raises(ValueError, match='itr should be'):
        snap.load(str(tmp_path), 'foo')
    with pytest.raises(FileNotFoundError):
        snap.load(str(tmp_path / 'missing'))
    with pytest.raises(FileNotFoundError):
        snap.load(str(tmp_path))
    with pytest.raises(ValueError, match='Invalid snapshot mode'):
        _snapshotter(tmp_path, mode='sometimes').save_itr_params(0, {})


def test_snapshot_errors_name_the_file_or_directory(tmp_path, monkeypatch):
    snap = _snapshotter(tmp_path)
    with pytest.raises(FileNotFoundError, match=f'no snapshot .* in {tmp_path}'):
        snap.load(str(tmp_path))
    with pytest.raises(FileNotFoundError, match='no snapshot directory .*missing'):
        snap.load(str(tmp_path / 'missing'))
    cloudpickle.dump([1, 2], open(tmp_path / 'params.pkl', 'wb'))
    with pytest.raises(_garage_compat.CorruptSnapshotError, match='params.pkl holds a list'):
        snap.load(str(tmp_path))
    with pytest.raises(_garage_compat.NotASnapshotError, match="lacks \\['seed'"):
        _garage_compat.check_training_snapshot({'algo': 1}, str(tmp_path))
    snap.save_itr_params(0, {'epoch': 0})

    def too_big(obj, file):
        raise OSError(27, 'File too large')

    monkeypatch.setattr(cloudpickle, 'dump', too_big)
    with pytest.raises(OSError, match='could not write the snapshot .*params.pkl'):
        snap.save_itr_params(1, {'epoch': 1})
    monkeypatch.undo()
    assert snap.load(str(tmp_path))['epoch'] == 0


def test_numpy_is_pinned_below_2():
    assert int(np.__version__.split('.')[0]) < 2


def test_tensorboard_output_skips_non_finite_scalars(tmp_path):
    from dowel import TensorBoardOutput
    written = []
    output = TensorBoardOutput(str(tmp_path))
    output._writer.add_scalar = lambda key, value, step: written.append((key, value))
    output._record_kv('MetaTest/Average/AverageReturn', float('nan'), 1)
    output._record_kv('Inf', np.float32('inf'), 1)
    output._record_kv('Step_0-AverageReturn', 2.5, 1)
    assert written == [('Step_0-AverageReturn', 2.5)]
    output.close()


#: What garage and dowel import at module level for functions the package does not call
#: (workaround 13), and what stands for them there.
_DEFERRED = {'ray': ('garage.sampler.ray_sampler', 'ray', 'init'),
             'cma': ('garage.np.algos.cma_es', 'cma', 'CMAEvolutionStrategy'),
             'scipy.signal': ('garage.np._functions', 'scipy', 'signal'),
             'matplotlib.pyplot': ('dowel.tensor_board_output', 'plt', 'Figure'),
             'scipy.stats': ('dowel.tensor_board_output', 'scipy', 'stats')}


def test_garage_and_dowels_heavy_imports_wait_for_their_first_use():
    """Importing the package (and garage's samplers and algorithms, dowel's outputs) loads
    none of those modules; each name reads the real module once used, and garage's
    discounted sum (scipy.signal's filter) gives the closed form's numbers."""
    result = _run_python(
        'import importlib, sys\n'
        'import garage_promp, garage_promp.experiment, garage.sampler, garage.np.algos\n'
        'import dowel, numpy as np\n'
        f'deferred = {_DEFERRED!r}\n'
        'print(sorted(m for m in deferred if m in sys.modules))\n'
        'for target, (module, name, attr) in deferred.items():\n'
        '    stand_in = vars(importlib.import_module(module))[name]\n'
        "    assert type(stand_in).__name__ == 'DeferredModule', (module, stand_in)\n"
        '    value = getattr(stand_in, attr)  # imports the target\n'
        '    real = sys.modules[target.split(".")[0] if name == "scipy" else target]\n'
        '    assert value is getattr(real, attr) and target in sys.modules, (module, name)\n'
        '    print(module, name, "->", stand_in)\n'
        'from garage.np import discount_cumsum\n'
        'x = np.arange(1., 6.)\n'
        'closed = [sum(0.5 ** l * x[t + l] for l in range(5 - t)) for t in range(5)]\n'
        'print(discount_cumsum(x, 0.5).tolist() == closed)\n')
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == '[]'  # none loaded by the imports
    assert lines[1] == 'garage.sampler.ray_sampler ray -> <ray, imported at its first use>'
    assert lines[-1] == 'True'


def test_a_module_loaded_with_deferred_imports_keeps_its_line_numbers_and_caches_no_bytecode(
        tmp_path):
    """Its code is not the file's: no bytecode of it is written beside the file (a later
    import without the hook would run it), and a traceback names the file's lines."""
    import importlib.util
    import traceback
    path = tmp_path / 'deferring_example.py'
    path.write_text('import json\nimport colorsys\n\n\ndef fail():\n    raise ValueError(json)\n')
    loader = _garage_compat._DeferringLoader('deferring_example', str(path),
                                             {'colorsys': ('colorsys', 'colorsys')})
    spec = importlib.util.spec_from_file_location('deferring_example', path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert type(vars(module)['colorsys']).__name__ == 'DeferredModule'
    assert module.colorsys.rgb_to_hsv(1., 0., 0.) == (0., 1., 1.)
    # A copy (made without __init__: its fields are read before they are set) is one too.
    assert copy.copy(vars(module)['colorsys']).hsv_to_rgb(0., 1., 1.) == (1., 0., 0.)
    with pytest.raises(ValueError) as raised:
        module.fail()
    assert traceback.extract_tb(raised.tb)[-1].lineno == 6
    assert not (tmp_path / '__pycache__').exists()


def test_a_deferred_import_is_taken_out_only_where_the_name_is_bound_once():
    import ast
    source = ('import os, ray\n'
              'import scipy.signal\n'
              'import matplotlib.pyplot as plt\n'
              'import numpy.linalg\n'
              'import numpy\n'
              'from cma import CMAOptions\n'
              'def f():\n'
              '    import ray\n')
    deferred = {'ray': ('ray', 'ray'), 'scipy': ('scipy', 'scipy.signal'),
                'plt': ('matplotlib.pyplot', 'matplotlib.pyplot'),
                'numpy': ('numpy', 'numpy.linalg'), 'cma': ('cma', 'cma')}
    tree = ast.parse(source)
    found = _garage_compat._deferred_names(tree, deferred)
    assert found == ['ray', 'scipy', 'plt']  # numpy: bound by two imports; cma: a from-import
    assert ast.unparse(tree).splitlines() == [
        'import os', 'import numpy.linalg', 'import numpy', 'from cma import CMAOptions', '',
        'def f():', '    import ray']
    # Another module than the one named, or the name bound by another module: kept.
    tree = ast.parse('import scipy.stats\nimport pyplot as plt\n')
    assert _garage_compat._deferred_names(tree, deferred) == []
    assert len(tree.body) == 2


def test_tensorboard_output_records_a_figure_and_a_distribution_through_deferred_imports(
        tmp_path):
    """dowel's TensorBoardOutput tells a matplotlib figure and a scipy.stats distribution by
    their classes: read through the deferred names (workaround 13)."""
    import matplotlib
    matplotlib.use('Agg')
    from dowel import TensorBoardOutput
    import matplotlib.pyplot as plt
    import scipy.stats
    output = TensorBoardOutput(str(tmp_path))
    written = []
    output._writer.add_figure = lambda key, value, step: written.append(('figure', key))
    output._writer.add_histogram = lambda key, value, step: written.append(('histogram', key))
    figure = plt.figure()
    output._record_kv('F', figure, 1)
    output._record_kv('D', scipy.stats.norm(0., 1.), 1)
    plt.close(figure)
    assert written == [('figure', 'F'), ('histogram', 'D')]
    output.close()


def test_import_order_hook_lets_garage_come_first(tmp_path):
    """With the startup hook (installed by scripts/install.sh), ``import garage``
    works before ``import garage_promp``, and the hook is removable."""
    import sysconfig

    from garage_promp import _import_order
    _import_order.install(tmp_path)
    purelib = sysconfig.get_paths()['purelib']
    # -S: site-packages is added by hand, the test's hook directory first.
    result = subprocess.run(
        [sys.executable, '-S', '-c',
         'import site, sys\n'
         f'site.addsitedir({str(tmp_path)!r}); site.addsitedir({purelib!r})\n'
         'import _garage_promp_import_order as hook\n'
         f'assert hook.__file__.startswith({str(tmp_path)!r}), hook.__file__\n'
         'import garage, garage.sampler, garage.torch.algos\n'
         "assert 'garage_promp' not in sys.modules\n"
         # workaround 13 too: garage's module-level ray and cma wait for their first use
         "assert 'ray' not in sys.modules and 'cma' not in sys.modules\n"
         'import garage_promp\n'
         "assert 'tensorflow' not in sys.modules\n"
         "print('ok')"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == 'ok'
    _import_order.uninstall(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_garage_conjugate_gradient_optimizer_steps_after_unpickling():
    """garage's TRPO optimizer survives a snapshot round trip under torch 2."""
    from garage.torch.optimizers import ConjugateGradientOptimizer
    import torch
    param = torch.nn.Parameter(torch.tensor([1., -2.]))
    optimizer = cloudpickle.loads(cloudpickle.dumps(
        ConjugateGradientOptimizer([param], max_constraint_value=0.1)))
    param = optimizer.param_groups[0]['params'][0]
    old = param.detach().clone()

    def loss():
        return (param ** 2).sum()

    def constraint():
        return ((param - old) ** 2).sum()

    loss().backward()
    optimizer.step(loss, constraint)
    assert loss().item() < (old ** 2).sum().item()


@pytest.mark.parametrize('learn_std', [True, False])
@pytest.mark.parametrize('move', ['module.to', 'parent.to'])
def test_gaussian_mlp_module_follows_its_device(learn_std, move):
    """Workaround 9: the log-std is built on the module's device, whichever way it moved.

    The 'meta' device stands in for a GPU: a tensor made on the CPU does not
    mix with it, as with CUDA, and no GPU is needed.
    """
    from garage.torch.modules.gaussian_mlp_module import GaussianMLPModule
    import torch
    module = GaussianMLPModule(3, 2, hidden_sizes=(4, ), learn_std=learn_std, init_std=0.7,
                               min_std=None)
    on_cpu = module._get_mean_and_log_std(torch.ones(5, 3))[1]
    assert torch.allclose(on_cpu, torch.full((5, 2), np.log(0.7), dtype=torch.float32))
    if move == 'module.to':
        module.to('meta')
    else:  # how policy.to(device) moves it: nn.Module._apply, not the module's to
        torch.nn.Sequential(module).to('meta')
    mean, log_std = module._get_mean_and_log_std(torch.ones(5, 3, device='meta'))
    assert mean.device.type == log_std.device.type == 'meta'
    assert log_std.shape == (5, 2)


def test_snapshot_load_first_prefers_the_oldest_numbered_one(tmp_path):
    """'gap_and_last' keeps params.pkl (the newest) beside itr_N.pkl: 'first' is the oldest."""
    snap = _snapshotter(tmp_path, mode='gap_and_last')
    for epoch in (0, 1, 2, 3):
        snap.save_itr_params(epoch, {'epoch': epoch, 'stats': None})
    assert snap.load(str(tmp_path), 'first')['epoch'] == 0
    assert snap.load(str(tmp_path), 'last')['epoch'] == 3


def test_normalize_refuses_an_action_of_another_shape_before_scaling_it():
    """garage's scaling would broadcast a (1,) action or a float into a (2,) one."""
    from garage_promp.envs import PointEnvCorner  # pylint: disable=import-outside-toplevel

    from garage.envs import normalize  # pylint: disable=import-outside-toplevel
    env = normalize(PointEnvCorner(max_episode_length=3), expected_action_scale=10.)
    env.reset()
    for action in (np.zeros(1), 0.1, np.zeros((2, 2)), None):
        with pytest.raises(ValueError, match=r"action space's shape \(2,\)"):
            env.step(action)
    steps = [env.step(np.zeros(2)) for _ in range(3)]  # no step was used up
    assert [s.last for s in steps] == [False, False, True]


def test_a_snapshot_that_is_not_a_file_is_named_not_read(tmp_path):
    """A named pipe would block the read and a device never end it: a snapshot name
    that is not a file is refused by what it is (and 'last' falls back past it), and a
    params.pkl that is a directory or a link loop is named, not 'no snapshot'."""
    import os
    snap = _snapshotter(tmp_path, mode='all')
    snap.save_itr_params(1, {'epoch': 1})
    os.mkfifo(tmp_path / 'itr_9.pkl')
    with pytest.warns(UserWarning, match=r'itr_9.pkl is not a file \(a named pipe\); trying'):
        assert snap.load(str(tmp_path), 'last')['epoch'] == 1
    with pytest.raises(_garage_compat.CorruptSnapshotError, match='not a file .a named pipe.'):
        snap.load(str(tmp_path), 9)
    (tmp_path / 'itr_9.pkl').unlink()
    (tmp_path / 'itr_9.pkl').symlink_to('/dev/zero')
    with pytest.raises(_garage_compat.CorruptSnapshotError,
                       match=r'itr_9.pkl is not a file \(a symbolic link to a device\)'):
        snap.load(str(tmp_path), 9)
    for name in ('itr_1.pkl', 'itr_9.pkl'):
        (tmp_path / name).unlink()
    (tmp_path / 'params.pkl').mkdir()
    with pytest.raises(_garage_compat.CorruptSnapshotError,
                       match=r'params.pkl is not a file \(a directory\)'):
        snap.load(str(tmp_path))
    (tmp_path / 'params.pkl').rmdir()
    (tmp_path / 'params.pkl').symlink_to('params.pkl')
    with pytest.raises(_garage_compat.CorruptSnapshotError, match='a symbolic link loop'):
        snap.load(str(tmp_path))
    # A link to nothing is named too, and 'last' falls back past it to an intact snapshot.
    (tmp_path / 'params.pkl').unlink()
    (tmp_path / 'params.pkl').symlink_to('gone.pkl')
    snap.save_itr_params(4, {'epoch': 4})
    with pytest.warns(UserWarning, match=r'params.pkl is not a file \(a symbolic link to '
                                         r'nothing\); trying itr_4.pkl'):
        assert snap.load(str(tmp_path), 'last')['epoch'] == 4


def test_wrap_experiments_metadata_comes_from_the_git_safe_function():
    from garage.experiment import experiment  # pylint: disable=import-outside-toplevel
    _garage_compat.apply()
    assert experiment.get_metadata is _garage_compat.get_metadata


@pytest.mark.parametrize('failure', [
    FileNotFoundError(2, "No such file or directory: 'git'"),
    subprocess.TimeoutExpired(['git', 'status'], 30.),
    subprocess.CalledProcessError(128, ['git', 'status']),
    PermissionError(13, 'Permission denied'),
])
def test_a_git_that_is_missing_fails_or_hangs_records_a_launcher_outside_git(
        monkeypatch, failure):
    """garage caught only git's own failure; now a missing, failing or silent git (each
    call limited to GIT_SECONDS) records the launcher's path only, as garage records a
    launcher outside a git repository."""
    import __main__  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(__main__, '__file__', '/somewhere/launchers/train.py', raising=False)
    seen = []

    def check_output(args, **kwargs):
        seen.append(kwargs.get('timeout'))
        raise failure
    monkeypatch.setattr(subprocess, 'check_output', check_output)
    assert _garage_compat.get_metadata() == (None, {'launcher': '/somewhere/launchers/train.py'})
    assert seen == [_garage_compat.GIT_SECONDS]


def test_in_a_git_repository_the_metadata_is_garages(tmp_path, monkeypatch):
    """The git root, the revision (``-dirty`` with changes) and the launcher's path in it."""
    git = ['git', '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=m']
    try:
        subprocess.run([*git, 'init', '-q', str(tmp_path)], check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        pytest.skip('no working git here')
    launcher = tmp_path / 'launchers' / 'run.py'
    launcher.parent.mkdir()
    launcher.write_text('')
    subprocess.run([*git, 'add', '.'], cwd=tmp_path, check=True, timeout=30)
    subprocess.run([*git, 'commit', '-qm', 'x'], cwd=tmp_path, check=True, timeout=30)
    head = subprocess.check_output(['git', 'rev-parse', 'HEAD'], cwd=tmp_path).decode().strip()
    import __main__  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(__main__, '__file__', str(launcher), raising=False)
    root, metadata = _garage_compat.get_metadata()
    assert os.path.samefile(root, tmp_path)
    assert metadata == {'githash': head, 'launcher': os.path.join('launchers', 'run.py')}
    (tmp_path / 'new.txt').write_text('')
    assert _garage_compat.get_metadata()[1]['githash'] == head + '-dirty'


def test_a_run_starts_on_a_machine_without_git(tmp_path):
    """launchers/train.py with no git on the PATH: the run trains (garage's own metadata
    call ended it with a traceback after making its directory)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'python').symlink_to(sys.executable)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    log_dir = tmp_path / 'run'
    result = subprocess.run(
        [sys.executable, os.path.join(root, 'launchers', 'train.py'), '--env', 'PointEnvCorner',
         '--meta-batch-size', '2', '--episodes-per-task', '2', '--max-episode-length', '4',
         '--n-test-tasks', '1', '--hidden-sizes', '4', '--epochs', '1', '--log-dir',
         str(log_dir)], capture_output=True, text=True, timeout=300, cwd=root, check=False,
        env=dict(os.environ, PATH=str(bin_dir)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((log_dir / 'metadata.json').read_text()) == {
        'launcher': os.path.join(root, 'launchers', 'train.py')}


def test_a_half_made_wrapper_is_collected_without_a_traceback():
    """A wrapper whose making was cut short (no ``_env``) has nothing to close: its
    collection prints nothing (garage's ``__del__`` printed an ignored AttributeError);
    a whole wrapper still closes what it wraps."""
    code = ('import gc, garage_promp\n'
            'from garage.envs import normalize\n'
            'half = normalize.__new__(normalize)\n'
            'del half\n'
            'gc.collect()\n'
            'from garage_promp.envs import PointEnv1D\n'
            'env = normalize(PointEnv1D(max_episode_length=2))\n'
            'closed = []\n'
            'env._env.close = lambda: closed.append(1)\n'
            'env.close()\n'
            'print(closed)\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == '[1]'
    assert 'Exception ignored' not in proc.stderr and 'Error' not in proc.stderr, proc.stderr
