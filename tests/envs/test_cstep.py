"""The compiled stepping loop (garage_promp/envs/_cstep.c) against the Python loop it replaces."""
import copy
import os
import shutil
import subprocess
import sys

from garage_promp.envs import _cstep
from garage_promp.envs._mujoco import MujocoMetaEnv
from garage_promp.experiment.paper_config import ENVS

import mujoco
import numpy as np
import pytest

MUJOCO_ENVS = sorted(name for name in ENVS if not name.startswith('PointEnv'))
needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get('CC', 'cc')) is None,
    reason='no C compiler on this machine: the envs step from Python (tested elsewhere)')


@pytest.fixture
def loops(monkeypatch):
    """``use(compiled)``: the compiled loop (True) or the Python loop (False) steps the
    envs until the next call; the library as it was after the test."""
    lib = _cstep.library()

    def use(compiled):
        monkeypatch.setattr(_cstep, '_library', lib if compiled else None)
    return use


def _gym_envs(name, n=4):
    gym_cls = ENVS[name]['env'].gym_env_cls
    envs = [gym_cls(seed=i) for i in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    return gym_cls, envs


@needs_compiler
@pytest.mark.mujoco
@pytest.mark.parametrize('name', MUJOCO_ENVS)
def test_the_compiled_loop_steps_every_env_as_the_python_loop(name, loops):
    """Bit for bit: observations, rewards, ends and env infos of 40 steps of 4 envs."""
    assert _cstep.library() is not None, _cstep.reason
    gym_cls, compiled = _gym_envs(name)
    plain = copy.deepcopy(compiled)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.uniform(-1.2, 1.2, (len(compiled), compiled[0].action_space.shape[0]))
        loops(True)
        a = gym_cls.batch_step(compiled, actions)
        loops(False)
        b = gym_cls.batch_step(plain, actions)
        for x, y in zip(a[:4], b[:4]):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        assert a[4].keys() == b[4].keys()
        for key in a[4]:
            np.testing.assert_array_equal(a[4][key], b[4][key], err_msg=key)
    for x, y in zip(compiled, plain):
        np.testing.assert_array_equal(x.data.qacc_warmstart, y.data.qacc_warmstart)
        np.testing.assert_array_equal(x.data.qpos, y.data.qpos)


@needs_compiler
@pytest.mark.mujoco
def test_a_mujoco_error_is_raised_as_the_bindings_raise_it(loops):
    """MuJoCo's error inside the loop: the bindings' FatalError with MuJoCo's message and
    the index of the env; MuJoCo's error hook is the bindings' again afterwards."""
    gym_cls, envs = _gym_envs('HalfCheetahFwdBack', n=3)
    envs[1].model.opt.integrator = 99  # mj_step: mju_error("mj_step: invalid integrator")
    loops(True)
    with pytest.raises(mujoco.FatalError) as compiled:
        gym_cls.batch_step(envs, np.zeros((3, 6)))
    assert compiled.value.lean_index == 1
    with pytest.raises(mujoco.FatalError) as bindings:
        mujoco.mj_step(envs[1].model, envs[1].data)  # the hook: a Python error, no jump
    assert str(compiled.value) == str(bindings.value) == 'mj_step: invalid integrator'
    loops(False)
    with pytest.raises(mujoco.FatalError, match='invalid integrator') as plain:
        gym_cls.batch_step(envs, np.zeros((3, 6)))
    assert plain.value.lean_index == 1


@needs_compiler
@pytest.mark.mujoco
def test_envs_of_different_sizes_are_stepped_from_python():
    """One batch, two models of different sizes: the Python loop's error, and nothing
    written into the smaller simulation."""
    assert _cstep.library() is not None, _cstep.reason
    _, (humanoid, ) = _gym_envs('HumanoidRandDirec', n=1)
    _, (cheetah, ) = _gym_envs('HalfCheetahFwdBack', n=1)
    before = cheetah.data.qfrc_applied.copy()
    with pytest.raises(ValueError, match='broadcast'):
        MujocoMetaEnv._simulate([humanoid, cheetah], np.full((2, 17), 7.))  # pylint: disable=protected-access
    np.testing.assert_array_equal(cheetah.data.qfrc_applied, before)


def _library_in_subprocess(tmp_path, **env):
    code = ('from garage_promp.envs import _cstep; lib = _cstep.library(); '
            'print("none" if lib is None else "built"); print(_cstep.reason)')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=300, check=True,
                          env=dict(os.environ, GARAGE_PROMP_CACHE=str(tmp_path), **env))
    return proc.stdout.splitlines()


