"""Functional access to garage torch Gaussian policies, and adapted policies.

The meta-algorithms never mutate the meta-policy to evaluate adapted
parameters: they call the policy through :func:`torch.func.functional_call`
with a parameter dict, so the adaptation graph stays differentiable with
respect to the meta-parameters θ (unlike garage's ``DifferentiableSGD``,
which swaps non-leaf tensors into the module).
"""
import collections
import contextlib
import copy
import itertools
import threading
from typing import Any, Dict, List, Sequence, Tuple

from garage_promp.validation import check_int

import akro
from garage.torch.policies import Policy
import numpy as np
import torch
from torch.func import functional_call, vmap

Params = Dict[str, torch.Tensor]


#: The policy's learned log-std (``build_experiment(log_std=...)``, ``train.py --log-std``).
LOG_STD_KINDS = ('shared', 'per-dimension')


def learn_log_std_per_dimension(policy: torch.nn.Module) -> torch.nn.Module:
    """Give a garage ``GaussianMLPPolicy`` one learned log-std per action dimension.

    garage's ``GaussianMLPPolicy`` (``learn_std=True``) learns one log-std
    shared by every action dimension, a parameter of shape ``(1,)``; the
    original ProMP code's ``MetaGaussianMLPPolicy`` learns a ``(1, A)``
    variable, one per dimension, adapted in the inner step like the other
    parameters. This replaces the parameter (``_module._init_std``) by one of
    shape ``(A,)`` holding the same value, so the policy's distribution is
    unchanged until it learns, and everything else works as before: garage's
    forward broadcasts it, and the package's batched forward, inner steps and
    hand-written Hessian-vector products sum each derivative to the
    parameter's shape. Build the algorithm after this call: it records the
    policy's parameters (its optimiser and any learned inner step sizes
    would hold the old one). A policy that already has one per dimension is
    returned as it is.

    Returns:
        torch.nn.Module: ``policy``.

    Raises:
        ValueError: Where ``policy`` is not a ``GaussianMLPPolicy`` with a
            learned log-std parameter (``learn_std=False`` has none to learn)
            of garage's shape ``(1,)`` (or already ``(A,)``).

    """
    from garage.torch.modules.gaussian_mlp_module import GaussianMLPModule  # pylint: disable=import-outside-toplevel
    from garage.torch.policies import GaussianMLPPolicy  # pylint: disable=import-outside-toplevel
    module = getattr(policy, '_module', None)
    if not isinstance(policy, GaussianMLPPolicy) or type(module) is not GaussianMLPModule:
        raise ValueError('one log-std per action dimension needs a garage GaussianMLPPolicy, '
                         f'got {type(policy).__name__}')
    if not module._learn_std:  # pylint: disable=protected-access
        raise ValueError('one log-std per action dimension: the policy has a fixed std '
                         '(learn_std=False), nothing to learn')
    current = module._init_std  # pylint: disable=protected-access
    action_dim = module._action_dim  # pylint: disable=protected-access
    if current.shape == (action_dim, ):
        return policy
    if current.shape != (1, ):
        raise ValueError(f'one log-std per action dimension: the policy\'s log-std has shape '
                         f'{tuple(current.shape)}, neither garage\'s (1,) nor ({action_dim},)')
    module._init_std = torch.nn.Parameter(  # pylint: disable=protected-access
        current.detach().expand(action_dim).clone(), requires_grad=current.requires_grad)
    return policy


def named_params(policy: torch.nn.Module) -> Params:
    """The policy's parameters by name, in ``named_parameters()`` order."""
    return collections.OrderedDict(policy.named_parameters())


_CHECKS_LOCK = threading.Lock()
_CHECKS_OFF = {'depth': 0, 'saved': None}


