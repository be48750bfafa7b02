"""The password hasher of users made in the test process."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneRoundPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 at one iteration instead of a million (~0.33 s a hash, and as much a
    password check, on this machine's CPUs: the fixtures that made three users for each test spent
    a second on it). The algorithm's name is Django's own, so a daphne started with the real
    settings checks these passwords as it checks any — and upgrades the hash on a password login
    there, which ends the sessions made here for that user (``force_login``): no test does both."""

    iterations = 1
