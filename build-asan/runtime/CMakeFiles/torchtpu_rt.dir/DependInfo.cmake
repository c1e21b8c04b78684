
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/runtime/src/base/alloc.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/alloc.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/alloc.c.o.d"
  "/work/main/runtime/src/base/dtype.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/dtype.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/dtype.c.o.d"
  "/work/main/runtime/src/base/hash.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/hash.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/hash.c.o.d"
  "/work/main/runtime/src/base/log.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/log.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/log.c.o.d"
  "/work/main/runtime/src/base/status.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/status.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/status.c.o.d"
  "/work/main/runtime/src/base/strbuf.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/strbuf.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/base/strbuf.c.o.d"
  "/work/main/runtime/src/cache/cache.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/cache/cache.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/cache/cache.c.o.d"
  "/work/main/runtime/src/eager/copy.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/copy.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/copy.c.o.d"
  "/work/main/runtime/src/eager/flush.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/flush.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/flush.c.o.d"
  "/work/main/runtime/src/eager/op.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/op.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/op.c.o.d"
  "/work/main/runtime/src/eager/record.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/record.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/record.c.o.d"
  "/work/main/runtime/src/eager/runtime.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/runtime.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/runtime.c.o.d"
  "/work/main/runtime/src/eager/scalars.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/scalars.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/scalars.c.o.d"
  "/work/main/runtime/src/eager/view.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/view.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/eager/view.c.o.d"
  "/work/main/runtime/src/ir/build.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/build.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/build.c.o.d"
  "/work/main/runtime/src/ir/graph.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/graph.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/graph.c.o.d"
  "/work/main/runtime/src/ir/print.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/print.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/ir/print.c.o.d"
  "/work/main/runtime/src/lower/common.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/common.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/common.c.o.d"
  "/work/main/runtime/src/lower/lower_elementwise.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_elementwise.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_elementwise.c.o.d"
  "/work/main/runtime/src/lower/lower_matmul.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_matmul.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_matmul.c.o.d"
  "/work/main/runtime/src/lower/lower_reduce.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_reduce.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/lower_reduce.c.o.d"
  "/work/main/runtime/src/lower/promote.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/promote.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/promote.c.o.d"
  "/work/main/runtime/src/lower/table.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/table.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/lower/table.c.o.d"
  "/work/main/runtime/src/pjrt/buffer.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/buffer.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/buffer.c.o.d"
  "/work/main/runtime/src/pjrt/client.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/client.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/client.c.o.d"
  "/work/main/runtime/src/pjrt/executable.c" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/executable.c.o" "gcc" "runtime/CMakeFiles/torchtpu_rt.dir/src/pjrt/executable.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
