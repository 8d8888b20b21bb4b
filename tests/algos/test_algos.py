"""Every algorithm through garage's Trainer, MetaEvaluator and snapshots."""
import math
import os

import garage_promp
from garage_promp.experiment import relative_std, sample_meta_gradients
from garage_promp.policies import AdaptedPolicy

from garage import EpisodeBatch, wrap_experiment
from garage.trainer import Trainer
import numpy as np
import pytest
import torch

from tests.helpers import ALGOS, LongPointEnv, make_algo, make_setup

ALGO_NAMES = sorted(ALGOS)


def _train(tmp_path, algo, env, n_epochs, name='exp'):
    log_dir = str(tmp_path / name)
    out = {}

    @wrap_experiment(log_dir=log_dir, archive_launch_repo=False,
                     snapshot_mode='all', use_existing_dir=True)
    def run(ctxt=None):
        trainer = Trainer(ctxt)
        trainer.setup(algo, env)
        out['return'] = trainer.train(n_epochs=n_epochs, batch_size=1)

    run()
    return log_dir, out['return']


def _progress(log_dir):
    import csv
    with open(os.path.join(log_dir, 'progress.csv')) as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize('name', ALGO_NAMES)
def test_two_epochs_with_meta_evaluator(tmp_path, name):
    env, algo = make_algo(name, evaluator=True, num_inner_grad_steps=2)
    log_dir, last_return = _train(tmp_path, algo, env, 2)
    assert math.isfinite(last_return)
    rows = _progress(log_dir)
    assert len(rows) == 2
    for row in rows:
        for key in ('LossBefore', 'LossAfter', 'KL', 'Entropy'):
            assert math.isfinite(float(row[f'GaussianMLPPolicy/{key}'])), key
        for k in range(3):
            assert math.isfinite(float(row[f'Step_{k}-AverageReturn']))
        assert math.isfinite(float(row['MetaTest/Average/AverageReturn']))
    assert rows[0].keys() == rows[1].keys()


@pytest.mark.parametrize('name', ALGO_NAMES)
def test_snapshot_restore_resume(tmp_path, name):
    env, algo = make_algo(name)
    log_dir, _ = _train(tmp_path, algo, env, 2)
    state = {k: v.clone() for k, v in algo.policy.state_dict().items()}
    resumed = {}

    @wrap_experiment(log_dir=str(tmp_path / 'resumed'),
                     archive_launch_repo=False, use_existing_dir=True)
    def resume(ctxt=None):
        trainer = Trainer(ctxt)
        trainer.restore(log_dir, from_epoch=1)
        restored = trainer._algo
        resumed['state'] = {
            k: v.clone() for k, v in restored.policy.state_dict().items()
        }
        resumed['algo'] = restored
        trainer.resume(n_epochs=4)
        resumed['epochs'] = trainer._stats.total_epoch

    resume()
    for key, value in state.items():
        assert torch.equal(resumed['state'][key], value), key
    restored = resumed['algo']
    assert resumed['epochs'] == 3
    assert restored is not algo
    optimizer = getattr(restored, '_optimizer', None)
    if optimizer is not None:
        # Adam moments survived (steps taken in 4 epochs, not 2).
        steps = [s['step'] for s in optimizer.state.values()]
        expected_per_epoch = getattr(restored, '_num_promp_steps', 1)
        assert all(float(s) == 4 * expected_per_epoch for s in steps)
        assert all(id(p) in {id(q) for q in restored.policy.parameters()}
                   for g in optimizer.param_groups for p in g['params'])
    assert restored._processing.baseline.coeffs is not None


def test_promp_restores_adaptive_inner_kl_coeff(tmp_path):
    env, algo = make_algo('ProMP', adaptive_inner_kl_penalty=True,
                          init_inner_kl_penalty=0.1)
    log_dir, _ = _train(tmp_path, algo, env, 2)
    coeff = algo.inner_kl_coeff.copy()
    assert not np.allclose(coeff, 0.1)
    from garage.experiment import Snapshotter
    saved = Snapshotter().load(log_dir, 'last')
    np.testing.assert_array_equal(saved['algo'].inner_kl_coeff, coeff)


