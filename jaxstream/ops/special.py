"""Kernels the array API lacks, for every array namespace: the special functions erf,
erfinv and the normal CDF, and the running logsumexp.

JAX has them all; NumPy's namespace has none, so erf and the CDF are built here from
Cephes' rational approximations, accurate to a few ulp in float64, erfinv is SciPy's
(a dependency of JAX's), and the running logsumexp is NumPy's `logaddexp.accumulate`.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import jax.scipy.special

# Cephes' rational approximations of erf (|x| <= 1) and erfc (1 < |x|; past 27 erfc
# underflows).
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)


def polynomial(coefficients: tuple, x: Any) -> Any:
    """Horner's rule, highest power first."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * x + c
    return acc


def _erf_near_zero(xp: Any, a: Any) -> Any:
    z = a * a
    return a * polynomial(_ERF_T, z) / polynomial(_ERF_U, z)


def erfc_tail(xp: Any, x: Any) -> Any:
    """erfc(|x|) for |x| >= 1 (held at 1 below)."""
    x = xp.clip(xp.abs(x), 1.0, 27.0)
    return xp.exp(-x * x) * polynomial(_ERFC_P, x) / polynomial(_ERFC_Q, x)


def erf(xp: Any, a: Any) -> Any:
    if xp is jnp:
        return jax.scipy.special.erf(a)
    return xp.where(xp.abs(a) <= 1, _erf_near_zero(xp, a), xp.sign(a) * (1 - erfc_tail(xp, a)))


def erfinv(xp: Any, a: Any) -> Any:
    """The inverse of erf on (-1, 1): +-inf at +-1, NaN outside."""
    if xp is jnp:
        return jax.scipy.special.erfinv(a)
    import scipy.special  # here, not at the top: it adds 0.4 s to importing jaxstream

    return scipy.special.erfinv(a)


def normal_cdf(xp: Any, a: Any) -> Any:
    """Phi(a), computed from erfc in the lower tail, where 1 + erf(a / sqrt 2) cancels."""
    if xp is jnp:
        return jax.scipy.special.ndtr(a)
    z = a * math.sqrt(0.5)
    tail = erfc_tail(xp, z) * 0.5
    central = 0.5 + 0.5 * _erf_near_zero(xp, z)
    return xp.where(xp.abs(z) <= 1, central, xp.where(z > 0, 1 - tail, tail))


def logcumsumexp(xp: Any, a: Any, axis: int) -> Any:
    """`log(cumsum(exp(a)))` along `axis`, stable at any magnitude (a 0-d `a` is its own)."""
    if not a.ndim:
        return a + 0.0
    if xp is jnp:
        return jax.lax.cumlogsumexp(a, axis=axis)
    return xp.logaddexp.accumulate(a, axis=axis)
