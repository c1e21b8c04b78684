file(REMOVE_RECURSE
  "CMakeFiles/tpu_tests.dir/tests/runner.c.o"
  "CMakeFiles/tpu_tests.dir/tests/runner.c.o.d"
  "CMakeFiles/tpu_tests.dir/tests/test_engine.c.o"
  "CMakeFiles/tpu_tests.dir/tests/test_engine.c.o.d"
  "CMakeFiles/tpu_tests.dir/tests/test_ir.c.o"
  "CMakeFiles/tpu_tests.dir/tests/test_ir.c.o.d"
  "CMakeFiles/tpu_tests.dir/tests/test_pjrt.c.o"
  "CMakeFiles/tpu_tests.dir/tests/test_pjrt.c.o.d"
  "tpu_tests"
  "tpu_tests.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/tpu_tests.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
