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