def test_adapt_policy_leaves_meta_policy_and_counts_steps():
    env, algo = make_algo('LVCVPG', num_inner_grad_steps=2)
    before = {k: v.clone() for k, v in algo.policy.state_dict().items()}
    batches = algo.sample_meta_batch(0)
    episodes = batches[0].episodes
    first = episodes.split()[:2]
    from garage import EpisodeBatch
    eps = EpisodeBatch.concatenate(*first)
    explore = algo.get_exploration_policy()
    assert isinstance(explore, AdaptedPolicy) and explore.num_steps == 0
    one = algo.adapt_policy(explore, eps)
    two = algo.adapt_policy(one, eps)
    assert (one.num_steps, two.num_steps) == (1, 2)
    for key, value in algo.policy.state_dict().items():
        assert torch.equal(value, before[key]), key
    p1, p2 = one.adapted_params(), two.adapted_params()
    assert any(not torch.equal(p1[k], p2[k]) for k in p1)
    assert any(not torch.equal(p1[k], before[k]) for k in p1)
    obs = torch.zeros(1, env.spec.observation_space.flat_dim)
    assert not torch.equal(one(obs)[0].mean, two(obs)[0].mean)


class _WithoutAdaptMany:
    """An algorithm seen without ``adapt_many`` or a ``MetaSampler``, as a third-party one."""

    def __init__(self, algo):
        self._algo = algo

    def __getattr__(self, name):
        if name in ('adapt_many', 'sampler'):
            raise AttributeError(name)
        return getattr(self._algo, name)


@pytest.mark.parametrize('batched', [True, False])
def test_meta_evaluator_adapts_k_times(batched):
    env, algo = make_algo('LVCVPG', num_inner_grad_steps=3)
    calls = []
    if batched:  # one round per inner step; each task adapts as soon as it is back
        adapt_many = algo.adapt_many

        def counting_many(params, episodes, episodes_per_task):
            calls.append(len(params))
            return adapt_many(params, episodes, episodes_per_task)

        algo.adapt_many = counting_many
        expected = [1] * 6  # 2 tasks × 3 inner steps
    else:  # adapt_policy task by task
        adapt = algo.adapt_policy

        def counting(policy, episodes):
            calls.append(policy.num_steps)
            return adapt(policy, episodes)

        algo.adapt_policy = counting
        algo = _WithoutAdaptMany(algo)
        expected = [0, 1, 2, 0, 1, 2]  # task by task: K steps of one task, then the next
    evaluator = garage_promp.MetaEvaluator(
        test_task_sampler=algo._task_sampler, n_test_tasks=2,
        n_exploration_eps=2, n_test_episodes=1)
    evaluator.evaluate(algo)
    assert calls == expected


def test_adapt_many_equals_adapt_policy_task_by_task():
    env, algo = make_algo('ProMP')
    batches = algo.sample_meta_batch(0)
    episodes = batches[0].episodes
    theta = dict(algo.policy.named_parameters())
    together = algo.adapt_many([theta] * 3, episodes, 2)
    singles = episodes.split()
    for i in range(3):
        alone = algo.adapt_policy(algo.get_exploration_policy(),
                                  EpisodeBatch.concatenate(*singles[2 * i:2 * i + 2]))
        for name, value in alone.adapted_params().items():
            torch.testing.assert_close(together[i][name], value)
        assert not torch.equal(together[i][name], theta[name].detach())


@pytest.mark.parametrize('name', ALGO_NAMES)
def test_step_is_deterministic_for_a_seed(name):
    results = []
    for _ in range(2):
        _, algo = make_algo(name, seed=7)
        batches = algo.sample_meta_batch(0)
        algo.optimize(0, batches)
        results.append(
            (batches[-1].rewards.clone(),
             torch.cat([p.detach().reshape(-1)
                        for p in algo.policy.parameters()])))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])


def test_per_parameter_inner_lr_and_learn_std_off():
    _, policy, _, _ = make_setup(learn_std=False)
    lrs = {name: torch.full_like(p, 0.05)
           for name, p in policy.named_parameters()}
    _, algo = make_algo('ProMP', inner_lr=lrs,
                        setup_kwargs=dict(learn_std=False))
    assert all('_init_std' not in n for n, _ in algo.policy.named_parameters())
    batches = algo.sample_meta_batch(0)
    algo.optimize(0, batches)
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())


def test_sample_meta_gradients_shape_and_policy_untouched():
    _, algo = make_algo('LVCVPG')
    before = [p.detach().clone() for p in algo.policy.parameters()]
    adam_state = {k: dict(v) for k, v in algo._optimizer.state.items()}
    grads = sample_meta_gradients(algo, 3)
    n_params = sum(p.numel() for p in algo.policy.parameters())
    assert grads.shape == (3, n_params)
    assert torch.isfinite(grads).all()
    assert not torch.equal(grads[0], grads[1])
    for p, b in zip(algo.policy.parameters(), before):
        assert torch.equal(p.detach(), b)
    assert {k: dict(v) for k, v in algo._optimizer.state.items()} == adam_state
    assert relative_std(grads.numpy()) > 0
    with pytest.raises(ValueError, match='n_rounds'):
        sample_meta_gradients(algo, 1)


