"""The two-parameter policy of the paper's Fig. 6 (formulation I vs II on PointEnv1D).

As ``FeaturePolicy(tf.identity, std=1)`` of the original ProMP code's
experiments/env_1d/point_1d_hand_grads.py: a Gaussian with mean
:math:`\\theta_0 s^2 + \\theta_1` and a fixed standard deviation (1), on the
1-D observation s of :class:`~garage_promp.envs.PointEnv1D`.

It is a garage torch ``StochasticPolicy`` like ``GaussianMLPPolicy``:
``forward(obs)`` returns ``(Independent(Normal), {'mean', 'log_std'})``, so the sampler
(through the generic ``vmap`` path of :mod:`garage_promp.policies`) and every
algorithm of the package (through ``torch.func.functional_call`` with
per-task parameters) take it as any other policy. Its only parameter is
``theta`` (2 numbers); the log-std is a buffer, so the inner and outer steps
never move it.
"""
from typing import Sequence

from garage.torch.policies.stochastic_policy import StochasticPolicy
import torch

#: θ at the start of the paper's Fig. 6 runs (the reference's initial value).
FIG6_INIT_THETA = (0.09, 0.05)


class QuadraticMeanPolicy(StochasticPolicy):
    """Gaussian policy with mean θ0·s² + θ1 and a fixed log-std.

    Args:
        env_spec (garage.EnvSpec): A spec with 1-D observations and 1-D
            actions (e.g. ``PointEnv1D().spec``); s is the observation.
        init_theta (sequence of 2 floats): Initial (θ0, θ1).
        log_std (float): The fixed log standard deviation (0: std 1, as the
            reference).
        name (str): Policy name (the algorithms prefix their logs with it).

    Raises:
        ValueError: If the spec's observation or action space is not 1-D of
            size 1, or ``init_theta`` is not two finite numbers.

    """

    def __init__(self, env_spec, init_theta: Sequence[float] = FIG6_INIT_THETA,
                 log_std: float = 0., name: str = 'QuadraticMeanPolicy'):
        super().__init__(env_spec, name)
        obs_shape = tuple(env_spec.observation_space.shape)
        act_shape = tuple(env_spec.action_space.shape)
        if obs_shape != (1, ) or act_shape != (1, ):
            raise ValueError('QuadraticMeanPolicy needs 1-D observations and actions of '
                             f'size 1, got observation {obs_shape} and action {act_shape}')
        theta = torch.as_tensor(init_theta, dtype=torch.float32).detach().clone()
        if theta.shape != (2, ) or not bool(torch.isfinite(theta).all()):
            raise ValueError(f'init_theta must be two finite numbers, got {init_theta!r}')
        log_std = float(log_std)
        if not torch.isfinite(torch.tensor(log_std)):
            raise ValueError(f'log_std must be finite, got {log_std!r}')
        self.theta = torch.nn.Parameter(theta)
        self.register_buffer('log_std', torch.full((1, ), log_std))

    def forward(self, observations: torch.Tensor):
        """The action distribution at ``observations`` :math:`(N, 1)`.

        Returns:
            torch.distributions.Independent: A Normal of mean θ0·s² + θ1 and
                std e^log_std, (N, 1), over the action dimension (as garage's
                ``GaussianMLPPolicy``: ``log_prob`` gives (N,)).
            dict[str, torch.Tensor]: ``mean`` and ``log_std``, each (N, 1).

        """
        s = observations[..., :1]
        mean = self.theta[0] * s.pow(2) + self.theta[1]
        log_std = self.log_std.expand_as(mean)
        # validate_args off: the constructor's value checks would be
        # data-dependent control flow under torch.func.vmap.
        dist = torch.distributions.Independent(
            torch.distributions.Normal(mean, log_std.exp(), validate_args=False), 1,
            validate_args=False)
        return dist, dict(mean=mean, log_std=log_std)
