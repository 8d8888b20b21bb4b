"""Meta-testing and diagnostics."""
from garage_promp.experiment.gradient_variance import relative_std, sample_meta_gradients
from garage_promp.experiment.meta_evaluator import MetaEvaluator

__all__ = ['MetaEvaluator', 'relative_std', 'sample_meta_gradients']
