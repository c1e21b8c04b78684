
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/runtime/tests/runner.c" "runtime/CMakeFiles/tpu_tests.dir/tests/runner.c.o" "gcc" "runtime/CMakeFiles/tpu_tests.dir/tests/runner.c.o.d"
  "/work/main/runtime/tests/test_engine.c" "runtime/CMakeFiles/tpu_tests.dir/tests/test_engine.c.o" "gcc" "runtime/CMakeFiles/tpu_tests.dir/tests/test_engine.c.o.d"
  "/work/main/runtime/tests/test_ir.c" "runtime/CMakeFiles/tpu_tests.dir/tests/test_ir.c.o" "gcc" "runtime/CMakeFiles/tpu_tests.dir/tests/test_ir.c.o.d"
  "/work/main/runtime/tests/test_pjrt.c" "runtime/CMakeFiles/tpu_tests.dir/tests/test_pjrt.c.o" "gcc" "runtime/CMakeFiles/tpu_tests.dir/tests/test_pjrt.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/build-asan/runtime/CMakeFiles/torchtpu_rt.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
