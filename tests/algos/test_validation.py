"""Every constructor argument is validated with a ValueError naming it."""
import fractions

import garage_promp
from garage_promp.baselines import LinearFeatureBaseline

import akro
from garage import EnvSpec
import numpy as np
import pytest
import torch

from tests.helpers import make_algo, make_setup

COMMON_BAD = [
    ('meta_batch_size', 0), ('meta_batch_size', 2.5), ('episodes_per_task', 0),
    ('num_inner_grad_steps', 0), ('inner_lr', 0.), ('inner_lr', -0.1),
    ('inner_lr', True), ('inner_lr', {'nope': 0.1}), ('discount', 0.),
    ('discount', 1.5), ('gae_lambda', -0.1), ('gae_lambda', 1.1),
    ('evaluate_every_n_epochs', 0), ('baseline', 'linear'),
    ('learner_threads', 0), ('learner_threads', True), ('learner_threads', 1.5),
]
ALGO_BAD = {
    'ProMP': [('learning_rate', 0.), ('learning_rate', 1e39), ('learning_rate', 1e-50),
              ('target_inner_step', 1e39), ('init_inner_kl_penalty', 1e39),
              ('num_promp_steps', 0), ('num_minibatches', 0),
              ('num_minibatches', 4), ('clip_eps', 0.), ('target_inner_step', 0.),
              ('init_inner_kl_penalty', -1.), ('anneal_factor', 0.),
              ('anneal_factor', 1.5)],
    'TRPOMAML': [('max_kl_step', 0.), ('inner_estimator', 'magic'), ('cg_iters', 0),
                 ('backtrack_ratio', 1.), ('max_backtracks', 0),
                 ('hvp_approach', 'guess'), ('fd_eps', 0.), ('cg_damping', -1.),
                 ('max_kl_step', 1e39), ('fd_eps', 1e-50), ('cg_damping', 1e39)],
    'LVCVPG': [('learning_rate', -1.), ('learning_rate', 1e39)],
}
CASES = ([('LVCVPG', arg, value) for arg, value in COMMON_BAD] +
         [(algo, arg, value) for algo, bad in ALGO_BAD.items() for arg, value in bad])


@pytest.mark.parametrize('algo, arg, value', CASES)
def test_bad_argument_raises_value_error_naming_it(algo, arg, value):
    with pytest.raises(ValueError, match=arg):
        make_algo(algo, **{arg: value})


def test_promp_takes_as_many_minibatches_as_tasks():
    """``num_minibatches`` up to ``meta_batch_size`` (3 here; 4 is refused above): one
    task a minibatch."""
    _, algo = make_algo('ProMP', num_minibatches=3)
    assert algo._meta_batch_size == 3 and algo._num_minibatches == 3


def test_promp_refuses_a_zero_eta_only_when_the_adaptive_rule_would_scale_it():
    """The adaptive η rule halves or doubles η_k (the reference's ``pro_mp.py``): from 0
    it would stay 0, so asking for the rule with η = 0 is refused; a fixed η = 0 (no KL
    penalty) is accepted."""
    with pytest.raises(ValueError, match='init_inner_kl_penalty must be > 0 with '
                                         'adaptive_inner_kl_penalty=True'):
        make_algo('ProMP', init_inner_kl_penalty=0., adaptive_inner_kl_penalty=True)
    _, fixed = make_algo('ProMP', init_inner_kl_penalty=0., adaptive_inner_kl_penalty=False)
    assert fixed.inner_kl_coeff.tolist() == [0.]
    _, adaptive = make_algo('ProMP', init_inner_kl_penalty=1e-3, adaptive_inner_kl_penalty=True)
    assert adaptive.inner_kl_coeff.tolist() == [1e-3]


def test_per_parameter_inner_lr_shape_and_sign_are_checked():
    _, policy, _, _ = make_setup()
    good = {n: 0.1 for n, _ in policy.named_parameters()}
    name = next(iter(good))
    with pytest.raises(ValueError, match='inner_lr'):
        make_algo('LVCVPG', inner_lr={**good, name: torch.ones(7, 7)})
    with pytest.raises(ValueError, match='inner_lr'):
        make_algo('LVCVPG', inner_lr={**good, name: -1.})


