"""The Python API refuses what would otherwise give wrong numbers silently, fill memory or
fail deep inside a worker: each refusal names its culprit, before the work it would spoil."""
import copy
import re
import warnings

import garage_promp
from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline
from garage_promp.experiment import MetaEvaluator

from garage import EnvStep, EpisodeBatch
from garage.experiment import MetaEvaluator as GarageMetaEvaluator
from garage.experiment.experiment import ExperimentContext
from garage.experiment.task_sampler import EnvPoolSampler, SetTaskSampler
from garage.sampler import DefaultWorker, VecWorker
from garage.sampler.env_update import SetTaskUpdate
from garage.torch.policies import GaussianMLPPolicy
from garage.trainer import Trainer
import numpy as np
import psutil
import pytest
import torch

from tests.helpers import HORIZON, ShortPointEnv, make_algo, make_setup


def _promp(env, policy, sampler_policy=None, env_class=ShortPointEnv):
    sampler = garage_promp.make_sampler(sampler_policy or policy, env)
    return garage_promp.ProMP(env, policy, sampler, SetTaskSampler(env_class),
                              meta_batch_size=2, episodes_per_task=1)


# ------------------------------------------------------------------ the policy
@pytest.mark.parametrize('other, culprit', [
    (dict(hidden_nonlinearity=torch.relu), 'a policy that computes another mean'),
    (dict(std_parameterization='softplus'), 'a policy that computes another log-std'),
    (dict(learn_std=False),
     r"another policy \(the sampler's has \[\], the algorithm's \[\('_module._init_std'"),
    (dict(hidden_sizes=(16, )),
     r"another policy \(the sampler's has \[\('_module._mean_module._layers.0.linear.bias', "
     r"\(16,\)\)"),
], ids=['relu', 'softplus std', 'fixed std', 'wider'])
def test_a_sampler_built_for_a_policy_that_acts_otherwise_is_refused(other, culprit):
    """The sampler runs its own module at the algorithm's parameters: one that computes
    another mean or std recorded means and log-stds that were not the algorithm's policy
    at θ, and every ratio and KL of the update was wrong without a word."""
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    kwargs = dict(dict(hidden_sizes=(8, )), **other)
    with pytest.raises(ValueError, match='sampler was built for ' + culprit):
        _promp(env, policy, GaussianMLPPolicy(env.spec, **kwargs))
    _promp(env, policy, copy.deepcopy(policy))  # the same module, another object: fine
    _promp(env, policy, GaussianMLPPolicy(env.spec, hidden_sizes=(8, )))  # same architecture


def test_a_policy_with_frozen_parameters_is_refused_naming_them():
    """It failed in the first outer step (autograd: 'does not require grad'), after a
    whole meta-batch was sampled."""
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    name, value = list(policy.named_parameters())[1]
    value.requires_grad_(False)
    with pytest.raises(ValueError, match=rf"do not require grad: \['{name}'\]"):
        _promp(env, policy)


def _with_parameter(env, name, value):
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    with torch.no_grad():
        dict(policy.named_parameters())[name].fill_(value)
    return policy


@pytest.mark.parametrize('make_policy, culprit', [
    (lambda env: GaussianMLPPolicy(env.spec, hidden_sizes=(8, ), init_std=0.),
     '_module._init_std'),
    (lambda env: _with_parameter(env, '_module._mean_module._layers.0.linear.weight', np.nan),
     '_module._mean_module._layers.0.linear.weight'),
    (lambda env: _with_parameter(env, '_module._mean_module._output_layers.0.linear.bias',
                                 np.inf),
     '_module._mean_module._output_layers.0.linear.bias'),
    (lambda env: GaussianMLPPolicy(env.spec, hidden_sizes=(8, ), init_std=0., learn_std=False),
     '_module.init_std'),  # a buffer here, not a parameter
], ids=['init_std=0', 'nan weight', 'inf bias', 'init_std=0 fixed'])
def test_a_policy_with_non_finite_parameters_is_refused_naming_them(make_policy, culprit):
    """A log-std of -inf (garage's init_std=0) sampled a whole round through garage's min_std
    clamp and was then blamed on the inner step size; a NaN weight on the first action."""
    env = ShortPointEnv()
    with pytest.raises(ValueError, match=rf"non-finite \(NaN/inf\) parameters: \['{culprit}'\]"
                       ) as error:
        _promp(env, make_policy(env))
    assert ('init_std=0' in str(error.value)) == culprit.endswith('init_std')


