# Empty dependencies file for tpu_tests.
# This may be replaced when dependencies are built.