@contextlib.contextmanager
def _without_distribution_checks():
    """torch's argument validation of distributions off within the body.

    Non-finite parameters (a step size that diverged) then give a NaN loss or action,
    which the algorithms and the sampler name (the step sizes, the episode), not a
    ValueError from inside torch. The switch is torch's process-wide default: nested or
    concurrent bodies share one switch, turned back to what it was when the last one
    leaves.
    """
    distribution = torch.distributions.Distribution
    with _CHECKS_LOCK:
        if _CHECKS_OFF['depth'] == 0:
            _CHECKS_OFF['saved'] = distribution._validate_args  # pylint: disable=protected-access
            distribution.set_default_validate_args(False)
        _CHECKS_OFF['depth'] += 1
    try:
        yield
    finally:
        with _CHECKS_LOCK:
            _CHECKS_OFF['depth'] -= 1
            if _CHECKS_OFF['depth'] == 0:
                distribution.set_default_validate_args(_CHECKS_OFF['saved'])


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
    with _without_distribution_checks():
        out = policy(observations) if params is None else functional_call(policy, params,
                                                                          (observations, ))
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError('garage_promp algorithms need a Gaussian policy, whose forward returns '
                        f'(distribution, info); {type(policy).__name__} returned '
                        f'{type(out).__name__}')
    dist = out[0]
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


