// The IR: builders, hash-consing, printing; programs run on the CPU plugin.
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "test.h"

static tpu_graph_t* new_graph(void) {
  tpu_graph_t* g = NULL;
  CHECK_OK(tpu_graph_create(&g));
  return g;
}

// Prints, compiles and runs the graph with the given f32/any inputs, one
// output, copying it to `out`.
static void run_graph(tpu_client_t* c, tpu_graph_t* g, tpu_val_t* outs, int nouts,
                      const void* const* inputs, void** results, size_t* result_sizes) {
  CHECK_OK(tpu_graph_error(g) ? tpu_status_clone(tpu_graph_error(g)) : TPU_OK);
  tpu_program_output_t po[8];
  for (int i = 0; i < nouts; ++i) po[i] = (tpu_program_output_t){outs[i], -1};
  char* text;
  size_t size;
  CHECK_OK(tpu_graph_print(g, po, nouts, 1, &text, &size));
  tpu_executable_t* e = NULL;
  tpu_status_t s = tpu_executable_compile(c, text, size, 1, &e);
  if (s) fprintf(stderr, "%s\n", text);
  CHECK_OK(s);
  tpu_free(text);
  int np = tpu_graph_param_count(g);
  tpu_buffer_t* args[8];
  for (int i = 0; i < np; ++i) {
    const tpu_type_t* t = tpu_ir_type(g, tpu_graph_param(g, i));
    CHECK_OK(tpu_buffer_from_host(c, 0, t->dtype, t->dims, t->rank, inputs[i], NULL, &args[i]));
  }
  tpu_buffer_t* out[8];
  CHECK_OK(tpu_executable_execute(e, 0, args, np, NULL, 0, out, nouts, NULL));
  for (int i = 0; i < nouts; ++i) {
    CHECK_OK(tpu_buffer_to_host(out[i], results[i], result_sizes[i]));
    tpu_buffer_release(out[i]);
  }
  for (int i = 0; i < np; ++i) tpu_buffer_release(args[i]);
  tpu_executable_release(e);
}

void test_ir_golden_text(void) {
  tpu_graph_t* g = new_graph();
  int64_t d[2] = {2, 3};
  tpu_type_t t = tpu_type_make(TPU_F32, d, 2);
  tpu_val_t a = tpu_ir_param(g, &t), b = tpu_ir_param(g, &t);
  tpu_val_t s = tpu_ir_binary(g, TPU_IR_ADD, a, b);
  tpu_val_t zero = tpu_ir_const(g, TPU_F32, 0.0, NULL, 0);
  int64_t dim1 = 1;
  tpu_val_t r = tpu_ir_reduce(g, s, zero, &dim1, 1, TPU_BODY_ADD);
  tpu_program_output_t out = {r, -1};
  char* text;
  size_t size;
  CHECK_OK(tpu_graph_print(g, &out, 1, 1, &text, &size));
  if (getenv("TPU_UPDATE_GOLDEN")) {  // regenerate after an intended change
    FILE* w = fopen(TPU_TEST_GOLDEN_DIR "/add_reduce.mlir", "wb");
    CHECK(w && fwrite(text, 1, size, w) == size);
    fclose(w);
  }
  FILE* f = fopen(TPU_TEST_GOLDEN_DIR "/add_reduce.mlir", "rb");
  CHECK_MSG(f, "missing golden file %s", TPU_TEST_GOLDEN_DIR "/add_reduce.mlir");
  char golden[4096];
  size_t n = fread(golden, 1, sizeof golden - 1, f);
  golden[n] = 0;
  fclose(f);
  CHECK_MSG(!strcmp(golden, text), "printed text differs from the golden file:\n%s", text);
  tpu_free(text);
  tpu_graph_destroy(g);
}

