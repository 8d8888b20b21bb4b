"""The meta-update's device: CPU by default; a GPU gives the same update."""
import csv
import math
import pathlib

import garage_promp
from garage_promp.experiment.paper_config import ALGOS

from click.testing import CliRunner
import pytest
import torch

from tests.helpers import load_script, make_algo, make_setup

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason='needs a CUDA GPU (torch.cuda.is_available() is False)')


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the refusal on a machine without GPU')
def test_cuda_without_a_gpu_is_refused_by_name():
    with pytest.raises(ValueError, match=r"device='cuda' needs a CUDA GPU, but torch"):
        make_algo('ProMP', device='cuda')


def _step(algo, itr):
    """One update on freshly sampled batches, as ``train_once`` runs it."""
    batches = algo.sample_meta_batch(itr)
    with algo._on_device():
        algo.optimize(itr, [b.to(algo._learner_device) for b in batches])


def _first_update(algo):
    """θ after one update (flat), the devices of θ's tensors, and the algorithm."""
    _step(algo, 0)
    params = [p.detach() for p in algo.policy.parameters()]
    return torch.cat([p.flatten() for p in params]), {p.device.type for p in params}, algo


def _update(name, device, **kwargs):
    """θ after one update on the same batches (same seed), and the batches' device."""
    return _first_update(make_algo(name, device=device, **kwargs)[1])


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML', 'LVCVPG', 'DiCEVPG'])
def test_cpu_update_keeps_everything_on_the_cpu(name):
    theta, devices, algo = _update(name, 'cpu')
    assert devices == {'cpu'} and torch.isfinite(theta).all()
    optimizer = getattr(algo, '_optimizer', None)
    if optimizer is not None:
        assert all(v.device.type == 'cpu' for state in optimizer.state.values()
                   for v in state.values() if torch.is_tensor(v))


def _label_update(label, device):
    """θ after one update of the paper label ``label`` (tiny batch, same seed)."""
    env, policy, sampler, task_sampler = make_setup(1)
    return _first_update(garage_promp.make_algo(label, env, policy, sampler, task_sampler,
                                                meta_batch_size=3, episodes_per_task=2,
                                                device=device))


@needs_gpu
@pytest.mark.parametrize('label', sorted(ALGOS))
def test_gpu_update_equals_the_cpu_update(label):
    on_cpu, _, _ = _label_update(label, 'cpu')
    on_gpu, devices, algo = _label_update(label, 'cuda')
    assert devices == {'cpu'}  # θ comes back for sampling
    torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-4, atol=1e-5)
    # A second update starts from the moved-back state (Adam's moments too).
    _step(algo, 1)
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())


@needs_gpu
def test_launcher_trains_on_the_gpu_as_on_the_cpu(tmp_path):
    """Two epochs with --device cuda: the same rows as on the CPU, to float tolerance."""
    launcher = load_script(pathlib.Path(__file__).parents[2] / 'launchers' / 'train.py',
                           'train_launcher_gpu')
    rows = {}
    for device in ('cpu', 'cuda'):
        log_dir = tmp_path / device
        result = CliRunner().invoke(launcher.main, [
            '--algo', 'ProMP', '--env', 'PointEnvCorner', '--epochs', '2',
            '--meta-batch-size', '2', '--episodes-per-task', '2', '--max-episode-length', '4',
            '--n-test-tasks', '1', '--hidden-sizes', '4', '--device', device,
            '--log-dir', str(log_dir)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        with open(log_dir / 'progress.csv') as f:
            rows[device] = list(csv.DictReader(f))
    assert len(rows['cuda']) == len(rows['cpu']) == 2
    for key in ('Step_0-AverageReturn', 'Step_1-AverageReturn', 'GaussianMLPPolicy/LossAfter',
                'MetaTest/Average/AverageReturn'):
        for cpu_row, gpu_row in zip(rows['cpu'], rows['cuda']):
            assert math.isclose(float(gpu_row[key]), float(cpu_row[key]), rel_tol=1e-3,
                                abs_tol=1e-4), key