def test_a_float64_policy_is_refused_as_such():
    """It was refused as a policy that 'does not take the env's observations of size 3'."""
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, )).double()
    with pytest.raises(ValueError, match=r"policy must have float32 parameters .*\['float64'\]"):
        garage_promp.make_sampler(policy, env)


# ----------------------------------------------------------------- the sampler
def _sampler_and_tasks():
    env, policy, sampler, _ = make_setup()
    updates = [SetTaskUpdate(ShortPointEnv, task, None) for task in env.sample_tasks(2)]
    return policy, sampler, updates, dict(policy.named_parameters())


def test_sampler_counts_beyond_memory_are_refused_before_any_env_is_built():
    """obtain_meta_batch(..., 10**9) deep-copied an env per episode until memory ran out."""
    policy, sampler, updates, params = _sampler_and_tasks()
    cases = [
        (lambda: sampler.obtain_meta_batch(updates, [params] * 2, 10 ** 9),
         'episodes_per_task=1,000,000,000 x tasks=2 x horizon'),
        (lambda: sampler.obtain_rounds(updates, [params] * 2, [10 ** 8, 1],
                                       on_task=lambda *_: params), 'fit in memory'),
        (lambda: sampler.obtain_exact_episodes(10 ** 9, None), 'n_eps_per_worker'),
        (lambda: sampler.obtain_samples(0, 10 ** 12, None), r'num_samples must be an int in'),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert len(sampler.obtain_meta_batch(updates, [params] * 2, 2).lengths) == 4
    del policy


def test_sampler_refuses_parameters_not_of_its_policy_before_sampling():
    """Another dtype, a missing entry, a policy object or a list: a worker failed on them
    (a torch dtype error, a missing key) after the jobs had started."""
    policy, sampler, updates, params = _sampler_and_tasks()
    doubled = {k: v.double() for k, v in params.items()}
    fewer = dict(list(params.items())[1:])
    cases = [
        (lambda: sampler.obtain_meta_batch(updates, [doubled] * 2, 1), ValueError,
         r"params\[0\] must be the sampler's policy's: in float32"),
        (lambda: sampler.obtain_meta_batch(updates, [params, fewer], 1), ValueError,
         r"params\[1\] must be the sampler's policy's"),
        (lambda: sampler.obtain_meta_batch(updates, [policy] * 2, 1), TypeError,
         r'params\[0\] must be a dict'),
        (lambda: sampler.obtain_samples(0, 5, {k: v.tolist() for k, v in params.items()}),
         ValueError, 'agent_update parameters must be .* in float32'),
        (lambda: sampler.obtain_rounds(updates, [params] * 2, [1, 1],
                                       on_task=lambda *_: doubled), ValueError,
         r"on_task's parameters for task 0 in round 1 must be .* in float32"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
    rounds = sampler.obtain_rounds(updates, [params] * 2, [1, 1], on_task=lambda *_: params)
    assert [len(r.lengths) for r in rounds] == [2, 2]


class _WrongResetShape(ShortPointEnv):
    def reset(self):
        _, info = super().reset()
        return np.zeros(5), info


class _BareReset(ShortPointEnv):
    def reset(self):
        return super().reset()[0]


class _InfoOfChangingShape(ShortPointEnv):
    def step(self, action):
        step = super().step(action)
        self.calls = getattr(self, 'calls', 0) + 1
        return EnvStep(step.env_spec, step.action, step.reward, step.observation,
                       dict(step.env_info, extra=np.zeros(1 + self.calls % 2)), step.step_type)


@pytest.mark.parametrize('env_class, message', [
    (_WrongResetShape, r'env.reset\(\) returned an observation of shape \(5,\) where its '
                       r'observation space has \(3,\)'),
    (_BareReset, r'env.reset\(\) must return \(observation, episode_info\)'),
    (_InfoOfChangingShape, r"environment info 'extra' must have one shape at every step, got "
                           r'shapes \[\(1,\), \(2,\)\]; \(2,\) at the first step \(env '
                           r'_InfoOfChangingShape, task .*, task slot 0, episode 0, step 2\)'),
], ids=['reset shape', 'bare reset', 'info shape'])
def test_env_output_that_does_not_fit_is_named(env_class, message):
    """A torch shape error in the policy forward, an unpacking error or numpy's
    'inhomogeneous shape' before."""
    env = env_class()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    algo = _promp(env, policy, env_class=env_class)
    with pytest.raises(garage_promp.sampler.SamplerWorkerError, match=message):
        algo.sample_meta_batch(0)


class _Success(ShortPointEnv):
    """garage's PointEnv's ``success`` flag, replaced at step 2 of every episode."""

    VALUE = np.nan

    def step(self, action):
        step = super().step(action)
        self.calls = 1 if step.first else getattr(self, 'calls', 0) + 1
        success = self.VALUE if self.calls == 2 else float(step.env_info['success'])
        return EnvStep(step.env_spec, step.action, step.reward, step.observation,
                       dict(step.env_info, success=success), step.step_type)


@pytest.mark.parametrize('value', [np.nan, np.inf, 2., -1., 0.5, 'yes', None],
                         ids=str)
@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_a_success_flag_other_than_0_or_1_is_named(value, kind):
    """garage's np.any counted an episode with success=NaN (or 2.0) as a success:
    SuccessRate 1 in the log without a word."""
    env_class = type('_Odd', (_Success, ), {'VALUE': value})
    env = env_class()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    sampler = garage_promp.make_sampler(policy, env, kind=kind, n_workers=2)
    algo = garage_promp.ProMP(env, policy, sampler, SetTaskSampler(env_class),
                              meta_batch_size=2, episodes_per_task=1)
    with pytest.raises(ValueError, match=r"info 'success' must be 0 or 1 \(False or True\) at "
                                         rf'every step, got {re.escape(repr(value))}: it is '
                                         r'counted into SuccessRate.* \(env _Odd, task .*, task '
                                         r'slot [01], episode 0, step 2\)'):
        algo.sample_meta_batch(0)
    sampler.shutdown_worker()


@pytest.mark.parametrize('value', [0, 1, 0., 1., True, np.float32(1.)], ids=repr)
def test_success_flags_of_0_and_1_of_any_number_type_are_taken(value):
    env_class = type('_Fine', (_Success, ), {'VALUE': value})
    env = env_class()
    algo = _promp(env, GaussianMLPPolicy(env.spec, hidden_sizes=(8, )), env_class=env_class)
    assert algo.sample_meta_batch(0)


class _HugeReward(ShortPointEnv):
    def step(self, action):
        step = super().step(action)
        return EnvStep(step.env_spec, step.action, 1e200, step.observation, step.env_info,
                       step.step_type)


def test_a_reward_beyond_float32_is_named_where_the_batch_is_made():
    """Finite in float64, inf in the float32 batch: refused naming the task and the value,
    not left for the update (or optimize's own check) to meet as an inf."""
    env = _HugeReward()
    algo = _promp(env, GaussianMLPPolicy(env.spec, hidden_sizes=(8, )), env_class=_HugeReward)
    with np.errstate(all='ignore'):
        with pytest.raises(ValueError, match=r'the rewards of task 0 of the meta-batch do not '
                                             r'fit float32.*largest \|value\| 1e\+200'):
            algo.sample_meta_batch(0)


# ----------------------------------------------------------- the meta-evaluator
def test_meta_evaluator_refuses_counts_beyond_memory_and_a_pool_too_small_when_made():
    """They were accepted and failed at the first evaluation, an epoch later (a
    MemoryError after copying envs, or garage's pool error)."""
    sampler = SetTaskSampler(ShortPointEnv)
    for name in ('n_exploration_eps', 'n_test_episodes'):
        counts = dict(dict(n_exploration_eps=1, n_test_episodes=1), **{name: 10 ** 9})
        with pytest.raises(ValueError, match=rf'{name}=1,000,000,000 x n_test_tasks=2'):
            MetaEvaluator(test_task_sampler=sampler, n_test_tasks=2, **counts)
    pool = EnvPoolSampler([ShortPointEnv()] * 2)
    with pytest.raises(ValueError, match='n_test_tasks=5 but test_task_sampler .* holds 2'):
        MetaEvaluator(test_task_sampler=pool, n_test_tasks=5)
    MetaEvaluator(test_task_sampler=pool, n_test_tasks=2)
    with pytest.raises(ValueError, match=r"worker_args=\{'n_envs': 4\} would not be used"):
        MetaEvaluator(test_task_sampler=pool, n_test_tasks=2, worker_args={'n_envs': 4})
    with pytest.raises(ValueError, match=r"worker_class=<class .*VecWorker'> would not be used"):
        MetaEvaluator(test_task_sampler=pool, n_test_tasks=2, worker_class=VecWorker)
    MetaEvaluator(test_task_sampler=pool, n_test_tasks=2, worker_args={},
                  worker_class=DefaultWorker)
    _, algo = make_algo('LVCVPG')
    evaluator = MetaEvaluator(test_task_sampler=sampler, n_test_tasks=2, n_exploration_eps=1,
                              n_test_episodes=1)
    with pytest.raises(ValueError, match='fit in memory'):
        evaluator.evaluate(algo, test_episodes_per_task=10 ** 9)
    assert len(evaluator.evaluate(algo)) == 2


def test_task_samplers_of_another_family_are_refused_and_of_another_horizon_named():
    """A meta-evaluator's test tasks of another env family failed at its first evaluation,
    after a whole training epoch, in a message that named the training task sampler. Task
    samplers whose envs declare another max_episode_length are sampled at the algorithm's
    horizon with a warning (it was without a word); garage's own MetaEvaluator samples each
    test env at its own horizon, so its test envs may have another."""
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    sampler = garage_promp.make_sampler(policy, env)

    def promp(task_sampler=None, test_task_sampler=None, evaluator_class=MetaEvaluator):
        task_sampler = task_sampler or SetTaskSampler(ShortPointEnv)
        evaluator = test_task_sampler and evaluator_class(
            test_task_sampler=test_task_sampler, n_test_tasks=2, n_exploration_eps=1,
            n_test_episodes=1)
        return garage_promp.ProMP(env, policy, sampler, task_sampler, meta_batch_size=2,
                                  episodes_per_task=1, meta_evaluator=evaluator)

    other = SetTaskSampler(garage_promp.envs.PointEnvCorner)
    with pytest.raises(ValueError, match=r"meta_evaluator's test_task_sampler's env "
                                         r'PointEnvCorner has observation space shape'):
        promp(test_task_sampler=other)
    longer = SetTaskSampler(lambda: ShortPointEnv(max_episode_length=HORIZON + 5))
    with pytest.warns(UserWarning, match=rf"meta_evaluator's test_task_sampler's env "
                                         rf'ShortPointEnv has max_episode_length={HORIZON + 5}, '
                                         rf'but the algorithm samples episodes of {HORIZON} '
                                         'steps: its episodes end at the shorter of the two'):
        promp(test_task_sampler=longer)
    with pytest.warns(UserWarning, match=rf"the task sampler's env ShortPointEnv has "
                                         rf'max_episode_length={HORIZON + 5}, but'):
        promp(task_sampler=longer)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert promp(test_task_sampler=SetTaskSampler(ShortPointEnv))
        assert promp(test_task_sampler=longer, evaluator_class=GarageMetaEvaluator)
        with pytest.raises(ValueError, match='PointEnvCorner has observation space shape'):
            promp(test_task_sampler=other, evaluator_class=GarageMetaEvaluator)


@pytest.mark.parametrize('n_epochs', [2.5, -1, 0, True, '2', None], ids=repr)
def test_a_trainers_epoch_count_is_checked_before_the_first_epoch(tmp_path, n_epochs):
    """garage's Trainer.train(n_epochs=2.5) ran 2 epochs, True one and -1 none (returning
    None, as if trained)."""
    env, algo = make_algo('LVCVPG')
    trainer = Trainer(ExperimentContext(snapshot_dir=str(tmp_path), snapshot_mode='none',
                                        snapshot_gap=1))
    trainer.setup(algo, env)
    with pytest.raises(ValueError, match=r"the Trainer's n_epochs must be an int >= 1"):
        trainer.train(n_epochs=n_epochs, batch_size=1)
    assert trainer.step_itr is None and trainer.total_env_steps == 0  # no epoch began
    with pytest.raises(ValueError, match=r'Trainer.train\(plot=True\) is not supported'):
        trainer.train(n_epochs=1, batch_size=1, plot=True)
    assert trainer.step_itr is None and trainer.total_env_steps == 0
    assert not psutil.Process().children(recursive=True)  # garage's plotter process is stopped
    with pytest.raises(ValueError, match=r'Trainer has no training arguments: a garage Trainer '
                                         r'trains the algorithm \(trainer.setup'):
        algo.train(Trainer(ExperimentContext(snapshot_dir=str(tmp_path),
                                             snapshot_mode='none', snapshot_gap=1)))


# ---------------------------------------------------------------- adaptation
def _with(episodes, **fields):
    values = dict(env_spec=episodes.env_spec, episode_infos=episodes.episode_infos_by_episode,
                  observations=episodes.observations,
                  last_observations=episodes.last_observations, actions=episodes.actions,
                  rewards=episodes.rewards, env_infos=episodes.env_infos,
                  agent_infos=episodes.agent_infos, step_types=episodes.step_types,
                  lengths=episodes.lengths)
    values.update(fields)
    return EpisodeBatch(**values)


def test_adaptation_that_overflows_or_starts_from_nan_is_refused():
    """Finite episodes whose likelihoods overflow float32 (a recorded log-std of -100,
    actions of 1e30), or a step size so large that the step overflows, adapted to NaN
    parameters without a word, and NaN parameters were adapted to NaN; float64
    parameters failed in torch's matmul."""
    _, algo = make_algo('LVCVPG', meta_batch_size=2, episodes_per_task=1)
    episodes = EpisodeBatch.concatenate(*algo.sample_meta_batch(0)[0].episodes.split()[:1])
    theta = algo.get_exploration_policy().adapted_params()
    infos = episodes.agent_infos
    narrow = _with(episodes, agent_infos=dict(infos, log_std=infos['log_std'] * 0 - 100))
    for bad in (narrow, _with(episodes, actions=episodes.actions * 0 + 1e30)):
        with pytest.raises(FloatingPointError, match="log-likelihood of its own actions is not "
                                                     'finite in float32 for task 0'):
            algo.adapt_many([theta], bad, 1)
    _, huge_step = make_algo('LVCVPG', meta_batch_size=2, episodes_per_task=1, inner_lr=3e38)
    with pytest.raises(FloatingPointError, match=r'the inner step of task slot 0 made the adapted '
                                                 r'policy parameters non-finite.*inner step size '
                                                 r'is likely too large'):
        huge_step.adapt_many([theta], episodes, 1)
    nan = {k: v * float('nan') for k, v in theta.items()}
    with pytest.raises(ValueError, match=r'params\[0\] must be finite'):
        algo.adapt_many([nan], episodes, 1)
    with pytest.raises(ValueError, match=r'params\[0\] must hold .* in float32'):
        algo.adapt_many([{k: v.double() for k, v in theta.items()}], episodes, 1)
    adapted = algo.adapt_many([theta], episodes, 1)[0]
    assert all(bool(torch.isfinite(v).all()) for v in adapted.values())
    assert any(not torch.equal(adapted[k], theta[k]) for k in theta)


# ------------------------------------------------------------------ baselines
@pytest.mark.parametrize('baseline', [LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline])
def test_baselines_predict_zero_on_padding_and_refuse_masks_that_do_not_fit(baseline):
    """'Predictions (R, T), 0 on padding' held only for finite padding; a mask of 2s scaled
    the predictions and a NaN one made them NaN; shapes that differ failed in numpy."""
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(3, HORIZON, 2)), rng.normal(size=(3, HORIZON)), \
        np.ones((3, HORIZON))
    obs[0, -1], mask[0, -1] = np.nan, 0.
    predictions = baseline().fit_predict(obs, targets, mask)
    assert predictions[0, -1] == 0 and np.isfinite(predictions).all()
    for bad, message in ((mask * 2, 'only 0 and 1'), (mask * np.nan, 'only 0 and 1'),
                         (mask[:2], r'observations \(R, T, O\), a mask \(R, T\)')):
        with pytest.raises(ValueError, match=message):
            baseline().fit_predict(obs, targets, bad)
    with pytest.raises(ValueError, match='targets'):
        baseline().fit_predict(obs, targets[:, :2], mask)


@pytest.mark.parametrize('value', [np.complex128(0.1 + 0.5j), torch.tensor(0.1 + 0.5j),
                                   [0.1 + 0.5j]], ids=['numpy', 'tensor', 'list'])
def test_a_complex_step_size_is_refused_as_such(value):
    """A numpy complex in an inner_lr dict was taken as its real part (a ComplexWarning);
    a scalar one was told to pass value.item(), which is refused too."""
    from garage_promp.policies import named_params
    _, algo = make_algo('LVCVPG')
    names = list(named_params(algo.policy))
    with pytest.raises(ValueError, match=f'inner_lr must be a real scalar .* for {names[0]}'):
        make_algo('LVCVPG', inner_lr={n: value if i == 0 else 0.1 for i, n in enumerate(names)})
    if not isinstance(value, list):
        with pytest.raises(ValueError, match=r'a real number, not a complex one'):
            make_algo('LVCVPG', inner_lr=value)


def test_sampler_takes_parameter_dicts_with_other_entries():
    """A state_dict's other entries (buffers) are not read by the worker's forward."""
    policy, sampler, updates, params = _sampler_and_tasks()
    extra = dict(params, **{'some_buffer': torch.zeros(2)})
    assert len(sampler.obtain_meta_batch(updates, [extra] * 2, 1).lengths) == 2
    del policy


def test_an_adapted_policy_casts_parameters_of_another_dtype():
    """AdaptedPolicy copies the values in (its own module's dtype), as it always did."""
    from garage_promp.policies import AdaptedPolicy
    env = ShortPointEnv()
    policy = GaussianMLPPolicy(env.spec, hidden_sizes=(8, ))
    doubled = {k: v.detach().double() for k, v in policy.named_parameters()}
    adapted = AdaptedPolicy(policy, doubled, 1)
    assert all(v.dtype == torch.float32 for v in adapted.adapted_params().values())


def test_a_ragged_step_size_list_is_refused_naming_inner_lr():
    """numpy's own 'inhomogeneous shape' error, naming nothing, escaped the check."""
    from garage_promp.policies import named_params
    _, algo = make_algo('LVCVPG')
    names = list(named_params(algo.policy))
    with pytest.raises(ValueError, match=f'inner_lr must be a real scalar .* for {names[0]}'):
        make_algo('LVCVPG', inner_lr={n: [[0.1], [0.1, 0.2]] if i == 0 else 0.1
                                      for i, n in enumerate(names)})


def test_a_collapsed_sampling_gaussian_is_named_where_the_batch_is_made():
    """Log-likelihoods of -inf (a log-std of -100) reached optimize, which called the batch
    hand-built."""
    from garage_promp.algos._batch import process_episodes
    _, algo = make_algo('LVCVPG', meta_batch_size=2, episodes_per_task=1)
    episodes = algo.sample_meta_batch(0)[0].episodes
    infos = episodes.agent_infos
    narrow = _with(episodes, agent_infos=dict(infos, log_std=infos['log_std'] * 0 - 100))
    with pytest.raises(FloatingPointError, match=r"log-likelihood of its own actions is not "
                                                 r"finite .* for task 0 .*log-std -100\)"):
        process_episodes(narrow, 2, 1, HORIZON, algo._processing)


def test_seeds_up_to_2_31_minus_1_are_taken_everywhere_and_no_further():
    # The launchers' and build_experiment's range is the sampler's too (it had stopped
    # at 10^9, after the launchers had accepted the seed).
    from garage_promp.experiment import build_experiment
    from garage_promp.validation import MAX_SEED
    exp = build_experiment('ProMP', 'PointEnvCorner', MAX_SEED, meta_batch_size=2,
                           episodes_per_task=1, max_episode_length=3, n_test_tasks=None)
    try:
        batches = exp.algo.sample_meta_batch(0)
        assert batches[0].mask.shape[:2] == (2, 1)
    finally:
        exp.algo.sampler.shutdown_worker()
    env, policy, _, _ = make_setup(1)
    with pytest.raises(ValueError, match='seed must be an int in'):
        garage_promp.make_sampler(policy, env, seed=MAX_SEED + 1)


def test_the_device_given_twice_is_refused():
    from garage_promp.experiment import build_experiment
    with pytest.raises(ValueError, match=r"device is given twice, 'cuda' and "
                                         r"overrides\['device'\] = 'cpu'"):
        build_experiment('ProMP', 'PointEnvCorner', 1, device='cuda',
                         overrides={'device': 'cpu'}, n_test_tasks=None)


@pytest.mark.parametrize('env_class, task', [
    ('PointEnvCorner', np.array([2 + 5j, 2 - 7j])),
    ('PointEnvMomentum', [2 + 5j, 2.]),
    ('PointEnv1D', np.array(-1 + 0j)),
    ('PointEnv1D', 1 + 0j),
    ('AntRandGoalEnv', np.array([1 + 1j, 0.])),
    ('AntRandDirecEnv', np.array([1 + 0j, 0.])),
])
def test_complex_tasks_are_refused_naming_the_task(env_class, task):
    # numpy's float conversion would drop the imaginary part with only a warning.
    env = getattr(garage_promp.envs, env_class)()
    try:
        with pytest.raises(ValueError, match=r'task \w+ should be .*: a complex number'):
            env.set_task(task)
    finally:
        env.close()


def test_complex_rand_params_are_refused():
    env = garage_promp.envs.HopperRandParamsEnv()
    try:
        task = env.sample_tasks(1)[0]
        task['body_mass'] = task['body_mass'] + 0j
        with pytest.raises(ValueError, match=r"(?s)task \['body_mass'\] .*a complex number"):
            env.set_task(task)
    finally:
        env.close()


@pytest.mark.parametrize('baseline', [LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline])
def test_baselines_take_real_numpy_arrays_only(baseline):
    obs, targets, mask = np.ones((2, 3, 4)), np.ones((2, 3)), np.ones((2, 3))
    for name, bad, message in (
            ('observations', obs + 1j, 'observations must hold real numbers, got dtype complex'),
            ('observations', torch.ones(2, 3, 4), 'observations is a torch.Tensor'),
            ('targets', targets.tolist(), 'targets is a builtins.list'),
            ('mask', mask.astype(object), 'mask must hold real numbers, got dtype object')):
        args = dict(dict(observations=obs, targets=targets, mask=mask), **{name: bad})
        with pytest.raises(ValueError, match=message):
            baseline().fit(args['observations'], args['targets'], args['mask'])


def test_a_fitted_linear_baseline_refuses_to_predict_on_nan_observations():
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5)), np.ones((2, 5))
    baseline = LinearFeatureBaseline()
    baseline.fit(obs, targets, mask)
    obs[1, 2, 0] = np.nan
    with pytest.raises(FloatingPointError, match='predict on NaN/inf observations'):
        baseline.predict(obs, mask)
    mask[1, 2:] = 0  # on padding, NaN observations are predicted 0, as before
    assert np.isfinite(baseline.predict(obs, mask)).all()


