// Private to src/ir: node layout, attribute structs, the arena.
#ifndef TPU_IR_INTERNAL_H_
#define TPU_IR_INTERNAL_H_

#include "ir/ir.h"

struct tpu_node {
  tpu_ir_op_t op;
  int32_t num_operands;
  int32_t num_results;  // > 0 for multi-result nodes (read via RESULT)
  int32_t extra;        // PARAM: index; RESULT: result index
  uint32_t attr_size;
  const tpu_val_t* operands;
  const void* attrs;
  const tpu_type_t* result_types;  // multi-result nodes
  tpu_type_t type;                 // single-result nodes and RESULT
  tpu_hash_t hash;
};

typedef struct arena_chunk {
  struct arena_chunk* next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} arena_chunk_t;

struct tpu_graph {
  tpu_node_t* nodes;
  int32_t count, cap;
  int32_t* table;  // hash-consing: node index + 1, 0 = empty
  uint32_t table_cap;
  int32_t* params;
  int32_t num_params, params_cap;
  arena_chunk_t* arena;
  tpu_status_t error;
  tpu_precision_t precision;
};

// The precision attribute of a product of `dtype` operands: the graph's
// precision + 1 for float32 (and complex64) operands, the ones
// torch.set_float32_matmul_precision governs; 0 (none printed) otherwise.
int64_t tpu_graph_precision_attr(const tpu_graph_t* g, tpu_dtype_t dtype);


// Adds a node (or finds its twin). `attrs` is copied; its bytes take part in
// hashing and equality, so attribute structs must be fully initialized
// (memset to 0 first, to clear padding).
tpu_val_t tpu_graph_add(tpu_graph_t* g, tpu_ir_op_t op,
                        const tpu_val_t* operands, int num_operands,
                        const void* attrs, size_t attr_size,
                        const tpu_type_t* type);
tpu_val_t tpu_graph_add_multi(tpu_graph_t* g, tpu_ir_op_t op,
                              const tpu_val_t* operands, int num_operands,
                              const void* attrs, size_t attr_size,
                              const tpu_type_t* types, int num_results);
const tpu_node_t* tpu_graph_node(const tpu_graph_t* g, tpu_val_t v);

// The builders' shared checks (build*.c): an operand is usable only while
// the graph holds no error; a bad argument fails the graph and yields
// TPU_VAL_NONE.
#define FAIL(g, ...)                                                         \
  (tpu_graph_fail((g), tpu_status_make(TPU_CODE_INVALID_ARGUMENT, __VA_ARGS__)), \
   TPU_VAL_NONE)

static inline bool valid(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_ok(g) && v >= 0 && v < g->count;
}

static inline const tpu_type_t* type_of(const tpu_graph_t* g, tpu_val_t v) {
  return &g->nodes[v].type;
}

// Prints the regions of an LU loop node `v` (print_loop.c).
struct tpu_strbuf;
void tpu_print_loop(struct tpu_strbuf* sb, const tpu_node_t* n, int32_t v);
// Writes a product's ", precision_config = [...]" (from its precision
// attribute, tpu_graph_precision_attr) into buf, or "" for none.
void tpu_precision_text(char* buf, size_t size, int64_t precision);

// Attribute structs (zero-initialized before filling).
typedef struct const_attrs {
  tpu_dtype_t dtype;  // F32/F64/ints/bool/complex; others are converted
  int32_t is_array;   // a dense i64 array follows in `array`
  uint64_t bits, bits_im;
  int64_t count;
  int64_t array[];    // when is_array
} const_attrs_t;

typedef struct dims_attrs {  // iota, concat, transpose, broadcast, reverse,
  int32_t n;                 // dynamic_slice sizes, reduce dims
  int32_t body;              // reduce/scatter-like bodies
  int64_t v[TPU_MAX_RANK];
} dims_attrs_t;

typedef struct slice_attrs {
  int64_t start[TPU_MAX_RANK], limit[TPU_MAX_RANK], strides[TPU_MAX_RANK];
} slice_attrs_t;  // also pad: lo, hi, interior

typedef struct gather_attrs {
  tpu_gather_dims_t dn;
  int64_t slice_sizes[TPU_MAX_RANK];
} gather_attrs_t;

typedef struct scatter_attrs {
  tpu_scatter_dims_t dn;
  int32_t body;
} scatter_attrs_t;

typedef struct window_attrs {
  tpu_window_t w;
  int32_t body;
} window_attrs_t;

typedef struct sort_attrs {
  int64_t dim;
  int32_t order, stable;
} sort_attrs_t;

typedef struct collective_attrs {
  int32_t body, num_groups, group_size, pad;
  int64_t dim, dim2;
  int64_t groups[64];
} collective_attrs_t;

#endif  // TPU_IR_INTERNAL_H_
