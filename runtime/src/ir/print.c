// Printing a graph as a StableHLO module (MLIR generic op syntax).
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "ir/ir_internal.h"

typedef struct printer {
  const tpu_graph_t* g;
  tpu_strbuf_t* sb;
} printer_t;

static void put_type(tpu_strbuf_t* sb, const tpu_type_t* t) {
  char buf[160];
  tpu_type_str(t, buf, sizeof buf);
  tpu_strbuf_puts(sb, buf);
}

static void put_scalar_type(tpu_strbuf_t* sb, tpu_dtype_t dtype) {
  tpu_strbuf_printf(sb, "tensor<%s>", tpu_dtype_mlir(dtype));
}

static void put_i64s(tpu_strbuf_t* sb, const int64_t* v, int n) {
  for (int i = 0; i < n; ++i)
    tpu_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
}

static void put_array(tpu_strbuf_t* sb, const char* name, const int64_t* v, int n) {
  tpu_strbuf_printf(sb, "%s = array<i64%s", name, n ? ": " : "");
  put_i64s(sb, v, n);
  tpu_strbuf_puts(sb, ">");
}

void tpu_precision_text(char* buf, size_t size, int64_t precision) {
  static const char* const names[] = {"HIGHEST", "HIGH", "DEFAULT"};
  const char* name = precision > 0 ? names[precision - 1] : NULL;  // the same for both operands
  snprintf(buf, size, name ? ", precision_config = [#stablehlo<precision %s>, "
                             "#stablehlo<precision %s>]" : "", name, name);
}

static void put_precision(tpu_strbuf_t* sb, int64_t precision) {
  char text[96];
  tpu_precision_text(text, sizeof text, precision);
  tpu_strbuf_puts(sb, text);
}

// The SSA name of a value.
static void put_val(printer_t* p, tpu_val_t v) {
  const tpu_node_t* n = tpu_graph_node(p->g, v);
  if (n->op == TPU_IR_PARAM) tpu_strbuf_printf(p->sb, "%%arg%d", n->extra);
  else if (n->op == TPU_IR_RESULT) tpu_strbuf_printf(p->sb, "%%%d#%d", n->operands[0], n->extra);
  else tpu_strbuf_printf(p->sb, "%%%d", v);
}

static const tpu_type_t* val_type(printer_t* p, tpu_val_t v) {
  return &tpu_graph_node(p->g, v)->type;
}

static const char* compare_type(tpu_dtype_t t) {
  switch (tpu_dtype_kind(t)) {
    case TPU_KIND_FLOAT:
    case TPU_KIND_COMPLEX: return "FLOAT";
    case TPU_KIND_INT: return "SIGNED";
    default: return "UNSIGNED";
  }
}

static const char* const cmp_names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

static void put_compare_attrs(tpu_strbuf_t* sb, tpu_cmp_t cmp, tpu_dtype_t t) {
  tpu_strbuf_printf(sb,
                    "{comparison_direction = #stablehlo<comparison_direction %s>, "
                    "compare_type = #stablehlo<comparison_type %s>}",
                    cmp_names[cmp], compare_type(t));
}

//===--- regions ---===//

// Emits "%<pre><name> = <op>(a, b)" on scalar tensors of `t`.
static void region_binary(tpu_strbuf_t* sb, const char* res, const char* op,
                          const char* a, const char* b, tpu_dtype_t t) {
  tpu_strbuf_printf(sb, "      %s = \"%s\"(%s, %s) : (", res, op, a, b);
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ", ");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ") -> ");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, "\n");
}

static void region_compare(tpu_strbuf_t* sb, const char* res, tpu_cmp_t cmp,
                           const char* a, const char* b, tpu_dtype_t t) {
  tpu_strbuf_printf(sb, "      %s = \"stablehlo.compare\"(%s, %s) ", res, a, b);
  put_compare_attrs(sb, cmp, t);
  tpu_strbuf_puts(sb, " : (");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ", ");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ") -> tensor<i1>\n");
}

static void region_logic(tpu_strbuf_t* sb, const char* res, const char* op,
                         const char* a, const char* b) {
  tpu_strbuf_printf(sb, "      %s = \"stablehlo.%s\"(%s, %s) : (tensor<i1>, "
                        "tensor<i1>) -> tensor<i1>\n", res, op, a, b);
}