@pytest.mark.parametrize('bad', ['observation', 'return'])
@pytest.mark.parametrize('solver', ['lstsq', 'cholesky'])
def test_a_linear_baseline_refuses_to_fit_on_one_nan(bad, solver):
    """One NaN on a valid step, in the observations or in the returns alone, is named
    before any solve; on padding it is ignored."""
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5)), np.ones((2, 5))
    (obs[1, 2, 0:1] if bad == 'observation' else targets[1, 2:3])[0] = np.nan
    with pytest.raises(FloatingPointError, match='fit on NaN/inf observations or returns'):
        LinearFeatureBaseline(solver=solver).fit(obs, targets, mask)
    mask[1, 2:] = 0
    assert np.isfinite(LinearFeatureBaseline(solver=solver).fit_predict(obs, targets, mask)).all()


@pytest.mark.parametrize('prefix', [5, '', None])
def test_meta_evaluator_prefix_must_be_text_naming_a_group(prefix):
    """An empty prefix logged the meta-test's ``Average/...`` keys over training's own
    (the same keys, one row: the last written was kept, silently)."""
    env, _, _, task_sampler = make_setup(1)
    with pytest.raises(ValueError, match=r'prefix must be a non-empty str .*overwrite '
                                         rf"training's own; got {re.escape(repr(prefix))}"):
        MetaEvaluator(test_task_sampler=task_sampler, n_test_tasks=2, n_exploration_eps=1,
                      prefix=prefix)
    # One restored from a snapshot is not made: evaluate refuses it, before any sampling.
    _, algo = make_algo('LVCVPG')
    evaluator = MetaEvaluator(test_task_sampler=task_sampler, n_test_tasks=2,
                              n_exploration_eps=2)
    evaluator._prefix = prefix
    evaluator._test_task_sampler = None  # (sampling the test tasks would fail otherwise)
    with pytest.raises(ValueError, match=r'prefix must be a non-empty str'):
        evaluator.evaluate(algo)