def test_without_a_compiler_the_envs_step_from_python(tmp_path):
    state, reason = _library_in_subprocess(tmp_path, CC='/nonexistent/cc')
    assert state == 'none' and '/nonexistent/cc' in reason
    assert not list(tmp_path.iterdir())  # nothing half-written left
    state, reason = _library_in_subprocess(tmp_path, GARAGE_PROMP_CSTEP='0')
    assert state == 'none' and reason == 'GARAGE_PROMP_CSTEP=0'
    for cc, said in (('cc "', 'is not a command line: No closing quotation'),
                     (' ', 'names no compiler')):
        state, reason = _library_in_subprocess(tmp_path, CC=cc)
        assert state == 'none' and reason == f'CC={cc!r} {said}', reason


def test_a_cache_directory_others_may_write_to_is_not_loaded_from(tmp_path):
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o777)
    state, reason = _library_in_subprocess(shared)
    assert state == 'none' and 'not only this user' in reason
    assert not list(shared.iterdir())


@needs_compiler
def test_a_cached_file_that_does_not_load_is_built_again(tmp_path):
    assert _library_in_subprocess(tmp_path)[0] == 'built'
    built, = tmp_path.iterdir()
    built.write_bytes(b'not a shared library')
    assert _library_in_subprocess(tmp_path)[0] == 'built'
    assert built.read_bytes().startswith(b'\x7fELF')


@needs_compiler
def test_a_compiler_with_arguments(tmp_path):
    cc = os.environ.get('CC', 'cc')
    assert _library_in_subprocess(tmp_path, CC=f'{cc} -O1')[0] == 'built'


@needs_compiler
def test_the_library_is_built_once_per_source_and_mujoco_version(tmp_path):
    assert _library_in_subprocess(tmp_path)[0] == 'built'
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and mujoco.__version__ in built[0].name
    stamp = built[0].stat().st_mtime_ns
    assert _library_in_subprocess(tmp_path)[0] == 'built'
    assert [p.stat().st_mtime_ns for p in tmp_path.iterdir()] == [stamp]


PARTS_BEFORE = (('xpos', 3, 2), ('qpos', 0, 1))
PARTS_AFTER = (('xpos', 3, 2), ('cfrc_ext', 0, None), ('qpos', 0, None), ('qvel', 0, None),
               ('ctrl', 0, None))


def _read(envs, parts):
    """The parts of every env's data now, read from Python."""
    rows = []
    for env in envs:
        row = []
        for field, start, count in parts:
            flat = getattr(env.data, field).ravel()
            row.append(flat[start:None if count is None else start + count])
        rows.append(np.concatenate(row))
    return np.array(rows)


@needs_compiler
@pytest.mark.mujoco
@pytest.mark.parametrize('way', ['next to each step', 'after all steps', 'python loop'])
def test_the_parts_asked_are_each_envs_numbers_right_before_and_after_its_step(
        way, loops, monkeypatch):
    """``_step_all``'s before and after rows: read next to each simulation's step in the
    compiled loop, read over all simulations before and after them (a part whose arrays
    differ in size), or around the Python loop, they are each env's own numbers before
    and after its step, bit for bit (and its state is the one ``step`` reaches)."""
    assert _cstep.library() is not None, _cstep.reason
    _, envs = _gym_envs('AntRandDirec')
    plain = copy.deepcopy(envs)
    rng = np.random.default_rng(3)
    if way == 'after all steps':
        monkeypatch.setattr(MujocoMetaEnv, '_parts_spec', staticmethod(lambda *args: None))
    loops(way != 'python loop')
    for _ in range(5):
        actions = rng.uniform(-1, 1, (len(envs), 8))
        want_before = _read(envs, PARTS_BEFORE)
        before, after = MujocoMetaEnv._step_all(envs, actions, True, PARTS_BEFORE, PARTS_AFTER)  # pylint: disable=protected-access
        for env, action in zip(plain, actions):
            env.do_simulation(action, env.frame_skip)
        np.testing.assert_array_equal(before, want_before)
        np.testing.assert_array_equal(after, _read(plain, PARTS_AFTER))
        np.testing.assert_array_equal(after, _read(envs, PARTS_AFTER))
        assert len({row.tobytes() for row in after}) == len(envs)  # each env its own row
    none = MujocoMetaEnv._step_all(envs, actions, True)  # pylint: disable=protected-access
    assert none == (None, None)