def _spec(action_space):
    return EnvSpec(akro.Box(-1, 1, (2, ), dtype=np.float32), action_space, 5)


@pytest.mark.parametrize('action_space, match', [
    (akro.Discrete(3), 'Box action space'),
    (akro.Box(-np.inf, np.inf, (2, ), dtype=np.float32), 'bounded action space'),
])
def test_bad_env_spaces_are_rejected(action_space, match):
    env, policy, sampler, task_sampler = make_setup()

    class _Env:
        spec = _spec(action_space)

    with pytest.raises(ValueError, match=match):
        garage_promp.ProMP(_Env(), policy, sampler, task_sampler)


def test_env_without_finite_horizon_is_rejected():
    env, policy, sampler, task_sampler = make_setup()

    class _Env:
        spec = EnvSpec(env.spec.observation_space, env.spec.action_space, None)

    with pytest.raises(ValueError, match='max_episode_length'):
        garage_promp.ProMP(_Env(), policy, sampler, task_sampler)


def test_wrong_sampler_and_task_sampler_are_rejected():
    from garage.sampler import LocalSampler
    env, policy, sampler, task_sampler = make_setup()
    plain = LocalSampler(agents=policy, envs=env, max_episode_length=5, n_workers=1)
    with pytest.raises(ValueError, match='MetaSampler'):
        garage_promp.ProMP(env, policy, plain, task_sampler)
    with pytest.raises(ValueError, match='task_sampler'):
        garage_promp.ProMP(env, policy, sampler, object())
    with pytest.raises(ValueError, match='policy'):
        garage_promp.ProMP(env, 'policy', sampler, task_sampler)
    with pytest.raises(ValueError, match='kind'):
        garage_promp.make_sampler(policy, env, kind='threads')
    with pytest.raises(ValueError, match='n_workers'):
        garage_promp.make_sampler(policy, env, n_workers=0)


def test_meta_batch_smaller_than_worker_count_is_split_by_episodes():
    # One task, two workers: each samples one of its episodes.
    _, algo = make_algo('LVCVPG', meta_batch_size=1, episodes_per_task=2,
                        setup_kwargs=dict(n_workers=2))
    batches = algo.sample_meta_batch(0)
    assert batches[0].n_tasks == 1 and len(batches[0].episodes.lengths) == 2


def test_nan_reward_from_env_names_field_and_task():
    _, algo = make_algo('LVCVPG')
    batches = algo.sample_meta_batch(0)
    episodes = batches[0].episodes
    rewards = episodes.rewards.copy()
    rewards[7] = np.nan
    from garage_promp.algos._batch import process_episodes
    bad = type(episodes)(episode_infos=episodes.episode_infos_by_episode, **{
        **{f: getattr(episodes, f) for f in (
        'env_spec', 'observations', 'last_observations', 'actions',
        'env_infos', 'agent_infos', 'step_types', 'lengths')}, 'rewards': rewards})
    with pytest.raises(ValueError, match=r'rewards.*task 0'):
        process_episodes(bad, 3, 2, 5, algo._processing)


def test_nan_meta_loss_skips_steps_then_raises():
    _, algo = make_algo('LVCVPG')
    before = [p.detach().clone() for p in algo.policy.parameters()]
    for _ in range(algo.MAX_CONSECUTIVE_NAN_STEPS - 1):
        assert not algo._adam_step(algo._optimizer, torch.tensor(float('nan')))
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    with pytest.raises(FloatingPointError, match='NaN'):
        algo._adam_step(algo._optimizer, torch.tensor(float('nan')))


