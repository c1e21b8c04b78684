// The CPython module torchtpu._C: what the Python package calls.
#include <ATen/Context.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/autograd/variable.h>

#include <thread>

#include "binding.h"

namespace py = pybind11;

namespace torchtpu {
namespace {

c10::Device tpu_device(int i) {
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(i)};
}

tpu_mode_t mode_from_name(const std::string& name) {
  if (name == "debug") return TPU_MODE_DEBUG;
  if (name == "strict") return TPU_MODE_STRICT;
  if (name == "fused") return TPU_MODE_FUSED;
  throw py::value_error("unknown mode '" + name + "': expected debug, strict or fused");
}

// Waits for fused mode's background compiles (they count and are reported
// once done); without the GIL, which the compile hook may take.
void wait_compiles() {
  py::gil_scoped_release no_gil;
  tpu_wait_compiles();
}

py::dict metrics() {
  wait_compiles();  // compiles asked for so far count, wherever they run
  tpu_metrics_t m;
  tpu_metrics_get(&m);
  py::dict d;
  d["compiles"] = m.compiles;
  d["cache_hits"] = m.cache_hits;
  d["cache_misses"] = m.cache_misses;
  d["disk_hits"] = m.disk_hits;
  d["executions"] = m.executions;
  d["host_syncs"] = m.host_syncs;
  d["h2d_bytes"] = m.h2d_bytes;
  d["d2h_bytes"] = m.d2h_bytes;
  d["h2d_copies"] = m.h2d_copies;
  d["d2h_copies"] = m.d2h_copies;
  d["flushes"] = m.flushes;
  d["graph_nodes"] = m.graph_nodes;
  d["ops"] = m.ops_recorded;
  d["compile_seconds"] = m.compile_seconds;
  py::dict fb;
  const char* names[512];
  int64_t counts[512];
  int n = tpu_metrics_fallbacks(names, counts, 512);
  for (int i = 0; i < n && i < 512; ++i) fb[names[i]] = counts[i];
  d["fallbacks"] = fb;
  return d;
}

py::dict memory_stats(int device) {
  c10::CachingDeviceAllocator::DeviceStats s = device_stats(static_cast<c10::DeviceIndex>(device));
  constexpr size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  py::dict d;
  auto put = [&](const std::string& what, const c10::CachingAllocator::StatArray& stat) {
    d[(what + ".all.current").c_str()] = stat[all].current;
    d[(what + ".all.peak").c_str()] = stat[all].peak;
    d[(what + ".all.allocated").c_str()] = stat[all].allocated;
    d[(what + ".all.freed").c_str()] = stat[all].freed;
  };
  put("allocated_bytes", s.allocated_bytes);
  put("reserved_bytes", s.reserved_bytes);
  put("active_bytes", s.active_bytes);
  put("requested_bytes", s.requested_bytes);
  put("allocation", s.allocation);
  put("segment", s.segment);
  put("active", s.active);
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  tpu_memory_stats_t m;
  tpu_client_memory_stats(tpu_runtime_client(), device, &m);
  d["bytes_limit"] = m.bytes_cap ? m.bytes_cap : m.bytes_limit;
  return d;
}

py::dict device_info(int device) {
  ensure_runtime();
  tpu_client_t* c = tpu_runtime_client();
  TORCH_CHECK(device >= 0 && device < tpu_client_device_count(c), "Invalid device index ",
              device);
  int64_t v[3];
  tpu_client_stablehlo_version(c, v);
  py::dict d;
  d["kind"] = tpu_client_device_kind(c, device);
  d["platform"] = tpu_client_platform(c);
  d["platform_version"] = tpu_client_platform_version(c);
  d["plugin"] = tpu_client_plugin_path(c);
  d["pjrt_api"] = "0." + std::to_string(tpu_client_api_minor(c));
  d["xla_version"] = tpu_client_xla_version(c);
  d["stablehlo"] = std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
  tpu_memory_stats_t m;
  tpu_client_memory_stats(c, device, &m);
  d["memory_limit"] = m.bytes_limit;
  return d;
}

// At exit, see _shutdown.py: autograd's device worker destroys each finished
// backward pass after waking its caller; the pass's thread-local snapshot
// holds Python objects, whose release needs the GIL. A backward pass run
// from a plain C++ thread (whose snapshot holds no Python object) makes the
// worker finish releasing the previous pass while the GIL is free to take.
void drain_autograd_worker() {
  py::gil_scoped_release no_gil;
  std::thread t([] {
    try {
      at::Tensor x = new_tensor({1}, c10::ScalarType::Float, 0);
      x.set_requires_grad(true);
      x.sum().backward();
    } catch (const std::exception&) {  // exiting anyway
    }
  });
  t.join();
}

}  // namespace
}  // namespace torchtpu

