"""garage_promp: ProMP and its meta-policy-gradient family as garage algorithms.

Importing this package first applies :mod:`garage_promp._garage_compat`, which
makes garage 2021.3 importable on Python 3.11 / torch 2 without TensorFlow.
"""
from garage_promp import _garage_compat

_garage_compat.apply()

__version__ = '0.1.0'

__all__ = ['__version__']