# ------------------------------------------------- arguments named by their own names
@pytest.mark.parametrize('kwargs, error, match', [
    (dict(env=['PointEnvCorner']), TypeError, r"env must be a name \(a str\), got \['Point"),
    (dict(algo=['ProMP']), TypeError, r"algo must be a name \(a str\), got \['ProMP'\]"),
    (dict(sampler='Local'), ValueError, r"sampler must be one of \('local', .* got 'Local'"),
    (dict(sampler=None), ValueError, 'sampler must be one of .* got None'),
    (dict(evaluate_every=0), ValueError, 'evaluate_every must be an int >= 1, got 0'),
])
def test_build_experiment_names_its_own_arguments(kwargs, error, match):
    """A list for a name failed as an unhashable key; the sampler and the meta-test period
    were named by the names the sampler and the algorithm give them (kind,
    evaluate_every_n_epochs)."""
    from garage_promp.experiment.builder import build_experiment  # pylint: disable=import-outside-toplevel
    arguments = dict(dict(algo='ProMP', env='PointEnvCorner', seed=1), **kwargs)
    with pytest.raises(error, match=match):
        build_experiment(arguments.pop('algo'), arguments.pop('env'), arguments.pop('seed'),
                         **arguments)


def test_a_sampler_refuses_tasks_or_parameters_that_are_not_a_list():
    env, policy, sampler, task_sampler = make_setup(1)
    tasks = task_sampler.sample(2)
    theta = dict(policy.named_parameters())
    with pytest.raises(TypeError, match='task_updates must be a list .* got generator'):
        sampler.obtain_meta_batch((t for t in tasks), [theta] * 2, 1)
    with pytest.raises(TypeError, match='params must be a list .* got set'):
        sampler.obtain_rounds(tasks, {1, 2}, [1])
    assert len(sampler.obtain_meta_batch(tuple(tasks), [theta] * 2, 1).lengths) == 2
    # A sized, ordered collection pairs with the tasks; the rounds are only iterated.
    by_task = {0: theta, 1: theta}
    rounds = sampler.obtain_rounds(tasks, by_task.values(), (r for r in [1]))
    assert len(rounds) == 1 and len(rounds[0].lengths) == 2
    sampler.shutdown_worker()