void test_ir_hash_consing(void) {
  tpu_graph_t* g = new_graph();
  int64_t d[1] = {4};
  tpu_type_t t = tpu_type_make(TPU_F32, d, 1);
  tpu_val_t a = tpu_ir_param(g, &t);
  tpu_val_t x = tpu_ir_unary(g, TPU_IR_EXP, a), y = tpu_ir_unary(g, TPU_IR_EXP, a);
  CHECK(x == y);
  tpu_val_t c1 = tpu_ir_const(g, TPU_F32, 1.5, d, 1), c2 = tpu_ir_const(g, TPU_F32, 1.5, d, 1);
  CHECK(c1 == c2);
  CHECK(tpu_ir_const(g, TPU_F32, 2.5, d, 1) != c1);
  int32_t before = tpu_graph_node_count(g);
  tpu_ir_binary(g, TPU_IR_ADD, x, c1);
  tpu_ir_binary(g, TPU_IR_ADD, y, c2);
  CHECK(tpu_graph_node_count(g) == before + 1);
  // Two graphs built alike hash alike; a different op changes the hash.
  tpu_graph_t* h = new_graph();
  tpu_val_t ha = tpu_ir_param(h, &t);
  tpu_val_t hx = tpu_ir_unary(h, TPU_IR_EXP, ha);
  CHECK(tpu_hash_eq(tpu_ir_hash(g, x), tpu_ir_hash(h, hx)));
  CHECK(!tpu_hash_eq(tpu_ir_hash(g, x), tpu_ir_hash(h, tpu_ir_unary(h, TPU_IR_LOG, ha))));
  tpu_graph_destroy(h);
  tpu_graph_destroy(g);
}

void test_ir_sticky_error(void) {
  tpu_graph_t* g = new_graph();
  int64_t d2[1] = {2}, d3[1] = {3};
  tpu_type_t t2 = tpu_type_make(TPU_F32, d2, 1), t3 = tpu_type_make(TPU_F32, d3, 1);
  tpu_val_t a = tpu_ir_param(g, &t2), b = tpu_ir_param(g, &t3);
  tpu_val_t s = tpu_ir_binary(g, TPU_IR_ADD, a, b);
  CHECK(s == TPU_VAL_NONE);
  CHECK(tpu_ir_unary(g, TPU_IR_EXP, s) == TPU_VAL_NONE);
  CHECK(!tpu_graph_ok(g));
  CHECK(strstr(tpu_status_message(tpu_graph_error(g)), "tensor<2xf32> vs tensor<3xf32>"));
  tpu_graph_reset(g);
  CHECK(tpu_graph_ok(g) && tpu_graph_node_count(g) == 0);
  tpu_graph_destroy(g);
}

