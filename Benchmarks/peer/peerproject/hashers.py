"""Argon2id with Gatehouse's default parameters (m=19456 KiB, t=2, p=1), so both servers hash alike."""

from django.contrib.auth.hashers import Argon2PasswordHasher


class GatehouseArgon2PasswordHasher(Argon2PasswordHasher):
    # Django's own defaults are m=102400 KiB, t=2, p=8; Gatehouse's (OWASP's) are these.
    memory_cost = 19456
    time_cost = 2
    parallelism = 1