class BatchedGaussianMLP:
    """Mean and log-std of S parameter sets at once for a garage ``GaussianMLPPolicy``.

    The sampler's per-step forward: one ``baddbmm`` per layer over the
    stacked per-task parameters, instead of ``torch.func.vmap`` of
    ``functional_call``, whose per-call overhead (about 0.5 ms for a 64×64
    policy, mostly pytree handling, against 0.07 ms here) was a quarter of a
    worker's time on HalfCheetah. It computes what garage's
    ``GaussianMLPModule.forward`` computes (hidden layers, the output layer,
    the shared log-std with its clamp and parameterisation); :meth:`of`
    returns None for any other structure, and the caller keeps the generic
    ``vmap`` path.

    Args:
        layers (list[tuple]): (weight name, bias name, nonlinearity or None).
        log_std_name (str or None): The learned log-std parameter's name.
        fixed_log_std (torch.Tensor or None): The log-std buffer
            (``learn_std=False``).
        clamp (tuple or None): (min, max) of the log-std, each float or None;
            None: no clamp.
        parameterization (str): 'exp' or 'softplus' (garage's names).

    """

    def __init__(self, layers, log_std_name, fixed_log_std, clamp, parameterization):
        self._layers = layers
        self._log_std_name = log_std_name
        self._fixed_log_std = fixed_log_std
        self._clamp = clamp
        self._parameterization = parameterization

    @classmethod
    def of(cls, policy: torch.nn.Module) -> 'BatchedGaussianMLP | None':
        """The batched forward of ``policy``, or None if its structure is another."""
        # pylint: disable=import-outside-toplevel
        from garage.torch._functions import NonLinearity
        from garage.torch.modules.gaussian_mlp_module import GaussianMLPModule
        from garage.torch.policies import GaussianMLPPolicy
        if type(policy).forward is not GaussianMLPPolicy.forward:
            return None
        module = getattr(policy, '_module', None)
        if type(module) is not GaussianMLPModule or \
                module._norm_dist_class is not torch.distributions.Normal:
            return None
        mean_module = module._mean_module
        if len(mean_module._output_layers) != 1:
            return None
        layers = []
        for group in ('_layers', '_output_layers'):
            for i, layer in enumerate(getattr(mean_module, group)):
                children = dict(layer.named_children())
                if set(children) - {'linear', 'non_linearity'} or \
                        type(children.get('linear')) is not torch.nn.Linear or \
                        children['linear'].bias is None:
                    return None
                act = children.get('non_linearity')
                if act is not None and not isinstance(act, NonLinearity):
                    return None
                name = f'_module._mean_module.{group}.{i}.linear'
                layers.append((f'{name}.weight', f'{name}.bias',
                               None if act is None else act.module))

        def bound(value):
            return None if value is None else float(value.item())

        low, high = module._min_std_param, module._max_std_param
        # garage clamps only if ``min or max`` is truthy (a log-std bound of
        # exactly 0, std 1, alone does not clamp); the same here.
        clamp = (bound(low), bound(high)) if (low is not None and bool(low)) or (
            high is not None and bool(high)) else None
        return cls(layers, '_module._init_std' if module._learn_std else None,
                   None if module._learn_std else module.init_std.detach().clone(),
                   clamp, module._std_parameterization)

    def __call__(self, params: Params, observations: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std, each :math:`(S, W, A)`.

        Args:
            params (dict): Stacked parameters, each of shape ``(S, *shape)``.
            observations (torch.Tensor): :math:`(S, W, O)`.

        """
        mean = self.means(params, observations)
        return mean, self.log_stds(params, mean)

    def means(self, params: Params, observations: torch.Tensor) -> torch.Tensor:
        """The means alone, :math:`(S, W, A)` (the first output of a call)."""
        x = observations
        for weight, bias, act in self._layers:
            x = torch.baddbmm(params[bias].unsqueeze(1), x, params[weight].transpose(1, 2))
            if act is not None:
                x = act(x)
        return x

    def log_stds(self, params: Params, means: torch.Tensor) -> torch.Tensor:
        """The log-stds alone, of the shape of ``means`` :math:`(S, W, A)` (the second
        output of a call): they depend on the parameters only, so a caller whose
        parameters stay may compute them once (the same operations on the same shape)."""
        log_std = torch.zeros_like(means) + self.raw_log_std(params, means.shape[0]).unsqueeze(1)
        return self.log_std_of(log_std)

    @property
    def layers(self):
        """(weight name, bias name, nonlinearity or None) of each layer."""
        return self._layers

    @property
    def log_std_name(self):
        """The learned log-std parameter's name, or None (a fixed std)."""
        return self._log_std_name

    def raw_log_std(self, params: Params, n_sets: int) -> torch.Tensor:
        """The log-std parameter (or buffer) of each set, :math:`(S, A)`."""
        if self._log_std_name is None:
            return self._fixed_log_std.expand(n_sets, -1)
        return params[self._log_std_name]

    def log_std_of(self, raw: torch.Tensor) -> torch.Tensor:
        """The distribution's log-std from the raw parameter, elementwise.

        garage's clamp, then its parameterisation ('exp': σ = e^raw;
        'softplus': σ = log(1 + e^(e^raw))).
        """
        if self._clamp is not None:
            raw = raw.clamp(min=self._clamp[0], max=self._clamp[1])
        if self._parameterization == 'exp':
            std = raw.exp()
        else:
            std = raw.exp().exp().add(1.).log()
        return torch.log(std)


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
        num_steps = check_int(num_steps, 'num_steps', 0)
        super().__init__(policy._env_spec, policy.name)
        inner = policy.policy if isinstance(policy, AdaptedPolicy) else policy
        # Other entries (e.g. the buffers of a state_dict) are not read.
        check_params_of(inner, params, "params must hold the policy's parameters",
                        others_ok=True, same_dtype=False)  # (copied in: cast to its dtype)
        values = {}
        for name, param in inner.named_parameters():  # tensors, numpy arrays, lists of numbers
            value = torch.as_tensor(params[name])
            if value.is_complex() or value.dtype == torch.bool:  # (a cast drops or makes 1s)
                raise ValueError(f'params[{name!r}] must be real numbers (cast to the '
                                 f"policy's dtype), got {str(value.dtype).replace('torch.', '')}")
            value = values[name] = value.to(param.dtype)  # (1e39 is inf in float32)
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f'params[{name!r}] holds NaN or inf (in the policy\'s dtype, '
                                 f"{str(param.dtype).replace('torch.', '')}): no adapted "
                                 'policy acts')
        self.policy = copy.deepcopy(inner)
        with torch.no_grad():
            for name, value in self.policy.named_parameters():
                value.copy_(values[name])
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


