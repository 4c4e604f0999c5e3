"""The suite's password hasher: Django's PBKDF2 with one iteration instead of a million.

A million iterations is 0.2 s of CPU for every password set and every sign-in, and the suite sets and checks some
thousands. The hash keeps Django's ``pbkdf2_sha256$<iterations>$...`` form, so a Scout process the suite starts (a
worker, ``manage.py``), which uses the real hasher, still checks these passwords: the iteration count is read from
the hash."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