static void region_select(tpu_strbuf_t* sb, const char* res, const char* p,
                          const char* a, const char* b, tpu_dtype_t t) {
  tpu_strbuf_printf(sb, "      %s = \"stablehlo.select\"(%s, %s, %s) : (tensor<i1>, ", res, p, a, b);
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ", ");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, ") -> ");
  put_scalar_type(sb, t);
  tpu_strbuf_puts(sb, "\n");
}

static void region_return(tpu_strbuf_t* sb, const char* const* vals,
                          const tpu_dtype_t* types, int n) {
  tpu_strbuf_puts(sb, "      \"stablehlo.return\"(");
  for (int i = 0; i < n; ++i) tpu_strbuf_printf(sb, "%s%s", i ? ", " : "", vals[i]);
  tpu_strbuf_puts(sb, ") : (");
  for (int i = 0; i < n; ++i) {
    if (i) tpu_strbuf_puts(sb, ", ");
    put_scalar_type(sb, types[i]);
  }
  tpu_strbuf_puts(sb, ") -> ()\n");
}

static void region_open(tpu_strbuf_t* sb, int id, const char* const* names,
                        const tpu_dtype_t* types, int n) {
  tpu_strbuf_puts(sb, "{\n    ^bb0(");
  for (int i = 0; i < n; ++i) {
    tpu_strbuf_printf(sb, "%s%%r%d_%s: ", i ? ", " : "", id, names[i]);
    put_scalar_type(sb, types[i]);
  }
  tpu_strbuf_puts(sb, "):\n");
}

// A body that combines (a, b) of dtype t. Names are %r<id>_<x>.
static void put_body(tpu_strbuf_t* sb, int id, tpu_body_t body, tpu_dtype_t t) {
  char a[32], b[32], r[32];
  snprintf(a, sizeof a, "%%r%d_a", id);
  snprintf(b, sizeof b, "%%r%d_b", id);
  snprintf(r, sizeof r, "%%r%d_r", id);
  static const char* const names2[] = {"a", "b"};
  tpu_dtype_t types[2] = {t, t};
  region_open(sb, id, names2, types, 2);
  const char* op = NULL;
  switch (body) {
    case TPU_BODY_ADD: op = t == TPU_BOOL ? "stablehlo.or" : "stablehlo.add"; break;
    case TPU_BODY_MUL: op = t == TPU_BOOL ? "stablehlo.and" : "stablehlo.multiply"; break;
    case TPU_BODY_MAX: op = t == TPU_BOOL ? "stablehlo.or" : "stablehlo.maximum"; break;
    case TPU_BODY_MIN: op = t == TPU_BOOL ? "stablehlo.and" : "stablehlo.minimum"; break;
    case TPU_BODY_AND: op = "stablehlo.and"; break;
    case TPU_BODY_OR: op = "stablehlo.or"; break;
    case TPU_BODY_XOR: op = "stablehlo.xor"; break;
    default: break;
  }
  const char* ret = b;  // REPLACE: the update wins
  if (op) {
    region_binary(sb, r, op, a, b, t);
    ret = r;
  }
  region_return(sb, &ret, &t, 1);
  tpu_strbuf_puts(sb, "    }");
}