def test_an_outer_step_that_overflows_the_parameters_is_undone_then_blamed():
    """A finite gradient times a huge learning rate gives inf parameters: the step is
    undone and counted, and after MAX_CONSECUTIVE_NAN_STEPS the error names the rate."""
    _, algo = make_algo('LVCVPG')  # (the constructor refuses a rate that is inf in float32)
    _huge_learning_rate(algo, 1e308)
    before = [p.detach().clone() for p in algo.policy.parameters()]
    loss = sum((p ** 2).sum() for p in algo.policy.parameters())  # finite, grads finite
    for _ in range(algo.MAX_CONSECUTIVE_NAN_STEPS - 1):
        assert not algo._adam_step(algo._optimizer, loss.clone())
        loss = sum((p ** 2).sum() for p in algo.policy.parameters())
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    assert not algo._optimizer.state  # Adam's moments and step count undone too
    with pytest.raises(FloatingPointError, match=r'the outer step .*learning_rate=1e\+308'):
        algo._adam_step(algo._optimizer, loss)


def _huge_learning_rate(algo, value):
    """Set the optimiser's rate as a Python caller can, past the constructor's check."""
    for group in algo._optimizer.param_groups:
        group['lr'] = value
    algo._learning_rate = value


def test_an_outer_step_whose_policy_overflows_its_likelihoods_is_undone_then_blamed():
    """Finite but huge parameters (a rate of 1e30) give means whose distance to the
    sampled actions overflows: at the probe (each task's first step of the batch being
    optimised) the log-likelihood is not finite, so the step is undone and counted like
    an overflowing one; without the probe the step would stand."""
    _, algo = make_algo('LVCVPG')
    _huge_learning_rate(algo, 1e30)
    batch = algo.sample_meta_batch(0)[0]
    before = [p.detach().clone() for p in algo.policy.parameters()]
    loss = sum((p ** 2).sum() for p in algo.policy.parameters())
    algo._probe = (batch.observations[:, 0, 0], batch.actions[:, 0, 0])
    for _ in range(algo.MAX_CONSECUTIVE_NAN_STEPS - 1):
        assert not algo._adam_step(algo._optimizer, loss.clone())
        loss = sum((p ** 2).sum() for p in algo.policy.parameters())
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    with pytest.raises(FloatingPointError, match="likelihood of sampled actions.*1e\\+30"):
        algo._adam_step(algo._optimizer, loss)
    algo._probe = None
    algo._consecutive_nan_steps = 0
    loss = sum((p ** 2).sum() for p in algo.policy.parameters())
    assert algo._adam_step(algo._optimizer, loss)  # finite parameters: taken
    assert max(float(p.abs().max()) for p in algo.policy.parameters()) > 1e29


def test_baseline_rejects_bad_reg_coeff_and_nan_fit():
    with pytest.raises(ValueError, match='reg_coeff'):
        LinearFeatureBaseline(reg_coeff=0.)
    obs = np.full((2, 3, 1), np.nan)
    with pytest.raises(FloatingPointError, match='NaN'):
        LinearFeatureBaseline().fit(obs, np.ones((2, 3)), np.ones((2, 3)))


def test_promp_counts_a_non_finite_batch_once(monkeypatch):
    from garage_promp.algos.meta_objective import MetaObjective
    _, algo = make_algo('ProMP', num_promp_steps=5)
    batches = algo.sample_meta_batch(0)
    real = algo.meta_objective

    def nan_objective(*args, **kwargs):
        meta = real(*args, **kwargs)
        return MetaObjective(meta.objective * float('nan'), meta.kl, meta.stats)

    monkeypatch.setattr(algo, 'meta_objective', nan_objective)
    before = [p.detach().clone() for p in algo.policy.parameters()]
    for itr in range(algo.MAX_CONSECUTIVE_NAN_STEPS - 1):  # 4 bad batches: skipped
        algo.optimize(itr, batches)
    assert algo._consecutive_nan_steps == algo.MAX_CONSECUTIVE_NAN_STEPS - 1
    assert all(torch.equal(p.detach(), b) for p, b in zip(algo.policy.parameters(), before))
    with pytest.raises(FloatingPointError, match='consecutive epochs.*learning_rate=0.001'):
        algo.optimize(9, batches)


