// Medians and modes: median, nanmedian (whole tensor and along a dim), mode.
//
// All sort the rows (the dim moved last, the rest flattened) stably
// ascending with NaN last, paired with positions, and read one sorted
// position per row:
// - median: the lower median, (n - 1) / 2; a row holding NaN gives its first
//   NaN (CPU returns the first NaN it finds), which a stable sort puts at
//   n - (number of NaN);
// - nanmedian: the lower median of the non-NaN values, (n - nans - 1) / 2
//   truncated toward zero (for an all-NaN row the value is NaN; CPU's index
//   there depends on its nth_element and is not reproduced);
// - mode: the run lengths of equal sorted values (a prefix max of run starts
//   gives each run's start); the longest run wins, ties going to the smallest
//   value, and the index is the run's last element (CPU scans its sorted
//   pairs and keeps the last of the run; its sort keeps small rows stable).
//   Tied values' indices on CPU come from std::nth_element / std::sort and
//   match here for distinct values and small rows.
#include <math.h>
#include <string.h>

#include "lower/lower.h"

// The rows of a reduction: x (argument 0) with `dim` moved last and the
// other dims flattened, as [rows, len]; dim < 0 flattens everything.
typedef struct md_rows {
  int64_t rows, len;
  int64_t out[TPU_MAX_RANK];  // result shape
  int nout;
} md_rows_t;

static tpu_val_t md_rows(tpu_lower_ctx_t* cx, int64_t dim, bool keepdim, md_rows_t* r) {
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  r->nout = 0;
  if (dim < 0 || rank == 0) {
    r->rows = 1;
    r->len = tpu_numel(d, rank);
    if (dim >= 0 && keepdim && rank) r->out[r->nout++] = 1;  // (rank 0 keeps rank 0)
    int64_t f[2] = {1, r->len};
    return tpu_ir_reshape(g, x, f, 2);
  }
  int64_t perm[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < rank; ++i)
    if (i != dim) perm[k++] = i;
  perm[k] = dim;
  for (int i = 0; i < rank; ++i)
    if (i != dim || keepdim) r->out[r->nout++] = i == dim ? 1 : d[i];
  r->len = d[dim];
  r->rows = tpu_numel(d, rank) / (r->len ? r->len : 1);
  if (dim != rank - 1) x = tpu_ir_transpose(g, x, perm);
  int64_t f[2] = {r->rows, r->len};
  return tpu_ir_reshape(g, x, f, 2);
}

// Sorted values and their positions along dim 1 of [rows, len].
static void md_sort(tpu_graph_t* g, tpu_val_t x, const int64_t* d2, tpu_val_t* v, tpu_val_t* i) {
  tpu_val_t ops[2] = {x, tpu_ir_iota(g, TPU_I64, d2, 2, 1)};
  tpu_val_t s = tpu_ir_sort(g, ops, 2, 1, TPU_SORT_ASCENDING, true);
  *v = tpu_ir_result(g, s, 0);
  *i = tpu_ir_result(g, s, 1);
}

// Element pos[r] (i64 [rows]) of each row of x [rows, len] -> [rows].
static tpu_val_t md_pick(tpu_graph_t* g, tpu_val_t x, tpu_val_t pos, int64_t rows, int64_t len) {
  int64_t flat = rows * len;
  tpu_val_t off = tpu_ir_binary(
      g, TPU_IR_ADD,
      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, &rows, 1, 0),
                    tpu_ir_const_i(g, TPU_I64, len, &rows, 1)),
      pos);
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = 1;
  int64_t one = 1;
  return tpu_ir_gather(g, tpu_ir_reshape(g, x, &flat, 1), off, &dn, &one);
}

static tpu_status_t md_check(tpu_lower_ctx_t* cx, const char* kernel, bool allow_bool) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if ((t == TPU_BOOL && !allow_bool) || tpu_dtype_is_complex(t))
    return tpu_not_implemented(kernel, t);
  return TPU_OK;
}

