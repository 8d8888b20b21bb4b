"""The meta-update's device: CPU by default; a GPU gives the same update."""
import pytest
import torch

from tests.helpers import make_algo

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason='needs a CUDA GPU (torch.cuda.is_available() is False)')


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the refusal on a machine without GPU')
def test_cuda_without_a_gpu_is_refused_by_name():
    with pytest.raises(ValueError, match=r"device='cuda' needs a CUDA GPU, but torch"):
        make_algo('ProMP', device='cuda')


def _update(name, device, **kwargs):
    """θ after one update on the same batches (same seed), and the batches' device."""
    _, algo = make_algo(name, device=device, **kwargs)
    batches = algo.sample_meta_batch(0)
    with algo._on_device():
        algo.optimize(0, [b.to(algo._learner_device) for b in batches])
    params = [p.detach() for p in algo.policy.parameters()]
    return torch.cat([p.flatten() for p in params]), {p.device.type for p in params}, algo


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML', 'LVCVPG', 'DiCEVPG'])
def test_cpu_update_keeps_everything_on_the_cpu(name):
    theta, devices, algo = _update(name, 'cpu')
    assert devices == {'cpu'} and torch.isfinite(theta).all()
    optimizer = getattr(algo, '_optimizer', None)
    if optimizer is not None:
        assert all(v.device.type == 'cpu' for state in optimizer.state.values()
                   for v in state.values() if torch.is_tensor(v))


@needs_gpu
@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML', 'LVCVPG', 'DiCEVPG'])
def test_gpu_update_equals_the_cpu_update(name):
    on_cpu, _, _ = _update(name, 'cpu')
    on_gpu, devices, algo = _update(name, 'cuda')
    assert devices == {'cpu'}  # θ comes back for sampling
    torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)
    # A second update starts from the moved-back state (Adam's moments too).
    batches = algo.sample_meta_batch(1)
    with algo._on_device():
        algo.optimize(1, [b.to(algo._learner_device) for b in batches])
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())
