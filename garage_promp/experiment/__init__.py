"""Building experiments, meta-testing and diagnostics."""
from garage_promp.experiment.builder import Experiment, build_experiment, make_algo
from garage_promp.experiment.gradient_variance import relative_std, sample_meta_gradients
from garage_promp.experiment.meta_evaluator import MetaEvaluator

__all__ = ['Experiment', 'MetaEvaluator', 'build_experiment', 'make_algo', 'relative_std',
           'sample_meta_gradients']
