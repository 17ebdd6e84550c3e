#!/bin/sh
# Check the team's policy and run its tests in CI (from the directory `baton init` wrote).
# Any failure exits non-zero. Add the states of real threads to states/ as you meet them.
set -e
baton check --deny-warnings policies/team.policy
baton test --coverage policies/tests/
baton diff --from default --to policies/team.policy --corpus states/
