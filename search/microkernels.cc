// tessera's bfloat16 micro-kernels: a run of output pixels of a convolution (or rows of a matmul, a 1x1 one) from bf16
// data and weights, accumulated in fp32, either on AMX tiles (tdpbf16ps) or with AVX-512 BF16 dot products
// (vdpbf16ps). The kernel templates call them from TIR (search/templates/bf16.py); each function carries its own
// target attributes, so the file compiles with the plain options of any other source and nothing here runs unless a
// kernel calls it.
//
// Operands, for a run of `width` output pixels (pixel p at input column p * stride_w of the first input row it
// reads; a run longer than the row continues on the next rows, as their pixels follow in memory) and one block of 16
// output channels:
//   x    the zero-padded input in blocks of 32 channels, (blocks, padded height, padded width, 32) bf16, at the first
//        input row the run reads; `row_stride` and `block_stride` are its row and block strides in elements;
//   w    the weights of the 16 output channels, (blocks, kh, kw, 16 channel pairs, 16, 2) bf16: each 64-byte row
//        holds a pair of input channels for every output channel, as the dot-product instructions read them;
//   out  the run, (width, 16) fp32.
// The `rows` functions take several short runs of `run_width` pixels (at most 16: a strided convolution's output rows),
// run r's input at x + r * run_step elements and its pixels at out + r * run_width * 16; `width` is all of them.
// All return 0, or -1 when this CPU (or the kernel's permission for AMX state) lacks the instructions.
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <utility>

namespace {

constexpr int kBlock = 32;  // input channels per block: one 64-byte row of bf16
constexpr int kLanes = 16;  // output channels per block: one 64-byte row of fp32
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool HasAmx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1) || !(d >> 24 & 1)) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;  // Linux grants AMX state on request
}

bool HasAvx512Bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b >> 16 & 1) || !(b >> 30 & 1)) return false;  // avx512f, bw
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
}

struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0 to 3 accumulate up to four groups of 16 output pixels, the last one `last` pixels; the input of a whole
// group goes through tile 4, that of the last group through tile 5 (a tile's rows are fixed by the configuration);
// tile 6 holds the weights, shared by every group.
constexpr int kGroups = 4;

__attribute__((target("amx-tile,amx-bf16"))) void LoadTiles(int groups, int last) {
  TileConfig config;
  for (int tile = 0; tile < 7; ++tile) config.colsb[tile] = 64;
  for (int group = 0; group < kGroups; ++group) config.rows[group] = group < groups - 1 ? kLanes : last;
  config.rows[4] = kLanes;
  config.rows[5] = last;
  config.rows[6] = kBlock / 2;
  asm volatile("" : : "r"(&config) : "memory");  // keep the stores: the compiler does not see ldtilecfg read them
  _tile_loadconfig(&config);
}

struct Row {
  const uint16_t* x;
  const uint16_t* w;
  float* out;
  int blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w, width;

  const uint16_t* input(int block, int i, int j, int column) const {
    return x + (long)block * block_stride + (long)i * dilation_h * row_stride +
           ((long)column * stride_w + (long)j * dilation_w) * kBlock;
  }
  const uint16_t* weights(int block, int i, int j) const {
    return w + (((long)block * kh + i) * kw + j) * kBlock * kLanes;
  }
};

// Group `group` (a literal: the tile intrinsics take tile numbers as text) of the pixels from `column`: its input
// into tile 4 (a whole group) or 5 (the last one), times the weights in tile 6, into tile `group`.
#define TESSERA_AMX_GROUP(group, last)                                                        \
  do {                                                                                        \
    const uint16_t* input = r.input(block, i, j, column + (group) * kLanes);                  \
    if (last) {                                                                               \
      _tile_loadd(5, input, pixel_bytes);                                                     \
      _tile_dpbf16ps(group, 5, 6);                                                            \
    } else {                                                                                  \
      _tile_loadd(4, input, pixel_bytes);                                                     \
      _tile_dpbf16ps(group, 4, 6);                                                            \
    }                                                                                         \
  } while (0)