def check_params_of(policy: torch.nn.Module, params: Any, refusal: str,
                    others_ok: bool = False, same_dtype: bool = True) -> None:
    """Refuse ``params`` unless it is a dict of every parameter of ``policy`` by name, each
    of its shape (and, without ``others_ok``, nothing else), and with ``same_dtype`` of its
    dtype.

    Raises:
        ValueError: ``refusal``, then the names and shapes (or dtypes) wanted and got.

    """
    want = {name: tuple(value.shape) for name, value in policy.named_parameters()}
    got = None
    if isinstance(params, dict):
        got = {name: tuple(torch.as_tensor(value).shape) for name, value in params.items()
               if not others_ok or name in want}
    if got != want:
        raise ValueError(f'{refusal} {want}, got {got if got is not None else params!r}')
    dtype = next(policy.parameters(), torch.empty(0)).dtype
    wrong = {name: str(torch.as_tensor(params[name]).dtype).replace('torch.', '')
             for name in want if torch.as_tensor(params[name]).dtype != dtype} if same_dtype else {}
    if wrong:
        raise ValueError(f'{refusal} in {str(dtype).replace("torch.", "")} (the policy\'s '
                         f'dtype), got {wrong}')


def check_env_and_policy(env, policy, need_horizon: bool = True) -> int | None:
    """Check that ``env`` and ``policy`` fit each other; return the horizon.

    The env needs flat Box spaces, a bounded action space (Gaussian policy)
    and (``need_horizon``) a finite horizon; the policy, a torch module, must
    take the env's observations and give actions of its action size.

    Args:
        env (garage.Environment): The env (or a template of the task family).
        policy (garage.torch.policies.Policy): The (meta-)policy.
        need_horizon (bool): Require ``env.spec.max_episode_length`` (a
            sampler given its own horizon does not).

    Returns:
        int or None: The env's horizon (None without ``need_horizon``).

    Raises:
        ValueError: Naming ``env`` or ``policy`` and what does not fit.

    """
    if not isinstance(policy, torch.nn.Module):
        raise ValueError(f'policy must be a garage torch policy (a torch.nn.Module), got '
                         f'{policy!r}')
    spec = getattr(env, 'spec', None)
    if spec is None or isinstance(env, type):
        raise ValueError(f'env must be a garage Environment (an instance, with a spec), got '
                         f'{env!r}')
    obs_space = getattr(spec, 'observation_space', None)
    act_space = getattr(spec, 'action_space', None)
    for name, space in (('observation', obs_space), ('action', act_space)):
        if not isinstance(space, akro.Box) or len(space.shape) != 1:
            raise ValueError(f'env must have a flat (1-D) Box {name} space, '
                             f'got {space!r}')
    if not (np.isfinite(act_space.low).all()
            and np.isfinite(act_space.high).all()):
        gym_space = getattr(getattr(env, 'gym_env', None), 'action_space', None)
        low, high = getattr(gym_space, 'low', None), getattr(gym_space, 'high', None)
        note = ''
        if low is not None and high is not None and np.isfinite(low).all() \
                and np.isfinite(high).all():
            note = (f' (the gymnasium env declares finite bounds, {low!r} to {high!r}, beyond '
                    "float32, the dtype of the spaces garage's policies take)")
        raise ValueError('env must have a bounded action space (Gaussian '
                         f'policy), got {act_space!r}{note}')
    horizon = spec.max_episode_length
    if need_horizon and (horizon is None or not np.isfinite(horizon)):
        raise ValueError('env must have a finite max_episode_length, got '
                         f'{horizon!r}')
    dtypes = sorted({str(value.dtype).replace('torch.', '') for value in policy.parameters()})
    if dtypes != ['float32']:
        raise ValueError(f'policy must have float32 parameters (garage\'s default; the sampled '
                         f'batches are float32), got {dtypes or "no parameters"}')
    # A probe forward: works for any policy, whatever it records of its spec.
    obs_dim, act_dim = obs_space.shape[0], act_space.shape[0]
    try:
        with torch.no_grad():
            mean, _ = distribution_params(policy, None, torch.zeros(1, obs_dim))
    except TypeError as error:  # not a Gaussian policy
        raise ValueError(f'policy must be a garage torch Gaussian policy: {error}') from error
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"policy does not take the env's observations of size "
                         f'{obs_dim}: {error}') from error
    if tuple(mean.shape) != (1, act_dim):
        raise ValueError(f'policy outputs actions of size {mean.shape[-1]} but the env '
                         f'has {act_dim}')
    return int(horizon) if need_horizon else None


