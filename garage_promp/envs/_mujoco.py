"""Shared machinery of the MuJoCo meta-envs: the base class and task mixins.

The envs run on gymnasium's ``MujocoEnv`` (official ``mujoco`` bindings, no
mujoco-py) with gymnasium's bundled XML assets. The 2018 gym-v2 XMLs the paper
used are the ``*.xml`` (not ``*_v5.xml``) assets, whose timesteps match
([G] in the spec); where the paper changed a timestep (RandParams), the class
sets :attr:`MujocoMetaEnv.sim_timestep` to reproduce the paper's ``dt``.
Physics differs from MuJoCo 1.50 / 1.31 in detail (new solver defaults), so
returns are comparable with the paper's but not bit-identical.
"""
import contextlib
import contextvars
import ctypes
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from garage_promp.envs import _cstep, _tasks
from garage_promp.envs.base import MetaEnv, check_action, stack_step_infos

from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.envs.mujoco.mujoco_rendering import MujocoRenderer
from gymnasium.spaces import Box
import mujoco
import numpy as np

#: Parts of an ``MjData`` to read next to a step: ``(field, first number, count or None for
#: the rest)`` of ``data.<field>`` flattened (:meth:`MujocoMetaEnv._step_all`).
Parts = Tuple[Tuple[str, int, int | None], ...]

#: What :meth:`MujocoMetaEnv.batch_step` returns.
BatchStep = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Dict[str, np.ndarray]]

DIAGNOSTIC_KEYS = {'forward_vel': 'ForwardVel', 'ctrl_cost': 'CtrlCost'}

#: While :func:`stepping_with_models` is active: the ``MjModel`` to step each env's
#: ``MjData`` with, by ``id(env)`` (see :func:`identical_models`).
_STEP_MODELS: contextvars.ContextVar[Dict[int, Any] | None] = contextvars.ContextVar(
    'garage_promp_step_models', default=None)


