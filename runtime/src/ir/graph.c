// Graph storage: node array, arena, hash-consing, sticky errors.
#include <stdio.h>
#include <string.h>

#include "ir/ir_internal.h"

static const char* const op_names[] = {
#define TPU_IR_OP_NAME(e, name, cls) name,
    TPU_IR_OP_LIST(TPU_IR_OP_NAME)
#undef TPU_IR_OP_NAME
};

const char* tpu_ir_op_name(tpu_ir_op_t op) {
  return op >= 0 && op < TPU_IR_OP_COUNT ? op_names[op] : "?";
}

//===--- types ---===//

tpu_type_t tpu_type_make(tpu_dtype_t dtype, const int64_t* dims, int rank) {
  tpu_type_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  // A rank above TPU_MAX_RANK does not fit dims: the type is marked invalid
  // (rank -1), which add_node refuses, instead of overrunning the array.
  if (rank > TPU_MAX_RANK) {
    t.rank = -1;
    return t;
  }
  t.rank = rank;
  if (rank > 0) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

int64_t tpu_type_numel(const tpu_type_t* t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

bool tpu_type_eq(const tpu_type_t* a, const tpu_type_t* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

void tpu_type_str(const tpu_type_t* t, char* out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "tensor<");
  for (int i = 0; i < t->rank && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, "%lldx", (long long)t->dims[i]);
  if (n < size) snprintf(out + n, size - n, "%s>", tpu_dtype_mlir(t->dtype));
}

//===--- graph ---===//

tpu_status_t tpu_graph_create(tpu_graph_t** out) {
  *out = tpu_calloc(1, sizeof(tpu_graph_t));
  return *out ? TPU_OK
              : tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
}

void tpu_graph_destroy(tpu_graph_t* g) {
  if (!g) return;
  for (arena_chunk_t* c = g->arena; c;) {
    arena_chunk_t* next = c->next;
    tpu_free(c);
    c = next;
  }
  tpu_free(g->nodes);
  tpu_free(g->table);
  tpu_free(g->params);
  tpu_status_free(g->error);
  tpu_free(g);
}

void tpu_graph_reset(tpu_graph_t* g) {
  // Keep the largest chunk, free the rest.
  arena_chunk_t* keep = NULL;
  for (arena_chunk_t* c = g->arena; c;) {
    arena_chunk_t* next = c->next;
    if (!keep || c->cap > keep->cap) {
      tpu_free(keep);
      keep = c;
    } else {
      tpu_free(c);
    }
    c = next;
  }
  if (keep) {
    keep->next = NULL;
    keep->used = 0;
  }
  g->arena = keep;
  g->count = 0;
  g->num_params = 0;
  if (g->table) memset(g->table, 0, sizeof(int32_t) * g->table_cap);
  tpu_status_free(g->error);
  g->error = NULL;
}

static bool grow_table(tpu_graph_t* g);

void tpu_graph_truncate(tpu_graph_t* g, int32_t count) {
  if (count >= g->count && !g->error) return;
  if (count < g->count) {
    g->count = count;
    while (g->num_params > 0 && g->params[g->num_params - 1] >= count) --g->num_params;
    // Rebuild the hash-consing table from the surviving nodes.
    if (g->table) {
      memset(g->table, 0, sizeof(int32_t) * g->table_cap);
      uint32_t cap = g->table_cap;
      g->table_cap /= 2;  // grow_table doubles it back
      if (!grow_table(g)) g->table_cap = cap;
    }
  }
  tpu_status_free(g->error);
  g->error = NULL;
}

void* tpu_graph_alloc(tpu_graph_t* g, size_t size) {
  size = (size + 15) & ~(size_t)15;
  arena_chunk_t* c = g->arena;
  if (!c || c->used + size > c->cap) {
    size_t cap = c ? c->cap * 2 : 64 * 1024;
    while (cap < size) cap *= 2;
    arena_chunk_t* n = tpu_malloc(sizeof *n + cap);
    if (!n) return NULL;
    n->next = c;
    n->used = 0;
    n->cap = cap;
    g->arena = c = n;
  }
  void* p = c->data + c->used;
  c->used += size;
  return p;
}

tpu_status_t tpu_graph_error(const tpu_graph_t* g) { return g->error; }
bool tpu_graph_ok(const tpu_graph_t* g) { return g->error == NULL; }
int32_t tpu_graph_node_count(const tpu_graph_t* g) { return g->count; }

void tpu_graph_set_precision(tpu_graph_t* g, tpu_precision_t p) { g->precision = p; }

int64_t tpu_graph_precision_attr(const tpu_graph_t* g, tpu_dtype_t dtype) {
  return dtype == TPU_F32 || dtype == TPU_C64 ? (int64_t)g->precision + 1 : 0;
}

tpu_status_t tpu_graph_take_error(tpu_graph_t* g) {
  tpu_status_t s = g->error;
  g->error = NULL;
  return s;
}

void tpu_graph_fail(tpu_graph_t* g, tpu_status_t status) {
  if (!status) return;
  if (g->error) tpu_status_free(status);
  else g->error = status;
}

// Once the graph has failed, builders return TPU_VAL_NONE and lowerings go
// on to their end (the error is taken after): NONE reads as a node of no
// operands and a 0-d type, so what they ask of it stays in bounds.
static const tpu_node_t none_node;

const tpu_node_t* tpu_graph_node(const tpu_graph_t* g, tpu_val_t v) {
  return v >= 0 && v < g->count ? &g->nodes[v] : &none_node;
}

const tpu_type_t* tpu_ir_type(const tpu_graph_t* g, tpu_val_t v) {
  return &tpu_graph_node(g, v)->type;
}
tpu_dtype_t tpu_ir_dtype(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_node(g, v)->type.dtype;
}
int tpu_ir_rank(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_node(g, v)->type.rank;
}
const int64_t* tpu_ir_dims(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_node(g, v)->type.dims;
}
tpu_hash_t tpu_ir_hash(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_node(g, v)->hash;
}
tpu_ir_op_t tpu_ir_node_op(const tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_node(g, v)->op;
}

void tpu_graph_mark_users(const tpu_graph_t* g, bool* marked) {
  // Operands precede their users, so one pass in order reaches them all.
  for (int32_t i = 0; i < g->count; ++i) {
    const tpu_node_t* n = &g->nodes[i];
    for (int32_t k = 0; !marked[i] && k < n->num_operands; ++k) marked[i] = marked[n->operands[k]];
  }
}

bool tpu_graph_depends_on(const tpu_graph_t* g, tpu_val_t v, tpu_val_t on) {
  while (g->nodes[on].op == TPU_IR_RESHAPE || g->nodes[on].op == TPU_IR_TRANSPOSE)
    on = g->nodes[on].operands[0];
  if (v <= on) return v == on;  // operands precede their users
  bool* marked = tpu_calloc((size_t)g->count, sizeof *marked);
  if (!marked) return true;
  marked[on] = true;
  tpu_graph_mark_users(g, marked);
  bool depends = marked[v];
  tpu_free(marked);
  return depends;
}

int32_t tpu_graph_param_count(const tpu_graph_t* g) { return g->num_params; }
tpu_val_t tpu_graph_param(const tpu_graph_t* g, int32_t i) {
  return g->params[i];
}

static tpu_hash_t hash_type(tpu_hash_t h, const tpu_type_t* t) {
  h = tpu_hash_u64(h, (uint64_t)t->dtype << 32 | (uint32_t)t->rank);
  return tpu_hash_bytes(h, t->dims, sizeof(int64_t) * (size_t)t->rank);
}

static bool node_equal(const tpu_node_t* n, tpu_ir_op_t op,
                       const tpu_val_t* operands, int num_operands,
                       const void* attrs, size_t attr_size, int extra,
                       const tpu_type_t* types, int num_types) {
  if (n->op != op || n->num_operands != num_operands ||
      n->attr_size != attr_size || n->extra != extra)
    return false;
  if (num_operands &&
      memcmp(n->operands, operands, sizeof(tpu_val_t) * (size_t)num_operands))
    return false;
  if (attr_size && memcmp(n->attrs, attrs, attr_size)) return false;
  if (n->num_results) {
    if (n->num_results != num_types) return false;
    for (int i = 0; i < num_types; ++i)
      if (!tpu_type_eq(&n->result_types[i], &types[i])) return false;
    return true;
  }
  return num_types == 1 && tpu_type_eq(&n->type, types);
}

static bool grow_table(tpu_graph_t* g) {
  uint32_t cap = g->table_cap ? g->table_cap * 2 : 1024;
  int32_t* t = tpu_calloc(cap, sizeof(int32_t));
  if (!t) return false;
  for (int32_t i = 0; i < g->count; ++i) {
    if (g->nodes[i].op == TPU_IR_PARAM) continue;
    uint32_t k = (uint32_t)g->nodes[i].hash.lo & (cap - 1);
    while (t[k]) k = (k + 1) & (cap - 1);
    t[k] = i + 1;
  }
  tpu_free(g->table);
  g->table = t;
  g->table_cap = cap;
  return true;
}

static tpu_val_t add_node(tpu_graph_t* g, tpu_ir_op_t op,
                          const tpu_val_t* operands, int num_operands,
                          const void* attrs, size_t attr_size, int extra,
                          const tpu_type_t* types, int num_types, bool multi) {
  if (g->error) return TPU_VAL_NONE;
  for (int i = 0; i < num_operands; ++i)
    if (operands[i] < 0 || operands[i] >= g->count) {
      tpu_graph_fail(g, tpu_status_make(TPU_CODE_INTERNAL,
                                        "%s: operand %d is not a value",
                                        tpu_ir_op_name(op), i));
      return TPU_VAL_NONE;
    }
  for (int i = 0; i < num_types; ++i)
    if (types[i].rank < 0 || types[i].rank > TPU_MAX_RANK) {
      tpu_graph_fail(g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                        "%s: a result of more than %d dimensions",
                                        tpu_ir_op_name(op), TPU_MAX_RANK));
      return TPU_VAL_NONE;
    }
  tpu_hash_t h = tpu_hash_u64((tpu_hash_t){0x7470, 0x7531},
                              (uint64_t)op << 32 | (uint32_t)extra);
  for (int i = 0; i < num_operands; ++i) {
    tpu_hash_t oh = g->nodes[operands[i]].hash;
    h = tpu_hash_u64(h, oh.lo);
    h = tpu_hash_u64(h, oh.hi);
  }
  if (attr_size) h = tpu_hash_bytes(h, attrs, attr_size);
  for (int i = 0; i < num_types; ++i) h = hash_type(h, &types[i]);

  bool consable = op != TPU_IR_PARAM;
  if (consable && (uint32_t)(g->count + 1) * 2 > g->table_cap &&
      !grow_table(g)) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
    return TPU_VAL_NONE;
  }
  uint32_t k = 0;
  if (consable) {
    k = (uint32_t)h.lo & (g->table_cap - 1);
    for (; g->table[k]; k = (k + 1) & (g->table_cap - 1)) {
      const tpu_node_t* n = &g->nodes[g->table[k] - 1];
      if (tpu_hash_eq(n->hash, h) &&
          node_equal(n, op, operands, num_operands, attrs, attr_size, extra,
                     types, num_types))
        return g->table[k] - 1;
    }
  }
  if (g->count == g->cap) {
    int32_t cap = g->cap ? g->cap * 2 : 256;
    tpu_node_t* nodes = tpu_realloc(g->nodes, sizeof *nodes * (size_t)cap);
    if (!nodes) {
      tpu_graph_fail(g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
      return TPU_VAL_NONE;
    }
    g->nodes = nodes;
    g->cap = cap;
  }
  tpu_node_t* n = &g->nodes[g->count];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->num_operands = num_operands;
  n->extra = extra;
  n->hash = h;
  n->attr_size = (uint32_t)attr_size;
  tpu_val_t* ops = num_operands ? tpu_graph_alloc(g, sizeof(tpu_val_t) * (size_t)num_operands) : NULL;
  void* at = attr_size ? tpu_graph_alloc(g, attr_size) : NULL;
  tpu_type_t* rt = multi ? tpu_graph_alloc(g, sizeof(tpu_type_t) * (size_t)num_types) : NULL;
  if ((num_operands && !ops) || (attr_size && !at) || (multi && !rt)) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
    return TPU_VAL_NONE;
  }
  if (num_operands) memcpy(ops, operands, sizeof(tpu_val_t) * (size_t)num_operands);
  if (attr_size) memcpy(at, attrs, attr_size);
  n->operands = ops;
  n->attrs = at;
  if (multi) {
    memcpy(rt, types, sizeof(tpu_type_t) * (size_t)num_types);
    n->result_types = rt;
    n->num_results = num_types;
  } else {
    n->type = types[0];
  }
  if (consable) g->table[k] = g->count + 1;
  return g->count++;
}

