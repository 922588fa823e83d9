#!/usr/bin/env bash
# Prints the path of a Python interpreter with argon2-cffi (the reference C implementation of Argon2), for the
# differential tests and the benchmark:
#   GATEHOUSE_ARGON2_REFERENCE=$(bash scripts/argon2-reference.sh) swift run -c release argon2-bench
# It is the project's one virtual environment; see scripts/python-env.sh.
exec bash "$(dirname "${BASH_SOURCE[0]}")/python-env.sh"
