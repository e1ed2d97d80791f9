"""Follower kinds: the operators that run right after a node in the layout it writes (activations, per-channel scale
and shift, NCHW pooling), one class a kind behind one interface (``base``), registered by name.

Built in: the activations (``activations``: ``relu``, ``relu6``, ``clip``, ``leaky_relu``, ``hardswish``, ``silu``,
``mish``, ``sigmoid``, ``hardsigmoid``, ``gelu``, ``gelu_tanh``, ``tanh``, each in the forms frontends write), which
kernels also fuse into their epilogues, and ``channel_scale``, ``channel_shift``, ``max_pool2d``, ``avg_pool2d`` and
``adaptive_avg_pool2d``. A new follower is one class and ``@register_follower``; ``check_follower`` checks it.
"""

# they register themselves
from search.followers import activations, channel, pooling  # noqa: F401
from search.followers.base import (
    FOLLOWERS,
    ActivationKind,
    FollowerKind,
    FollowerMatch,
    activation_kind,
    get_follower,
    longest_match,
    register_follower,
)
from search.followers.checks import check_follower, follower_checks

__all__ = [
    "FOLLOWERS",
    "ActivationKind",
    "FollowerKind",
    "FollowerMatch",
    "activation_kind",
    "check_follower",
    "follower_checks",
    "get_follower",
    "longest_match",
    "register_follower",
]