tpu_val_t tpu_graph_add(tpu_graph_t* g, tpu_ir_op_t op,
                        const tpu_val_t* operands, int num_operands,
                        const void* attrs, size_t attr_size,
                        const tpu_type_t* type) {
  return add_node(g, op, operands, num_operands, attrs, attr_size, 0, type, 1,
                  false);
}

tpu_val_t tpu_graph_add_multi(tpu_graph_t* g, tpu_ir_op_t op,
                              const tpu_val_t* operands, int num_operands,
                              const void* attrs, size_t attr_size,
                              const tpu_type_t* types, int num_results) {
  return add_node(g, op, operands, num_operands, attrs, attr_size, 0, types,
                  num_results, true);
}

tpu_val_t tpu_ir_param(tpu_graph_t* g, const tpu_type_t* type) {
  if (g->error) return TPU_VAL_NONE;
  if (g->num_params == g->params_cap) {
    int32_t cap = g->params_cap ? g->params_cap * 2 : 32;
    int32_t* p = tpu_realloc(g->params, sizeof *p * (size_t)cap);
    if (!p) {
      tpu_graph_fail(g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
      return TPU_VAL_NONE;
    }
    g->params = p;
    g->params_cap = cap;
  }
  tpu_val_t v = add_node(g, TPU_IR_PARAM, NULL, 0, NULL, 0, g->num_params,
                         type, 1, false);
  if (v != TPU_VAL_NONE) g->params[g->num_params++] = v;
  return v;
}

tpu_val_t tpu_ir_result(tpu_graph_t* g, tpu_val_t node, int index) {
  if (g->error) return TPU_VAL_NONE;
  const tpu_node_t* n = &g->nodes[node];
  if (index < 0 || index >= n->num_results) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_INTERNAL,
                                      "%s has no result %d",
                                      tpu_ir_op_name(n->op), index));
    return TPU_VAL_NONE;
  }
  tpu_type_t t = n->result_types[index];
  return add_node(g, TPU_IR_RESULT, &node, 1, NULL, 0, index, &t, 1, false);
}
