"""What a snapshot of an algorithm holds, so that a restored run continues exactly.

garage's ``Snapshotter`` pickles the algorithm every epoch; ``Trainer.restore``
unpickles it and re-seeds the global RNGs with the run's original seed. The
snapshot therefore carries the global RNG states of the moment it was taken,
and the epoch loop puts them back before its first epoch after a restore.

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import random

import numpy as np
import torch


def _global_rng_states() -> dict:
    return dict(python=random.getstate(), numpy=np.random.get_state(),
                torch=torch.get_rng_state())


def _set_global_rng_states(states: dict):
    random.setstate(states['python'])
    np.random.set_state(states['numpy'])
    torch.set_rng_state(states['torch'])


class SnapshotState:
    """Pickled state: everything but per-process attributes, plus the global RNG states."""

    # Per-process attributes left out of snapshots.
    _TRANSIENT = ('_pending_rng_states', 'epoch_timings', 'last_timings', '_forward_cache')

    def __getstate__(self):
        """Pickle state, with the process's global RNG states.

        Our own randomness is keyed (the sampler's rounds, ProMP's minibatch
        stream), but task samplers such as garage's draw from the global
        numpy RNG. garage's ``Trainer.restore`` re-seeds the globals after
        unpickling, so the saved states are applied when ``train`` starts
        (see :meth:`train`): a restored run then continues exactly.
        """
        state = dict(self.__dict__)
        state['_saved_rng_states'] = _global_rng_states()
        for transient in self._TRANSIENT:
            state.pop(transient, None)
        return state

    #: Attributes added after snapshots were first written, with the value
    #: that reproduces what a run without them did: a snapshot from an older
    #: release resumes as the run it was (``launchers/train.py --resume``).
    _SNAPSHOT_DEFAULTS = {'_trainable_inner_step_size': False}

    def __setstate__(self, state):
        state = {**self._SNAPSHOT_DEFAULTS, **state}
        state['_pending_rng_states'] = state.pop('_saved_rng_states', None)
        self.__dict__.update(state)

    def _restore_global_rng_states(self):
        """After a restore, put back the global RNG states saved in the snapshot."""
        pending = self.__dict__.pop('_pending_rng_states', None)
        if pending is not None:
            _set_global_rng_states(pending)
