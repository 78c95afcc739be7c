"""Dependency policies and retry backoff: the small arithmetic the engine is built on.

A task with ``n`` dependencies and policy ``p`` needs ``required_successes(p, n)``
successful dependencies (``completed`` or ``skipped``). Its policy is *met* as soon as
that many have succeeded, and *impossible* as soon as more than ``n - required`` have
ended badly (``failed``, ``upstream_failed`` or ``cancelled``), i.e. when even if every
remaining dependency succeeded there would not be enough.

=========  =====================  ======================================
policy     met when               impossible when
=========  =====================  ======================================
``all``    all n succeeded        any dependency ended badly
``any``    at least 1 succeeded   all n ended badly
``N``      at least N succeeded   more than n - N ended badly
=========  =====================  ======================================

A task without dependencies is met at start.
"""

from __future__ import annotations

from dagq.core.model import DepPolicy


def required_successes(policy: DepPolicy, n_deps: int) -> int:
    """How many dependencies must succeed for ``policy`` over ``n_deps`` dependencies.

    Raises ``ValueError`` for an integer policy outside ``1..n_deps`` or an unknown name.
    """
    if policy == "all":
        return n_deps
    if policy == "any":
        return min(1, n_deps)
    if isinstance(policy, int) and not isinstance(policy, bool):
        if not 1 <= policy <= n_deps:
            raise ValueError(
                f"dep_policy {policy} needs between 1 and {n_deps} dependencies "
                f"(the task has {n_deps})")
        return policy
    raise ValueError(f"dep_policy must be 'all', 'any' or a positive integer, not {policy!r}")


def policy_met(n_ok: int, required: int) -> bool:
    """True once enough dependencies succeeded."""
    return n_ok >= required


def policy_impossible(n_bad: int, n_deps: int, required: int) -> bool:
    """True once too many dependencies ended badly for the policy ever to be met."""
    return n_bad > n_deps - required


def retry_delay(retry: int, backoff_s: float, backoff_max_s: float) -> float:
    """Delay before retry number ``retry`` (1 = the first retry) of a task.

    ``backoff_s * 2**(retry-1)``, capped at ``backoff_max_s``; 0 without backoff.
    """
    if backoff_s <= 0 or retry < 1:
        return 0.0
    if retry > 64:  # 2**64 * anything positive is past any sensible cap
        return float(backoff_max_s)
    return float(min(backoff_s * 2 ** (retry - 1), backoff_max_s))