// The sorted position of the (nan)median of each row.
static tpu_val_t md_median_pos(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d2,
                               bool ignore_nan) {
  int64_t rows = d2[0], len = d2[1];
  if (!tpu_dtype_is_float(t)) return tpu_ir_const_i(g, TPU_I64, (len - 1) / 2, &rows, 1);
  static const int64_t over = 1;
  tpu_val_t nans = tpu_ir_reduce(g, tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_NE, x, x), TPU_I64),
                                 tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), &over, 1, TPU_BODY_ADD);
  tpu_val_t n = tpu_ir_const_i(g, TPU_I64, len, &rows, 1);
  tpu_val_t zero = tpu_ir_const_i(g, TPU_I64, 0, &rows, 1);
  tpu_val_t two = tpu_ir_const_i(g, TPU_I64, 2, &rows, 1);
  tpu_val_t one = tpu_ir_const_i(g, TPU_I64, 1, &rows, 1);
  if (ignore_nan) {
    tpu_val_t m = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_binary(g, TPU_IR_SUB, n, nans), one);
    return tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_binary(g, TPU_IR_MAX, m, zero), two);
  }
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GT, nans, zero),
                       tpu_ir_binary(g, TPU_IR_SUB, n, nans),
                       tpu_ir_const_i(g, TPU_I64, (len - 1) / 2, &rows, 1));
}

// median / nanmedian over everything: a 0-d value (NaN when empty).
static tpu_status_t median_all(tpu_lower_ctx_t* cx, bool ignore_nan) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(md_check(cx, ignore_nan ? "nanmedian_cpu" : "median_cpu", false));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  md_rows_t r;
  tpu_val_t x = md_rows(cx, -1, false, &r);
  if (r.len == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, tpu_dtype_is_float(t) ? NAN : 0, NULL, 0));
    return TPU_OK;
  }
  int64_t d2[2] = {1, r.len};
  tpu_val_t v, i;
  md_sort(g, x, d2, &v, &i);
  tpu_val_t pos = md_median_pos(g, x, t, d2, ignore_nan);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, md_pick(g, v, pos, 1, r.len), NULL, 0));
  return TPU_OK;
}

tpu_status_t tpu_lower_median_all(tpu_lower_ctx_t* cx) { return median_all(cx, false); }
tpu_status_t tpu_lower_nanmedian_all(tpu_lower_ctx_t* cx) { return median_all(cx, true); }

static tpu_status_t check_reduce_dim(tpu_lower_ctx_t* cx, const char* op, int64_t* dim) {
  int rank = tpu_arg_rank(cx, 0);
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, -1), rank, dim));
  if (rank > 0 && tpu_arg_sizes(cx, 0)[*dim] == 0)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "%s(): Expected reduction dim %lld to have non-zero size.", op,
                           (long long)*dim);
  return TPU_OK;
}

// out=: values of the input's dtype, int64 indices, each worded as CPU's
// kernel words it (a float tensor of indices was written without a word).
static tpu_status_t median_out_check(const tpu_lower_ctx_t* cx) {
  if (cx->num_out_dtypes != 2) return TPU_OK;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), v = cx->out_dtypes[0], i = cx->out_dtypes[1];
  if (v != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected tensor for 'values' to have the same type as tensor for "
                           "argument #2 'self'; but type torch.%sTensor does not equal "
                           "torch.%sTensor (while checking arguments for median)",
                           tpu_dtype_torch_name(v), tpu_dtype_torch_name(t));
  if (i != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected tensor for argument #1 'indices' to have scalar type "
                           "Long; but got torch.%sTensor instead (while checking arguments "
                           "for median)", tpu_dtype_torch_name(i));
  return TPU_OK;
}

// median.dim / nanmedian.dim(Tensor self, int dim, bool keepdim=False)
static tpu_status_t median_dim(tpu_lower_ctx_t* cx, bool ignore_nan) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(md_check(cx, ignore_nan ? "nanmedian_cpu" : "median_cpu", false));
  TPU_RETURN_IF_ERROR(median_out_check(cx));
  int64_t dim;
  TPU_RETURN_IF_ERROR(check_reduce_dim(cx, "median", &dim));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  md_rows_t r;
  tpu_val_t x = md_rows(cx, dim, tpu_arg_bool(cx, 2, false), &r);
  if (r.rows == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, r.out, r.nout));
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, r.out, r.nout));
    return TPU_OK;
  }
  int64_t d2[2] = {r.rows, r.len};
  tpu_val_t v, i;
  md_sort(g, x, d2, &v, &i);
  tpu_val_t pos = md_median_pos(g, x, t, d2, ignore_nan);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, md_pick(g, v, pos, r.rows, r.len), r.out, r.nout));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, md_pick(g, i, pos, r.rows, r.len), r.out, r.nout));
  return TPU_OK;
}

tpu_status_t tpu_lower_median_dim(tpu_lower_ctx_t* cx) { return median_dim(cx, false); }
tpu_status_t tpu_lower_nanmedian_dim(tpu_lower_ctx_t* cx) { return median_dim(cx, true); }