PYBIND11_MODULE(_C, m) {
  using namespace torchtpu;
  m.doc() = "torchtpu runtime binding";
  m.def("_init", [] { ensure_runtime(); });
  m.def("_init_error", []() -> std::string {
    tpu_status_t s = tpu_runtime_init();
    std::string msg = s ? tpu_status_message(s) : "";
    tpu_status_free(s);
    return msg;
  });
  m.def("_device_count", [] { return device_count(); });
  m.def("_is_initialized", [] { return tpu_runtime_client() != nullptr && !tpu_forked_child(); });
  m.def("_is_in_bad_fork", [] { return tpu_forked_child(); });
  m.def("_manual_seed_all", [](uint64_t seed) { manual_seed_all(seed); });
  m.def("_set_sync_debug_mode", [](int mode) { set_sync_debug_mode(mode); });
  m.def("_get_sync_debug_mode", [] { return sync_debug_mode(); });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_quiesce", [] {
    py::gil_scoped_release no_gil;
    tpu_quiesce();
  });
  m.def("_synchronize", [](int d) {
    py::gil_scoped_release no_gil;
    check(tpu_synchronize(d));
  });
  m.def("_flush", [](int d) {
    py::gil_scoped_release no_gil;
    check(tpu_flush(d));
  });
  m.def("_wait_launches", [](int d) {
    py::gil_scoped_release no_gil;
    check(tpu_wait_launches(d));
  });
  m.def("_set_mode", [](const std::string& name, bool this_thread) {
    tpu_mode_t mode = mode_from_name(name);
    if (this_thread) tpu_mode_set(mode);
    else tpu_mode_set_default(mode);
  });
  m.def("_get_mode", [] { return std::string(tpu_mode_name(tpu_mode_get())); });
  m.def("_thread_mode", [] { return tpu_mode_thread(); });
  m.def("_restore_thread_mode", [](int m) { tpu_mode_restore(m); });
  m.def("_metrics", &metrics);
  m.def("_reset_metrics", [] {
    wait_compiles();  // counted before, not after
    tpu_metrics_reset();
    reset_compile_sites();
  });
  m.def("_compile_sites", [] {
    wait_compiles();
    py::list out;
    for (const auto& s : compile_sites()) {
      py::dict reasons;
      for (const auto& [why, n] : s.reasons) reasons[why.c_str()] = n;
      out.append(py::dict(py::arg("frame") = s.frame, py::arg("op") = s.op,
                          py::arg("compiles") = s.compiles, py::arg("from_disk") = s.from_disk,
                          py::arg("steps") = s.steps, py::arg("reads") = s.reads,
                          py::arg("settled") = s.settled,
                          py::arg("reasons") = reasons));
    }
    return out;
  });
  m.def("_mark_step", &mark_step);
  m.def("_drain_autograd_worker", &drain_autograd_worker);
  m.def("_steps_taken", &steps_taken);
  m.def("_op_table", [] {
    py::list rows;
    for (int i = 0; i < tpu_op_count(); ++i)
      rows.append(py::make_tuple(tpu_op_name(i), tpu_op_aten(i)));
    return rows;
  });
  m.def("_register_kernel", &register_kernel);
  m.def("_meta_layout_runs", &meta_layout_runs);
  m.def("_register_fallback", &register_fallback);
  m.def("_autograd_ran_on_device", &autograd_ran_on_device);
  m.def("_memory_stats", &memory_stats);
  m.def("_mem_get_info", [](int d) { return mem_get_info(static_cast<c10::DeviceIndex>(d)); });
  m.def("_reset_peak_memory_stats", [](int d) {
    ensure_runtime();
    tpu_client_reset_peak(tpu_runtime_client(), d);
  });
  m.def("_reset_accumulated_memory_stats", [](int d) {
    ensure_runtime();
    tpu_client_reset_accumulated(tpu_runtime_client(), d);
  });
  m.def("_set_memory_cap", [](int d, int64_t bytes) {
    ensure_runtime();
    tpu_client_set_memory_cap(tpu_runtime_client(), d, bytes);
  });
  m.def("_device_info", &device_info);
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(at::globalContext().defaultGenerator(tpu_device(d))));
  });
}
