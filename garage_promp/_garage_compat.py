"""The one place that adapts garage 2021.3 to Python 3.11, torch 2 and numpy 1.26.

garage 2021.3.0 is the only garage on PyPI. It is installed with ``--no-deps``
(its pins, torch<1.8, tensorflow, gym 0.17 and mujoco-py, cannot be met on
Python 3.11), so a few of its modules need help on today's stack. Every
workaround lives here, is applied once when :mod:`garage_promp` is imported,
and carries its reason. The one other change to a garage class is not a
workaround: :func:`garage_promp.experiment.resume.install_checked_restore`
gives ``Trainer.restore`` the launcher's snapshot checks.

Workarounds:

1. **TensorFlow-free import.** ``garage/sampler/worker_factory.py`` imports
   ``garage.tf.samplers`` unconditionally, which imports TensorFlow, so
   ``import garage`` fails without TensorFlow. When TensorFlow is absent, an
   import hook serves ``garage.tf`` and ``garage.tf.samplers`` as light stand-ins:
   ``TFWorkerClassWrapper`` (only used with ``is_tf_worker=True``) and every
   other ``garage.tf`` name raise an ``ImportError`` that says to install
   TensorFlow. When TensorFlow is installed, nothing is changed.
2. **numpy aliases.** garage's ``dump_json`` (run at the end of
   ``Trainer.train``) tests ``isinstance(o, np.bool8)``; numpy 2 removed
   ``np.bool8``. We pin ``numpy<2``, but restore the alias if a newer numpy is
   present, so the final JSON dump never crashes.
3. **Atomic snapshots.** ``Snapshotter.save_itr_params`` writes ``params.pkl``
   in place, so a crash mid-write leaves a truncated file as the only snapshot.
   We write a new temporary file beside it (``garage_promp._files.replace_atomically``:
   a unique name, through a symbolic link, the permissions kept), ``fsync`` and
   ``os.replace``.
4. **Snapshot loading.** ``Snapshotter.load(dir, 'last')`` sorts ``itr_N.pkl``
   names as strings (``itr_9`` after ``itr_10``; fixed upstream after 2021.3
   by garage PR #2327) and a truncated file fails with an anonymous
   unpickling error. We sort by epoch number, name the file that fails, and
   for ``'last'``/``'first'`` fall back to the newest intact ``itr_N.pkl``.
5. **Ray-free import.** ``garage/sampler/ray_sampler.py`` imports ``ray`` at
   module level, so ``import garage`` needs Ray even for an in-process run.
   When Ray is not installed, a stand-in ``ray`` module is served whose every
   attribute raises an ``ImportError`` that says to install Ray (only
   ``make_sampler(kind='ray')`` and garage's ``RaySampler`` need it). When Ray
   is installed, nothing is changed.
6. **Quiet TensorBoard.** dowel's ``TensorBoardOutput`` hands NaN scalars to
   tensorboardX, which prints "NaN or Inf found in input tensor" for each.
   Our logs hold NaN on purpose (e.g. ``MetaTest/...`` in epochs without a
   meta-test, so the key set is the same every epoch). Non-finite scalars are
   left out of TensorBoard (a gap in the curve); ``progress.csv`` keeps them.
7. **Quiet seeding.** garage's ``set_seed`` warns "Enabeling deterministic
   mode in PyTorch can have a performance impact when using GPU" on every
   call, also on CPU-only runs. That one message is filtered; seeding itself
   (``torch.manual_seed``, cuDNN's deterministic flags) is unchanged.
8. **Restorable optimizer.** garage's ``ConjugateGradientOptimizer`` (used by
   garage's own ``TRPO`` and ``MAMLTRPO``) replaces ``torch.optim.Optimizer``'s
   ``__setstate__`` without calling it, so an unpickled one lacks the hook
   dictionaries torch 2 expects, and the first ``step`` after
   ``Trainer.restore`` fails with "no attribute '_optimizer_step_pre_hooks'".
   After garage's ``__setstate__`` we run torch's, which adds only what is
   missing.
9. **Policies on a GPU.** ``GaussianMLPModule._get_mean_and_log_std`` builds
   the log-std as ``torch.zeros(*shape) + init_std``: the zeros are made on
   the CPU whatever the module's device, so a ``GaussianMLPPolicy`` (shared
   std, garage's default) moved to a GPU fails with "Expected all tensors to
   be on the same device". With ``learn_std=False`` the log-std it adds is a
   stale CPU copy of its buffer after ``policy.to(device)``, and the module's
   own ``to`` raises ``KeyError`` unless both ``min_std`` and ``max_std`` are
   set. The zeros are made on the mean's device and dtype, the moved buffer is
   read, and ``to`` refreshes only the buffers that exist; values and
   gradients are unchanged.
10. **Action shapes through ``normalize``.** ``NormalizedEnv.step`` scales an
   action by broadcasting it against the action space's bounds, so a ``(1,)``
   action or a bare float for a 2-D env comes out as a valid-looking ``(2,)``
   one, and the wrapped env's own check never sees it. An action that is not
   of the action space's shape is refused (ValueError naming the shape) before
   it is scaled; every other action is scaled and stepped as before.
11. **Launcher metadata without a working git.** ``wrap_experiment`` records the
   launcher's git revision (``garage.experiment.experiment.get_metadata``) after it
   has made the run's directory and written ``variant.json``; garage catches only
   git's own failure, so on a machine without ``git`` the run ended there with a
   ``FileNotFoundError`` traceback, leaving a directory with nothing but
   ``variant.json``, and a ``git`` that never answers (a stalled network file
   system, a stopped process) held the run before its first line. The same
   metadata is recorded, each git call given :data:`GIT_SECONDS`; where git is
   missing, fails or does not answer, the run is recorded as one whose launcher is
   not in a git repository (``metadata.json`` holds the launcher's path only), as
   garage records such a launcher.
12. **Collecting a half-made wrapper.** garage's ``Environment.__del__`` closes the env,
   and ``Wrapper.close`` closes ``self._env``; a wrapper whose making was cut short (a
   sampler worker's timeout while it copies its envs, an error in ``__init__``) has no
   ``_env``, and its collection printed an ``Exception ignored in ... __del__``
   traceback after the run's own error. Such a wrapper has nothing to close; every
   other wrapper closes as before.

13. **Start-up time.** garage and dowel import at module level what only a few of
   their functions use: ``ray`` (``garage/sampler/ray_sampler.py``), ``cma`` (garage's
   CMA-ES, ``garage/np/algos/cma_es.py``, which imports ``scipy.stats`` and
   ``matplotlib.pyplot``), ``scipy.signal`` (``garage/np/_functions.py``) and
   ``matplotlib.pyplot`` and ``scipy.stats`` (``dowel/tensor_board_output.py``): 1.7 of
   the 3.7 s a process took to start and 120 of its 374 MiB (``benchmarks/startup.py``),
   paid by every launcher, sampler worker and ``--help``.
   Those import statements (:data:`DEFERRED_IMPORTS`) are taken out of the modules' code
   as it is loaded, and each name is bound to a :class:`DeferredModule` that imports the
   module at its first attribute access and reads every attribute from it; nothing else
   in the modules changes (their code is compiled from their files, line numbers kept, and
   no bytecode of it is cached). A module whose source is not as expected loads as it is.

The import banners of garage's dependencies are avoided by versions, not
patches: cma>=3.3 imports fully on Python 3.11 (2.7.0, garage's pin, prints
"Only ``cma.purecma`` has been imported") and gym-notices<0.1 has no notice
for gym 0.26 (0.1 prints an "unmaintained" banner on every ``import gym``).
"""
import ast
import errno
import importlib.abc
import importlib.machinery
import importlib.util
import numbers
import os
import stat
import subprocess
import sys
import types
import warnings

