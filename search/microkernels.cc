// tessera's bfloat16 micro-kernels: one output row of a convolution from bf16 data and weights, accumulated in fp32,
// either on AMX tiles (tdpbf16ps) or with AVX-512 BF16 dot products (vdpbf16ps). The kernel templates call them from
// TIR (search/templates/conv2d_bf16.py); each function carries its own target attributes, so the file compiles with
// the plain options of any other source and nothing here runs unless a kernel calls it.
//
// Operands, for a row of `width` output pixels and one block of 16 output channels:
//   x    the zero-padded input in blocks of 32 channels, (blocks, padded height, padded width, 32) bf16, at the first
//        input row the output row reads; `row_stride` and `block_stride` are its row and block strides in elements;
//   w    the weights of the 16 output channels, (blocks, kh, kw, 16 channel pairs, 16, 2) bf16: each 64-byte row
//        holds a pair of input channels for every output channel, as the dot-product instructions read them;
//   out  the row, (width, 16) fp32.
// Both return 0, or -1 when this CPU (or the kernel's permission for AMX state) lacks the instructions.
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// Tiles 0 and 1 accumulate two blocks of up to 16 output pixels (rows m0, m1), 2 and 3 hold their input, 4 the
// weights shared by both.
__attribute__((target("amx-tile,amx-bf16"))) void LoadTiles(int m0, int m1) {
  TileConfig config;
  for (int tile = 0; tile < 5; ++tile) config.colsb[tile] = 64;
  config.rows[0] = config.rows[2] = m0;
  config.rows[1] = config.rows[3] = m1 ? m1 : 1;
  config.rows[4] = kBlock / 2;
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

__attribute__((target("amx-tile,amx-bf16"))) void AmxRow(const Row& r) {
  const long pixel_bytes = 2L * kBlock * r.stride_w;
  int loaded0 = -1, loaded1 = -1;
  for (int column = 0; column < r.width; column += 2 * kLanes) {
    const int m0 = r.width - column < kLanes ? r.width - column : kLanes;
    const int rest = r.width - column - m0;
    const int m1 = rest < kLanes ? rest : kLanes;
    if (m0 != loaded0 || m1 != loaded1) {
      LoadTiles(m0, m1);
      loaded0 = m0;
      loaded1 = m1;
    }
    _tile_zero(0);
    if (m1) _tile_zero(1);
    for (int block = 0; block < r.blocks; ++block) {
      for (int i = 0; i < r.kh; ++i) {
        for (int j = 0; j < r.kw; ++j) {
          _tile_loadd(4, r.weights(block, i, j), 64);
          _tile_loadd(2, r.input(block, i, j, column), pixel_bytes);
          _tile_dpbf16ps(0, 2, 4);
          if (m1) {
            _tile_loadd(3, r.input(block, i, j, column + kLanes), pixel_bytes);
            _tile_dpbf16ps(1, 3, 4);
          }
        }
      }
    }
    _tile_stored(0, r.out + (long)column * kLanes, 64);
    if (m1) _tile_stored(1, r.out + (long)(column + kLanes) * kLanes, 64);
  }
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

void DotRow(const Row& r) {
  constexpr int kTile = 14;  // 14 accumulators, the weights and a broadcast: within the 32 registers
  int column = 0;
  for (; column + kTile <= r.width; column += kTile) DotTile<kTile>(r, column);
  for (; column + 4 <= r.width; column += 4) DotTile<4>(r, column);
  for (; column < r.width; ++column) DotTile<1>(r, column);
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
