// tessera's reduced-precision micro-kernels: a run of output pixels of a convolution (or rows of a matmul, a 1x1 one)
// from bf16 data and weights accumulated in fp32, or from unsigned 8-bit data and signed 8-bit weights accumulated in
// int32, either on AMX tiles (tdpbf16ps, tdpbusd) or with AVX-512 dot products (vdpbf16ps, vpdpbusd). The kernel
// templates call them from TIR (search/templates/microkernel_calls.py); each function carries its own target
// attributes, so the file compiles with the plain options of any other source and nothing here runs unless a kernel
// calls it.
//
// Operands, for a run of `width` output pixels (pixel p at input column p * stride_w of the first input row it
// reads; a run longer than the row continues on the next rows, as their pixels follow in memory) and one block of 16
// output channels, with G = 2 (bf16) or 4 (int8) input channels per dot-product group, one 32-bit lane:
//   x    the zero-padded input in blocks of 64 bytes of channels (32 bf16 or 64 uint8), (blocks, padded height,
//        padded width, block), at the first input row the run reads; `row_stride` and `block_stride` are its row and
//        block strides in elements;
//   w    the weights of the 16 output channels, (blocks, kh, kw, block / G groups, 16, G): each 64-byte row holds a
//        group of input channels for every output channel, as the dot-product instructions read them;
//   out  the run, (width, 16) fp32 (bf16) or int32 (int8) sums.
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
#include <type_traits>
#include <utility>

namespace {

constexpr int kLanes = 16;  // output channels per block: one 64-byte row of fp32 or int32
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// What a precision's micro-kernels read, sum and write, and its AVX-512 dot product: bf16 pairs into fp32, or groups
// of four unsigned by signed bytes into int32.
struct Bf16 {
  using Data = uint16_t;
  using Weight = uint16_t;
  using Sum = float;
  using Vector = __m512;
  static constexpr int kAmxFlag = 22;  // CPUID 7.0 EDX: amx-bf16
  __attribute__((target("avx512f"))) static Vector Zero() { return _mm512_setzero_ps(); }
  __attribute__((target("avx512f,avx512bw,avx512bf16"))) static Vector Dot(Vector acc, __m512i a, __m512i b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
  }
  __attribute__((target("avx512f"))) static void Store(Sum* out, Vector v) { _mm512_storeu_ps(out, v); }
};

struct Int8 {
  using Data = uint8_t;
  using Weight = int8_t;
  using Sum = int32_t;
  using Vector = __m512i;
  static constexpr int kAmxFlag = 25;  // CPUID 7.0 EDX: amx-int8
  __attribute__((target("avx512f"))) static Vector Zero() { return _mm512_setzero_si512(); }
  __attribute__((target("avx512f,avx512bw,avx512vnni"))) static Vector Dot(Vector acc, __m512i a, __m512i b) {
    return _mm512_dpbusd_epi32(acc, a, b);
  }
  __attribute__((target("avx512f"))) static void Store(Sum* out, Vector v) { _mm512_storeu_si512(out, v); }
};

template <typename P>
constexpr int kBlock = 64 / sizeof(typename P::Data);  // input channels per block: one 64-byte row
template <typename P>
constexpr int kGroup = 4 / sizeof(typename P::Data);  // input channels per dot-product group: one 32-bit lane

template <typename P>
bool HasAmx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> P::kAmxFlag & 1) || !(d >> 24 & 1)) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;  // Linux grants AMX state on request
}

template <typename P>
bool HasDot() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b >> 16 & 1) || !(b >> 30 & 1)) return false;  // avx512f, bw
  if (std::is_same_v<P, Int8>) return c >> 11 & 1;  // avx512_vnni
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);  // avx512_bf16
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
// tile 6 holds the weights, shared by every group. Every precision's tiles are 64-byte rows, the weights' 16 of them.
constexpr int kGroups = 4;

