// The op table, expanded from ops.def.
#include <string.h>

#include "lower/lower.h"

// Lowerings of the generic row forms (lower_elementwise.c).
tpu_status_t tpu_lower_unary(tpu_lower_ctx_t* cx);
tpu_status_t tpu_lower_binary(tpu_lower_ctx_t* cx);
tpu_status_t tpu_lower_compare(tpu_lower_ctx_t* cx);

#define OP(name, aten, cls, flags, fn) tpu_status_t fn(tpu_lower_ctx_t* cx);
#define UNARY(name, aten, ir, rule)
#define BINARY(name, aten, ir, rule)
#define COMPARE(name, aten, cmp)
#include "lower/ops.def"
#undef OP
#undef UNARY
#undef BINARY
#undef COMPARE

static const tpu_op_row_t rows[] = {
#define OP(name, aten, cls, flags, fn) \
  {#name, aten, TPU_CLASS_##cls, flags, fn, TPU_IR_PARAM, TPU_RULE_SAME},
#define UNARY(name, aten, ir, rule)                                          \
  {#name, aten, TPU_CLASS_ELEMENTWISE, TPU_F_CAST_CHECK, tpu_lower_unary, \
   TPU_IR_##ir, TPU_RULE_##rule},
#define BINARY(name, aten, ir, rule)                                          \
  {#name, aten, TPU_CLASS_ELEMENTWISE, TPU_F_CAST_CHECK, tpu_lower_binary, \
   TPU_IR_##ir, TPU_RULE_##rule},
// A comparison keeps its direction in the ir_op slot.
#define COMPARE(name, aten, cmp)                                               \
  {#name, aten, TPU_CLASS_ELEMENTWISE, TPU_F_CAST_CHECK, tpu_lower_compare, \
   (tpu_ir_op_t)TPU_CMP_##cmp, TPU_RULE_BOOL},
#include "lower/ops.def"
#undef OP
#undef UNARY
#undef BINARY
#undef COMPARE
};

enum { NUM_ROWS = (int)(sizeof rows / sizeof rows[0]) };

const tpu_op_row_t* tpu_op_row(int op) {
  return op >= 0 && op < NUM_ROWS ? &rows[op] : NULL;
}

int tpu_op_count(void) { return NUM_ROWS; }
const char* tpu_op_name(int op) { return op >= 0 && op < NUM_ROWS ? rows[op].name : ""; }
const char* tpu_op_aten(int op) { return op >= 0 && op < NUM_ROWS ? rows[op].aten : ""; }
bool tpu_op_is_random(int op) {
  return op >= 0 && op < NUM_ROWS && rows[op].cls == TPU_CLASS_RNG;
}
bool tpu_op_out_disjoint(int op) {
  return op >= 0 && op < NUM_ROWS && (rows[op].flags & TPU_F_OUT_DISJOINT);
}
bool tpu_op_is_elementwise(int op) {
  return op >= 0 && op < NUM_ROWS && rows[op].cls == TPU_CLASS_ELEMENTWISE;
}
bool tpu_op_has_input_layout(int op) {
  return tpu_op_is_elementwise(op) ||
         (op >= 0 && op < NUM_ROWS && (rows[op].flags & TPU_F_INPUT_LAYOUT));
}
bool tpu_op_has_meta_layout(int op) {
  return op >= 0 && op < NUM_ROWS && (rows[op].flags & TPU_F_META_LAYOUT);
}
// The elementwise rows with TensorIterator's cast rule are TensorIterator's
// ops, so their in-place forms get its overlap check too.
tpu_overlap_t tpu_op_inplace_overlap(int op) {
  if (op < 0 || op >= NUM_ROWS) return TPU_OVERLAP_ANY;
  if (rows[op].flags & TPU_F_INPLACE_DISJOINT) return TPU_OVERLAP_NONE;
  return tpu_op_is_elementwise(op) && (rows[op].flags & TPU_F_CAST_CHECK) ? TPU_OVERLAP_WHOLE
                                                                          : TPU_OVERLAP_ANY;
}

int tpu_op_lookup(const char* name) {
  for (int i = 0; i < NUM_ROWS; ++i)
    if (!strcmp(rows[i].name, name)) return i;
  return -1;
}
