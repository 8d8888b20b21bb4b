"""Functional access to garage torch Gaussian policies, and adapted policies.

The meta-algorithms never mutate the meta-policy to evaluate adapted
parameters: they call the policy through :func:`torch.func.functional_call`
with a parameter dict, so the adaptation graph stays differentiable with
respect to the meta-parameters θ (unlike garage's ``DifferentiableSGD``,
which swaps non-leaf tensors into the module).
"""
import collections
import copy
from typing import Dict, List, Sequence, Tuple

from garage.torch.policies import Policy
import torch
from torch.func import functional_call, vmap

Params = Dict[str, torch.Tensor]


def named_params(policy: torch.nn.Module) -> Params:
    """The policy's parameters by name, in ``named_parameters()`` order."""
    return collections.OrderedDict(policy.named_parameters())


def distribution_params(policy: torch.nn.Module, params: Params | None,
                        observations: torch.Tensor
                        ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mean and log-std of a Gaussian policy at ``params``.

    Args:
        policy (torch.nn.Module): A garage torch Gaussian policy whose
            ``forward(obs)`` returns ``(distribution, info)``.
        params (dict or None): Parameters to evaluate at (None: the policy's
            own).
        observations (torch.Tensor): :math:`(N, O)`.

    Returns:
        tuple(torch.Tensor, torch.Tensor): Mean and log-std, each
            :math:`(N, A)`.

    """
    if params is None:
        dist, _ = policy(observations)
    else:
        dist, _ = functional_call(policy, params, (observations, ))
    base = getattr(dist, 'base_dist', dist)
    if not isinstance(base, torch.distributions.Normal):
        raise TypeError('garage_promp algorithms need a Gaussian policy; '
                        f'{type(policy).__name__} returned '
                        f'{type(base).__name__}')
    return base.loc, torch.log(base.scale).expand_as(base.loc)


def stack_params(params: Sequence[Params]) -> Params:
    """Stack per-task parameter dicts into one dict with a leading task axis."""
    return collections.OrderedDict(
        (name, torch.stack([p[name] for p in params]))
        for name in params[0])


def unstack_params(params: Params) -> List[Params]:
    """Split a stacked parameter dict into one dict per task."""
    n_tasks = next(iter(params.values())).shape[0]
    return [
        collections.OrderedDict((k, v[i]) for k, v in params.items())
        for i in range(n_tasks)
    ]


def expand_params(params: Params, n_tasks: int) -> Params:
    """Share ``params`` across ``n_tasks`` tasks as a stacked dict.

    The result is a view: differentiating a sum of per-task objectives with
    respect to it gives each task's own gradient, in one backward pass.
    """
    return collections.OrderedDict(
        (k, v.unsqueeze(0).expand(n_tasks, *v.shape))
        for k, v in params.items())


def task_distribution_params(policy: torch.nn.Module, params: Params,
                             observations: torch.Tensor,
                             vectorize: bool = True
                             ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mean and log-std of M tasks, each at its own parameters.

    Args:
        policy (torch.nn.Module): A garage torch Gaussian policy.
        params (dict): Stacked parameters, each of shape ``(M, *shape)``.
        observations (torch.Tensor): :math:`(M, N, O)`.
        vectorize (bool): One batched forward over the tasks
            (``torch.func.vmap`` of ``functional_call``); False loops over
            the tasks with one plain forward each. Both give the same values
            up to float rounding.

    Returns:
        tuple(torch.Tensor, torch.Tensor): Mean and log-std, each
            :math:`(M, N, A)`.

    """
    n_tasks = observations.shape[0]
    if vectorize and n_tasks > 1:
        return vmap(lambda p, o: distribution_params(policy, p, o))(
            dict(params), observations)
    outs = [
        distribution_params(policy, {k: v[i]
                                     for k, v in params.items()},
                            observations[i]) for i in range(n_tasks)
    ]
    return (torch.stack([m for m, _ in outs]),
            torch.stack([s for _, s in outs]))


class AdaptedPolicy(Policy):
    """A meta-policy with adapted parameters, as handed out by ``adapt_policy``.

    It holds its own copy of the policy (the meta-policy is never touched)
    and counts the inner steps taken, so an evaluator can adapt step by step
    with fresh samples after each step.

    Args:
        policy (garage.torch.policies.Policy): The meta-policy.
        params (dict): Adapted parameter values, by parameter name.
        num_steps (int): Inner steps taken to reach ``params``.

    """

    def __init__(self, policy: Policy, params: Params, num_steps: int):
        super().__init__(policy._env_spec, policy.name)
        inner = policy.policy if isinstance(policy, AdaptedPolicy) else policy
        self.policy = copy.deepcopy(inner)
        with torch.no_grad():
            for name, value in self.policy.named_parameters():
                value.copy_(params[name])
        self.num_steps = num_steps

    def forward(self, observations):
        """Distribution and infos of the adapted policy."""
        return self.policy(observations)

    def get_action(self, observation):
        """Sample an action for one observation."""
        return self.policy.get_action(observation)

    def get_actions(self, observations):
        """Sample actions for a batch of observations."""
        return self.policy.get_actions(observations)

    def reset(self, do_resets=None):
        """Reset the (stateless) policy."""
        self.policy.reset(do_resets)

    @property
    def env_spec(self):
        """EnvSpec of the policy."""
        return self.policy.env_spec

    def adapted_params(self) -> Params:
        """Detached adapted parameters."""
        return collections.OrderedDict(
            (k, v.detach().clone()) for k, v in self.policy.named_parameters())