class WaveModels(dict):
    """:func:`identical_models`' ``{id(env): model}``, with the wave's cache of constants.

    ``constants`` keeps what :func:`wave_constant` computes: values that nothing
    changes within a lean wave (each env's task, ``MjModel`` and ``MjData``), so
    the per-step Python that gathers them from 200 envs runs once a wave. A new
    wave (``LeanStepper.start``) makes a new ``WaveModels``, so nothing outlives it.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.constants: Dict[Any, Any] = {}
        #: The wave's envs in order (set by the lean stepper), of which every step steps
        #: those whose episodes run on: a constant of some of them is then taken out of
        #: the whole wave's (see :func:`wave_constant`).
        self.wave: Sequence[Any] | None = None
        self._index: Dict[int, int] | None = None
        self._groups: Dict[Tuple[int, ...], int] = {}
        self._last: Tuple[Any, int] | None = None

    def group(self, envs: Sequence[Any]) -> int:
        """A number for the envs of ``envs`` in this order, the same for the same envs.

        The constants are kept under it: the identities of 200 envs are read and
        hashed only when ``envs`` is another list object than at the last call (a
        step's callers pass one list along, and the lean stepper one list while a
        step's envs stay), which the callers do not modify.
        """
        last = self._last
        if last is not None and last[0] is envs:
            return last[1]
        number = self._groups.setdefault(tuple(map(id, envs)), len(self._groups))
        self._last = (envs, number)
        return number

    def positions(self, envs: Sequence[Any]) -> np.ndarray | None:
        """Each of ``envs``' position in :attr:`wave`, or None where one is not in it."""
        if self.wave is None:
            return None
        if self._index is None:
            self._index = {id(env): n for n, env in enumerate(self.wave)}
        try:
            return np.fromiter((self._index[id(env)] for env in envs), dtype=np.intp,
                               count=len(envs))
        except KeyError:
            return None


def row_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a[i] @ b[i]`` of each row of two ``(n, k)`` arrays, as NumPy computes the dot of
    two 1-D ``float64`` arrays, bit for bit.

    NumPy's 1-D ``@`` calls the BLAS ``ddot``, whose sum of products (fused or not, in
    which order) depends on the machine's BLAS, so it is not rewritten as a sum; a stack
    of vector-vector products in ``matmul`` calls the same function for each row.
    """
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    return np.matmul(a[:, None, :], b[:, :, None])[:, 0, 0]


def wave_constant(envs: Sequence[Any], name: str, compute, take=None):
    """``compute(envs)``, computed once a wave for these ``envs`` (in this order).

    Within :func:`stepping_with_models` (the lean path's wave), the value is kept
    in the wave's :class:`WaveModels` under ``name`` and the envs' identities;
    elsewhere it is computed at every call. Only for values that nothing changes
    within a wave, and that the caller does not modify.

    Where episodes end early (a walker that falls), each step steps another part of
    the wave's envs; with ``take``, the value of a part is ``take(value of the whole
    wave, positions of envs in it)`` (the rows of an array, say) rather than computed
    again from the envs (a step plan's Python over 200 envs, about a quarter of a
    millisecond, at most steps of a HopperRandParams wave). ``take`` must give what
    ``compute`` would, or a value the caller treats alike (a set holding the part's
    members and others takes the general path: the same numbers).
    """
    models = _STEP_MODELS.get()
    if not isinstance(models, WaveModels):
        return compute(envs)
    key = (name, models.group(envs))
    try:
        return models.constants[key]
    except KeyError:
        pass
    index = None
    if take is not None and models.wave is not None and len(envs) < len(models.wave):
        index = models.positions(envs)
    if index is None:
        value = compute(envs)
    else:
        value = take(wave_constant(models.wave, name, compute), index)
    models.constants[key] = value
    return value


def _take_plan(plan: Tuple[List[Any], List[Any], Any], index: np.ndarray
               ) -> Tuple[List[Any], List[Any], Any]:
    """The step plan (:meth:`MujocoMetaEnv._step_plan`) of the envs at ``index`` of a
    wave, from the wave's: the models, ``MjData`` and addresses at those positions.
    Where the wave's envs cannot all take the compiled loop, neither does a part (the
    Python loop: the same numbers)."""
    step_models, datas, pointers = plan
    return ([step_models[i] for i in index], [datas[i] for i in index],
            None if pointers is None else (pointers[0][index], pointers[1][index]))


def take_rows(value: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The rows ``index`` of a wave's array (a ``take`` of :func:`wave_constant`)."""
    return value[index]


def take_whole(value: Any, index: np.ndarray) -> Any:
    """The wave's value itself, for a value that holds for any part of the wave (a
    ``take`` of :func:`wave_constant`)."""
    del index
    return value


def _libc_memcmp():
    """The C library's ``memcmp`` through ``ctypes``, or None where it cannot be loaded."""
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    memcmp.restype = ctypes.c_int
    return memcmp


