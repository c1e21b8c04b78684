// Builders of the collectives (all_reduce, all_gather, reduce_scatter,
// all_to_all) and of the optimization barrier.
#include <string.h>

#include "ir/ir_internal.h"

static tpu_val_t collective(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t x,
                            tpu_body_t body, int64_t dim, int64_t dim2,
                            const int64_t* groups, int num_groups,
                            int group_size, const tpu_type_t* t) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  if (num_groups * group_size > 64 || group_size < 1)
    return FAIL(g, "collective: too many devices");
  collective_attrs_t a;
  memset(&a, 0, sizeof a);
  a.body = body;
  a.num_groups = num_groups;
  a.group_size = group_size;
  a.dim = dim;
  a.dim2 = dim2;
  memcpy(a.groups, groups, sizeof(int64_t) * (size_t)(num_groups * group_size));
  return tpu_graph_add(g, op, &x, 1, &a, sizeof a, t);
}

tpu_val_t tpu_ir_all_reduce(tpu_graph_t* g, tpu_val_t x, tpu_body_t body,
                            const int64_t* groups, int num_groups,
                            int group_size) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  return collective(g, TPU_IR_ALL_REDUCE, x, body, 0, 0, groups, num_groups,
                    group_size, type_of(g, x));
}

tpu_val_t tpu_ir_all_gather(tpu_graph_t* g, tpu_val_t x, int64_t dim,
                            const int64_t* groups, int num_groups,
                            int group_size) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = *type_of(g, x);
  if (dim < 0 || dim >= t.rank) return FAIL(g, "all_gather: bad dim");
  t.dims[dim] *= group_size;
  return collective(g, TPU_IR_ALL_GATHER, x, 0, dim, 0, groups, num_groups,
                    group_size, &t);
}

tpu_val_t tpu_ir_reduce_scatter(tpu_graph_t* g, tpu_val_t x, int64_t dim,
                                tpu_body_t body, const int64_t* groups,
                                int num_groups, int group_size) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = *type_of(g, x);
  if (dim < 0 || dim >= t.rank || t.dims[dim] % group_size)
    return FAIL(g, "reduce_scatter: dim %lld not divisible by %d", (long long)dim, group_size);
  t.dims[dim] /= group_size;
  return collective(g, TPU_IR_REDUCE_SCATTER, x, body, dim, 0, groups,
                    num_groups, group_size, &t);
}

tpu_val_t tpu_ir_all_to_all(tpu_graph_t* g, tpu_val_t x, int64_t split_dim,
                            int64_t concat_dim, const int64_t* groups,
                            int num_groups, int group_size) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = *type_of(g, x);
  if (split_dim < 0 || split_dim >= t.rank || concat_dim < 0 ||
      concat_dim >= t.rank || t.dims[split_dim] % group_size)
    return FAIL(g, "all_to_all: bad dims");
  t.dims[split_dim] /= group_size;
  t.dims[concat_dim] *= group_size;
  return collective(g, TPU_IR_ALL_TO_ALL, x, 0, split_dim, concat_dim, groups,
                    num_groups, group_size, &t);
}

tpu_val_t tpu_ir_barrier(tpu_graph_t* g, tpu_val_t x) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  return tpu_graph_add(g, TPU_IR_OPT_BARRIER, &x, 1, NULL, 0, type_of(g, x));
}