#define TESSERA_AMX_STORE(group) _tile_stored(group, r.out + (long)(column + (group) * kLanes) * kLanes, 64)

__attribute__((target("amx-tile,amx-bf16"))) void AmxRow(const Row& r) {
  const long pixel_bytes = 2L * kBlock * r.stride_w;
  int configured = -1;
  for (int column = 0; column < r.width; column += kGroups * kLanes) {
    const int left = r.width - column;
    const int groups = left >= kGroups * kLanes ? kGroups : (left + kLanes - 1) / kLanes;
    const int last = left - (groups - 1) * kLanes < kLanes ? left - (groups - 1) * kLanes : kLanes;
    if (groups * (kLanes + 1) + last != configured) {
      LoadTiles(groups, last);
      configured = groups * (kLanes + 1) + last;
    }
    _tile_zero(0);
    if (groups > 1) _tile_zero(1);
    if (groups > 2) _tile_zero(2);
    if (groups > 3) _tile_zero(3);
    for (int block = 0; block < r.blocks; ++block) {
      for (int i = 0; i < r.kh; ++i) {
        for (int j = 0; j < r.kw; ++j) {
          _tile_loadd(6, r.weights(block, i, j), 64);
          TESSERA_AMX_GROUP(0, groups == 1);
          if (groups > 1) TESSERA_AMX_GROUP(1, groups == 2);
          if (groups > 2) TESSERA_AMX_GROUP(2, groups == 3);
          if (groups > 3) TESSERA_AMX_GROUP(3, true);
        }
      }
    }
    TESSERA_AMX_STORE(0);
    if (groups > 1) TESSERA_AMX_STORE(1);
    if (groups > 2) TESSERA_AMX_STORE(2);
    if (groups > 3) TESSERA_AMX_STORE(3);
  }
  _tile_release();
}

// Up to kGroups runs of at most 16 pixels at once, one accumulator each (every one `width` rows, their input through
// tile 5), run r's input `run_step` elements after run r - 1's: alone, the one accumulator of a short run leaves each
// tile product waiting for the last one.
#define TESSERA_AMX_RUN(run)                                                                   \
  do {                                                                                        \
    _tile_loadd(5, r.input(block, i, j, 0) + (run) * run_step, pixel_bytes);                  \
    _tile_dpbf16ps(run, 5, 6);                                                                \
  } while (0)

__attribute__((target("amx-tile,amx-bf16"))) void AmxRuns(const Row& r, int runs, long run_step) {
  const long pixel_bytes = 2L * kBlock * r.stride_w;
  LoadTiles(1, r.width);
  _tile_zero(0);
  if (runs > 1) _tile_zero(1);
  if (runs > 2) _tile_zero(2);
  if (runs > 3) _tile_zero(3);
  for (int block = 0; block < r.blocks; ++block) {
    for (int i = 0; i < r.kh; ++i) {
      for (int j = 0; j < r.kw; ++j) {
        _tile_loadd(6, r.weights(block, i, j), 64);
        TESSERA_AMX_RUN(0);
        if (runs > 1) TESSERA_AMX_RUN(1);
        if (runs > 2) TESSERA_AMX_RUN(2);
        if (runs > 3) TESSERA_AMX_RUN(3);
      }
    }
  }
  _tile_stored(0, r.out, 64);
  if (runs > 1) _tile_stored(1, r.out + (long)r.width * kLanes, 64);
  if (runs > 2) _tile_stored(2, r.out + 2L * r.width * kLanes, 64);
  if (runs > 3) _tile_stored(3, r.out + 3L * r.width * kLanes, 64);
  _tile_release();
}

