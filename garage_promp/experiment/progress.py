"""A one-line-per-epoch console output for dowel, with an ETA.

garage prints a table of every logged key each epoch (about 60 rows for our
algorithms). :class:`ProgressOutput` prints text lines as garage's
``StdOutput`` does and, instead of the table, one line per epoch::

    epoch 12/300 | 2.3M steps | pre -1.2 | post 85.2 | meta-test 101.7 | 14.1 s/epoch | ETA 1h10m

(``pre``: ``Step_0-AverageReturn``; ``post``: ``Step_K-AverageReturn``;
``meta-test``: ``MetaTest/Average/AverageReturn``, ``-`` in epochs without
a meta-test). It works in a log file or a pipe as well as in a terminal.
``full_table=True`` prints garage's table too. Every key still goes to
``progress.csv`` and TensorBoard unchanged.

Within an epoch the algorithms report their phase (sampling round k of K+1,
the update, the meta-test) through :func:`garage_promp._console.phase`. In a terminal the phase is
a status line that the next one overwrites; in a log file or pipe a phase
line is printed only once an epoch has run for ``quiet_s`` seconds (30 by
default), and at most every ``quiet_s`` seconds, so short epochs add nothing::

      epoch 13/300: update (41 s into the epoch)

Without a ``ProgressOutput`` (e.g. garage's own console output in a user's
pipeline) phases are not shown.
"""
import math
import re
import sys
import time

from garage_promp import _console

from dowel import StdOutput, TabularInput


def _steps(n: float) -> str:
    if n >= 1e6:
        return f'{n / 1e6:.1f}M'
    if n >= 1e3:
        return f'{n / 1e3:.0f}k'
    return f'{n:.0f}'


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes < 1:
        return f'{seconds:.0f}s'
    hours, minutes = divmod(minutes, 60)
    return f'{hours}h{minutes:02d}m' if hours else f'{minutes}m'


def _number(value) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return '-'
    return '-' if math.isnan(value) else f'{value:.1f}'


class ProgressOutput(StdOutput):
    """garage's console output with one line per epoch instead of the table.

    Args:
        n_epochs (int): Epochs of the run (for ``epoch i/n`` and the ETA).
        start_epoch (int): Epochs already done (a resumed run).
        full_table (bool): Also print garage's full table.
        with_timestamp (bool): Timestamp text lines (as ``StdOutput``).
        quiet_s (float): Outside a terminal, phase lines start this many
            seconds into an epoch and come at most this often.
        max_env_steps (int or None): The run's budget of env steps (the
            run ends at the first epoch past it): the line then shows
            ``steps/budget`` and the ETA comes from the env-step rate.

    """

    def __init__(self, n_epochs: int, start_epoch: int = 0,
                 full_table: bool = False, with_timestamp: bool = True,
                 quiet_s: float = 30., max_env_steps: int | None = None):
        super().__init__(with_timestamp=with_timestamp)
        self._n_epochs = n_epochs
        self._max_env_steps = max_env_steps
        self._steps_seen = []
        self._epoch = start_epoch
        self._full_table = full_table
        self._last = time.perf_counter()
        self._durations = []
        self._quiet_s = quiet_s
        self._last_phase_line = -math.inf
        self._status_shown = False
        _console.set_listener(self.phase)

    def phase(self, what: str) -> None:
        """Show the running epoch's phase (see the module docstring)."""
        now = time.perf_counter()
        text = f'  epoch {self._epoch_label(self._epoch + 1)}: {what} ({now - self._last:.0f} s'
        if sys.stdout.isatty():
            sys.stdout.write(f'\r{text})\x1b[K')
            sys.stdout.flush()
            self._status_shown = True
        elif (now - self._last >= self._quiet_s
              and now - self._last_phase_line >= self._quiet_s):
            print(f'{text} into the epoch)', flush=True)
            self._last_phase_line = now

    def _clear_status(self):
        if self._status_shown:
            sys.stdout.write('\r\x1b[K')
            self._status_shown = False

    def close(self):
        """Stop receiving phases."""
        if _console.listener() == self.phase:
            _console.set_listener(None)
        super().close()

    def record(self, data, prefix=''):
        """Print a text line, or the epoch's line for a table."""
        self._clear_status()
        if not isinstance(data, TabularInput):
            super().record(data, prefix)
            return
        if self._full_table:
            super().record(data, prefix)
        values = data.as_dict
        data.mark_str()
        print(self.epoch_line(values))

    def epoch_line(self, values: dict) -> str:
        """The line of one epoch from its logged values."""
        now = time.perf_counter()
        self._durations.append(now - self._last)
        self._last = now
        self._last_phase_line = -math.inf
        self._epoch += 1
        steps = [int(m.group(1)) for key in values
                 for m in [re.fullmatch(r'Step_(\d+)-AverageReturn', key)] if m]
        post = f'Step_{max(steps)}-AverageReturn' if steps else None
        recent = self._durations[-5:]
        per_epoch = sum(recent) / len(recent)
        total = float(values.get('TotalEnvSteps', 0) or 0)
        self._steps_seen.append(total)
        steps = f'{_steps(total)} steps'
        if self._max_env_steps:
            steps = f'{_steps(total)}/{_steps(self._max_env_steps)} steps'
            done = self._steps_seen[-6:]
            # The rate over the last epochs (a first, perhaps resumed, epoch has none).
            rate = ((done[-1] - done[0]) / sum(self._durations[-len(done) + 1:])
                    if len(done) > 1 else 0.)
            left = max(self._max_env_steps - total, 0) / rate if rate > 0 else math.nan
        else:
            left = max(self._n_epochs - self._epoch, 0) * per_epoch
        return ' | '.join([
            f'epoch {self._epoch_label(self._epoch)}',
            steps,
            f"pre {_number(values.get('Step_0-AverageReturn'))}",
            f'post {_number(values.get(post))}',
            f"meta-test {_number(values.get('MetaTest/Average/AverageReturn'))}",
            f'{per_epoch:.1f} s/epoch',
            f'ETA {_duration(left)}' if math.isfinite(left) else 'ETA -',
        ])

    def _epoch_label(self, epoch: int) -> str:
        # With a budget of env steps, n_epochs is only an upper bound.
        return str(epoch) if self._max_env_steps else f'{epoch}/{self._n_epochs}'