@pytest.mark.parametrize('sizes, culprit', [
    (dict(meta_batch_size=10 ** 7, episodes_per_task=10 ** 2), 'meta_batch_size=10,000,000'),
    (dict(num_inner_grad_steps=10 ** 8), r'sampling rounds \(num_inner_grad_steps \+ 1\)')])
def test_a_meta_batch_too_large_for_memory_is_refused_by_the_constructor(sizes, culprit):
    """Every sampling round of a meta-batch is kept for the outer update: their env steps
    together are refused over MAX_BATCH_STEPS, before anything is sampled."""
    with pytest.raises(ValueError, match=culprit + '.*fit in memory'):
        make_algo('LVCVPG', **sizes)


def test_check_float_in_float32_refuses_what_float32_cannot_hold():
    """A value that enters float32 arithmetic must be finite there, and keep an open
    bound once rounded: 1e39 is inf in float32 and 1e-50 is 0, so > 0 fails."""
    from garage_promp.validation import check_float
    assert check_float(1e38, 'x', 0., low_open=True, float32=True) == 1e38
    assert check_float(1e-40, 'x', 0., low_open=True, float32=True) == 1e-40  # subnormal > 0
    assert check_float(0., 'x', 0., float32=True) == 0.
    for value in (1e39, -1e39, 1e-50):
        with pytest.raises(ValueError, match='x must be a finite number.* in float32'):
            check_float(value, 'x', None if value < 0 else 0., low_open=value > 0,
                        float32=True)
    assert check_float(1e39, 'x', 0., low_open=True) == 1e39  # float64 work: allowed


@pytest.mark.parametrize('value', [10**400, -10**400, fractions.Fraction(10**400, 3), 10**5000,
                                   fractions.Fraction(10**5000, 3)],
                         ids=['10**400', '-10**400', 'fraction', '5000 digits',
                              '5000-digit fraction'])
def test_check_float_refuses_a_number_beyond_float_range_naming_it(value):
    """An int or fraction too large for a float (``float(10**400)`` raises OverflowError)
    is refused as any non-finite number is; one too long for ``repr`` (over 4,300 digits)
    is named by its size."""
    from garage_promp.validation import check_float
    with pytest.raises(ValueError, match=r'discount must be a finite number in \(0\.0, 1\.0\], '
                                         r'got (-?1000|Fraction|an int of 16,610 bits'
                                         r'|a Fraction holding a number too long)'):
        check_float(value, 'discount', 0., 1., low_open=True)
    with pytest.raises(ValueError, match='inner_lr'):
        make_algo('ProMP', inner_lr=value)


