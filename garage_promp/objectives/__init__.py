"""Pure functions: surrogate objectives (torch) and advantages (numpy)."""
from garage_promp.objectives.advantages import (
                                                TooFewStepsError,
                                                discount_cumsum,
                                                discounted_rewards,
                                                gae_advantages,
                                                normalize_advantages,
                                                shift_advantages_to_positive,
)
from garage_promp.objectives.surrogates import (
                                                clipped_objective,
                                                cumulative_log_probs,
                                                dice_objective,
                                                emaml_objective,
                                                gaussian_kl,
                                                gaussian_log_likelihood,
                                                likelihood_ratio,
                                                log_likelihood_objective,
                                                lvc_objective,
                                                magic_box,
                                                masked_mean,
)

__all__ = [
    'TooFewStepsError', 'clipped_objective', 'cumulative_log_probs', 'dice_objective',
    'discount_cumsum', 'discounted_rewards', 'emaml_objective',
    'gae_advantages', 'gaussian_kl', 'gaussian_log_likelihood',
    'likelihood_ratio', 'log_likelihood_objective', 'lvc_objective',
    'magic_box', 'masked_mean', 'normalize_advantages',
    'shift_advantages_to_positive'
]