@needs_compiler
@pytest.mark.mujoco
def test_a_spec_with_an_unknown_field_or_a_bad_layout_steps_nothing():
    lib = _cstep.library()
    assert lib is not None, _cstep.reason
    _, envs = _gym_envs('HalfCheetahFwdBack', n=2)
    models, datas = [env.model for env in envs], [env.data for env in envs]
    times = [data.time for data in datas]
    bad_code = np.array([[99], [0], [1]], dtype=np.int32)
    for spec, match in ((bad_code, 'unknown field code'), (bad_code.astype(np.int64), 'int32'),
                        (np.array([[9], [-1], [1]], dtype=np.int32), 'non-negative'),
                        (np.array([[9], [0], [1]], dtype=np.int32).T.copy(), r'\(3, k\)')):
        for where in ('before', 'after'):
            with pytest.raises(ValueError, match=match):
                _cstep.step_batch(lib, models, datas, np.zeros((2, 6)), 5, False,
                                  **{where: spec})
    assert [data.time for data in datas] == times
    # The C function's own check of the codes, below the Python one.
    n_fields = len(_cstep.GATHER_FIELDS)
    ptrs = _cstep.pointers(models, datas)
    out = np.empty((2, 1))
    code = np.array([[n_fields], [0], [1]], dtype=np.int32)
    assert lib.gp_step_batch(2, ptrs[0].ctypes.data, ptrs[1].ctypes.data,
                             np.zeros((2, 6)).ctypes.data, 6, 5, 0, 0, None, 0, None,
                             1, code.ctypes.data, 1, out.ctypes.data) == -1
    assert [data.time for data in datas] == times


@pytest.mark.mujoco
def test_parts_of_arrays_of_other_sizes_or_outside_them_have_no_spec():
    _, (ant, ) = _gym_envs('AntRandDirec', n=1)
    _, (humanoid, ) = _gym_envs('HumanoidRandDirec', n=1)
    spec = MujocoMetaEnv._parts_spec  # pylint: disable=protected-access
    got = spec([ant.data, ant.data], (('cfrc_ext', 6, None), ('qpos', 2, 3)))
    codes = _cstep.FIELD_CODES
    np.testing.assert_array_equal(got, [[codes['cfrc_ext'], codes['qpos']], [6, 2],
                                        [ant.data.cfrc_ext.size - 6, 3]])
    assert spec([ant.data, humanoid.data], (('qpos', 0, None),)) is None  # 15 and 24
    assert spec([ant.data], (('qpos', 0, ant.data.qpos.size + 1),)) is None
    assert spec([ant.data], (('qpos', ant.data.qpos.size + 1, None),)) is None
    assert spec([ant.data], (('qpos', -1, 1),)) is None


def test_a_compiler_that_hangs_is_ended_once_and_the_envs_step_from_python(tmp_path):
    """One bounded wait, not one per cache directory and rebuild (a hanging compiler held
    every worker four times two minutes); the compiler's own children end with it (a
    wrapper's child would hold the output pipes open)."""
    calls = tmp_path / 'calls'
    cc = tmp_path / 'cc.sh'
    cc.write_text(f'#!/bin/sh\necho called >> {calls}\nsleep 60\n')
    cc.chmod(0o755)
    code = ('import time; from garage_promp.envs import _cstep; _cstep.COMPILE_SECONDS = 2; '
            'start = time.monotonic(); lib = _cstep.library(); '
            'print("none" if lib is None else "built"); print(_cstep.reason); '
            'print(time.monotonic() - start)')
    cache = tmp_path / 'cache'
    proc = subprocess.run([sys.executable, '-W', 'ignore', '-c', code], capture_output=True,
                          text=True, timeout=120, check=True,
                          env=dict(os.environ, GARAGE_PROMP_CACHE=str(cache), CC=str(cc)))
    state, reason, seconds = proc.stdout.splitlines()
    assert state == 'none' and 'ran past 2 s and was ended' in reason
    assert calls.read_text() == 'called\n'
    assert float(seconds) < 30
    assert not list(cache.glob('*'))  # nothing half-written left
    assert not subprocess.run(['pgrep', '-f', f'{cc}'], capture_output=True, check=False).stdout
