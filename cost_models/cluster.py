"""Joining a Ray cluster to measure on: its address, the check that only token holders get in, and the connection.

A cluster for measuring is started by hand (see docs/cluster.md): every node with ``RAY_AUTH_MODE=token`` and the same
token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``), and ``--resources '{"timing_slot": 1}'``
on the nodes that may time. ``connect`` joins it from the driver within seconds or raises ``ClusterError`` with one
line: nothing listening, a token the cluster refuses, or a cluster that lets anyone in without one (Ray's gRPC ports
run anything they are sent, so tessera never measures on such a cluster). Importing this module imports no Ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models.errors import CostSourceError

TIMING_SLOT = "timing_slot"
"""Custom Ray resource, one per node, held by whatever times that machine (a measuring node, an experiment trial)."""

CONNECT_SECONDS = 10.0
"""How long each step of ``connect`` may wait for the cluster to answer."""

PROBE_SECONDS = 20.0
"""How long the check that the cluster refuses a process without a token may take (a fresh interpreter importing
Ray, then the cluster's refusal)."""

# run by ``_lets_strangers_in``: exit status 0 when the cluster admits a process that has no token
_PROBE = """
import sys
from ray._raylet import GcsClient
from ray.exceptions import AuthenticationError
try:
    GcsClient(address=sys.argv[1])
except AuthenticationError:
    sys.exit(3)
"""


class ClusterError(CostSourceError):
    """The cluster cannot be measured on: unreachable, a refused or missing token, a cluster open to anyone, no node
    that may time, or every such node lost."""


@dataclass(frozen=True)
class Cluster:
    """Measure on the Ray cluster whose head node's GCS listens at ``address`` (``HOST:PORT``).

    ``key_by_node``: nodes whose CPU model or versions differ from the target's (this machine's) time too, each
    record kept under its own node's context; the problem still uses the target's records only, timed on its nodes.
    Without it such nodes are refused for timing.
    """

    address: str
    key_by_node: bool = False

    def __post_init__(self) -> None:
        host, _, port = self.address.rpartition(":")
        if self.address.startswith("ray://"):
            raise ClusterError(f"{self.address} is a Ray Client address; give the head node's HOST:PORT (its GCS "
                               "port, 6379 unless ray start --port chose another)")
        if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise ClusterError(f"Ray address {self.address!r} is not HOST:PORT")

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)


def connect(cluster: Cluster, *, checked: bool = False) -> tuple[Any, bool]:
    """``(ray module, whether this call connected)`` once this process is on ``cluster`` with token authentication
    (``check_cluster``, unless the caller ran it moments before: ``checked``).

    A process already on that cluster (a Ray worker of it, such as an experiment trial) stays on it and the call
    returns False; one on another cluster is refused.

    Raises
    ------
    ClusterError
        What ``check_cluster`` raises, a process already on another cluster, or a cluster that cannot be joined.
    """
    import ray

    if ray.is_initialized():
        _require_token_mode()
        if _cluster_id(ray.get_runtime_context().gcs_address) != _cluster_id(cluster.address):
            raise ClusterError(f"this process is already on another Ray cluster than {cluster.address}")
        return ray, False
    if not checked:
        check_cluster(cluster)
    reload_ray_settings()
    try:
        with _quiet_stderr():
            ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ray.exceptions.RayError) as exc:
        raise ClusterError(f"cannot join the Ray cluster at {cluster.address}: {exc}") from exc
    return ray, True


def check_cluster(cluster: Cluster) -> None:
    """Check, without joining it, that this process may join ``cluster``: Ray's token authentication on
    (``RAY_AUTH_MODE=token``, also when unset), a token, something answering at the address within
    ``CONNECT_SECONDS``, the cluster accepting the token, and refusing a process without one.

    Raises
    ------
    ClusterError
        ``RAY_AUTH_MODE`` set to something other than ``token``, no token, nothing answering at the address, a token
        the cluster refuses, or a cluster that admits connections without a token.
    """
    _require_token_mode()
    try:
        with socket.create_connection(cluster.host_port, timeout=CONNECT_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ClusterError(f"no Ray cluster answers at {cluster.address} ({reason}); start its head node with "
                           "ray start --head (see docs/cluster.md)") from exc
    _cluster_id(cluster.address)
    if _lets_strangers_in(cluster.address):
        raise ClusterError(f"the Ray cluster at {cluster.address} admits connections without a token; restart its "
                           "nodes with RAY_AUTH_MODE=token and a shared RAY_AUTH_TOKEN (see docs/cluster.md)")


def _require_token_mode() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    mode = os.environ.setdefault("RAY_AUTH_MODE", "token")
    if mode != "token":
        raise ClusterError(f"joining a Ray cluster needs Ray's token authentication, but RAY_AUTH_MODE is {mode!r}; "
                           "set it to token here and on every node")
    if not has_token():
        raise ClusterError("joining a Ray cluster needs the token its nodes were started with, and this process has "
                           "none: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, or write ~/.ray/auth_token)")


def reload_ray_settings() -> None:
    """Make this process's Ray read ``RAY_AUTH_MODE`` and its token from the environment again: it reads them once,
    when first imported, so a process that imported Ray before setting them would keep the old ones (``ray.init``
    does the same where it turns token authentication on itself)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def has_token() -> bool:
    """Whether Ray finds a token for this process where it looks (without one its client aborts the process)."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    try:
        return bool(Path(path).read_text().strip())
    except (OSError, UnicodeDecodeError):
        return False


def _cluster_id(address: str) -> str:
    """The id of the cluster at ``address``, asked with this process's token."""
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError, RayError

    try:
        with _quiet_stderr():
            return GcsClient(address=address).cluster_id.hex()
    except AuthenticationError as exc:
        raise ClusterError(f"the Ray cluster at {address} refused this process's token: give it the token its nodes "
                           "were started with (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)") from exc
    except RayError as exc:
        raise ClusterError(f"no Ray cluster answers at {address} ({str(exc).splitlines()[0]})") from exc


def _lets_strangers_in(address: str) -> bool:
    """Whether the cluster at ``address`` answers a process that has no token (asked from a fresh interpreter: the
    token a process uses is fixed once Ray has read it)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH_TOKEN")}
    env["RAY_AUTH_MODE"] = "disabled"
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, address], env=env, capture_output=True,
                               timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"could not check within {PROBE_SECONDS:g} s that the Ray cluster at {address} refuses "
                           "connections without a token; not measuring there") from exc
    if probe.returncode not in (0, 3):  # 3: refused for want of a token
        raise ClusterError(f"could not check that the Ray cluster at {address} refuses connections without a token "
                           f"(the probe exited with {probe.returncode}); not measuring there")
    return probe.returncode == 0


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2, where Ray's C++ client logs every retry of a failing connection (the failure is
    then reported once, as an exception)."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
