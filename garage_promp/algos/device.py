"""Where the learner runs: its torch threads and its device.

Sampling, processing and the inner steps between sampling rounds run on the
CPU; the meta-update runs on ``device`` (θ, the optimiser's state and learned
step sizes move there for it and back after it), with ``learner_threads`` torch
threads while the sampler's workers wait.

``MetaPolicySearch`` (:mod:`garage_promp.algos.base`) is built from this and
its sibling mixins, each one job; the attributes they read are set by its
constructor (``_policy``, ``_sampler``, ``_inner_lr``, ... ; see there).
"""
import collections
import contextlib

from garage_promp._threads import available_cores

import torch


class LearnerDevice:
    """The learner's thread count and device placement."""

    def _learner_thread_count(self) -> int:
        """torch threads while the workers wait (see ``learner_threads``)."""
        if self._learner_threads is not None:
            return self._learner_threads
        if self._sampler.kind == 'local':  # no worker processes to wait for
            return torch.get_num_threads()
        return available_cores()

    @property
    def _learner_device(self) -> torch.device:
        # Snapshots written before the device option hold no _device: CPU.
        return self.__dict__.get('_device', torch.device('cpu'))

    @contextlib.contextmanager
    def _on_device(self):
        """Hold θ, the optimiser's state and per-parameter step sizes on ``device``.

        The meta-update runs there; sampling, processing and the inner steps
        between sampling rounds stay on the CPU. Parameters move once each
        way per iteration. On the CPU nothing is moved (nor traversed: an error
        that interrupts torch's ``vmap`` part-way, a Ctrl-C say, can leave its
        transform level behind, under which ``Module.to`` refuses to run, and the
        run would end with that error instead of the interrupt). Where moving back
        fails while an error is already on its way out, that error is the one
        raised.
        """
        device = self._learner_device
        if device.type == 'cpu':
            yield
            return
        self._move_learner(device)
        try:
            yield
        except BaseException:
            try:
                self._move_learner(torch.device('cpu'))
            except Exception:  # pylint: disable=broad-except
                pass  # (the error in flight says what went wrong; this one follows from it)
            raise
        self._move_learner(torch.device('cpu'))

    def _move_learner(self, device):
        self._policy.to(device)
        if self._trainable_inner_step_size:
            for value in self._inner_lr.values():  # in place: the optimiser holds them
                value.data = value.data.to(device)
        else:
            self._inner_lr = collections.OrderedDict(
                (k, v.to(device)) for k, v in self._inner_lr.items())
        optimizer = getattr(self, '_optimizer', None)
        if optimizer is not None:
            for state in optimizer.state.values():
                for key, value in state.items():
                    # Adam keeps its step count on the CPU unless capturable.
                    if torch.is_tensor(value) and key != 'step':
                        state[key] = value.to(device)