def test_meta_evaluator_refuses_what_is_not_an_algorithm():
    evaluator = MetaEvaluator(test_task_sampler=SetTaskSampler(ShortPointEnv), n_test_tasks=1,
                              n_exploration_eps=1, n_test_episodes=1)
    with pytest.raises(TypeError, match='algo must be a meta-RL algorithm .* got NoneType'):
        evaluator.evaluate(None)


def test_a_linear_baseline_refuses_observations_of_another_size_and_array_subclasses():
    rng = np.random.default_rng(0)
    obs, targets, mask = rng.normal(size=(2, 5, 2)), rng.normal(size=(2, 5)), np.ones((2, 5))
    baseline = LinearFeatureBaseline()
    baseline.fit(obs, targets, mask)
    with pytest.raises(ValueError, match=r'fit on observations of another size: 10 features .* '
                                         r'\(R, T, 3\), 8 fitted'):
        baseline.predict(rng.normal(size=(2, 5, 3)), mask)
    with pytest.raises(ValueError, match='targets is a numpy.matrix'):
        baseline.fit(obs, np.matrix(targets), mask)
    with pytest.raises(ValueError, match='observations is a numpy.ma.core.MaskedArray'):
        baseline.fit(np.ma.masked_array(obs), targets, mask)
    assert baseline.predict(obs, mask).shape == (2, 5)