__attribute__((target("amx-tile"))) void LoadTiles(int groups, int last) {
  TileConfig config;
  for (int tile = 0; tile < 7; ++tile) config.colsb[tile] = 64;
  for (int group = 0; group < kGroups; ++group) config.rows[group] = group < groups - 1 ? kLanes : last;
  config.rows[4] = kLanes;
  config.rows[5] = last;
  config.rows[6] = kLanes;
  asm volatile("" : : "r"(&config) : "memory");  // keep the stores: the compiler does not see ldtilecfg read them
  _tile_loadconfig(&config);
}

template <typename P>
struct Row {
  const typename P::Data* x;
  const typename P::Weight* w;
  typename P::Sum* out;
  int blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w, width;

  const typename P::Data* input(int block, int i, int j, int column) const {
    return x + (long)block * block_stride + (long)i * dilation_h * row_stride +
           ((long)column * stride_w + (long)j * dilation_w) * kBlock<P>;
  }
  const typename P::Weight* weights(int block, int i, int j) const {
    return w + (((long)block * kh + i) * kw + j) * kBlock<P> * kLanes;
  }
};

// The tile dot product of precision P into accumulator `acc` (literals: the tile intrinsics take tile numbers as text).
#define TESSERA_AMX_DOT(acc, a, b)          \
  do {                                      \
    if constexpr (std::is_same_v<P, Int8>)  \
      _tile_dpbusd(acc, a, b);              \
    else                                    \
      _tile_dpbf16ps(acc, a, b);            \
  } while (0)

// Group `group` of the pixels from `column`: its input into tile 4 (a whole group) or 5 (the last one), times the
// weights in tile 6, into tile `group`.
#define TESSERA_AMX_GROUP(group, last)                                                        \
  do {                                                                                        \
    const auto* input = r.input(block, i, j, column + (group) * kLanes);                      \
    if (last) {                                                                               \
      _tile_loadd(5, input, pixel_bytes);                                                     \
      TESSERA_AMX_DOT(group, 5, 6);                                                           \
    } else {                                                                                  \
      _tile_loadd(4, input, pixel_bytes);                                                     \
      TESSERA_AMX_DOT(group, 4, 6);                                                           \
    }                                                                                         \
  } while (0)
#define TESSERA_AMX_STORE(group) _tile_stored(group, r.out + (long)(column + (group) * kLanes) * kLanes, 64)

template <typename P>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) void AmxRow(const Row<P>& r) {
  const long pixel_bytes = 64L * r.stride_w;
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
    TESSERA_AMX_DOT(run, 5, 6);                                                               \
  } while (0)