// (a, ai, b, bi) -> the winner: NaN first, then larger (smaller) value, then
// the lower index (the higher one for the _LAST bodies).
static void put_arg_body(tpu_strbuf_t* sb, int id, tpu_body_t body,
                         tpu_dtype_t t, tpu_dtype_t ti) {
  static const char* const names[] = {"a", "ai", "b", "bi"};
  tpu_dtype_t types[4] = {t, ti, t, ti};
  region_open(sb, id, names, types, 4);
  char v[12][40];
  for (int i = 0; i < 12; ++i) snprintf(v[i], sizeof v[i], "%%r%d_%d", id, i);
  char a[32], ai[32], b[32], bi[32];
  snprintf(a, sizeof a, "%%r%d_a", id);
  snprintf(ai, sizeof ai, "%%r%d_ai", id);
  snprintf(b, sizeof b, "%%r%d_b", id);
  snprintf(bi, sizeof bi, "%%r%d_bi", id);
  bool is_max = body == TPU_BODY_ARGMAX || body == TPU_BODY_ARGMAX_LAST;
  bool last = body == TPU_BODY_ARGMAX_LAST || body == TPU_BODY_ARGMIN_LAST;
  region_compare(sb, v[0], is_max ? TPU_CMP_GT : TPU_CMP_LT, a, b, t);
  region_compare(sb, v[1], TPU_CMP_EQ, a, b, t);
  region_compare(sb, v[2], last ? TPU_CMP_GT : TPU_CMP_LT, ai, bi, ti);
  region_logic(sb, v[3], "and", v[1], v[2]);  // equal, and wins by index
  region_logic(sb, v[4], "or", v[0], v[3]);
  if (tpu_dtype_is_float(t)) {
    region_compare(sb, v[5], TPU_CMP_NE, a, a, t);  // a is NaN
    region_compare(sb, v[6], TPU_CMP_NE, b, b, t);  // b is NaN
    region_logic(sb, v[7], "and", v[5], v[6]);
    region_logic(sb, v[8], "and", v[7], v[2]);      // both NaN: by index
    region_logic(sb, v[9], "xor", v[5], v[7]);      // only a NaN
    region_logic(sb, v[10], "or", v[4], v[8]);
    region_logic(sb, v[11], "or", v[10], v[9]);
  } else {
    snprintf(v[11], sizeof v[11], "%s", v[4]);
  }
  char rv[40], ri[40];
  snprintf(rv, sizeof rv, "%%r%d_rv", id);
  snprintf(ri, sizeof ri, "%%r%d_ri", id);
  region_select(sb, rv, v[11], a, b, t);
  region_select(sb, ri, v[11], ai, bi, ti);
  const char* rets[2] = {rv, ri};
  tpu_dtype_t rt[2] = {t, ti};
  region_return(sb, rets, rt, 2);
  tpu_strbuf_puts(sb, "    }");
}

// Comparator over pairs (a0, b0, a1, b1, ...), ordering by operand 0.
static void put_sort_body(tpu_strbuf_t* sb, int id, const tpu_type_t* types,
                          int n, tpu_sort_order_t order) {
  tpu_strbuf_puts(sb, "{\n    ^bb0(");
  for (int i = 0; i < n; ++i) {
    tpu_strbuf_printf(sb, "%s%%r%d_a%d: ", i ? ", " : "", id, i);
    put_scalar_type(sb, types[i].dtype);
    tpu_strbuf_printf(sb, ", %%r%d_b%d: ", id, i);
    put_scalar_type(sb, types[i].dtype);
  }
  tpu_strbuf_puts(sb, "):\n");
  tpu_dtype_t t = types[0].dtype;
  char a[32], b[32], v[6][40];
  snprintf(a, sizeof a, "%%r%d_a0", id);
  snprintf(b, sizeof b, "%%r%d_b0", id);
  for (int i = 0; i < 6; ++i) snprintf(v[i], sizeof v[i], "%%r%d_%d", id, i);
  bool asc = order == TPU_SORT_ASCENDING;
  region_compare(sb, v[0], asc ? TPU_CMP_LT : TPU_CMP_GT, a, b, t);
  const char* ret = v[0];
  if (tpu_dtype_is_float(t)) {
    // NaN sorts last ascending, first descending.
    region_compare(sb, v[1], TPU_CMP_NE, a, a, t);
    region_compare(sb, v[2], TPU_CMP_NE, b, b, t);
    region_logic(sb, v[3], "xor", v[1], v[2]);
    region_logic(sb, v[4], "and", v[3], asc ? v[2] : v[1]);
    region_logic(sb, v[5], "or", v[0], v[4]);
    ret = v[5];
  }
  tpu_dtype_t bt = TPU_BOOL;
  region_return(sb, &ret, &bt, 1);
  tpu_strbuf_puts(sb, "    }");
}

static void put_select_ge_body(tpu_strbuf_t* sb, int id, tpu_dtype_t t) {
  static const char* const names[] = {"a", "b"};
  tpu_dtype_t types[2] = {t, t};
  region_open(sb, id, names, types, 2);
  char a[32], b[32], r[32];
  snprintf(a, sizeof a, "%%r%d_a", id);
  snprintf(b, sizeof b, "%%r%d_b", id);
  snprintf(r, sizeof r, "%%r%d_r", id);
  region_compare(sb, r, TPU_CMP_GE, a, b, t);
  const char* ret = r;
  tpu_dtype_t bt = TPU_BOOL;
  region_return(sb, &ret, &bt, 1);
  tpu_strbuf_puts(sb, "    }");
}

