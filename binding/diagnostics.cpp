// Recompile diagnostics: every compilation is attributed to the Python line
// that caused it and, when the same line compiles again, to a reason. The
// same line is named in the message of a device-side check an op records.
#include <Python.h>
#include <frameobject.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "binding.h"

namespace torchtpu {
namespace {

using Hash = std::pair<uint64_t, uint64_t>;

// The reasons a line needed a new program, as recompiles() reports them.
// A number an op special-cases (pow's exponent 2 or 0.5, add's alpha 1) is
// built into the program at those values and is an input at others: when
// the line's numbers went in or out of the program, it says so.
const char* const kConstant = "a constant or attribute changed (sizes, dims, values)";
const char* const kSpecialNumber =
    "a constant or attribute changed (a number at a value the op special-cases, "
    "as pow's exponent 2 or add's alpha 1)";
const char* const kInputType = "input shape or dtype changed";
// The same ops reading more or fewer tensors: one tensor passed as two
// arguments (x * x, then x * y), or a value that leaves an argument unread
// (addmm's beta 0, a power of 0). No input's type changed.
const char* const kInputsRead =
    "the tensors it reads changed (one passed twice, or one an op leaves unread at a "
    "special value, as addmm's beta 0)";
const char* const kGraphCut = "graph cut at a different point";

struct Site {
  std::string frame, op;
  int programs = 0, from_disk = 0;  // new programs; those loaded from the disk cache
  std::map<std::string, int> reasons;
  std::set<int64_t> steps;  // training steps in which it needed a new program
  std::set<int64_t> reads;  // host reads before each time it did
  int64_t last_reads = 0, last_hits = 0;  // host reads and cache hits before its last
  // The graphs (ops), graphs with how many tensors they read (counted), with
  // their tensor inputs' types (typed) and with the numbers they take as
  // inputs too (numbered) it needed programs for. A line may need several programs each step (two matmuls
  // of different shapes, the backward ops of every layer at
  // loss.backward()): a reason compares with all of them, not just the
  // last, which is often the line's other program.
  std::set<Hash> graphs;
  std::set<std::pair<Hash, int>> counted;
  std::set<std::pair<Hash, Hash>> typed;
  std::set<std::pair<std::pair<Hash, Hash>, Hash>> numbered;
};

std::mutex lock;
std::map<std::string, Site> sites;

// The directories of torch's and torchtpu's Python files, found once (with
// the GIL held): a path that merely contains "/torchtpu/", as a clone of
// this repository named so does, is the user's.
const std::vector<std::string>& package_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::vector<std::string> out;
    for (const char* name : {"torch", "torchtpu"}) {
      PyObject* key = PyUnicode_FromString(name);
      PyObject* module = key ? PyImport_GetModule(key) : nullptr;
      Py_XDECREF(key);
      PyObject* file = module ? PyObject_GetAttrString(module, "__file__") : nullptr;
      const char* path = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : nullptr;
      const char* slash = path ? std::strrchr(path, '/') : nullptr;
      if (slash) out.emplace_back(path, slash + 1 - path);
      Py_XDECREF(file);
      Py_XDECREF(module);
    }
    PyErr_Clear();
    return out;
  }();
  return dirs;
}

bool internal_file(const char* f) {
  for (const std::string& dir : package_dirs())
    if (std::strncmp(f, dir.c_str(), dir.size()) == 0) return true;
  return std::strncmp(f, "<frozen", 7) == 0;
}

// The innermost frame outside torch and torchtpu: "file:line in function".
std::string user_frame() {
  if (!Py_IsInitialized() || !PyGILState_GetThisThreadState())
    return "(autograd thread)";  // backward ops run on C++ threads
  PyGILState_STATE st = PyGILState_Ensure();
  std::string where = "(no Python frame)";
  PyFrameObject* f = PyEval_GetFrame();
  if (!f) where = "(backward pass)";  // autograd's worker runs no Python code
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (!file) file = "?";
    if (!internal_file(file)) {
      const char* func = PyUnicode_AsUTF8(code->co_name);
      where = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f)) + " in " +
              (func ? func : "?");
      Py_DECREF(code);
      Py_DECREF(f);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  PyErr_Clear();
  PyGILState_Release(st);
  return where;
}

void on_compile(void*, const tpu_compile_event_t* e) {
  std::string frame = e->first_site && *e->first_site ? e->first_site : user_frame();
  std::string op = e->first_op >= 0 ? tpu_op_name(e->first_op) : "copy";
  std::lock_guard<std::mutex> g(lock);
  Site& s = sites[frame + "|" + op];
  Hash ops{e->ops_hash.lo, e->ops_hash.hi};
  Hash inputs{e->inputs_hash.lo, e->inputs_hash.hi};
  Hash numbers{e->numbers_hash.lo, e->numbers_hash.hi};
  if (s.programs == 0) {
    s.frame = frame;
    s.op = op;
  } else if (s.numbered.count({{ops, inputs}, numbers})) {
    ++s.reasons[kConstant];
  } else if (s.typed.count({ops, inputs})) {
    ++s.reasons[kSpecialNumber];
  } else if (s.counted.count({ops, e->tensor_inputs})) {
    ++s.reasons[kInputType];
  } else if (s.graphs.count(ops)) {
    ++s.reasons[kInputsRead];
  } else {
    ++s.reasons[kGraphCut];
  }
  ++s.programs;
  s.from_disk += e->from_disk;
  s.steps.insert(e->step);
  s.reads.insert(e->reads);
  s.last_reads = e->reads;
  s.last_hits = e->hits;
  s.graphs.insert(ops);
  s.counted.insert({ops, e->tensor_inputs});
  s.typed.insert({ops, inputs});
  s.numbered.insert({{ops, inputs}, numbers});
}

void on_check(void*, char* buf, size_t size) {
  std::snprintf(buf, size, "%s", user_frame().c_str());
}

struct InstallHook {
  InstallHook() {
    tpu_set_compile_hook(&on_compile, nullptr);
    tpu_set_site_hook(&on_check, nullptr);
  }
} install_hook;

}  // namespace

PythonLockReleased::PythonLockReleased()
    : saved_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}

PythonLockReleased::~PythonLockReleased() {
  if (saved_) PyEval_RestoreThread(static_cast<PyThreadState*>(saved_));
}

std::vector<CompileSite> compile_sites() {
  tpu_metrics_t m;
  tpu_metrics_get(&m);
  std::lock_guard<std::mutex> g(lock);
  std::vector<CompileSite> out;
  for (const auto& [key, s] : sites)
    out.push_back({s.frame, s.op, s.programs - s.from_disk, s.from_disk,
                   static_cast<int>(s.steps.size()), static_cast<int>(s.reads.size()),
                   m.host_syncs > s.last_reads && m.cache_hits > s.last_hits, s.reasons});
  return out;
}

void mark_step() { tpu_step_mark(); }
int64_t steps_taken() { return tpu_steps_taken(); }

void reset_compile_sites() {
  std::lock_guard<std::mutex> g(lock);
  sites.clear();
  tpu_steps_reset();  // a new loop may not train
}

}  // namespace torchtpu
