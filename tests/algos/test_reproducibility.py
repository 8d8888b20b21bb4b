"""Same seed, same run; restore + resume continues exactly (every backend)."""
import csv
import os

from garage import wrap_experiment
from garage.trainer import Trainer
import pytest

from tests.helpers import make_algo


def _rows(log_dir):
    with open(os.path.join(log_dir, 'progress.csv')) as f:
        return list(csv.DictReader(f))


def _make(name, kind, workers=None):
    if workers is None:
        workers = 2 if kind == 'multiprocessing' else 1
    return make_algo(name, seed=3, evaluator=True, meta_batch_size=3,
                     setup_kwargs=dict(kind=kind, n_workers=workers))


def _train(log_dir, name, kind, n_epochs, workers=None):
    env, algo = _make(name, kind, workers)

    @wrap_experiment(log_dir=log_dir, archive_launch_repo=False,
                     snapshot_mode='all', use_existing_dir=True)
    def run(ctxt=None):
        trainer = Trainer(ctxt)
        trainer.setup(algo, env)
        trainer.train(n_epochs=n_epochs, batch_size=1)

    run()
    return _rows(log_dir)


def _resume(from_dir, log_dir, from_epoch, n_epochs):
    @wrap_experiment(log_dir=log_dir, archive_launch_repo=False,
                     snapshot_mode='all', use_existing_dir=True)
    def run(ctxt=None):
        trainer = Trainer(ctxt)
        trainer.restore(from_dir, from_epoch=from_epoch)
        trainer.resume(n_epochs=n_epochs)

    run()
    return _rows(log_dir)


def _assert_same_rows(first, second):
    assert len(first) == len(second)
    assert 'Time/Sampling' in first[0]
    for a, b in zip(first, second):
        assert a.keys() == b.keys()
        # Everything but the wall-clock timings.
        different = {k: (a[k], b[k]) for k in a
                     if a[k] != b[k] and not k.startswith('Time/')}
        assert not different


def test_two_runs_with_the_worker_pool_are_identical(tmp_path):
    first = _train(str(tmp_path / 'a'), 'ProMP', 'multiprocessing', 3)
    second = _train(str(tmp_path / 'b'), 'ProMP', 'multiprocessing', 3)
    assert len(first) == 3
    _assert_same_rows(first, second)


@pytest.mark.parametrize('kind', ['local', 'multiprocessing'])
@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML'])
def test_restore_and_resume_continue_exactly(tmp_path, name, kind):
    full = _train(str(tmp_path / 'full'), name, kind, 4)
    _train(str(tmp_path / 'half'), name, kind, 2)
    resumed = _resume(str(tmp_path / 'half'), str(tmp_path / 'resumed'), 1,
                      4)
    assert len(resumed) == 2
    _assert_same_rows(full[2:], resumed)


@pytest.mark.parametrize('name', ['ProMP', 'TRPOMAML'])
def test_the_same_seed_gives_the_same_run_with_any_worker_count(tmp_path, name):
    """Keyed episodes, per-task inner steps between rounds, one batched update."""
    in_process = _train(str(tmp_path / 'local'), name, 'local', 3)
    _assert_same_rows(in_process, _train(str(tmp_path / 'pool'), name, 'multiprocessing', 3,
                                         workers=3))
    # Two workers for three tasks: a task's episodes are split between them.
    _assert_same_rows(in_process, _train(str(tmp_path / 'pool2'), name, 'multiprocessing', 3,
                                         workers=2))