def test_relative_std_by_hand():
    grads = np.array([[1., -2.], [3., -2.]])
    # std/|mean| per param: (1 / 2, 0 / 2) -> mean 0.25
    assert relative_std(grads) == pytest.approx(0.25, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('name, kwargs', [('ProMP', dict(learning_rate=1e-2)),
                                          ('TRPOMAML', {})])
def test_post_update_return_improves(tmp_path, name, kwargs):
    """15 epochs on a 20-step point env: post-update return and the gain of
    adaptation (post − pre) both rise from the first to the last 5 epochs."""
    env, algo = make_algo(name, seed=3, meta_batch_size=10,
                          episodes_per_task=5,
                          setup_kwargs=dict(hidden_sizes=(32, 32),
                                            env_class=LongPointEnv),
                          **kwargs)
    log_dir, _ = _train(tmp_path, algo, env, 15)
    rows = _progress(log_dir)
    pre = np.array([float(r['Step_0-AverageReturn']) for r in rows])
    post = np.array([float(r['Step_1-AverageReturn']) for r in rows])
    assert post[-5:].mean() > post[:5].mean() + 1, post
    gain = post - pre
    assert gain.mean() > 0, gain
    assert gain[-5:].mean() > gain[:5].mean(), gain


def test_learner_uses_its_threads_only_while_workers_wait(monkeypatch):
    import garage_promp._threads as threads
    seen = []
    optimize = garage_promp.ProMP.optimize

    def spy(self, itr, batches):
        seen.append(torch.get_num_threads())
        return optimize(self, itr, batches)

    monkeypatch.setattr(garage_promp.ProMP, 'optimize', spy)
    before = torch.get_num_threads()
    env, algo = make_algo('ProMP', learner_threads=3)
    with threads.learner_threads(3):
        assert torch.get_num_threads() == 3
    assert torch.get_num_threads() == before
    algo._train_once(0, 0, algo.sample_meta_batch(0))
    assert seen == [3] and torch.get_num_threads() == before


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_meta_test_adapts_on_the_threads_training_adapts_on_and_restores_them(monkeypatch,
                                                                              kind):
    """Not the outer step's learner_threads (3 here): the adapted policy would depend on them."""
    _, algo = make_algo('ProMP', evaluator=True, learner_threads=3,
                        setup_kwargs=dict(kind=kind, n_workers=2))
    seen = []
    inner_step = algo._inner_step

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return inner_step(*args, **kwargs)

    monkeypatch.setattr(algo, '_inner_step', spy)
    before = torch.get_num_threads()
    try:
        batches = algo.sample_meta_batch(0)  # training's inner steps
        training = set(seen)
        assert len(training) == 1 and torch.get_num_threads() == before
        seen.clear()
        algo._meta_evaluator.evaluate(algo)  # meta-test, pipelined through the sampler
        algo.adapt_policy(algo.get_exploration_policy(), batches[0].episodes)  # garage's API
        assert seen and set(seen) == training
        assert torch.get_num_threads() == before

        def failing(*args, **kwargs):
            seen.append(torch.get_num_threads())
            raise RuntimeError('inner step failed')

        monkeypatch.setattr(algo, '_inner_step', failing)
        seen.clear()
        with pytest.raises(RuntimeError, match='inner step failed'):
            algo.adapt_many([dict(algo.policy.named_parameters())], batches[0].episodes, 6)
        assert set(seen) == training and torch.get_num_threads() == before
    finally:
        algo.sampler.shutdown_worker()


def test_default_learner_threads_leave_an_in_process_run_alone(monkeypatch):
    import garage_promp._threads as threads
    monkeypatch.setattr(threads, 'available_cores', lambda: 7)
    monkeypatch.setattr('garage_promp.algos.device.available_cores', lambda: 7)
    _, local = make_algo('LVCVPG')
    assert local._learner_thread_count() == torch.get_num_threads()
    _, pool = make_algo('LVCVPG', setup_kwargs=dict(kind='multiprocessing', n_workers=2))
    assert pool._learner_thread_count() == 7


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
def test_a_non_finite_inner_step_is_blamed_not_the_env(kind):
    """inner_lr=1e30 makes the adapted policy non-finite: the error names the inner step."""
    _, algo = make_algo('LVCVPG', inner_lr=1e30, setup_kwargs=dict(kind=kind, n_workers=2))
    try:
        with pytest.raises(FloatingPointError, match=r'(inner step 1 of task slot \d+ made the '
                                                     r'adapted policy parameters non-finite)|'
                                                     r'(the policy gave a non-finite action .*'
                                                     r'inner step size)'):
            algo.sample_meta_batch(0)
    finally:
        algo.sampler.shutdown_worker()