import numpy as np

_TF_MISSING_MESSAGE = (
    '{name} needs TensorFlow, which is not installed. garage_promp installs '
    'garage without TensorFlow (only the PyTorch side of garage is used). '
    'To use garage.tf, install TensorFlow: pip install tensorflow')


def tensorflow_available() -> bool:
    """Whether TensorFlow can be imported in this environment."""
    return importlib.util.find_spec('tensorflow') is not None


class _MissingTensorFlowModule(types.ModuleType):
    """A stand-in for ``garage.tf`` whose every attribute raises ImportError."""

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        raise ImportError(
            _TF_MISSING_MESSAGE.format(name=f'{self.__name__}.{attr}'))


class TFWorkerClassWrapper:
    """Stand-in for ``garage.tf.samplers.TFWorkerClassWrapper``.

    garage's ``WorkerFactory`` imports this name at module level but only
    instantiates it for TensorFlow policies (``is_tf_worker=True``).
    """

    def __init__(self, *args, **kwargs):
        del args, kwargs
        raise ImportError(
            _TF_MISSING_MESSAGE.format(
                name='garage.tf.samplers.TFWorkerClassWrapper'))


class _GarageTFFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``garage.tf`` stand-ins while TensorFlow is not installed."""

    _STUBS = ('garage.tf', 'garage.tf.samplers')

    def find_spec(self, fullname, path=None, target=None):
        del path, target
        if fullname in self._STUBS:
            return importlib.machinery.ModuleSpec(fullname,
                                                  self,
                                                  is_package=True)
        if fullname.startswith('garage.tf.'):
            raise ImportError(_TF_MISSING_MESSAGE.format(name=fullname),
                              name=fullname)
        return None

    def create_module(self, spec):
        return _MissingTensorFlowModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        if module.__name__ == 'garage.tf.samplers':
            module.TFWorkerClassWrapper = TFWorkerClassWrapper


def _install_tensorflow_free_import():
    if tensorflow_available():
        return
    if any(isinstance(f, _GarageTFFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _GarageTFFinder())


RAY_MISSING_MESSAGE = (
    '{name} needs Ray, which is not installed. Only the Ray sampler backend '
    "(make_sampler(kind='ray')) and garage's RaySampler use it: "
    'pip install "garage_promp[ray]" (or pip install ray)')


class _MissingRayModule(types.ModuleType):
    """A stand-in for ``ray`` whose every attribute raises ImportError."""

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        raise ImportError(RAY_MISSING_MESSAGE.format(name=f'ray.{attr}'))


def ray_available() -> bool:
    """Whether Ray can be imported in this environment."""
    module = sys.modules.get('ray')
    if module is not None:
        return not isinstance(module, _MissingRayModule)
    try:
        return importlib.util.find_spec('ray') is not None
    except (ImportError, ValueError):
        return False


def _install_ray_free_import():
    # Workaround 5: garage.sampler imports ray at module level.
    if 'ray' not in sys.modules and not ray_available():
        sys.modules['ray'] = _MissingRayModule('ray')


#: Workaround 13: the module-level imports of garage's and dowel's modules that only their
#: functions use, per module: the name the import binds -> (the module bound, the module to
#: import at the first attribute access). ``import scipy.signal`` binds ``scipy``;
#: ``import matplotlib.pyplot as plt`` binds ``plt``.
DEFERRED_IMPORTS = {
    'garage.np._functions': {'scipy': ('scipy', 'scipy.signal')},
    'garage.np.algos.cma_es': {'cma': ('cma', 'cma')},
    'garage.sampler.ray_sampler': {'ray': ('ray', 'ray')},
    'dowel.tensor_board_output': {'plt': ('matplotlib.pyplot', 'matplotlib.pyplot'),
                                  'scipy': ('scipy', 'scipy.stats')},
}


class DeferredModule:
    """What a deferred import (workaround 13) binds: the module ``bound``, imported (with
    ``target``) at the first attribute access, each access read from it."""

    __slots__ = ('_bound', '_target')

    def __init__(self, bound: str, target: str):
        self._bound, self._target = bound, target

    def __getattr__(self, attr):
        if attr in DeferredModule.__slots__:  # not set yet (a copy being made): no module
            raise AttributeError(attr)
        importlib.import_module(self._target)
        return getattr(sys.modules[self._bound], attr)

    def __repr__(self):
        return f'<{self._bound}, imported at its first use>'


def _deferred_names(tree: ast.Module, deferred: dict) -> list:
    """Take out of ``tree`` the top-level ``import`` statements that ``deferred`` names (the
    name an import binds -> (the module it binds, the module it imports)); the names they
    bound. A name that another top-level import binds too is left as it is."""
    def binding(alias):
        if alias.asname:
            return alias.asname, alias.name, alias.name
        return alias.name.split('.')[0], alias.name.split('.')[0], alias.name

    imports = [node for node in tree.body if isinstance(node, ast.Import)]
    bound = [binding(alias)[0] for node in imports for alias in node.names]
    found = []
    for node in imports:
        kept = []
        for alias in node.names:
            name, module, imported = binding(alias)
            if deferred.get(name) == (module, imported) and bound.count(name) == 1:
                found.append(name)
            else:
                kept.append(alias)
        node.names = kept
    tree.body = [node for node in tree.body if not (isinstance(node, ast.Import)
                                                    and not node.names)]
    return found


class _DeferringLoader(importlib.machinery.SourceFileLoader):
    """Loads a module of :data:`DEFERRED_IMPORTS` from its source with those imports
    taken out and their names bound to :class:`DeferredModule`s. The code is compiled
    from the source each time (it is not the file's: no bytecode is cached or read)."""

    def __init__(self, fullname, path, deferred):
        super().__init__(fullname, path)
        self._deferred = deferred

    def exec_module(self, module):
        tree = ast.parse(self.get_data(self.path), self.path)
        for name in _deferred_names(tree, self._deferred):
            module.__dict__[name] = DeferredModule(*self._deferred[name])
        exec(compile(tree, self.path, 'exec', dont_inherit=True), module.__dict__)  # pylint: disable=exec-used


class _DeferringFinder(importlib.abc.MetaPathFinder):
    """Gives the modules of :data:`DEFERRED_IMPORTS` a :class:`_DeferringLoader`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in DEFERRED_IMPORTS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec  # (none, or not a source file: imported as it is)
        spec.loader = _DeferringLoader(fullname, spec.origin, DEFERRED_IMPORTS[fullname])
        return spec


def _install_deferred_imports():
    if not any(isinstance(f, _DeferringFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeferringFinder())


def _restore_numpy_aliases():
    # Workaround 2: garage.experiment.experiment.LogEncoder uses np.bool8.
    # numpy 1.x still has it (as a deprecated alias); numpy 2 does not.
    if int(np.__version__.split('.')[0]) >= 2:
        np.bool8 = np.bool_


def _snapshot_epoch(file_name):
    """Epoch number of ``itr_N.pkl``, or None for other names."""
    stem = file_name[:-len('.pkl')]
    if file_name.startswith('itr_') and stem[4:].isdigit():
        return int(stem[4:])
    return None


def _held_epoch(snapshot):
    """The last epoch a Trainer snapshot holds (garage's ``stats.total_epoch``), or None."""
    stats = snapshot.get('stats') if isinstance(snapshot, dict) else None
    epoch = getattr(stats, 'total_epoch', None)
    return epoch if isinstance(epoch, int) else None


class SnapshotWriteError(OSError):
    """A snapshot could not be written (a full disk, a directory gone...); the previous
    one is kept. A run ends on it with one ``Error:`` line (``launchers/train.py``)."""


def atomic_cloudpickle_dump(obj, file_name):
    """Write ``obj`` to ``file_name`` so that readers never see a partial file
    (:func:`garage_promp._files.replace_atomically`: a temporary file beside it, synced,
    renamed over it; through a symbolic link, keeping the file's permissions).

    Raises:
        SnapshotWriteError: If the file cannot be written; any previous ``file_name`` is
            left untouched.

    """
    # (This module imports nothing of the package at its top: garage_promp/_import_order.py
    # may load it before the package.)
    from garage_promp._files import replace_atomically

    import cloudpickle
    try:
        replace_atomically(file_name, lambda file: cloudpickle.dump(obj, file), binary=True)
    except OSError as error:
        raise SnapshotWriteError(
            error.errno, f'could not write the snapshot {file_name} '
            f'({error.strerror or error}); the previous one is kept', file_name) from error


def _load_snapshot_file(file_name):
    import cloudpickle
    try:  # a named pipe would block the read, a device never end it
        regular = stat.S_ISREG(os.stat(file_name).st_mode)
    except OSError as e:
        if not os.path.islink(file_name):  # a link loop or a link to nothing: named below
            raise OSError(e.errno, f'could not read the snapshot {file_name} '
                          f'({e.strerror or e})', file_name) from e
        regular = False
    if not regular:
        from garage_promp._files import file_kind  # (see atomic_cloudpickle_dump)
        raise CorruptSnapshotError(f'snapshot file {file_name} is not a file '
                                   f'({file_kind(file_name)})')
    try:
        with open(file_name, 'rb') as file:
            snapshot = cloudpickle.load(file)
    except OSError as e:
        raise OSError(e.errno, f'could not read the snapshot {file_name} '
                      f'({e.strerror or e})', file_name) from e
    except Exception as e:  # pylint: disable=broad-except
        # Whatever unpickling raises (EOFError, UnpicklingError, ValueError, ImportError,
        # and on damaged bytes MemoryError or OverflowError from a garbage length), the
        # file cannot be loaded: the caller tries an older snapshot.
        raise CorruptSnapshotError(
            f'snapshot file {file_name} is corrupt or truncated '
            f'({type(e).__name__}: {e})') from e
    if not isinstance(snapshot, dict):
        raise NotASnapshotError(
            f'{file_name} holds a {type(snapshot).__name__}, not a snapshot '
            "(a dict, e.g. with 'seed', 'train_args', 'stats', 'env' and "
            "'algo' as garage's Trainer.save writes)")
    return snapshot


TRAINING_SNAPSHOT_KEYS = ('seed', 'train_args', 'stats', 'env', 'algo')


#: What garage's ``Trainer.restore`` reads from each entry of a snapshot.
_SNAPSHOT_ATTRIBUTES = {
    'train_args': ('n_epochs', 'batch_size', 'store_episodes', 'pause_for_plot'),
    'stats': ('total_epoch', 'total_itr', 'total_env_steps'),
    'algo': ('train', ),
    'env': ('spec', 'step', 'reset'),
}


def check_training_snapshot(snapshot, where):
    """Raise NotASnapshotError unless ``snapshot`` is a Trainer snapshot.

    A dict with garage's keys whose entries are not what ``Trainer.restore`` uses
    (a seed that is not an int, stats without their counters, an algorithm
    without ``train``) is refused as well, rather than failing inside garage.
    """
    missing = [k for k in TRAINING_SNAPSHOT_KEYS if k not in snapshot]
    if missing:
        raise NotASnapshotError(
            f'the snapshot in {where} is not a training snapshot: it lacks '
            f'{missing} (garage\'s Trainer.save writes {list(TRAINING_SNAPSHOT_KEYS)})')
    seed = snapshot['seed']
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise NotASnapshotError(f'the snapshot in {where} is not a training snapshot: its '
                                f'seed is {seed!r}, not an int')
    for key, attributes in _SNAPSHOT_ATTRIBUTES.items():
        lacking = [a for a in attributes if not hasattr(snapshot[key], a)]
        if lacking:
            raise NotASnapshotError(
                f'the snapshot in {where} is not a training snapshot: its {key!r} is a '
                f'{type(snapshot[key]).__name__} without {lacking}')


class CorruptSnapshotError(ValueError):
    """A snapshot file exists but cannot be unpickled."""


class NotASnapshotError(CorruptSnapshotError):
    """A pickle that is not a training snapshot."""


def _patch_snapshotter():
    from garage.experiment import snapshotter as snapshotter_module
    snapshotter_cls = snapshotter_module.Snapshotter
    if getattr(snapshotter_cls, '_garage_promp_patched', False):
        return
    NotAFileError = snapshotter_module.NotAFileError

    def save_itr_params(self, itr, params):
        """Save a snapshot atomically (garage_promp workaround 3)."""
        mode, gap = self._snapshot_mode, self._snapshot_gap
        file_names = []
        itr_file = os.path.join(self._snapshot_dir, f'itr_{itr}.pkl')
        last_file = os.path.join(self._snapshot_dir, 'params.pkl')
        if mode == 'all':
            file_names = [itr_file]
        elif mode == 'gap_overwrite':
            file_names = [last_file] if itr % gap == 0 else []
        elif mode == 'last':
            file_names = [last_file]
        elif mode == 'gap':
            file_names = [itr_file] if itr % gap == 0 else []
        elif mode == 'gap_and_last':
            file_names = ([itr_file] if itr % gap == 0 else []) + [last_file]
        elif mode != 'none':
            raise ValueError(f'Invalid snapshot mode {mode}')
        for file_name in file_names:
            atomic_cloudpickle_dump(params, file_name)

    def load(self, load_dir, itr='last'):
        """Load a snapshot (garage_promp workaround 4).

        Args:
            load_dir (str): Directory holding the snapshots.
            itr (int or str): An epoch number, 'last' or 'first'.

        Returns:
            dict: Loaded snapshot.

        Raises:
            ValueError: If itr is not an int, 'last' or 'first'.
            FileNotFoundError: If load_dir holds no snapshot.
            NotAFileError: If the requested itr_N.pkl does not exist.
            CorruptSnapshotError: If no intact snapshot can be loaded.

        """
        del self
        if isinstance(itr, int) or (isinstance(itr, str) and itr.isdigit()):
            file_name = os.path.join(load_dir, f'itr_{itr}.pkl')
            if not os.path.lexists(file_name):  # one that is there but no file: named below
                kept = sorted(int(e) for e in (_snapshot_epoch(f) for f in os.listdir(load_dir))
                              if e is not None) if os.path.isdir(load_dir) else []
                last = os.path.isfile(os.path.join(load_dir, 'params.pkl'))
                raise NotAFileError(
                    f'no snapshot of epoch {itr}: {file_name} does not exist (numbered '
                    f'snapshots here: {kept or "none"}'
                    f'{"; params.pkl holds the last epoch saved: use last" if last else ""})')
            return _load_snapshot_file(file_name)
        if itr not in ('last', 'first'):
            raise ValueError("itr should be an integer or 'last' or 'first'")
        if not os.path.isdir(load_dir):
            raise FileNotFoundError(errno.ENOENT,
                                    f'no snapshot directory {load_dir}',
                                    load_dir)
        numbered = sorted(
            (_snapshot_epoch(f), f) for f in os.listdir(load_dir)
            if f.endswith('.pkl') and _snapshot_epoch(f) is not None)
        candidates = [f for _, f in numbered]
        if itr == 'last':
            candidates.reverse()
        if os.path.lexists(os.path.join(load_dir, 'params.pkl')):  # (a non-file: named below)
            # 'last': params.pkl first (then any newer itr_N.pkl, below); 'first':
            # the oldest itr_N.pkl, params.pkl only when there is none.
            if itr == 'last':
                candidates.insert(0, 'params.pkl')
            else:
                candidates.append('params.pkl')
        if not candidates:
            raise FileNotFoundError(
                errno.ENOENT,
                f'no snapshot (params.pkl or itr_N.pkl) in {load_dir}',
                load_dir)
        errors = []
        loaded = {}
        for position, file_name in enumerate(candidates):
            try:
                loaded[file_name] = _load_snapshot_file(os.path.join(load_dir, file_name))
            except CorruptSnapshotError as e:
                errors.append(str(e))
                if position + 1 < len(candidates):  # else the error below says it all
                    warnings.warn(f'{e}; trying {candidates[position + 1]}')
                continue
            if file_name != 'params.pkl' or itr != 'last':
                break
            # params.pkl may be older than an itr_N.pkl (a run continued with
            # another snapshot mode): the newest by the epoch it holds wins.
            held = _held_epoch(loaded[file_name])
            newer = [f for f in candidates[1:]
                     if held is not None and _snapshot_epoch(f) > held]
            for position, newer_file in enumerate(newer):
                try:
                    return _load_snapshot_file(os.path.join(load_dir, newer_file))
                except CorruptSnapshotError as e:
                    errors.append(str(e))
                    fallback = (newer[position + 1] if position + 1 < len(newer)
                                else f'{file_name} (epoch {held})')
                    warnings.warn(f'{e}; trying {fallback}')
            return loaded[file_name]
        if loaded:
            return next(iter(loaded.values()))
        raise CorruptSnapshotError('no intact snapshot in {}: {}'.format(
            load_dir, '; '.join(errors)))

    snapshotter_cls.save_itr_params = save_itr_params
    snapshotter_cls.load = load
    snapshotter_cls._garage_promp_patched = True


def _skip_non_finite_tensorboard_scalars():
    # Workaround 6.
    try:
        from dowel import tensor_board_output
    except ImportError:  # dowel without TensorBoard support
        return
    cls = tensor_board_output.TensorBoardOutput
    if getattr(cls, '_garage_promp_patched', False):
        return
    original = cls._record_kv

    def _record_kv(self, key, value, step):
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            return
        original(self, key, value, step)

    cls._record_kv = _record_kv
    cls._garage_promp_patched = True


def _quiet_set_seed():
    # Workaround 7.
    warnings.filterwarnings('ignore', message='Enabeling deterministic mode in PyTorch',
                            category=UserWarning)


def _restorable_conjugate_gradient_optimizer():
    # Workaround 8.
    from garage.torch.optimizers import ConjugateGradientOptimizer
    import torch
    cls = ConjugateGradientOptimizer
    if getattr(cls, '_garage_promp_patched', False):
        return
    original = cls.__setstate__

    def __setstate__(self, state):
        original(self, state)
        torch.optim.Optimizer.__setstate__(self, {})  # adds the missing hooks only

    cls.__setstate__ = __setstate__
    cls._garage_promp_patched = True


def _device_safe_gaussian_mlp_module():
    # Workaround 9.
    from garage.torch.modules import gaussian_mlp_module
    import torch
    base, cls = gaussian_mlp_module.GaussianMLPBaseModule, gaussian_mlp_module.GaussianMLPModule
    if getattr(cls, '_garage_promp_patched', False):
        return

    def _log_std_param(module):
        # learn_std=True: the parameter '_init_std' (a plain tensor inside
        # torch.func.functional_call); learn_std=False: the registered buffer
        # 'init_std', which .to()/_apply moved (the attribute is a stale copy).
        return module._init_std if module._learn_std else module.init_std

    def _get_mean_and_log_std(self, *inputs):
        assert len(inputs) == 1
        mean = self._mean_module(*inputs)
        broadcast_shape = list(inputs[0].shape[:-1]) + [self._action_dim]
        zeros = torch.zeros(*broadcast_shape, device=mean.device, dtype=mean.dtype)
        return mean, zeros + _log_std_param(self)

    def to(self, *args, **kwargs):
        torch.nn.Module.to(self, *args, **kwargs)
        buffers = dict(self.named_buffers())
        if not isinstance(self._init_std, torch.nn.Parameter):
            self._init_std = buffers['init_std']
        self._min_std_param = buffers.get('min_std_param')
        self._max_std_param = buffers.get('max_std_param')
        return self

    cls._get_mean_and_log_std = _get_mean_and_log_std
    base.to = to
    cls._garage_promp_patched = True


def _shape_checked_normalized_step():
    # Workaround 10.
    from garage.envs.normalized_env import NormalizedEnv
    step = NormalizedEnv.step
    if getattr(step, 'shape_checked', False):
        return

    def checked_step(self, action):
        shape = self.action_space.shape
        if np.shape(action) != shape:
            raise ValueError(f"action must be numbers of the action space's shape {shape}, got "
                             f'{action!r} (garage normalize around '
                             f'{type(getattr(self._env, "unwrapped", self._env)).__name__})')
        return step(self, action)

    checked_step.__doc__ = step.__doc__
    checked_step.shape_checked = True
    NormalizedEnv.step = checked_step


def _half_made_wrappers_close_quietly():
    # Workaround 12.
    from garage import Wrapper
    close = Wrapper.close
    if getattr(close, 'half_made_safe', False):
        return

    def safe_close(self):
        if '_env' not in self.__dict__:  # (Wrapper.__getattr__ would raise for it)
            return None
        return close(self)

    safe_close.__doc__ = close.__doc__
    safe_close.half_made_safe = True
    Wrapper.close = safe_close


#: Seconds each of ``wrap_experiment``'s git calls may take (workaround 11).
GIT_SECONDS = 30.


def _git(*args: str, cwd: str) -> bytes:
    return subprocess.check_output(('git', *args), cwd=cwd, stderr=subprocess.DEVNULL,
                                   timeout=GIT_SECONDS)


def get_metadata():
    """garage's ``get_metadata`` (the launcher's git root and ``githash``/``launcher``
    metadata), with each git call limited to :data:`GIT_SECONDS`; a git that is missing,
    fails or does not answer: the launcher's path only, as for a launcher outside git
    (workaround 11)."""
    import __main__ as main  # pylint: disable=import-outside-toplevel
    main_file = getattr(main, '__file__', None)
    if not main_file:
        return None, {}
    main_file_path = os.path.abspath(main_file)
    outside = (None, {'launcher': main_file_path})
    try:
        root = _git('rev-parse', '--show-toplevel', cwd=os.path.dirname(main_file_path)).strip()
        # (old gits exit 0 outside a repository: garage checks the path exists)
        if not os.path.exists(root):
            return outside
        launcher = os.path.relpath(bytes(main_file_path, encoding='utf8'), root)
        git_hash = _git('rev-parse', 'HEAD', cwd=root).decode('utf-8').strip()
        if _git('status', '--short', cwd=root).decode('utf-8').strip():
            git_hash += '-dirty'
    except (OSError, subprocess.SubprocessError, UnicodeError):
        return outside
    return root, {'githash': git_hash, 'launcher': launcher.decode('utf-8')}


def _git_safe_metadata():
    # Workaround 11.
    from garage.experiment import experiment  # pylint: disable=import-outside-toplevel
    experiment.get_metadata = get_metadata


def apply_import_hooks():
    """The workarounds ``import garage`` itself needs (1, 2, 5, 7, 13); idempotent.

    Safe before garage is imported: it installs import hooks and patches
    nothing of garage. :mod:`garage_promp._import_order` calls it when
    ``garage`` is imported before ``garage_promp``.
    """
    _install_tensorflow_free_import()
    _install_ray_free_import()
    _install_deferred_imports()
    _restore_numpy_aliases()
    _quiet_set_seed()


def apply():
    """Apply every workaround. Idempotent; called by ``import garage_promp``."""
    apply_import_hooks()
    _patch_snapshotter()
    _skip_non_finite_tensorboard_scalars()
    _restorable_conjugate_gradient_optimizer()
    _device_safe_gaussian_mlp_module()
    _shape_checked_normalized_step()
    _git_safe_metadata()
    _half_made_wrappers_close_quietly()
