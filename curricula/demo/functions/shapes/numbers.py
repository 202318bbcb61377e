"""Number helpers."""

from math import gcd

LIMIT = 10_000


def digit_sum(n):
    """
    >>> digit_sum(1234)
    10
    >>> digit_sum(-5)
    Traceback (most recent call last):
    ...
    ValueError: n must be non-negative
    """
    if n < 0:
        raise ValueError("n must be non-negative")
    total = 0
    while n:
        total += n % 10
        n //= 10
    return total


def reduce_fraction(a, b):
    """
    >>> reduce_fraction(6, 8)
    (3, 4)
    >>> reduce_fraction(5, 0)
    Traceback (most recent call last):
    ...
    ZeroDivisionError: zero denominator
    """
    if b == 0:
        raise ZeroDivisionError("zero denominator")
    g = gcd(a, b)
    return a // g, b // g


def collatz_steps(n):
    """Steps until the Collatz sequence of n reaches 1.

    >>> collatz_steps(6)
    8
    """
    steps = 0
    while n != 1 and steps < LIMIT:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
