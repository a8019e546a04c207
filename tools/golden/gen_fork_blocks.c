/* Golden blocks from the TurboQuant llama.cpp fork's own C reference quantizers.
 *
 * Built against a checkout of the fork (FORK_DIR), never in CI; the fork's code is not part of
 * this repository. It quantizes a fixed, seeded set of rows with quantize_row_turbo3_0_ref,
 * quantize_row_turbo4_0_ref, quantize_row_turbo2_0_ref and ggml's quantize_row_q8_0_ref, and
 * prints a C++ header holding each row's float32 input bits and the bytes of each type.
 * tests/cpu/test_fork_golden.cpp checks that the library's quantizers give the same bytes.
 * The exact command is in tools/golden/README.md. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

#if !TURBO4_USE_4BIT
#error "the fork's default turbo4 layout is the 4-bit one (TURBO4_USE_4BIT=1)"
#endif

/* ggml symbols ggml-quants.c refers to in functions this program never calls. */
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "ggml_abort at %s:%d: ", file, line);
  vfprintf(stderr, fmt, args);
  va_end(args);
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
const char* ggml_type_name(enum ggml_type type) { (void)type; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }

#define MAX_VALUES 512

enum row_kind {
  FORMAT_VECTOR,  /* docs/format.md §6's exact vector */
  SINE_VECTOR,    /* docs/format.md §6's sinf vector */
  NORMAL,         /* N(0, sigma^2) */
  ZEROS,
  ZERO_BLOCK_THEN_NORMAL,
  SPIKE,          /* zeros but one value in the second block */
  SIGN_PATTERN,   /* 0.5 * s1: the rotation maps it to one spike and exact zeros */
  HALF_TIES,      /* q8_0 with d = 1: every other value is k + 0.5 */
  FLOAT_SUBNORMALS,
  BLOCK_SCALES,   /* 128-value blocks of sigma 1e-2, 1, 1e2 and zeros */
};

struct row_spec {
  const char* name;
  int n;
  enum row_kind kind;
  double sigma;
  uint64_t seed;
};