//===--- attributes ---===//

static void put_constant_value(tpu_strbuf_t* sb, const const_attrs_t* a) {
  if (a->is_array) {
    tpu_strbuf_puts(sb, "dense<[");
    put_i64s(sb, a->array, (int)a->count);
    tpu_strbuf_puts(sb, "]>");
    return;
  }
  tpu_strbuf_puts(sb, "dense<");
  switch (tpu_dtype_kind(a->dtype)) {
    case TPU_KIND_BOOL: tpu_strbuf_puts(sb, a->bits ? "true" : "false"); break;
    case TPU_KIND_INT: tpu_strbuf_printf(sb, "%lld", (long long)(int64_t)a->bits); break;
    case TPU_KIND_UINT: tpu_strbuf_printf(sb, "%llu", (unsigned long long)a->bits); break;
    case TPU_KIND_FLOAT:
      if (a->dtype == TPU_F64) tpu_strbuf_printf(sb, "0x%016llX", (unsigned long long)a->bits);
      else tpu_strbuf_printf(sb, "0x%08X", (unsigned)a->bits);
      break;
    case TPU_KIND_COMPLEX: {
      double re, im;
      memcpy(&re, &a->bits, 8);
      memcpy(&im, &a->bits_im, 8);
      if (a->dtype == TPU_C64) {
        float fr = (float)re, fi = (float)im;
        uint32_t br, bi;
        memcpy(&br, &fr, 4);
        memcpy(&bi, &fi, 4);
        tpu_strbuf_printf(sb, "(0x%08X, 0x%08X)", br, bi);
      } else {
        tpu_strbuf_printf(sb, "(0x%016llX, 0x%016llX)",
                          (unsigned long long)a->bits, (unsigned long long)a->bits_im);
      }
      break;
    }
  }
  tpu_strbuf_puts(sb, ">");
}

static void put_padding(tpu_strbuf_t* sb, const int64_t* lo, const int64_t* hi, int n) {
  tpu_strbuf_puts(sb, "padding = dense<");
  if (n == 0) tpu_strbuf_puts(sb, "0");
  else {
    tpu_strbuf_puts(sb, "[");
    for (int i = 0; i < n; ++i)
      tpu_strbuf_printf(sb, "%s[%lld, %lld]", i ? ", " : "", (long long)lo[i], (long long)hi[i]);
    tpu_strbuf_puts(sb, "]");
  }
  tpu_strbuf_printf(sb, "> : tensor<%dx2xi64>", n);
}

static void put_list(tpu_strbuf_t* sb, const char* name, const int64_t* v, int n,
                     bool first) {
  tpu_strbuf_printf(sb, "%s%s = [", first ? "" : ", ", name);
  put_i64s(sb, v, n);
  tpu_strbuf_puts(sb, "]");
}

static void put_groups(tpu_strbuf_t* sb, const collective_attrs_t* a) {
  tpu_strbuf_puts(sb, "replica_groups = dense<[");
  for (int gi = 0; gi < a->num_groups; ++gi) {
    tpu_strbuf_printf(sb, "%s[", gi ? ", " : "");
    put_i64s(sb, a->groups + gi * a->group_size, a->group_size);
    tpu_strbuf_puts(sb, "]");
  }
  tpu_strbuf_printf(sb, "]> : tensor<%dx%dxi64>", a->num_groups, a->group_size);
}

static void put_window(tpu_strbuf_t* sb, const tpu_window_t* w, int rank, bool dilations) {
  put_array(sb, "window_dimensions", w->dims, rank);
  tpu_strbuf_puts(sb, ", ");
  put_array(sb, "window_strides", w->strides, rank);
  if (dilations) {
    tpu_strbuf_puts(sb, ", ");
    put_array(sb, "base_dilations", w->base_dilations, rank);
    tpu_strbuf_puts(sb, ", ");
    put_array(sb, "window_dilations", w->window_dilations, rank);
  }
  tpu_strbuf_puts(sb, ", ");
  put_padding(sb, w->pad_lo, w->pad_hi, rank);
}