def test_optimize_refuses_batches_whose_fields_do_not_fit_their_layout_or_dtype():
    """Every tensor of every round must have its mask's (M, R, T) layout and the policy's
    dtype: a field cut to fewer tasks (an IndexError deep in the batch code before) or in
    float64 (a torch dtype error in the forward) is refused naming the round and field,
    θ untouched."""
    import dataclasses
    _, algo = make_algo('ProMP')
    batches = algo.sample_meta_batch(0)
    before = [p.detach().clone() for p in algo.policy.parameters()]
    cases = [
        ([batches[0], dataclasses.replace(batches[1], observations=batches[1].observations[:2])],
         r'batches\[1\].observations must be a tensor of shape \(3, 2, 5, .\?.\)'),
        ([batches[0], dataclasses.replace(batches[1], advantages=batches[1].advantages[:, :1])],
         r'batches\[1\].advantages must be a tensor of shape'),
        ([batches[0], dataclasses.replace(batches[1], mean_std_reward=None)],
         r'batches\[1\].mean_std_reward must be a tensor'),
        ([dataclasses.replace(batches[0], observations=batches[0].observations.double()),
          batches[1]], r'batches\[0\].observations must be torch.float32'),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            algo.optimize(0, bad)
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    algo.optimize(0, batches)  # the sampled rounds themselves pass


def _with(batch, name, edit):
    """``batch`` with its field ``name`` replaced by an edited copy."""
    import dataclasses
    value = getattr(batch, name).clone()
    edit(value)
    return dataclasses.replace(batch, **{name: value})


@pytest.mark.parametrize('label, options', [('ProMP', {}), ('LVCVPG', {}),
                                            ('TRPOMAML', dict(inner_estimator='dice'))],
                         ids=['ProMP', 'LVC-VPG', 'DiCE-TRPO'])
def test_optimize_refuses_values_no_sampling_gives_naming_the_first(label, options):
    """A NaN or inf anywhere in a round (the sampler refuses them from the env), a mask
    that is not 0/1, has padding before a valid step or gives a task no step: refused
    naming round, field and place, θ untouched. Before, a NaN was skipped and counted
    as if the step sizes had diverged, and an empty task gave NaN losses."""
    _, algo = make_algo(label, **options)
    batches = algo.sample_meta_batch(0)
    assert all(bool(b.mask[:, :, :2].all()) for b in batches)  # every episode has steps 0, 1
    before = [p.detach().clone() for p in algo.policy.parameters()]

    def put(index, value):
        return lambda tensor: tensor.__setitem__(index, value)

    cases = [
        (1, 'observations', put((2, 1, 0, 0), float('nan')),
         r'batches\[1\].observations holds nan at task 2, episode 1, step 0'),
        (0, 'advantages', put((1, 0, 0), float('-inf')),
         r'batches\[0\].advantages holds -inf at task 1, episode 0, step 0'),
        (1, 'old_log_std', put((0, 1, 0, 0), float('inf')),
         r'batches\[1\].old_log_std holds inf at task 0, episode 1, step 0'),
        (0, 'mean_std_reward', put(2, float('nan')),
         r'batches\[0\].mean_std_reward holds nan at task 2:'),
        (0, 'mask', put((0, 0, 0), 0.5), r'batches\[0\].mask must hold only 0 and 1, got 0.5'),
        (0, 'mask', lambda mask: (put((0, 0, 0), 0.)(mask), put((0, 0, 2), 0.25)(mask)),
         r'batches\[0\].mask must hold only 0 and 1, got 0.25'),  # (the first such, not a 0 or 1)
        (1, 'mask', put((1, 1, 0), 0.), r'batches\[1\].mask must mark each episode\'s steps '
         r'first.*task 1, episode 1 has a valid step 1 after padding at step 0'),
        (0, 'mask', put(2, 0.), r'batches\[0\].mask gives task 2 no valid step'),
    ]
    if options:
        cases.append((1, 'dice_rewards', put((0, 0, 0), float('nan')),
                      r'batches\[1\].dice_rewards holds nan at task 0, episode 0, step 0'))
    for k, name, edit, message in cases:
        bad = list(batches)
        bad[k] = _with(batches[k], name, edit)
        with pytest.raises(ValueError, match=message):
            algo.optimize(0, bad)
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    assert algo._consecutive_nan_steps == 0  # refused, not counted as a diverged step
    algo.optimize(0, batches)  # the sampled rounds themselves pass


def test_promp_refuses_a_meta_batch_of_fewer_tasks_than_minibatches_before_theta_moves():
    """``sample_meta_batch`` takes any tasks: a meta-batch of 1 task with
    ``num_minibatches=2`` gave an empty second minibatch, which failed inside torch after
    the first minibatch's Adam step had moved θ."""
    env, algo = make_algo('ProMP', num_minibatches=2)
    one = algo.sample_meta_batch(0, algo._task_sampler.sample(1))
    before = [p.detach().clone() for p in algo.policy.parameters()]
    with pytest.raises(ValueError, match=r'batches hold 1 task, fewer than num_minibatches '
                                         r'\(2\): a minibatch would have none'):
        algo.optimize(0, one)
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    algo.optimize(0, algo.sample_meta_batch(0, algo._task_sampler.sample(2)))  # 2 tasks: one each
    assert any(not torch.equal(p.detach(), b) for p, b in zip(algo.policy.parameters(), before))


def test_normalize_adv_on_one_step_task_batches_is_refused_before_any_sampling():
    """A task batch of one valid step has no spread to standardise the advantages by: the
    constructor refuses it for training, and the evaluator for its adaptation batches,
    before sampling (both failed inside the first sampling's processing)."""
    import functools

    from garage.envs import PointEnv
    one_step = functools.partial(PointEnv, max_episode_length=1)
    with pytest.raises(ValueError, match=r'normalize_adv=True .* episodes_per_task=1 x '
                                         r'max_episode_length=1 gives at most 1'):
        make_algo('LVCVPG', episodes_per_task=1, setup_kwargs=dict(env_class=one_step))
    env, algo = make_algo('LVCVPG', episodes_per_task=2, setup_kwargs=dict(env_class=one_step))
    evaluator = garage_promp.MetaEvaluator(test_task_sampler=algo._task_sampler, n_test_tasks=2,
                                           n_exploration_eps=1, n_test_episodes=1)
    sampled = []
    algo._sampler.obtain_rounds = lambda *a, **k: sampled.append(1)
    with pytest.raises(ValueError, match=r'n_exploration_eps=1 x max_episode_length=1'):
        evaluator.evaluate(algo)
    assert not sampled
    make_algo('LVCVPG', episodes_per_task=1, normalize_adv=False,
              setup_kwargs=dict(env_class=one_step))
    # An evaluator given to the constructor: refused there, not after training epochs.
    with pytest.raises(ValueError, match=r'meta_evaluator n_exploration_eps=1 x '
                                         r'max_episode_length=1'):
        make_algo('LVCVPG', episodes_per_task=2, setup_kwargs=dict(env_class=one_step),
                  meta_evaluator=evaluator)


def test_episodes_that_all_end_at_their_first_step_are_named_with_their_task():
    """With one episode per task (the constructor cannot know episodes end early), a task
    whose episode ends at its first step (a goal within one step of the start) leaves
    normalize_adv nothing to standardise: the error names the task and what to change."""
    from garage_promp.objectives import TooFewStepsError

    from garage.experiment.task_sampler import SetTaskUpdate

    from tests.helpers import ShortPointEnv
    _, algo = make_algo('LVCVPG', episodes_per_task=1)
    far, near = ({'goal': np.array(goal)} for goal in ([3., 3.], [0., 0.]))
    tasks = [SetTaskUpdate(ShortPointEnv, task, None) for task in (far, near, far)]
    with pytest.raises(TooFewStepsError, match=r'task 1 of the meta-batch: normalize_adv needs '
                                               r'at least 2 valid steps per task batch, got 1, '
                                               r'its episodes having ended at their first step'):
        algo.sample_meta_batch(0, tasks)


def test_a_0d_tensor_or_array_is_refused_saying_why():
    """Its printed value looks like a fine number: the message says it must be a scalar."""
    for arg, value in (('inner_lr', torch.tensor(0.1)), ('discount', np.array(0.99)),
                       ('meta_batch_size', np.array(3))):
        with pytest.raises(ValueError, match=rf'{arg}.*a Python or numpy scalar, not a 0-d'):
            make_algo('LVCVPG', **{arg: value})


@pytest.mark.parametrize('env', ['PointEnv', None, garage_promp.envs.PointEnvCorner],
                         ids=['a name', 'None', 'a class'])
def test_an_env_that_is_no_environment_is_named_as_such(env):
    """Not 'must have a flat Box observation space, got None' (the space looked up)."""
    setup_env, algo = make_algo('LVCVPG')
    with pytest.raises(ValueError, match='env must be a garage Environment .*, got'):
        garage_promp.make_sampler(algo.policy, env)
    from garage_promp.algos import LVCVPG
    with pytest.raises(ValueError, match='env must be a garage Environment'):
        LVCVPG(env, algo.policy, algo._sampler, algo._task_sampler, meta_batch_size=3,
               episodes_per_task=2)
