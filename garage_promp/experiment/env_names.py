"""The click type of the launchers' and benchmarks' ``--env`` options.

It lives here, above the envs and the paper table it reads, rather than in
:mod:`garage_promp.validation` (which every layer of the package imports).
"""
from garage_promp.envs.metaworld import check_env_name
from garage_promp.experiment.paper_config import ENVS, METAWORLD

import click


class EnvName(click.ParamType):
    """A click type: a paper environment, a Meta-World benchmark, or ``ML1:<task>``.

    Args:
        metaworld (bool): Also take Meta-World benchmarks.
        ml1_task (bool): ML1 is written ``ML1:<task>`` (the benchmarks'
            form, e.g. ``ML1:reach-v3``); its task is checked too.
        optional (bool): Also take ``''`` (none).

    """

    name = 'env'

    def __init__(self, metaworld: bool = True, ml1_task: bool = False, optional: bool = False):
        self.metaworld = metaworld
        self.ml1_task = ml1_task
        self.optional = optional

    def convert(self, value, param, ctx):
        if self.optional and value == '':
            return value
        family, sep, task = str(value).partition(':')
        names = sorted(ENVS) + (sorted(METAWORLD) if self.metaworld else [])
        if family not in names:
            shown = [n for n in names if not (self.ml1_task and n == 'ML1')]
            self.fail(f'unknown environment {value!r}; choose from {", ".join(shown)}'
                      + (' or ML1:<task>' if self.metaworld and self.ml1_task else ''),
                      param, ctx)
        if self.ml1_task and family == 'ML1':
            if not task:
                self.fail(f'{value!r}: give the ML1 task, e.g. ML1:reach-v3', param, ctx)
            try:
                check_env_name(task)
            except (ValueError, ImportError) as error:
                self.fail(str(error), param, ctx)
        elif sep:
            self.fail(f'{value!r}: only ML1 takes a task (ML1:<task>)', param, ctx)
        return value