static void put_conv_layout(tpu_strbuf_t* sb, int rank, int64_t a, char ca,
                            int64_t b, char cb, const int64_t* sp) {
  char l[8];
  for (int i = 0; i < rank; ++i) l[i] = '?';
  l[a] = ca;
  l[b] = cb;
  for (int i = 0; i < rank - 2; ++i) l[sp[i]] = (char)('0' + i);
  tpu_strbuf_puts(sb, "[");
  for (int i = 0; i < rank; ++i) tpu_strbuf_printf(sb, "%s%c", i ? ", " : "", l[i]);
  tpu_strbuf_puts(sb, "]");
}

//===--- nodes ---===//

static void put_node(printer_t* p, tpu_val_t v) {
  const tpu_node_t* n = tpu_graph_node(p->g, v);
  tpu_strbuf_t* sb = p->sb;
  const void* at = n->attrs;
  int rank_in = n->num_operands ? val_type(p, n->operands[0])->rank : 0;
  tpu_strbuf_puts(sb, "    ");
  put_val(p, v);
  if (n->num_results) tpu_strbuf_printf(sb, ":%d", n->num_results);
  tpu_strbuf_printf(sb, " = \"%s\"(", tpu_ir_op_name(n->op));
  for (int i = 0; i < n->num_operands; ++i) {
    if (i) tpu_strbuf_puts(sb, ", ");
    put_val(p, n->operands[i]);
  }
  tpu_strbuf_puts(sb, ") ");
  // Regions, then the attribute dictionary.
  switch (n->op) {
    case TPU_IR_REDUCE: {
      const dims_attrs_t* a = at;
      tpu_strbuf_puts(sb, "(");
      if (n->num_results)
        put_arg_body(sb, v, (tpu_body_t)a->body, n->result_types[0].dtype, n->result_types[1].dtype);
      else
        put_body(sb, v, (tpu_body_t)a->body, n->type.dtype);
      tpu_strbuf_puts(sb, ") {");
      put_array(sb, "dimensions", a->v, a->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_REDUCE_WINDOW: {
      const window_attrs_t* a = at;
      tpu_strbuf_puts(sb, "(");
      put_body(sb, v, (tpu_body_t)a->body, n->type.dtype);
      tpu_strbuf_puts(sb, ") {");
      put_window(sb, &a->w, rank_in, true);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_SELECT_AND_SCATTER: {
      const window_attrs_t* a = at;
      tpu_strbuf_puts(sb, "(");
      put_select_ge_body(sb, v, n->type.dtype);
      tpu_strbuf_puts(sb, ", ");
      put_body(sb, v + (1 << 30), TPU_BODY_ADD, n->type.dtype);  // a second, distinct region
      tpu_strbuf_puts(sb, ") {");
      put_window(sb, &a->w, rank_in, false);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_SCATTER: {
      const scatter_attrs_t* a = at;
      const tpu_scatter_dims_t* d = &a->dn;
      tpu_strbuf_puts(sb, "(");
      put_body(sb, v, (tpu_body_t)a->body, n->type.dtype);
      tpu_strbuf_puts(sb, ") {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<");
      put_list(sb, "update_window_dims", d->update_window_dims, (int)d->n_update_window, true);
      put_list(sb, "inserted_window_dims", d->inserted_window_dims, (int)d->n_inserted, false);
      if (d->n_input_batch) {
        put_list(sb, "input_batching_dims", d->input_batching_dims, (int)d->n_input_batch, false);
        put_list(sb, "scatter_indices_batching_dims", d->scatter_indices_batching_dims, (int)d->n_indices_batch, false);
      }
      put_list(sb, "scatter_dims_to_operand_dims", d->scatter_dims_to_operand_dims, (int)d->n_to_operand, false);
      tpu_strbuf_printf(sb, ", index_vector_dim = %lld>, unique_indices = false} ", (long long)d->index_vector_dim);
      break;
    }
    case TPU_IR_SORT: {
      const sort_attrs_t* a = at;
      tpu_strbuf_puts(sb, "(");
      put_sort_body(sb, v, n->result_types, n->num_results, (tpu_sort_order_t)a->order);
      tpu_strbuf_printf(sb, ") {dimension = %lld : i64, is_stable = %s} ", (long long)a->dim,
                        a->stable ? "true" : "false");
      break;
    }
    case TPU_IR_ALL_REDUCE:
    case TPU_IR_REDUCE_SCATTER: {
      const collective_attrs_t* a = at;
      tpu_strbuf_puts(sb, "(");
      put_body(sb, v, (tpu_body_t)a->body, n->type.dtype);
      tpu_strbuf_puts(sb, ") {");
      if (n->op == TPU_IR_REDUCE_SCATTER)
        tpu_strbuf_printf(sb, "scatter_dimension = %lld : i64, ", (long long)a->dim);
      put_groups(sb, a);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_ALL_GATHER: {
      const collective_attrs_t* a = at;
      tpu_strbuf_printf(sb, "{all_gather_dim = %lld : i64, ", (long long)a->dim);
      put_groups(sb, a);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_ALL_TO_ALL: {
      const collective_attrs_t* a = at;
      tpu_strbuf_printf(sb, "{concat_dimension = %lld : i64, ", (long long)a->dim2);
      put_groups(sb, a);
      tpu_strbuf_printf(sb, ", split_count = %d : i64, split_dimension = %lld : i64} ",
                        a->group_size, (long long)a->dim);
      break;
    }
    case TPU_IR_CONSTANT:
      tpu_strbuf_puts(sb, "{value = ");
      put_constant_value(sb, at);
      tpu_strbuf_puts(sb, " : ");
      put_type(sb, &n->type);
      tpu_strbuf_puts(sb, "} ");
      break;
    case TPU_IR_IOTA:
      tpu_strbuf_printf(sb, "{iota_dimension = %lld : i64} ", (long long)((const dims_attrs_t*)at)->v[0]);
      break;
    case TPU_IR_COMPARE:
      put_compare_attrs(sb, (tpu_cmp_t)((const dims_attrs_t*)at)->v[0],
                        val_type(p, n->operands[0])->dtype);
      tpu_strbuf_puts(sb, " ");
      break;
    case TPU_IR_TRANSPOSE:
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "permutation", ((const dims_attrs_t*)at)->v, ((const dims_attrs_t*)at)->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    case TPU_IR_BROADCAST:
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "broadcast_dimensions", ((const dims_attrs_t*)at)->v, ((const dims_attrs_t*)at)->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    case TPU_IR_REVERSE:
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "dimensions", ((const dims_attrs_t*)at)->v, ((const dims_attrs_t*)at)->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    case TPU_IR_DYNAMIC_SLICE:
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "slice_sizes", ((const dims_attrs_t*)at)->v, ((const dims_attrs_t*)at)->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    case TPU_IR_CONCAT:
      tpu_strbuf_printf(sb, "{dimension = %lld : i64} ", (long long)((const dims_attrs_t*)at)->v[0]);
      break;
    case TPU_IR_SLICE: {
      const slice_attrs_t* a = at;
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "start_indices", a->start, rank_in);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "limit_indices", a->limit, rank_in);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "strides", a->strides, rank_in);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_PAD: {
      const slice_attrs_t* a = at;
      tpu_strbuf_puts(sb, "{");
      put_array(sb, "edge_padding_low", a->start, rank_in);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "edge_padding_high", a->limit, rank_in);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "interior_padding", a->strides, rank_in);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_GATHER: {
      const gather_attrs_t* a = at;
      const tpu_gather_dims_t* d = &a->dn;
      tpu_strbuf_puts(sb, "{dimension_numbers = #stablehlo.gather<");
      put_list(sb, "offset_dims", d->offset_dims, (int)d->n_offset, true);
      put_list(sb, "collapsed_slice_dims", d->collapsed_slice_dims, (int)d->n_collapsed, false);
      if (d->n_operand_batch) {
        put_list(sb, "operand_batching_dims", d->operand_batching_dims, (int)d->n_operand_batch, false);
        put_list(sb, "start_indices_batching_dims", d->start_indices_batching_dims, (int)d->n_indices_batch, false);
      }
      put_list(sb, "start_index_map", d->start_index_map, (int)d->n_start_map, false);
      tpu_strbuf_printf(sb, ", index_vector_dim = %lld>, indices_are_sorted = false, ",
                        (long long)d->index_vector_dim);
      put_array(sb, "slice_sizes", a->slice_sizes, rank_in);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_DOT: {
      const tpu_dot_dims_t* d = at;
      tpu_strbuf_puts(sb, "{dot_dimension_numbers = #stablehlo.dot<");
      put_list(sb, "lhs_batching_dimensions", d->lhs_batch, d->n_batch, true);
      put_list(sb, "rhs_batching_dimensions", d->rhs_batch, d->n_batch, false);
      put_list(sb, "lhs_contracting_dimensions", d->lhs_contract, d->n_contract, false);
      put_list(sb, "rhs_contracting_dimensions", d->rhs_contract, d->n_contract, false);
      tpu_strbuf_puts(sb, ">");
      put_precision(sb, d->precision);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_CONV: {
      const tpu_conv_attrs_t* a = at;
      int s = (int)a->spatial, r = s + 2;
      tpu_strbuf_puts(sb, "{batch_group_count = ");
      tpu_strbuf_printf(sb, "%lld : i64, dimension_numbers = #stablehlo.conv<", (long long)a->batch_groups);
      put_conv_layout(sb, r, a->in_batch, 'b', a->in_feature, 'f', a->in_spatial);
      tpu_strbuf_puts(sb, "x");
      put_conv_layout(sb, r, a->k_out, 'o', a->k_in, 'i', a->k_spatial);
      tpu_strbuf_puts(sb, "->");
      put_conv_layout(sb, r, a->out_batch, 'b', a->out_feature, 'f', a->out_spatial);
      tpu_strbuf_printf(sb, ">, feature_group_count = %lld : i64, ", (long long)a->feature_groups);
      put_array(sb, "lhs_dilation", a->lhs_dilation, s);
      tpu_strbuf_puts(sb, ", ");
      put_padding(sb, a->pad_lo, a->pad_hi, s);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "rhs_dilation", a->rhs_dilation, s);
      tpu_strbuf_puts(sb, ", ");
      put_array(sb, "window_strides", a->strides, s);
      put_precision(sb, a->precision);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_TOP_K:
      tpu_strbuf_printf(sb, "{k = %lld : i64} ", (long long)((const dims_attrs_t*)at)->v[0]);
      break;
    case TPU_IR_FFT: {
      static const char* const types[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
      const dims_attrs_t* a = at;
      tpu_strbuf_printf(sb, "{fft_type = #stablehlo<fft_type %s>, ", types[a->body]);
      put_array(sb, "fft_length", a->v, a->n);
      tpu_strbuf_puts(sb, "} ");
      break;
    }
    case TPU_IR_CHOLESKY:
      tpu_strbuf_printf(sb, "{lower = %s} ", ((const dims_attrs_t*)at)->v[0] ? "true" : "false");
      break;
    case TPU_IR_TRIANGULAR_SOLVE: {
      static const char* const ops[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
      const int64_t* v = ((const dims_attrs_t*)at)->v;
      tpu_strbuf_printf(sb, "{left_side = %s, lower = %s, transpose_a = #stablehlo<transpose %s>, "
                        "unit_diagonal = %s} ", v[0] ? "true" : "false", v[1] ? "true" : "false",
                        ops[v[3]], v[2] ? "true" : "false");
      break;
    }
    case TPU_IR_LU:
    case TPU_IR_LU_PERMUTATION:
    case TPU_IR_QR:
    case TPU_IR_HOUSEHOLDER_PRODUCT:
    case TPU_IR_SQUARINGS:
      tpu_print_loop(sb, n, v);
      break;
    case TPU_IR_RNG_BITS:
      tpu_strbuf_puts(sb, "{rng_algorithm = #stablehlo<rng_algorithm PHILOX>} ");
      break;
    default:
      break;
  }
  // Function type.
  tpu_strbuf_puts(sb, ": (");
  for (int i = 0; i < n->num_operands; ++i) {
    if (i) tpu_strbuf_puts(sb, ", ");
    put_type(sb, val_type(p, n->operands[i]));
  }
  tpu_strbuf_puts(sb, ") -> ");
  if (n->num_results) {
    tpu_strbuf_puts(sb, "(");
    for (int i = 0; i < n->num_results; ++i) {
      if (i) tpu_strbuf_puts(sb, ", ");
      put_type(sb, &n->result_types[i]);
    }
    tpu_strbuf_puts(sb, ")");
  } else {
    put_type(sb, &n->type);
  }
  tpu_strbuf_puts(sb, "\n");
}

static bool* mark_live(const tpu_graph_t* g, const tpu_program_output_t* outs,
                       int n) {
  bool* live = tpu_calloc((size_t)(g->count ? g->count : 1), sizeof(bool));
  if (!live) return NULL;
  for (int i = 0; i < n; ++i) live[outs[i].value] = true;
  for (int32_t v = g->count - 1; v >= 0; --v) {
    if (!live[v]) continue;
    const tpu_node_t* nd = &g->nodes[v];
    for (int i = 0; i < nd->num_operands; ++i) live[nd->operands[i]] = true;
  }
  return live;
}

tpu_status_t tpu_graph_print(const tpu_graph_t* g,
                             const tpu_program_output_t* outs, int num_outs,
                             int num_replicas, char** out_text,
                             size_t* out_size) {
  *out_text = NULL;
  *out_size = 0;
  if (g->error) return tpu_status_clone(g->error);
  for (int i = 0; i < num_outs; ++i)
    if (outs[i].value < 0 || outs[i].value >= g->count)
      return tpu_status_make(TPU_CODE_INTERNAL, "output %d is not a value", i);
  bool* live = mark_live(g, outs, num_outs);
  if (!live) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  tpu_strbuf_t sb;
  tpu_strbuf_init(&sb);
  printer_t p = {g, &sb};
  tpu_strbuf_printf(&sb,
                    "module @torchtpu attributes {mhlo.num_partitions = 1 : i32, "
                    "mhlo.num_replicas = %d : i32} {\n"
                    "  func.func public @main(", num_replicas);
  for (int i = 0; i < g->num_params; ++i) {
    tpu_strbuf_printf(&sb, "%s%%arg%d: ", i ? ", " : "", i);
    put_type(&sb, &g->nodes[g->params[i]].type);
    for (int o = 0; o < num_outs; ++o)
      if (outs[o].donor_param == i) {
        tpu_strbuf_printf(&sb, " {tf.aliasing_output = %d : i32}", o);
        break;
      }
  }
  tpu_strbuf_puts(&sb, ") -> (");
  for (int i = 0; i < num_outs; ++i) {
    if (i) tpu_strbuf_puts(&sb, ", ");
    put_type(&sb, &g->nodes[outs[i].value].type);
  }
  tpu_strbuf_puts(&sb, ") {\n");
  for (int32_t v = 0; v < g->count; ++v) {
    tpu_ir_op_t op = g->nodes[v].op;
    if (live[v] && op != TPU_IR_PARAM && op != TPU_IR_RESULT) put_node(&p, v);
  }
  tpu_strbuf_puts(&sb, "    \"func.return\"(");
  for (int i = 0; i < num_outs; ++i) {
    if (i) tpu_strbuf_puts(&sb, ", ");
    put_val(&p, outs[i].value);
  }
  tpu_strbuf_puts(&sb, ") : (");
  for (int i = 0; i < num_outs; ++i) {
    if (i) tpu_strbuf_puts(&sb, ", ");
    put_type(&sb, &g->nodes[outs[i].value].type);
  }
  tpu_strbuf_puts(&sb, ") -> ()\n  }\n}\n");
  tpu_free(live);
  tpu_status_t s = tpu_strbuf_status(&sb);
  if (s) {
    tpu_strbuf_deinit(&sb);
    return s;
  }
  *out_size = sb.len;
  *out_text = sb.data;  // ownership moves to the caller
  return TPU_OK;
}

tpu_hash_t tpu_graph_program_hash(const tpu_graph_t* g,
                                  const tpu_program_output_t* outs,
                                  int num_outs, int num_replicas) {
  tpu_hash_t h = tpu_hash_u64((tpu_hash_t){0x5052, 0x4f47},
                              (uint64_t)num_replicas << 32 | (uint32_t)g->num_params);
  for (int i = 0; i < g->num_params; ++i) {
    tpu_hash_t ph = g->nodes[g->params[i]].hash;
    h = tpu_hash_u64(tpu_hash_u64(h, ph.lo), ph.hi);
  }
  for (int i = 0; i < num_outs; ++i) {
    tpu_hash_t oh = g->nodes[outs[i].value].hash;
    h = tpu_hash_u64(tpu_hash_u64(h, oh.lo), oh.hi);
    h = tpu_hash_u64(h, (uint64_t)(int64_t)outs[i].donor_param);
  }
  return h;
}