void test_ir_run_add_broadcast_convert(void) {
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[2] = {2, 3}, r[1] = {3};
  tpu_type_t tm = tpu_type_make(TPU_F32, d, 2), tr = tpu_type_make(TPU_I32, r, 1);
  tpu_val_t m = tpu_ir_param(g, &tm), row = tpu_ir_param(g, &tr);
  int64_t bd[1] = {1};
  tpu_val_t rowf = tpu_ir_convert(g, row, TPU_F32);
  tpu_val_t b = tpu_ir_broadcast(g, rowf, d, 2, bd);
  tpu_val_t s = tpu_ir_binary(g, TPU_IR_ADD, m, b);
  tpu_val_t h = tpu_ir_convert(g, s, TPU_BF16);
  float mv[6] = {1, 2, 3, 4, 5, 6};
  int32_t rv[3] = {10, 20, 30};
  float out[6];
  uint16_t outh[6];
  const void* in[2] = {mv, rv};
  void* res[2] = {out, outh};
  size_t sizes[2] = {sizeof out, sizeof outh};
  tpu_val_t outs[2] = {s, h};
  run_graph(c, g, outs, 2, in, res, sizes);
  for (int i = 0; i < 6; ++i) {
    float want = mv[i] + (float)rv[i % 3];
    CHECK(out[i] == want);
    uint32_t bits = (uint32_t)outh[i] << 16;
    float back;
    memcpy(&back, &bits, 4);
    CHECK(back == want);  // small integers are exact in bf16
  }
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_dot_reduce(void) {
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t da[2] = {2, 3}, db[2] = {3, 2};
  tpu_type_t ta = tpu_type_make(TPU_F32, da, 2), tb = tpu_type_make(TPU_F32, db, 2);
  tpu_val_t a = tpu_ir_param(g, &ta), b = tpu_ir_param(g, &tb);
  tpu_dot_dims_t dn = {0};
  dn.n_contract = 1;
  dn.lhs_contract[0] = 1;
  dn.rhs_contract[0] = 0;
  tpu_val_t p = tpu_ir_dot(g, a, b, &dn, TPU_F32);
  int64_t dims[2] = {0, 1};
  tpu_val_t total = tpu_ir_reduce(g, p, tpu_ir_const(g, TPU_F32, 0, NULL, 0), dims, 2, TPU_BODY_ADD);
  tpu_val_t mx = tpu_ir_reduce(g, a, tpu_ir_const_bits(g, TPU_F32, 0xff800000u, NULL, 0), dims + 1, 1, TPU_BODY_MAX);
  float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, 0, 0, 1, 1, 1}, pv[4], tv[1], mv[2];
  const void* in[2] = {av, bv};
  void* res[3] = {pv, tv, mv};
  size_t sizes[3] = {sizeof pv, sizeof tv, sizeof mv};
  tpu_val_t outs[3] = {p, total, mx};
  run_graph(c, g, outs, 3, in, res, sizes);
  CHECK(pv[0] == 4 && pv[1] == 5 && pv[2] == 10 && pv[3] == 11);
  CHECK(tv[0] == 30);
  CHECK(mv[0] == 3 && mv[1] == 6);
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

// Whether the printed program of `v` contains `what`.
static bool program_has(tpu_graph_t* g, tpu_val_t v, const char* what) {
  tpu_program_output_t po = {v, -1};
  char* text;
  size_t size;
  CHECK_OK(tpu_graph_print(g, &po, 1, 1, &text, &size));
  bool found = strstr(text, what) != NULL;
  tpu_free(text);
  return found;
}

// torch.set_float32_matmul_precision reaches float32 products as their
// precision_config (HIGHEST by default, where a GPU would use TF32 and a
// TPU bfloat16 passes); products of other dtypes carry none. The CPU plugin
// computes float32 at each.
void test_ir_dot_precision(void) {
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[2] = {2, 2};
  tpu_type_t tf = tpu_type_make(TPU_F32, d, 2), ti = tpu_type_make(TPU_I32, d, 2);
  tpu_val_t a = tpu_ir_param(g, &tf), ia = tpu_ir_param(g, &ti);
  tpu_dot_dims_t dn = {0};
  dn.n_contract = 1;
  dn.lhs_contract[0] = 1;
  tpu_val_t highest = tpu_ir_dot(g, a, a, &dn, TPU_F32);
  tpu_graph_set_precision(g, TPU_PRECISION_HIGH);
  tpu_val_t high = tpu_ir_dot(g, a, a, &dn, TPU_F32);
  tpu_graph_set_precision(g, TPU_PRECISION_MEDIUM);
  tpu_val_t medium = tpu_ir_dot(g, a, a, &dn, TPU_F32);
  tpu_val_t integer = tpu_ir_dot(g, ia, ia, &dn, TPU_I32);
  CHECK(highest != high && high != medium);  // distinct programs, distinct cache keys
  CHECK(program_has(g, highest, "precision_config = [#stablehlo<precision HIGHEST>, "
                                "#stablehlo<precision HIGHEST>]"));
  CHECK(program_has(g, high, "#stablehlo<precision HIGH>"));
  CHECK(program_has(g, medium, "#stablehlo<precision DEFAULT>"));
  CHECK(!program_has(g, integer, "precision"));
  // matrix_exp's squaring loop multiplies at the graph's precision too.
  tpu_val_t squared = tpu_ir_squarings(g, a, tpu_ir_const_i(g, TPU_I32, 1, NULL, 0));
  CHECK(program_has(g, squared, "#stablehlo<precision DEFAULT>"));
  float av[4] = {1, 2, 3, 4}, hv[4], mv[4], xv[4];
  const void* in[2] = {av, av};
  void* res[3] = {hv, mv, xv};
  size_t sizes[3] = {sizeof hv, sizeof mv, sizeof xv};
  tpu_val_t outs[3] = {highest, high, medium};
  run_graph(c, g, outs, 3, in, res, sizes);
  CHECK(hv[0] == 7 && hv[3] == 22 && !memcmp(hv, mv, sizeof hv) && !memcmp(hv, xv, sizeof hv));
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

// A float sum over the leading dims of data shaped with more dims than the
// sum's [rows, cols] is a product with ones (XLA would fold a reshape into
// the reduction and run it as a strided loop); other sums stay reductions.
void test_ir_column_sum(void) {
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d3[3] = {2, 3, 4};
  tpu_type_t t3 = tpu_type_make(TPU_F32, d3, 3);
  tpu_val_t x = tpu_ir_param(g, &t3);
  tpu_val_t sq = tpu_ir_binary(g, TPU_IR_MUL, x, x);
  int64_t lead[2] = {0, 1}, first = 0;
  tpu_val_t colsum = tpu_ir_reduce(g, sq, tpu_ir_const(g, TPU_F32, 0.5, NULL, 0), lead, 2, TPU_BODY_ADD);
  CHECK(program_has(g, colsum, "stablehlo.dot_general"));
  // the same data viewed as [6, 4] first: XLA would still see 3 dims
  tpu_val_t flat = tpu_ir_reshape(g, sq, (int64_t[]){6, 4}, 2);
  tpu_val_t viewed = tpu_ir_reduce(g, flat, tpu_ir_const(g, TPU_F32, 0, NULL, 0), &first, 1, TPU_BODY_ADD);
  CHECK(program_has(g, viewed, "stablehlo.dot_general"));
  // a max, and a sum of data that is [rows, cols] itself, stay reductions
  tpu_val_t mx = tpu_ir_reduce(g, sq, tpu_ir_const(g, TPU_F32, 0, NULL, 0), lead, 2, TPU_BODY_MAX);
  CHECK(!program_has(g, mx, "stablehlo.dot_general"));
  tpu_type_t t2 = tpu_type_make(TPU_F32, (int64_t[]){6, 4}, 2);
  tpu_val_t y = tpu_ir_param(g, &t2);
  tpu_val_t plain = tpu_ir_reduce(g, y, tpu_ir_const(g, TPU_F32, 0, NULL, 0), &first, 1, TPU_BODY_ADD);
  CHECK(!program_has(g, plain, "stablehlo.dot_general"));
  float xv[24], yv[24], cv[4], vv[4], mv[4], pv[4];
  for (int i = 0; i < 24; ++i) xv[i] = (float)(i % 7) - 3, yv[i] = (float)i;
  const void* in[2] = {xv, yv};
  void* res[4] = {cv, vv, mv, pv};
  size_t sizes[4] = {sizeof cv, sizeof vv, sizeof mv, sizeof pv};
  tpu_val_t outs[4] = {colsum, viewed, mx, plain};
  run_graph(c, g, outs, 4, in, res, sizes);
  for (int j = 0; j < 4; ++j) {
    float sum = 0, max = 0, col = 0;
    for (int r = 0; r < 6; ++r) {
      sum += xv[r * 4 + j] * xv[r * 4 + j];
      max = fmaxf(max, xv[r * 4 + j] * xv[r * 4 + j]);
      col += yv[r * 4 + j];
    }
    CHECK_MSG(cv[j] == sum + 0.5f, "column %d: %g, want %g", j, cv[j], sum + 0.5f);
    CHECK(vv[j] == sum && mv[j] == max && pv[j] == col);
  }
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_argmax_sort_gather(void) {
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[1] = {6};
  tpu_type_t t = tpu_type_make(TPU_F32, d, 1);
  tpu_val_t x = tpu_ir_param(g, &t);
  tpu_val_t idx = tpu_ir_iota(g, TPU_I64, d, 1, 0);
  tpu_val_t am = tpu_ir_reduce_arg(g, x, idx, tpu_ir_const_bits(g, TPU_F32, 0xff800000u, NULL, 0),
                                   tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), 0, TPU_BODY_ARGMAX);
  tpu_val_t am_i = tpu_ir_result(g, am, 1);
  tpu_val_t ops[2] = {x, idx};
  tpu_val_t srt = tpu_ir_sort(g, ops, 2, 0, TPU_SORT_ASCENDING, true);
  tpu_val_t sv = tpu_ir_result(g, srt, 0), si = tpu_ir_result(g, srt, 1);
  // gather x[[5, 0]]
  int64_t picks[2] = {5, 0};
  tpu_val_t pi = tpu_ir_reshape(g, tpu_ir_const_i64_array(g, picks, 2), (int64_t[]){2, 1}, 2);
  tpu_gather_dims_t gd = {0};
  gd.n_collapsed = 1;
  gd.collapsed_slice_dims[0] = 0;
  gd.n_start_map = 1;
  gd.start_index_map[0] = 0;
  gd.index_vector_dim = 1;
  int64_t ss[1] = {1};
  tpu_val_t ga = tpu_ir_gather(g, x, pi, &gd, ss);
  float xv[6] = {3, NAN, 7, 7, -1, 2}, svv[6], gv[2];
  int64_t amv, siv[6];
  const void* in[1] = {xv};
  void* res[4] = {&amv, svv, siv, gv};
  size_t sizes[4] = {8, sizeof svv, sizeof siv, sizeof gv};
  tpu_val_t outs[4] = {am_i, sv, si, ga};
  run_graph(c, g, outs, 4, in, res, sizes);
  CHECK_MSG(amv == 1, "argmax with NaN should pick the NaN, got %lld", (long long)amv);
  CHECK(svv[0] == -1 && svv[1] == 2 && svv[2] == 3 && svv[3] == 7 && svv[4] == 7 && isnan(svv[5]));
  CHECK(siv[3] == 2 && siv[4] == 3 && siv[5] == 1);  // stable, NaN last
  CHECK(gv[0] == 2 && gv[1] == 3);
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_compile_all_ops(void) {
  // Every builder once, in one module: the printer's syntax for each op must
  // be accepted by the real compiler.
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d4[4] = {1, 2, 4, 4}, k4[4] = {3, 2, 3, 3};
  tpu_type_t ti = tpu_type_make(TPU_F32, d4, 4), tk = tpu_type_make(TPU_F32, k4, 4);
  tpu_val_t x = tpu_ir_param(g, &ti), k = tpu_ir_param(g, &tk);
  tpu_conv_attrs_t ca;
  tpu_conv_attrs_default(&ca, 2);
  ca.pad_lo[0] = ca.pad_hi[0] = ca.pad_lo[1] = ca.pad_hi[1] = 1;
  tpu_val_t conv = tpu_ir_conv(g, x, k, &ca, TPU_F32);
  tpu_window_t w = {0};
  w.dims[0] = w.dims[1] = 1;
  w.dims[2] = w.dims[3] = 2;
  w.strides[0] = w.strides[1] = 1;
  w.strides[2] = w.strides[3] = 2;
  tpu_val_t ninf = tpu_ir_const_bits(g, TPU_F32, 0xff800000u, NULL, 0);
  tpu_val_t zero = tpu_ir_const(g, TPU_F32, 0, NULL, 0);
  tpu_val_t pool = tpu_ir_reduce_window(g, x, ninf, &w, TPU_BODY_MAX);
  tpu_val_t sas = tpu_ir_select_and_scatter(g, x, pool, zero, &w);
  tpu_val_t sl = tpu_ir_slice(g, x, (int64_t[]){0, 0, 1, 0}, (int64_t[]){1, 2, 4, 4}, (int64_t[]){1, 1, 2, 1});
  tpu_val_t pd = tpu_ir_pad(g, sl, zero, (int64_t[]){0, 0, 1, 0}, (int64_t[]){0, 0, 0, 1}, NULL);
  tpu_val_t rv = tpu_ir_reverse(g, x, (int64_t[]){3}, 1);
  tpu_val_t tr = tpu_ir_transpose(g, rv, (int64_t[]){0, 1, 3, 2});
  tpu_val_t cc = tpu_ir_concat(g, (tpu_val_t[]){x, tr}, 2, 1);
  tpu_val_t i0 = tpu_ir_const_i(g, TPU_I64, 1, NULL, 0);
  tpu_val_t ds = tpu_ir_dynamic_slice(g, x, (tpu_val_t[]){i0, i0, i0, i0}, (int64_t[]){1, 1, 2, 2});
  tpu_val_t dus = tpu_ir_dynamic_update_slice(g, x, ds, (tpu_val_t[]){i0, i0, i0, i0});
  tpu_val_t cmp = tpu_ir_compare(g, TPU_CMP_LT, x, dus);
  tpu_val_t sel = tpu_ir_select(g, cmp, x, dus);
  tpu_val_t un = tpu_ir_unary(g, TPU_IR_ERF, tpu_ir_unary(g, TPU_IR_TANH, sel));
  tpu_val_t cl = tpu_ir_clamp(g, zero, tpu_ir_reshape(g, un, (int64_t[]){32}, 1), tpu_ir_const(g, TPU_F32, 0.5, NULL, 0));
  tpu_val_t flat = tpu_ir_reshape(g, x, (int64_t[]){32}, 1);
  tpu_val_t upd = tpu_ir_const(g, TPU_F32, 1, (int64_t[]){2}, 1);
  tpu_val_t sidx = tpu_ir_reshape(g, tpu_ir_const_i64_array(g, (int64_t[]){3, 7}, 2), (int64_t[]){2, 1}, 2);
  tpu_scatter_dims_t sd = {0};
  sd.n_inserted = 1;
  sd.n_to_operand = 1;
  sd.index_vector_dim = 1;
  tpu_val_t sc = tpu_ir_scatter(g, flat, sidx, upd, &sd, TPU_BODY_ADD);
  tpu_val_t tk2 = tpu_ir_top_k(g, flat, 3);
  tpu_val_t state = tpu_ir_const_i(g, TPU_U64, 42, (int64_t[]){2}, 1);
  tpu_type_t bits_t = tpu_type_make(TPU_U32, (int64_t[]){4}, 1);
  tpu_val_t rng = tpu_ir_rng_bits(g, state, &bits_t);
  tpu_val_t cx = tpu_ir_binary(g, TPU_IR_COMPLEX, flat, flat);
  tpu_val_t cre = tpu_ir_unary(g, TPU_IR_REAL, tpu_ir_binary(g, TPU_IR_MUL, cx, tpu_ir_const_complex(g, TPU_C64, 0, 1, (int64_t[]){32}, 1)));
  tpu_val_t bc = tpu_ir_bitcast(g, flat, &(tpu_type_t){TPU_I32, 1, {32}});
  tpu_val_t outs[] = {conv, sas, pd, cc, cl, sc, tpu_ir_result(g, tk2, 1), tpu_ir_result(g, rng, 1), cre, bc};
  int n = (int)(sizeof outs / sizeof outs[0]);
  CHECK_OK(tpu_graph_error(g) ? tpu_status_clone(tpu_graph_error(g)) : TPU_OK);
  tpu_program_output_t po[16];
  for (int i = 0; i < n; ++i) po[i] = (tpu_program_output_t){outs[i], -1};
  char* text;
  size_t size;
  CHECK_OK(tpu_graph_print(g, po, n, 1, &text, &size));
  tpu_executable_t* e = NULL;
  tpu_status_t s = tpu_executable_compile(c, text, size, 1, &e);
  if (s) fprintf(stderr, "%s\n", text);
  CHECK_OK(s);
  CHECK(tpu_executable_num_outputs(e) == n);
  tpu_free(text);
  tpu_executable_release(e);
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_fft_cholesky(void) {
  // RFFT then IRFFT gives the input back; FFT of a complex impulse is flat;
  // cholesky and triangular_solve solve a 2x2 positive definite system.
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[2] = {2, 4}, m[2] = {2, 2};
  tpu_type_t tx = tpu_type_make(TPU_F32, d, 2), tm = tpu_type_make(TPU_F32, m, 2);
  tpu_val_t x = tpu_ir_param(g, &tx), a = tpu_ir_param(g, &tm), b = tpu_ir_param(g, &tm);
  tpu_val_t spec = tpu_ir_fft(g, x, TPU_FFT_RFFT, (int64_t[]){4}, 1);
  CHECK(tpu_ir_dims(g, spec)[1] == 3 && tpu_ir_dtype(g, spec) == TPU_C64);
  tpu_val_t back = tpu_ir_fft(g, spec, TPU_FFT_IRFFT, (int64_t[]){2, 4}, 2);
  back = tpu_ir_fft(g, tpu_ir_fft(g, back, TPU_FFT_RFFT, (int64_t[]){2, 4}, 2), TPU_FFT_IRFFT,
                    (int64_t[]){4}, 1);
  tpu_val_t imp = tpu_ir_binary(g, TPU_IR_COMPLEX, x, tpu_ir_const(g, TPU_F32, 0, d, 2));
  tpu_val_t flat = tpu_ir_unary(g, TPU_IR_REAL, tpu_ir_fft(g, tpu_ir_fft(g, imp, TPU_FFT_FFT, (int64_t[]){2, 4}, 2),
                                                           TPU_FFT_IFFT, (int64_t[]){2, 4}, 2));
  tpu_val_t l = tpu_ir_cholesky(g, a, true);
  tpu_val_t sol = tpu_ir_triangular_solve(g, l, b, true, true, false, TPU_TRANSPOSE_NO);
  float xv[8] = {1, 2, 3, 4, -1, 0.5f, 0, 2}, av[4] = {4, 2, 2, 3}, bv[4] = {2, 0, 1, 1};
  float backv[8], flatv[8], lv[4], sv[4];
  const void* in[3] = {xv, av, bv};
  void* res[4] = {backv, flatv, lv, sv};
  size_t sizes[4] = {sizeof backv, sizeof flatv, sizeof lv, sizeof sv};
  tpu_val_t outs[4] = {back, flat, l, sol};
  run_graph(c, g, outs, 4, in, res, sizes);
  for (int i = 0; i < 8; ++i) {
    CHECK_MSG(fabsf(backv[i] - xv[i]) < 1e-5f, "irfft(rfft(x))[%d] = %g, want %g", i, backv[i], xv[i]);
    CHECK_MSG(fabsf(flatv[i] - xv[i]) < 1e-5f, "ifft(fft(x))[%d] = %g, want %g", i, flatv[i], xv[i]);
  }
  // L = [[2, 0], [1, sqrt(2)]] (the upper triangle is left to XLA); L^-1 b.
  CHECK(fabsf(lv[0] - 2) < 1e-6f && fabsf(lv[2] - 1) < 1e-6f && fabsf(lv[3] - sqrtf(2)) < 1e-6f);
  CHECK(fabsf(sv[0] - 1) < 1e-6f && fabsf(sv[1]) < 1e-6f);
  CHECK(fabsf(sv[2] - 0) < 1e-6f && fabsf(sv[3] - 1 / sqrtf(2)) < 1e-6f);
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_lu(void) {
  // The LU loop on a batch of two 3x3 matrices: LAPACK's pivots, P L U = A
  // (row r of L U is row perm[r] of A), and the permutation rebuilt from
  // the pivots alone.
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[3] = {2, 3, 3};
  tpu_type_t t = tpu_type_make(TPU_F64, d, 3);
  tpu_val_t a = tpu_ir_param(g, &t);
  tpu_val_t lu, piv, perm;
  tpu_ir_lu(g, a, &lu, &piv, &perm);
  tpu_val_t perm2 = tpu_ir_lu_permutation(g, piv, 3);
  double av[18] = {1, 2, 0, 4, 1, 1, -2, 3, 5,   // pivots 2, 3, 3
                   0, 0, 1, 0, 1, 0, 1, 0, 0};  // a permutation: 3, 2, 3
  double luv[18];
  int32_t pv[6], qv[6], q2v[6];
  const void* in[1] = {av};
  void* res[4] = {luv, pv, qv, q2v};
  size_t sizes[4] = {sizeof luv, sizeof pv, sizeof qv, sizeof q2v};
  tpu_val_t outs[4] = {lu, piv, perm, perm2};
  run_graph(c, g, outs, 4, in, res, sizes);
  const int32_t want_piv[6] = {2, 3, 3, 3, 2, 3};
  for (int i = 0; i < 6; ++i) {
    CHECK_MSG(pv[i] == want_piv[i], "pivots[%d] = %d, want %d", i, pv[i], want_piv[i]);
    CHECK_MSG(qv[i] == q2v[i], "perm[%d] = %d, from the pivots %d", i, qv[i], q2v[i]);
  }
  for (int b = 0; b < 2; ++b) {
    const double* f = luv + 9 * b;
    for (int r = 0; r < 3; ++r)
      for (int col = 0; col < 3; ++col) {
        double s = 0;  // (L U)[r, col], L unit lower, U upper
        for (int k = 0; k <= (r < col ? r : col); ++k)
          s += (k == r ? 1.0 : f[r * 3 + k]) * f[k * 3 + col];
        double want = av[9 * b + qv[3 * b + r] * 3 + col];
        CHECK_MSG(fabs(s - want) < 1e-12, "batch %d: (LU)[%d,%d] = %g, want %g", b, r, col, s, want);
      }
  }
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_qr(void) {
  // Householder QR of a 4x3 matrix: Q (the first 3 columns of the
  // reflectors' product) has orthonormal columns, R is upper triangular
  // with LAPACK's signs (R[0][0] = -|column 0| for a positive A[0][0]), and
  // Q R = A.
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[2] = {4, 3};
  tpu_type_t t = tpu_type_make(TPU_F64, d, 2);
  tpu_val_t a = tpu_ir_param(g, &t);
  tpu_val_t packed, tau;
  tpu_ir_qr(g, a, &packed, &tau);
  tpu_val_t q = tpu_ir_householder_product(g, packed, tau, 3);
  double av[12] = {2, -1, 0, 1, 3, 1, 0, 1, 4, 1, 0, 1}, pv[12], qv[12];
  const void* in[1] = {av};
  void* res[2] = {pv, qv};
  size_t sizes[2] = {sizeof pv, sizeof qv};
  tpu_val_t outs[2] = {packed, q};
  run_graph(c, g, outs, 2, in, res, sizes);
  CHECK_MSG(fabs(pv[0] + sqrt(6.0)) < 1e-12, "R[0][0] = %g, want -sqrt(6)", pv[0]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double dot = 0;
      for (int r = 0; r < 4; ++r) dot += qv[r * 3 + i] * qv[r * 3 + j];
      CHECK_MSG(fabs(dot - (i == j)) < 1e-12, "(Q^T Q)[%d][%d] = %g", i, j, dot);
    }
  for (int r = 0; r < 4; ++r)
    for (int col = 0; col < 3; ++col) {
      double s = 0;
      for (int k = 0; k <= col; ++k) s += qv[r * 3 + k] * pv[k * 3 + col];
      CHECK_MSG(fabs(s - av[r * 3 + col]) < 1e-12, "(QR)[%d][%d] = %g, want %g", r, col, s,
                av[r * 3 + col]);
    }
  tpu_graph_destroy(g);
  tpu_client_release(c);
}

void test_ir_run_squarings(void) {
  // Two 2x2 diagonal matrices squared 0 and 3 times: diag(2, 3) stays,
  // diag(2, -1) becomes diag(256, 1).
  tpu_client_t* c = test_client(1);
  tpu_graph_t* g = new_graph();
  int64_t d[3] = {2, 2, 2}, n = 2;
  tpu_type_t t = tpu_type_make(TPU_F32, d, 3), ct = tpu_type_make(TPU_I32, &n, 1);
  tpu_val_t x = tpu_ir_param(g, &t), counts = tpu_ir_param(g, &ct);
  tpu_val_t y = tpu_ir_squarings(g, x, counts);
  float xv[8] = {2, 0, 0, 3, 2, 0, 0, -1}, yv[8];
  int32_t cv[2] = {0, 3};
  const void* in[2] = {xv, cv};
  void* res[1] = {yv};
  size_t sizes[1] = {sizeof yv};
  run_graph(c, g, &y, 1, in, res, sizes);
  const float want[8] = {2, 0, 0, 3, 256, 0, 0, 1};
  for (int i = 0; i < 8; ++i) CHECK_MSG(yv[i] == want[i], "y[%d] = %g, want %g", i, yv[i], want[i]);
  tpu_graph_destroy(g);
  tpu_client_release(c);
}
