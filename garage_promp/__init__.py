"""garage_promp: ProMP and its meta-policy-gradient family as garage algorithms.

Importing this package first applies :mod:`garage_promp._garage_compat`, which
makes garage 2021.3 importable on Python 3.11 / torch 2 without TensorFlow.
Import ``garage_promp`` before ``garage``, unless the import-order hook of
:mod:`garage_promp._import_order` is installed (``scripts/install.sh`` does).
"""
from garage_promp import _garage_compat

_garage_compat.apply()

__version__ = '0.1.0'

# pylint: disable=wrong-import-position
from garage_promp.algos import (  # noqa: E402
                                EMAMLVPG,
                                LVCVPG,
                                MAMLVPG,
                                TRPOMAML,
                                DiCEVPG,
                                MetaPolicySearch,
                                MetaVPG,
                                ProMP,
)
from garage_promp.baselines import LinearFeatureBaseline, LinearTimeBaseline, ZeroBaseline  # noqa: E402
from garage_promp.experiment import MetaEvaluator, build_experiment, make_algo  # noqa: E402
from garage_promp.experiment.resume import install_checked_restore  # noqa: E402
from garage_promp.policies import AdaptedPolicy  # noqa: E402
from garage_promp.sampler import MetaSampler, SamplerWorkerError, make_sampler  # noqa: E402

install_checked_restore()

__all__ = [
    '__version__', 'AdaptedPolicy', 'DiCEVPG', 'EMAMLVPG', 'LinearFeatureBaseline',
    'LinearTimeBaseline', 'LVCVPG', 'MAMLVPG', 'MetaEvaluator', 'MetaPolicySearch',
    'MetaSampler', 'MetaVPG', 'ProMP', 'SamplerWorkerError', 'TRPOMAML', 'ZeroBaseline',
    'build_experiment', 'make_algo', 'make_sampler'
]