_MEMCMP = _libc_memcmp()


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous ``uint8`` arrays hold the same bytes.

    ``memcmp`` stops at the first difference and reads each byte once; ``np.array_equal``
    builds a boolean array of the whole length first (half a megabyte for a model:
    about 3x longer where both are equal, and all of it where they differ early)."""
    if a.size != b.size:
        return False
    if _MEMCMP is None:
        return bool(np.array_equal(a, b))
    return _MEMCMP(a.ctypes.data, b.ctypes.data, a.size) == 0


def identical_models(envs: Sequence[Any]) -> 'WaveModels':
    """For every :class:`MujocoMetaEnv` of ``envs``, one ``MjModel`` per group of identical models.

    A sampler worker's envs are deep copies of one env, each with its own
    ``MjModel`` (half a megabyte for HalfCheetah): stepping 200 of them in
    turn reads 200 copies of the same numbers, and on HalfCheetahFwdBack
    MuJoCo's own time in the sampler is then about 1.2x that of one model
    stepping 200 ``MjData``. Two models are identical here when stepping
    with either computes the same: where the compiled stepping library is
    loaded, every size, option, statistic and array equal byte for byte but
    the textures' pixels, which only rendering reads and which are 94-98% of
    a paper env's model (:func:`_cstep.same_physics`: at most 9-33 KB read
    per comparison); else MuJoCo's own binary serialisation (``mj_saveModel``,
    every byte of the model) equal (:func:`same_bytes`). Envs whose task
    changes the model (the RandParams envs) group by task. Returns
    ``{id(env): model}``, each model that of the group's first env.

    It runs once a wave, so a model changed between waves (a task, a user's
    env randomising its model at reset) is grouped anew. Each env is compared
    with the group the previous env joined first (a task's envs are
    consecutive), then with the others; a difference ends a comparison early.
    Inside the sampler this cost about 170 µs an env a wave when every model
    was serialised into a new buffer and compared whole, and about 3% of a
    HalfCheetah meta-batch with one reused buffer and ``memcmp``: reading
    every model's half megabyte of textures.
    """
    lib = _cstep.library()
    envs = [env for env in envs if isinstance(env, MujocoMetaEnv)]  # (only their _simulate
    if lib is None:                                                 # reads the models)
        return _group_by_serialisation(envs)
    groups: List[Any] = []
    models = WaveModels()
    last = 0
    for env in envs:
        model = env.model
        order = [last, *range(last), *range(last + 1, len(groups))] if groups else []
        found = next((i for i in order if _cstep.same_physics(lib, groups[i], model)), None)
        if found is None:
            found = len(groups)
            groups.append(model)
        models[id(env)] = groups[found]
        last = found
    return models


def _group_by_serialisation(envs: Sequence['MujocoMetaEnv']) -> 'WaveModels':
    """:func:`identical_models` without the compiled library: each model serialised
    (``mj_saveModel``) into one reused buffer, a checksum to find the candidates, then
    every byte (:func:`same_bytes`)."""
    candidates_of: Dict[Tuple[int, int], List[Tuple[np.ndarray, Any]]] = {}
    models = WaveModels()
    scratch = None
    for env in envs:
        model = env.model
        size = mujoco.mj_sizeModel(model)
        if scratch is None or scratch.size != size:
            scratch = np.empty(size, dtype=np.uint8)
        mujoco.mj_saveModel(model, None, scratch)
        whole = size // 8 * 8
        key = (size, int(scratch[:whole].view(np.uint64).sum(dtype=np.uint64))
               ^ int(scratch[whole:].sum()))
        candidates = candidates_of.setdefault(key, [])
        found = next((other for blob, other in candidates if same_bytes(scratch, blob)), None)
        if found is None:  # a new group: the buffer becomes its serialisation
            candidates.append((scratch, model))
            scratch, found = None, model
        models[id(env)] = found
    return models


@contextlib.contextmanager
def stepping_with_models(models: Dict[int, Any] | None) -> Iterator[None]:
    """Within ``with``, :meth:`MujocoMetaEnv._simulate` steps each env of ``models``
    (from :func:`identical_models`) with the model given for it."""
    token = _STEP_MODELS.set(models)
    try:
        yield
    finally:
        _STEP_MODELS.reset(token)


#: MuJoCo's warnings of a simulation it reset in the middle of a step (``mj_checkPos``,
#: ``mj_checkVel``, ``mj_checkAcc``), with what each says.
_RESET_WARNINGS = {
    mujoco.mjtWarning.mjWARN_BADQPOS: 'a NaN, inf or huge value in qpos',
    mujoco.mjtWarning.mjWARN_BADQVEL: 'a NaN, inf or huge value in qvel',
    mujoco.mjtWarning.mjWARN_BADQACC: 'a NaN, inf or huge value in qacc',
}


def simulation_reset(data: Any) -> str | None:
    """What made MuJoCo reset ``data``'s simulation since its last ``mj_resetData``, or None.

    MuJoCo's step checks ``qpos``, ``qvel`` and ``qacc`` (``mj_checkPos``,
    ``mj_checkVel``, ``mj_checkAcc``); at a NaN, an inf or a value beyond 1e10 it
    resets the simulation, prints a warning and counts it in ``data.warning``, which
    keeps the count until the next reset (gymnasium's ``reset`` calls ``mj_resetData``).
    """
    warnings = data.warning
    for kind, what in _RESET_WARNINGS.items():
        if warnings[kind].number:
            return (f'{what} (at DOF {warnings[kind].lastinfo}) made MuJoCo reset the '
                    'simulation to its initial state in the middle of the episode')
    return None


class MujocoMetaEnv(MetaEnv, MujocoEnv):
    """A MuJoCo meta-env: XML, frame skip, reset noise, pickling.

    Subclasses set the class attributes below and implement ``step`` and
    ``_get_obs``; a task mixin placed before this class in the bases supplies
    the task methods. ``env_info`` of every step holds at least
    ``forward_vel`` (velocity along the task's direction, m/s), ``ctrl_cost``
    (the control penalty subtracted from the reward) and ``task`` (the task
    as a float64 vector), all numeric, the same keys every step.
    Observations are float32, like the spaces garage's policies expect.

    Args:
        seed (int or None): Seed of the task and reset-noise generators
            (see :mod:`garage_promp.envs.base`).

    """

    xml_file: str = ''
    """Asset of gymnasium's ``envs/mujoco/assets``."""
    frame_skip: int = 1
    sim_timestep: float | None = None
    """If set, replaces the XML's ``opt.timestep`` (dt = timestep * skip)."""
    obs_dim: int = 0
    qpos_noise: float = 0.
    """Reset: qpos = init_qpos + U(-qpos_noise, qpos_noise)."""
    qvel_noise: float = 0.
    """Reset: qvel = init_qvel + U(+-qvel_noise), or qvel_noise * N(0, 1)."""
    qvel_noise_normal: bool = False
    metadata = {'render_modes': ['human', 'rgb_array', 'depth_array']}
    diagnostic_keys = DIAGNOSTIC_KEYS

    def __init__(self, seed: int | None = None):
        MujocoEnv.__init__(self,
                           self.xml_file,
                           self.frame_skip,
                           observation_space=Box(-np.inf,
                                                 np.inf,
                                                 shape=(self.obs_dim, ),
                                                 dtype=np.float32))
        self.metadata = {
            **self.metadata, 'render_fps': int(round(1. / self.dt))
        }
        self._init_meta_env(seed, self._default_task())

    def _initialize_simulation(self):
        model, data = super()._initialize_simulation()
        if self.sim_timestep is not None:
            model.opt.timestep = self.sim_timestep
        return model, data

    def do_simulation(self, ctrl, n_frames) -> None:
        """gymnasium's ``do_simulation``, refusing controls that are not finite real numbers
        of the actuators' shape (:func:`~garage_promp.envs.base.check_action`), before
        anything of the simulation changes: MuJoCo itself would step on with a NaN
        control zeroed (and a warning) or an infinite one clamped to its range."""
        if not self._action_checked:  # (stepped directly, not by garage's wrapper)
            ctrl = check_action(self, ctrl, (self.model.nu, ))
        super().do_simulation(ctrl, n_frames)

    def reset_model(self) -> np.ndarray:
        """Reset noise of the original ProMP envs, drawn from ``self.np_random``."""
        qpos = self.init_qpos + self.np_random.uniform(
            -self.qpos_noise, self.qpos_noise, size=self.model.nq)
        if self.qvel_noise_normal:
            qvel = self.init_qvel + self.qvel_noise * \
                self.np_random.standard_normal(self.model.nv)
        else:
            qvel = self.init_qvel + self.np_random.uniform(
                -self.qvel_noise, self.qvel_noise, size=self.model.nv)
        self.set_state(qpos, qvel)
        return self._get_obs()

    def _get_obs(self) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def batch_step(cls, envs: Sequence['MujocoMetaEnv'], actions: np.ndarray) -> BatchStep:
        """Step every env of ``envs`` (all of this class) with its row of ``actions``.

        The sampler's lean path (``garage_promp.sampler.lean``) calls this
        once per step for all of a worker's envs. Returns observations
        ``(n, O)``, rewards ``(n,)``, terminated and truncated flags
        ``(n,)`` and env infos (key -> ``(n, ...)``), each row what
        ``envs[i].step(actions[i])`` returns. This default calls ``step``
        env by env; a class may compute the rows together from the envs'
        ``MjData`` if it gives the same values (tested against ``step``).
        """
        results = [env.step(action) for env, action in zip(envs, actions)]
        infos = stack_step_infos([r[4] for r in results])
        return (np.stack([np.asarray(r[0], dtype=np.float32) for r in results]),
                np.array([float(r[1]) for r in results]),
                np.array([bool(r[2]) for r in results]),
                np.array([bool(r[3]) for r in results]),
                infos)

    def _default_task(self) -> Any:
        raise NotImplementedError

    def _progress(self, before: np.ndarray, after: np.ndarray) -> float:
        """Displacement counted as forward: along +x (overridden by tasks)."""
        return float(after[0] - before[0])

    @classmethod
    def _overrides_any(cls, owner: type, names: Sequence[str]) -> bool:
        """Whether ``cls`` replaces any of ``owner``'s methods ``names`` (a user's subclass):
        then a vectorised ``batch_step`` written for ``owner`` does not apply."""
        def function(method):  # a classmethod's bound method is new at every lookup
            return getattr(method, '__func__', method)
        return any(function(getattr(cls, name)) is not function(getattr(owner, name))
                   for name in names)

    def _views(self) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """``(data, data.ctrl, data.qpos, data.qvel)`` of this env, the arrays made once.

        Each ``data.qpos`` makes a new numpy view of the ``MjData`` (about
        0.5 µs, as long as a HalfCheetah env step's own Python); the lean path
        reads these every step, so it reads them from here. The views stay
        valid as long as ``self.data`` is the same ``MjData`` (MuJoCo never
        moves its arrays; a new ``MjData`` makes new views).
        """
        views = self.__dict__.get('_data_views')
        if views is None or views[0] is not self.data:
            data = self.data
            views = self._data_views = (data, data.ctrl, data.qpos, data.qvel)
        return views

    @staticmethod
    def _simulate(envs: Sequence['MujocoMetaEnv'], actions: np.ndarray,
                  contact_forces: bool = False) -> None:
        """``do_simulation`` of every env (controls, ``mj_step`` with ``nstep=frame_skip``).

        gymnasium's ``mj_rnePostConstraint`` after the step fills only the
        contact-force outputs (``cacc``, ``cfrc_int``, ``cfrc_ext``), which
        the next ``mj_step`` neither reads nor keeps: it runs only with
        ``contact_forces``, for the envs whose observation or reward reads
        ``cfrc_ext`` (Ant, Humanoid). Inside :func:`stepping_with_models`
        (the lean path's wave), each env is stepped with the model given for
        it, one identical to its own.
        """
        MujocoMetaEnv._step_all(envs, actions, contact_forces)

    @staticmethod
    def _step_all(envs: Sequence['MujocoMetaEnv'], actions: np.ndarray, contact_forces: bool,
                  before: Parts = (), after: Parts = ()
                  ) -> Tuple[np.ndarray | None, np.ndarray | None]:
        """:meth:`_simulate`'s work, and the rows of the ``before`` and ``after`` parts
        (``(field, first number, count or None for the rest)`` of ``data.<field>``
        flattened): each env's numbers right before and right after its step, one row
        each, the parts one after another (None where no parts are asked).

        The loop runs in C (:mod:`garage_promp.envs._cstep`: the same MuJoCo calls on the
        same ``MjData``, bit for bit) where it could be compiled, the envs share one frame
        skip and their models one size (``nq``, ``nv``, ``nu``), and the actions are one
        row per env; else from Python. There the parts are copied out of each simulation
        next to its step, while its ``MjData`` is in the cache, where every env's array of
        each part has one size; else (and from Python) they are read with :meth:`_rows`
        before and after the envs' steps: the same numbers. Either way a MuJoCo error
        carries ``lean_index``, the position in ``envs`` of the env it came from.
        """
        lib = _cstep.library()
        step_models, datas, pointers = MujocoMetaEnv._plan(envs)
        if pointers is not None and np.shape(actions) == (len(envs), step_models[0].nu):

            def specs_of(es):  # (the wave's own datas where es are these envs)
                own = datas if es is envs else MujocoMetaEnv._plan(es)[1]
                return tuple(MujocoMetaEnv._parts_spec(own, parts) for parts in (before, after))
            specs = wave_constant(envs, ('parts', before, after), specs_of, take_whole)
            if all(spec is not None for spec in specs):
                return _cstep.step_batch(lib, step_models, datas, actions, envs[0].frame_skip,
                                         contact_forces, *(spec if len(spec[0]) else None
                                                           for spec in specs),
                                         addresses=pointers)
            rows_before = MujocoMetaEnv._parts_rows(envs, before)
            _cstep.step_batch(lib, step_models, datas, actions, envs[0].frame_skip,
                              contact_forces, addresses=pointers)
            return rows_before, MujocoMetaEnv._parts_rows(envs, after)
        rows_before = MujocoMetaEnv._parts_rows(envs, before)
        for n, (env, model, action) in enumerate(zip(envs, step_models, actions)):
            data, ctrl = env._views()[:2]
            ctrl[:] = action
            try:
                mujoco.mj_step(model, data, nstep=env.frame_skip)
                if contact_forces:
                    mujoco.mj_rnePostConstraint(model, data)
            except mujoco.FatalError as error:
                error.lean_index = n
                raise
        return rows_before, MujocoMetaEnv._parts_rows(envs, after)

    @staticmethod
    def _parts_spec(datas: Sequence[Any], parts: Parts) -> np.ndarray | None:
        """The :func:`_cstep.gather` spec of ``parts`` (see :meth:`_step_all`), or None
        where a part's array differs in size between the ``datas`` or the part does not
        lie inside it."""
        resolved = []
        for field, start, count in parts:
            sizes = {getattr(data, field).size for data in datas}
            size = next(iter(sizes))
            count = size - start if count is None else count
            if len(sizes) != 1 or start < 0 or count < 0 or start + count > size:
                return None
            resolved.append((field, start, count))
        return _cstep.spec_of(resolved)

    @staticmethod
    def _parts_rows(envs: Sequence['MujocoMetaEnv'], parts: Parts) -> np.ndarray | None:
        """The rows of ``parts`` of every env now (:meth:`_rows` of each part), or None
        for no parts."""
        if not parts:
            return None
        return np.concatenate([MujocoMetaEnv._rows(envs, field, start, count)
                               for field, start, count in parts], axis=1)

    @staticmethod
    def _step_plan(envs: Sequence['MujocoMetaEnv'], lib) -> Tuple[List[Any], List[Any], Any]:
        """The model to step each env with, each env's ``MjData``, and, where the compiled
        loop can step them all (one frame skip, one model size), their addresses
        (:func:`_cstep.pointers`); else None."""
        models = _STEP_MODELS.get() or {}
        step_models = [models.get(id(env)) or env.model for env in envs]
        datas = [env._views()[0] for env in envs]
        skip = envs[0].frame_skip
        if (lib is None or not all(env.frame_skip == skip for env in envs)
                or len({(m.nq, m.nv, m.nu)
                        for m in {id(m): m for m in step_models}.values()}) != 1):
            return step_models, datas, None
        return step_models, datas, _cstep.pointers(step_models, datas)

    @staticmethod
    def _plan(envs: Sequence['MujocoMetaEnv']) -> Tuple[List[Any], List[Any], Any]:
        """:meth:`_step_plan` of ``envs`` with the compiled library where it is loaded,
        once a wave (:func:`wave_constant`; a part's taken out of the wave's)."""
        lib = _cstep.library()
        return wave_constant(envs, 'step plan', lambda es: MujocoMetaEnv._step_plan(es, lib),
                             _take_plan)

    @staticmethod
    def _task_rows(envs: Sequence[Any]) -> np.ndarray:
        """Each env's task vector, one row each (a new array: it goes into the env infos)."""
        return wave_constant(envs, 'task rows',
                             lambda es: np.array([env._task_vector for env in es]),
                             take_rows).copy()

    @classmethod
    def _batch_advance(cls, envs: Sequence['MujocoMetaEnv'], actions: np.ndarray
                       ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step every env (:meth:`_simulate`); its ``qpos``, ``qvel`` (rows) and
        forward velocity ``d (x_after - x_before) / dt`` along x = qpos[0],
        each row what ``step`` computes for its env."""
        if cls._simulate is not MujocoMetaEnv._simulate:  # a subclass's own simulation
            views = [env._views() for env in envs]
            x_before = np.array([view[2][0] for view in views])
            cls._simulate(envs, actions)
            qpos = np.array([view[2] for view in views])
            qvel = np.array([view[3] for view in views])
        else:
            before, after = MujocoMetaEnv._step_all(
                envs, actions, False, before=(('qpos', 0, 1),),
                after=(('qpos', 0, None), ('qvel', 0, None)))
            x_before, nq = before[:, 0], envs[0].model.nq
            qpos, qvel = after[:, :nq], after[:, nq:]
        forward_vel = cls._directions(envs) * (qpos[:, 0] - x_before) / envs[0].dt
        return qpos, qvel, forward_vel

    @staticmethod
    def _directions(envs: Sequence['MujocoMetaEnv']) -> np.ndarray | float:
        """Each env's sign d of a fwd/back task; 1. (exact) for +x-only envs."""
        if getattr(envs[0], 'direction_dims', None) == 1:
            return wave_constant(envs, 'directions',
                                 lambda es: np.array([env._task_vector[0] for env in es]),
                                 take_rows)
        return 1.

    @classmethod
    def _vectorised(cls, envs) -> bool:
        """Whether :meth:`_batch_advance` may compute these envs' forward velocity: 1-D
        or no direction task (2-D directions take :meth:`DirectionTasks._batch_progress`)."""
        return getattr(envs[0], 'direction_dims', 1) == 1

    @staticmethod
    def _stack(envs: Sequence['MujocoMetaEnv'], field: str) -> np.ndarray:
        """``data.<field>`` of every env, one row each (flattened, copied)."""
        return MujocoMetaEnv._rows(envs, field, 0, None)

    @staticmethod
    def _rows(envs: Sequence['MujocoMetaEnv'], field: str, start: int,
              count: int | None) -> np.ndarray:
        """Numbers ``start`` to ``start + count`` (all with None) of every env's flattened
        ``data.<field>``, one row each (copied): :func:`_cstep.gather` of the wave's
        ``MjData`` where every env's array has one size and holds the part
        (:meth:`_parts_spec`; in one call into the compiled
        library, with the wave's addresses, where it is loaded); else env by env: the same
        numbers."""
        if field in _cstep.GATHER_FIELDS:
            lib = _cstep.library()
            _, datas, pointers = MujocoMetaEnv._plan(envs)
            spec = wave_constant(envs, ('part', field, start, count),
                                 lambda es: MujocoMetaEnv._parts_spec(
                                     datas if es is envs else MujocoMetaEnv._plan(es)[1],
                                     ((field, start, count),)),
                                 take_whole)
            if spec is not None:
                width = int(spec[2, 0])
                if pointers is None:  # (no library, or models of other sizes)
                    return _cstep.gather(None, None, spec, width, datas)
                return _cstep.gather(lib, pointers[1], spec, width)
        rows = [getattr(env.data, field).ravel() for env in envs]
        end = None if count is None else start + count
        return np.array([row[start:end] for row in rows]).reshape(len(envs), -1)

    def _info(self, forward_vel: float, ctrl_cost: float,
              **extra: float) -> Dict[str, Any]:
        return dict(forward_vel=forward_vel,
                    ctrl_cost=ctrl_cost,
                    task=self._task_vector,
                    **extra)

    # MjModel / MjData pickle exactly (mid-episode state included); the
    # renderer may hold an OpenGL context, so it is rebuilt instead.
    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state['mujoco_renderer'] = None
        state.pop('_data_views', None)  # views of this MjData; a copy makes its own
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.mujoco_renderer = MujocoRenderer(self.model,
                                              self.data,
                                              width=self.width,
                                              height=self.height,
                                              camera_id=self.camera_id,
                                              camera_name=self.camera_name)


class DirectionTasks:
    """Task mixin: a direction to run in.

    ``direction_dims = 1``: fwd/back, d in {-1, +1} (a float). ``2``: d uniform
    on the unit circle (an array of shape (2,)). Forward progress is
    d . (pos_after - pos_before) over the first ``direction_dims`` coordinates.
    """

    direction_dims: int = 1

    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[Any]:
        if self.direction_dims == 1:
            return _tasks.sample_signs(rng, n_tasks)
        return _tasks.sample_unit_vectors(rng, n_tasks)

    def _check_task(self, task: Any) -> Any:
        if self.direction_dims == 1:
            return _tasks.check_sign(task, 'direction')
        return _tasks.check_unit_vector(task, 'direction')

    def _default_task(self) -> Any:
        return 1. if self.direction_dims == 1 else np.array([1., 0.])

    def _progress(self, before: np.ndarray, after: np.ndarray) -> float:
        dims = self.direction_dims
        return float(self._task_vector @ (after[:dims] - before[:dims]))

    @staticmethod
    def _batch_progress(envs: Sequence[Any], before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """:meth:`_progress` of every env (rows of ``before`` and ``after``).

        The same float operations as ``_progress``, row by row: the
        difference elementwise, then one product for a 1-D task and numpy's
        own dot product of each row for a 2-D one (:func:`row_dots`; a dot of
        two terms may be rounded as one fused multiply-add, so it is not
        rewritten as a sum).
        """
        dims = envs[0].direction_dims
        diff = after[:, :dims] - before[:, :dims]
        if dims == 1:
            return MujocoMetaEnv._directions(envs) * diff[:, 0]
        vectors = MujocoMetaEnv._task_rows(envs)
        if vectors.dtype == np.float64 and vectors.shape == diff.shape:
            return row_dots(vectors, diff)
        return np.array([env._task_vector @ row for env, row in zip(envs, diff)])


class RandParamsTasks:
    """Task mixin: random physical parameters (``RandomEnv`` of dennisl88/rand_param_envs).

    A task is a dict of arrays ``body_mass``, ``body_inertia``,
    ``dof_damping``, ``geom_friction``: the model's initial values times
    elementwise multipliers 1.5**U(-3,3) (1.3**U(-3,3) for damping).
    ``set_task`` writes them into the model (no ``mj_setConst``, as the
    reference, which overwrote the arrays of MuJoCo 1.31). Forward progress
    is along +x.
    """

    def _default_task(self) -> Dict[str, np.ndarray]:
        # Runs once, right after the model is loaded: record its values.
        self._init_params = {
            key: getattr(self.model, key).copy()
            for key in _tasks.RAND_PARAMS_BASES
        }
        return {key: value.copy() for key, value in self._init_params.items()}

    def _sample_tasks(self, rng: np.random.Generator,
                      n_tasks: int) -> List[Dict[str, np.ndarray]]:
        return _tasks.sample_rand_params(rng, n_tasks, self._init_params)

    def _check_task(self, task: Any) -> Dict[str, np.ndarray]:
        return _tasks.check_rand_params(task, self._init_params)

    def _apply_task(self) -> None:
        for key, value in self._task.items():
            getattr(self.model, key)[:] = value

    def _make_task_vector(self) -> np.ndarray:
        return _tasks.flat_params(self._task, _tasks.RAND_PARAMS_BASES)
