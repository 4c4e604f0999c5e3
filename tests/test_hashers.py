"""The suite's quick password hasher (tests/hashers.py) makes hashes the production hasher still checks."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password


def test_the_suite_hashes_with_one_iteration_and_the_production_hasher_checks_those_hashes():
    encoded = make_password("pw-someone-123")
    assert encoded.startswith("pbkdf2_sha256$1$"), encoded
    assert check_password("pw-someone-123", encoded) and not check_password("pw-someone-124", encoded)
    production = PBKDF2PasswordHasher()  # what a worker or manage.py the suite starts uses
    assert production.verify("pw-someone-123", encoded) and not production.verify("pw-someone-124", encoded)
    assert production.must_update(encoded)  # and it re-hashes on the first sign-in there