// Inclusive prefix max along dim 1 of an i64 [rows, len] (Hillis-Steele).
static tpu_val_t md_prefix_max(tpu_graph_t* g, tpu_val_t x, int64_t rows, int64_t len) {
  tpu_val_t lowest = tpu_ir_const_i(g, TPU_I64, 0, NULL, 0);
  for (int64_t k = 1; k < len; k <<= 1) {
    int64_t start[2] = {0, 0}, limit[2] = {rows, len - k}, lo[2] = {0, k}, hi[2] = {0, 0},
            in[2] = {0, 0};
    tpu_val_t sh = tpu_ir_pad(g, tpu_ir_slice(g, x, start, limit, NULL), lowest, lo, hi, in);
    x = tpu_ir_binary(g, TPU_IR_MAX, x, sh);
  }
  return x;
}

// mode(Tensor self, int dim=-1, bool keepdim=False)
tpu_status_t tpu_lower_mode(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(md_check(cx, "mode_cpu", true));
  if (cx->num_out_dtypes == 2) {  // out=: as CPU's kernel checks it
    tpu_dtype_t want[2] = {tpu_arg_value_dtype(cx, 0), TPU_I64};
    static const char* const what[2] = {"values", "indices"};
    for (int k = 0; k < 2; ++k)
      if (cx->out_dtypes[k] != want[k])
        return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                               "expected scalar type '%s' but got '%s' for %s output",
                               tpu_dtype_torch_name(want[k]),
                               tpu_dtype_torch_name(cx->out_dtypes[k]), what[k]);
  }
  int64_t dim;
  TPU_RETURN_IF_ERROR(check_reduce_dim(cx, "mode", &dim));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  md_rows_t r;
  tpu_val_t x = md_rows(cx, dim, tpu_arg_bool(cx, 2, false), &r);
  if (r.rows == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, r.out, r.nout));
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, r.out, r.nout));
    return TPU_OK;
  }
  int64_t rows = r.rows, len = r.len, d2[2] = {rows, len};
  tpu_val_t v, i;
  md_sort(g, x, d2, &v, &i);
  tpu_val_t pos = tpu_ir_iota(g, TPU_I64, d2, 2, 1);
  tpu_val_t start_pos, end_mask;
  if (len == 1) {
    start_pos = tpu_ir_const_i(g, TPU_I64, 0, d2, 2);
    end_mask = tpu_ir_const_i(g, TPU_BOOL, 1, d2, 2);
  } else {
    // neighbours differ: a run starts at j (j = 0 or v[j-1] != v[j]) and
    // ends at j (j = len-1 or v[j] != v[j+1])
    int64_t s0[2] = {0, 0}, s1[2] = {0, 1}, la[2] = {rows, len - 1}, lb[2] = {rows, len};
    tpu_val_t a = tpu_ir_slice(g, v, s0, la, NULL), b = tpu_ir_slice(g, v, s1, lb, NULL);
    tpu_val_t diff = tpu_ir_compare(g, TPU_CMP_NE, a, b);  // [rows, len-1]
    tpu_val_t tru = tpu_ir_const_i(g, TPU_BOOL, 1, NULL, 0);
    int64_t p0[2] = {0, 1}, p1[2] = {0, 0}, z[2] = {0, 0};
    tpu_val_t starts = tpu_ir_pad(g, diff, tru, p0, p1, z);  // true at j = 0
    end_mask = tpu_ir_pad(g, diff, tru, p1, p0, z);          // true at j = len-1
    start_pos = md_prefix_max(
        g, tpu_ir_select(g, starts, pos, tpu_ir_const_i(g, TPU_I64, 0, d2, 2)), rows, len);
  }
  tpu_val_t run = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_SUB, pos, start_pos),
                                tpu_ir_const_i(g, TPU_I64, 1, d2, 2));
  run = tpu_ir_select(g, end_mask, run, tpu_ir_const_i(g, TPU_I64, 0, d2, 2));
  // the longest run, the first (smallest value) among equals
  tpu_val_t best = tpu_ir_reduce_arg(g, run, pos, tpu_ir_const_i(g, TPU_I64, -1, NULL, 0),
                                     tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), 1, TPU_BODY_ARGMAX);
  tpu_val_t at = tpu_ir_result(g, best, 1);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, md_pick(g, v, at, rows, len), r.out, r.nout));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, md_pick(g, i, at, rows, len), r.out, r.nout));
  return TPU_OK;
}