// `Pixels` output pixels at once, each one vector of 16 output channels in a register; the weights' vector is shared
// by them, each pixel's pair of input channels broadcast from memory.
template <int Pixels>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void DotTile(const Row& r, int column) {
  __m512 acc[Pixels];
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) acc[p] = _mm512_setzero_ps();
  for (int block = 0; block < r.blocks; ++block) {
    for (int i = 0; i < r.kh; ++i) {
      for (int j = 0; j < r.kw; ++j) {
        const uint16_t* a = r.input(block, i, j, column);
        const uint16_t* b = r.weights(block, i, j);
        for (int pair = 0; pair < kBlock / 2; ++pair) {
          const __m512bh weights = (__m512bh)_mm512_loadu_si512(b + pair * 2 * kLanes);
#pragma GCC unroll 16
          for (int p = 0; p < Pixels; ++p) {
            int32_t inputs;
            memcpy(&inputs, a + (long)p * r.stride_w * kBlock + 2 * pair, sizeof inputs);
            acc[p] = _mm512_dpbf16_ps(acc[p], (__m512bh)_mm512_set1_epi32(inputs), weights);
          }
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) _mm512_storeu_ps(r.out + (long)(column + p) * kLanes, acc[p]);
}

// DotTile<1> to DotTile<sizeof...(Sizes)>, indexed by the tile's pixels minus one.
template <int... Sizes>
constexpr auto DotTiles(std::integer_sequence<int, Sizes...>) {
  return std::array<void (*)(const Row&, int), sizeof...(Sizes)>{&DotTile<Sizes + 1>...};
}

// The run in as few tiles as fit the registers, of sizes that differ by at most one pixel (15 pixels: 8 and 7, not
// 14 and 1): each tile's accumulators are enough to hide the dot product's latency.
void DotRow(const Row& r) {
  constexpr int kTile = 14;  // 14 accumulators, the weights and a broadcast: within the 32 registers
  static constexpr auto tiles = DotTiles(std::make_integer_sequence<int, kTile>());
  const int count = (r.width + kTile - 1) / kTile;
  for (int tile = 0, column = 0; tile < count; ++tile) {
    const int size = r.width / count + (tile < r.width % count);
    tiles[size - 1](r, column);
    column += size;
  }
}

}  // namespace

extern "C" int tessera_bf16_conv_row_amx(const uint16_t* x, const uint16_t* w, float* out, int blocks,
                                         int row_stride, int block_stride, int kh, int kw, int stride_w,
                                         int dilation_h, int dilation_w, int width) {
  static const bool available = HasAmx();
  if (!available) return -1;
  AmxRow(Row{x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w, width});
  return 0;
}

extern "C" int tessera_bf16_conv_row_dot(const uint16_t* x, const uint16_t* w, float* out, int blocks,
                                         int row_stride, int block_stride, int kh, int kw, int stride_w,
                                         int dilation_h, int dilation_w, int width) {
  static const bool available = HasAvx512Bf16();
  if (!available) return -1;
  DotRow(Row{x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w, width});
  return 0;
}

extern "C" int tessera_bf16_conv_rows_amx(const uint16_t* x, const uint16_t* w, float* out, int blocks,
                                          int row_stride, int block_stride, int kh, int kw, int stride_w,
                                          int dilation_h, int dilation_w, int run_step, int run_width, int width) {
  static const bool available = HasAmx();
  if (!available) return -1;
  for (int first = 0; first * run_width < width; first += kGroups) {
    const int runs = width / run_width - first < kGroups ? width / run_width - first : kGroups;
    AmxRuns(Row{x + (long)first * run_step, w, out + (long)first * run_width * kLanes, blocks, row_stride,
                block_stride, kh, kw, stride_w, dilation_h, dilation_w, run_width},
            runs, run_step);
  }
  return 0;
}

extern "C" int tessera_bf16_conv_rows_dot(const uint16_t* x, const uint16_t* w, float* out, int blocks,
                                          int row_stride, int block_stride, int kh, int kw, int stride_w,
                                          int dilation_h, int dilation_w, int run_step, int run_width, int width) {
  static const bool available = HasAvx512Bf16();
  if (!available) return -1;
  for (int run = 0; run * run_width < width; ++run) {
    DotRow(Row{x + (long)run * run_step, w, out + (long)run * run_width * kLanes, blocks, row_stride, block_stride,
               kh, kw, stride_w, dilation_h, dilation_w, run_width});
  }
  return 0;
}