template <typename P>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) void AmxRuns(const Row<P>& r, int runs, long run_step) {
  const long pixel_bytes = 64L * r.stride_w;
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
// by them, each pixel's group of input channels broadcast from memory.
template <typename P, int Pixels>
__attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni"))) void DotTile(const Row<P>& r, int column) {
  typename P::Vector acc[Pixels];
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) acc[p] = P::Zero();
  for (int block = 0; block < r.blocks; ++block) {
    for (int i = 0; i < r.kh; ++i) {
      for (int j = 0; j < r.kw; ++j) {
        const auto* a = r.input(block, i, j, column);
        const auto* b = r.weights(block, i, j);
        for (int group = 0; group < kBlock<P> / kGroup<P>; ++group) {
          const __m512i weights = _mm512_loadu_si512(b + group * kGroup<P> * kLanes);
#pragma GCC unroll 16
          for (int p = 0; p < Pixels; ++p) {
            int32_t inputs;
            memcpy(&inputs, a + (long)p * r.stride_w * kBlock<P> + kGroup<P> * group, sizeof inputs);
            acc[p] = P::Dot(acc[p], _mm512_set1_epi32(inputs), weights);
          }
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) P::Store(r.out + (long)(column + p) * kLanes, acc[p]);
}

// DotTile<P, 1> to DotTile<P, sizeof...(Sizes)>, indexed by the tile's pixels minus one.
template <typename P, int... Sizes>
constexpr auto DotTiles(std::integer_sequence<int, Sizes...>) {
  return std::array<void (*)(const Row<P>&, int), sizeof...(Sizes)>{&DotTile<P, Sizes + 1>...};
}

// The run in as few tiles as fit the registers, of sizes that differ by at most one pixel (15 pixels: 8 and 7, not
// 14 and 1): each tile's accumulators are enough to hide the dot product's latency.
template <typename P>
void DotRow(const Row<P>& r) {
  constexpr int kTile = 14;  // 14 accumulators, the weights and a broadcast: within the 32 registers
  static constexpr auto tiles = DotTiles<P>(std::make_integer_sequence<int, kTile>());
  const int count = (r.width + kTile - 1) / kTile;
  for (int tile = 0, column = 0; tile < count; ++tile) {
    const int size = r.width / count + (tile < r.width % count);
    tiles[size - 1](r, column);
    column += size;
  }
}

template <typename P>
int RowAmx(const Row<P>& r) {
  static const bool available = HasAmx<P>();
  if (!available) return -1;
  AmxRow(r);
  return 0;
}

template <typename P>
int RowDot(const Row<P>& r) {
  static const bool available = HasDot<P>();
  if (!available) return -1;
  DotRow(r);
  return 0;
}

template <typename P>
int RowsAmx(const Row<P>& r, int run_step, int run_width) {
  static const bool available = HasAmx<P>();
  if (!available) return -1;
  for (int first = 0; first * run_width < r.width; first += kGroups) {
    const int runs = r.width / run_width - first < kGroups ? r.width / run_width - first : kGroups;
    Row<P> part = r;
    part.x += (long)first * run_step;
    part.out += (long)first * run_width * kLanes;
    part.width = run_width;
    AmxRuns(part, runs, run_step);
  }
  return 0;
}

template <typename P>
int RowsDot(const Row<P>& r, int run_step, int run_width) {
  static const bool available = HasDot<P>();
  if (!available) return -1;
  for (int run = 0; run * run_width < r.width; ++run) {
    Row<P> part = r;
    part.x += (long)run * run_step;
    part.out += (long)run * run_width * kLanes;
    part.width = run_width;
    DotRow(part);
  }
  return 0;
}

}  // namespace

// The entry points of precision P (`name` bf16 or int8), on each instruction set, one run or several short ones.
#define TESSERA_ENTRY_POINTS(name, P)                                                                              \
  extern "C" int tessera_##name##_conv_row_amx(const P::Data* x, const P::Weight* w, P::Sum* out, int blocks,      \
                                               int row_stride, int block_stride, int kh, int kw, int stride_w,     \
                                               int dilation_h, int dilation_w, int width) {                        \
    return RowAmx<P>({x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w,       \
                      width});                                                                                     \
  }                                                                                                                \
  extern "C" int tessera_##name##_conv_row_dot(const P::Data* x, const P::Weight* w, P::Sum* out, int blocks,      \
                                               int row_stride, int block_stride, int kh, int kw, int stride_w,     \
                                               int dilation_h, int dilation_w, int width) {                        \
    return RowDot<P>({x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w,       \
                      width});                                                                                     \
  }                                                                                                                \
  extern "C" int tessera_##name##_conv_rows_amx(const P::Data* x, const P::Weight* w, P::Sum* out, int blocks,     \
                                                int row_stride, int block_stride, int kh, int kw, int stride_w,    \
                                                int dilation_h, int dilation_w, int run_step, int run_width,       \
                                                int width) {                                                       \
    return RowsAmx<P>({x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w,      \
                       width},                                                                                     \
                      run_step, run_width);                                                                        \
  }                                                                                                                \
  extern "C" int tessera_##name##_conv_rows_dot(const P::Data* x, const P::Weight* w, P::Sum* out, int blocks,     \
                                                int row_stride, int block_stride, int kh, int kw, int stride_w,    \
                                                int dilation_h, int dilation_w, int run_step, int run_width,       \
                                                int width) {                                                       \
    return RowsDot<P>({x, w, out, blocks, row_stride, block_stride, kh, kw, stride_w, dilation_h, dilation_w,      \
                       width},                                                                                     \
                      run_step, run_width);                                                                        \
  }

TESSERA_ENTRY_POINTS(bf16, Bf16)
TESSERA_ENTRY_POINTS(int8, Int8)
