"""Sampling task by task between rounds gives the batches of whole-round processing."""
import dataclasses

from garage_promp.algos._batch import MetaBatch, check_finite, process_episodes
from garage_promp.policies import expand_params, named_params

from garage import EpisodeBatch
import pytest
import torch

from tests.helpers import make_algo

CASES = {
    'ProMP': dict(),
    'TRPOMAML': dict(inner_estimator='maml', exploration=True),  # E-MAML's mean_std_reward
    'DiCEVPG': dict(),  # dice_rewards
}


@pytest.mark.parametrize('name', CASES)
def test_pipelined_batches_equal_whole_round_processing(name):
    _, algo = make_algo(name, meta_batch_size=4, episodes_per_task=3,
                        setup_kwargs=dict(n_workers=2, kind='multiprocessing'), **CASES[name])
    try:
        batches = algo.sample_meta_batch(0)
    finally:
        algo.sampler.shutdown_worker()
    assert len(batches) == algo.num_inner_grad_steps + 1
    for batch in batches:
        whole = process_episodes(batch.episodes, 4, 3, algo._horizon, algo._processing)
        for field in dataclasses.fields(MetaBatch):
            ours, theirs = getattr(batch, field.name), getattr(whole, field.name)
            if isinstance(theirs, torch.Tensor):
                assert torch.equal(ours, theirs), field.name
            elif theirs is None:
                assert ours is None, field.name
    # The post-update round was sampled at the inner step of the whole round 0.
    theta = _theta(algo)
    adapted = algo._inner_step(expand_params(theta, 4), batches[0], False)
    mean, _ = algo._dist(adapted, batches[1])
    mask = batches[1].mask.unsqueeze(-1)
    torch.testing.assert_close(mean * mask, batches[1].old_mean * mask, rtol=1e-5, atol=1e-5)


def _theta(algo):
    return {k: v.detach() for k, v in named_params(algo.policy).items()}


def test_a_non_finite_value_names_the_tasks_meta_batch_slot():
    """Processed one task at a time, a NaN still names the task's own slot."""
    _, algo = make_algo('ProMP', meta_batch_size=3, episodes_per_task=2)
    episodes = algo.sample_meta_batch(0)[0].episodes
    task_2 = episodes.split()[4:]  # its two episodes
    bad = EpisodeBatch.concatenate(*task_2)
    bad.actions[1, 0] = float('nan')
    with pytest.raises(ValueError, match='in actions sampled from the environment, task 2 of'):
        check_finite(bad, 2, first_task=2)