static const struct row_spec specs[] = {
    {"format.md 6 exact vector", 128, FORMAT_VECTOR, 0, 0},
    {"format.md 6 sinf vector", 256, SINE_VECTOR, 0, 0},
    {"normal sigma 1, D 128", 128, NORMAL, 1.0, 101},
    {"normal sigma 1, D 256", 256, NORMAL, 1.0, 102},
    {"normal sigma 1, D 512", 512, NORMAL, 1.0, 103},
    {"normal sigma 0.05, D 256", 256, NORMAL, 0.05, 104},
    {"zeros", 128, ZEROS, 0, 0},
    {"zero block, then normal sigma 1", 256, ZERO_BLOCK_THEN_NORMAL, 1.0, 105},
    {"large norm: normal sigma 2000", 128, NORMAL, 2000.0, 106},
    {"norm near the fp16 top: normal sigma 4500", 128, NORMAL, 4500.0, 107},
    {"small: normal sigma 1e-4 (q8_0 scale fp16-subnormal)", 128, NORMAL, 1e-4, 108},
    {"tiny: normal sigma 1e-7 (turbo norm fp16-subnormal, q8_0 scale 0)", 128, NORMAL, 1e-7, 109},
    {"one spike in the second block", 256, SPIKE, 0, 0},
    {"0.5 * s1 (rotates to one spike and exact zeros)", 128, SIGN_PATTERN, 0, 0},
    {"q8_0 d = 1 with values k + 0.5 (ties away from zero)", 128, HALF_TIES, 0, 0},
    {"float subnormals (norm 0; q8_0 1/d overflows, x86-64 stores 0)", 128, FLOAT_SUBNORMALS, 0, 0},
    {"blocks of sigma 1e-2, 1, 1e2 and zeros", 512, BLOCK_SCALES, 0, 110},
};

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One N(0, 1) draw (Box-Muller in double); the header stores the floats, so libm may differ. */
static double normal(uint64_t* state) {
  const double u1 = ((double)(splitmix64(state) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (double)(splitmix64(state) >> 11) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Bit i of the rotation's first sign vector (docs/format.md §3). */
static int s1_negative(int i) {
  static const uint32_t words[4] = {0xE46A0359u, 0x42F85949u, 0xA4C63BBBu, 0x49F250A9u};
  return (int)((words[i / 32] >> (i % 32)) & 1u);
}

static void make_row(const struct row_spec* s, float* x) {
  uint64_t state = s->seed;
  for (int i = 0; i < s->n; ++i) {
    switch (s->kind) {
      case FORMAT_VECTOR: x[i] = (float)((i * 37) % 128 - 64) / 16.0f * (float)(1 + i % 5); break;
      case SINE_VECTOR: x[i] = (float)(sinf(0.37f * (float)i + 0.1f) * 3.0f + (float)((i % 7) - 3) * 0.25f); break;
      case NORMAL: x[i] = (float)(s->sigma * normal(&state)); break;
      case ZEROS: x[i] = 0.0f; break;
      case ZERO_BLOCK_THEN_NORMAL: x[i] = i < 128 ? 0.0f : (float)(s->sigma * normal(&state)); break;
      case SPIKE: x[i] = i == 200 ? 37.5f : 0.0f; break;
      case SIGN_PATTERN: x[i] = s1_negative(i) ? -0.5f : 0.5f; break;
      case HALF_TIES: x[i] = i % 32 == 0 ? ((i / 32) % 2 ? -127.0f : 127.0f) : (float)((i * 7) % 61 - 30) + 0.5f; break;
      case FLOAT_SUBNORMALS: x[i] = (i % 2 ? -1.0f : 1.0f) * (float)(i + 1) * 1e-40f; break;
      case BLOCK_SCALES: {
        static const double sigma[4] = {1e-2, 1.0, 1e2, 0.0};
        x[i] = (float)(sigma[i / 128] * normal(&state));
        break;
      }
    }
  }
}

static void print_bytes(const char* label, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  printf("    /* %s, %zu bytes */\n", label, n);
  for (size_t i = 0; i < n; i += 64) {
    printf("    \"");
    for (size_t j = i; j < n && j < i + 64; ++j) printf("%02x", b[j]);
    printf("\"%s\n", i + 64 >= n ? "," : "");
  }
}

/* A turbo norm of +inf means the fork's result for the row depends on its fp16 overflow, where
 * the library saturates (docs/format.md §7): such a row is no golden row. */
static int norm_is_inf(uint16_t h) { return (h & 0x7fffu) == 0x7c00u; }

int main(int argc, char** argv) {
  const char* fork_revision = argc > 1 ? argv[1] : "unknown revision";
  const int n_rows = (int)(sizeof specs / sizeof specs[0]);
  float x[MAX_VALUES];
  block_turbo3_0 t3[MAX_VALUES / QK_TURBO3];
  block_turbo4_0 t4[MAX_VALUES / QK_TURBO4];
  block_turbo2_0 t2[MAX_VALUES / QK_TURBO2];
  block_q8_0 q8[MAX_VALUES / QK8_0];
  size_t total_bytes = 0;

  printf("// Generated by tools/golden/gen_fork_blocks.c (tools/golden/README.md) from the TurboQuant\n");
  printf("// llama.cpp fork at %s: each row's float32 input bits and the bytes the fork's C reference\n", fork_revision);
  printf("// quantizers write for it (quantize_row_turbo3_0_ref, quantize_row_turbo4_0_ref with\n");
  printf("// TURBO4_USE_4BIT = 1, quantize_row_turbo2_0_ref, ggml's quantize_row_q8_0_ref). Do not edit.\n");
  printf("#pragma once\n\n#include <cstdint>\n\nnamespace fork_golden {\n\n");
  printf("struct row {\n  const char* name;\n  int n;             // values\n  const uint32_t* x; // float32 bits\n");
  printf("  const char* turbo3;  // hex\n  const char* turbo4;\n  const char* turbo2;\n  const char* q8_0;\n};\n\n");

  for (int r = 0; r < n_rows; ++r) {
    const struct row_spec* s = &specs[r];
    make_row(s, x);
    printf("inline constexpr uint32_t x%d[%d] = {", r, s->n);
    for (int i = 0; i < s->n; ++i) {
      uint32_t bits;
      memcpy(&bits, &x[i], 4);
      printf("%s0x%08" PRIx32 "u%s", i % 8 == 0 ? "\n    " : "", bits, i + 1 < s->n ? "," : "");
      if (i % 8 != 7 && i + 1 < s->n) printf(" ");
    }
    printf("};\n");
  }
  printf("\ninline constexpr row rows[] = {\n");
  for (int r = 0; r < n_rows; ++r) {
    const struct row_spec* s = &specs[r];
    make_row(s, x);
    quantize_row_turbo3_0_ref(x, t3, s->n);
    quantize_row_turbo4_0_ref(x, t4, s->n);
    quantize_row_turbo2_0_ref(x, t2, s->n);
    quantize_row_q8_0_ref(x, q8, s->n);
    for (int b = 0; b < s->n / 128; ++b) {
      if (norm_is_inf(t3[b].norm) || norm_is_inf(t4[b].norm) || norm_is_inf(t2[b].norm)) {
        fprintf(stderr, "row %d (%s): a turbo norm overflows fp16\n", r, s->name);
        return 1;
      }
    }
    printf("  {\"%s\", %d, x%d,\n", s->name, s->n, r);
    print_bytes("turbo3", t3, sizeof(block_turbo3_0) * (size_t)(s->n / QK_TURBO3));
    print_bytes("turbo4", t4, sizeof(block_turbo4_0) * (size_t)(s->n / QK_TURBO4));
    print_bytes("turbo2", t2, sizeof(block_turbo2_0) * (size_t)(s->n / QK_TURBO2));
    print_bytes("q8_0", q8, sizeof(block_q8_0) * (size_t)(s->n / QK8_0));
    printf("  },\n");
    total_bytes += sizeof(block_turbo3_0) * (size_t)(s->n / QK_TURBO3) + sizeof(block_turbo4_0) * (size_t)(s->n / QK_TURBO4) +
                   sizeof(block_turbo2_0) * (size_t)(s->n / QK_TURBO2) + sizeof(block_q8_0) * (size_t)(s->n / QK8_0);
  }
  printf("};\n\n}  // namespace fork_golden\n");
  fprintf(stderr, "%d rows, %zu bytes of blocks\n", n_rows, total_bytes);
  return 0;
}