def check_trainable(policy: torch.nn.Module) -> None:
    """Refuse a policy with parameters that do not require grad or are not finite, naming them.

    The meta-gradient differentiates through every parameter (the inner steps
    adapt each of them); a frozen one would end the first outer step with
    autograd's "does not require grad", after a whole meta-batch was sampled.
    A fixed value belongs in a buffer (garage's ``learn_std=False`` keeps its
    std out of the parameters).
    """
    frozen = [name for name, value in policy.named_parameters() if not value.requires_grad]
    if frozen:
        raise ValueError(f'policy has parameters that do not require grad: {frozen}; every '
                         'parameter is adapted and meta-learned (keep fixed values in buffers)')
    # Before any sampling: a NaN/inf parameter would be blamed on the first inner step
    # (garage's min_std clamp samples through a log-std of -inf, and its zero gradient
    # keeps it there), or on the policy's first action.
    with torch.no_grad():
        not_finite = [name for name, value in itertools.chain(policy.named_parameters(),
                                                              policy.named_buffers())
                      if value.is_floating_point() and not torch.isfinite(value).all()]
    if not_finite:
        hint = ''
        if any(name.endswith('init_std') for name in not_finite):
            hint = ("; a log-std of -inf comes from init_std=0 (garage's GaussianMLPPolicy "
                    'takes log(init_std))')
        raise ValueError(f'policy has non-finite (NaN/inf) parameters: {not_finite}{hint}')


def check_sampler_policy(policy: torch.nn.Module, sampler_policy: torch.nn.Module,
                         obs_dim: int) -> None:
    """Refuse a sampler built for a policy that acts otherwise than ``policy``.

    The sampler runs its own policy module at the parameters the algorithm hands
    it, so the module must compute what the algorithm's computes: another
    nonlinearity or std parameterisation would record means and log-stds that are
    not the algorithm's policy at θ, and every likelihood ratio and KL of the
    update would be wrong without a word. The same object passes; another one must
    have the same parameter names and shapes and give the same mean and log-std
    at ``policy``'s parameters on a fixed probe of observations of both signs.

    Raises:
        ValueError: Naming what differs.

    """
    if sampler_policy is policy:
        return
    params = named_params(policy)
    theirs = {name: tuple(value.shape) for name, value in sampler_policy.named_parameters()}
    ours = {name: tuple(value.shape) for name, value in params.items()}
    if theirs != ours:
        raise ValueError("sampler was built for another policy (the sampler's has "
                         f'{sorted(set(theirs.items()) - set(ours.items()))[:3]}, the '
                         f"algorithm's {sorted(set(ours.items()) - set(theirs.items()))[:3]}): "
                         "build it with make_sampler(policy, env) for the algorithm's policy")
    dtype = next(iter(params.values())).dtype
    probe = torch.linspace(-3., 3., 8 * obs_dim, dtype=dtype).reshape(8, obs_dim)
    with torch.no_grad():
        try:
            mine = distribution_params(policy, None, probe)
            other = distribution_params(sampler_policy, params, probe)
        except (RuntimeError, TypeError, ValueError) as error:
            raise ValueError("sampler was built for a policy that does not take the algorithm's "
                             f'parameters ({error}): build it with make_sampler(policy, env) '
                             "for the algorithm's policy") from error
    for what, a, b in zip(('mean', 'log-std'), mine, other):
        if a.shape != b.shape or not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            gap = (float((a - b).abs().max()) if a.shape == b.shape
                   else f'shapes {tuple(a.shape)} and {tuple(b.shape)}')
            raise ValueError(f"sampler was built for a policy that computes another {what} than "
                             f"the algorithm's at the same parameters (largest difference {gap}): "
                             "build it with make_sampler(policy, env) for the algorithm's policy")
