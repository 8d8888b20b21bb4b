"""Building experiments, meta-testing and diagnostics."""
from garage_promp.experiment.builder import Experiment, build_experiment
from garage_promp.experiment.gradient_variance import relative_std, sample_meta_gradients
from garage_promp.experiment.meta_evaluator import MetaEvaluator

__all__ = ['Experiment', 'MetaEvaluator', 'build_experiment', 'relative_std',
           'sample_meta_gradients']
