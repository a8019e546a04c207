// Quantizes the compatibility vector of docs/format.md §6 through the installed headers.
#include <turbo3/turbo3.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>

int main() {
  float x[256];
  for (int i = 0; i < 256; ++i) x[i] = float(sinf(0.37f * i + 0.1f) * 3.0f + ((i % 7) - 3) * 0.25f);
  turbo3::block_turbo3 blocks[2];
  turbo3::ref::quantize_row(x, blocks, 256);
  const unsigned char expected_head[4] = {0x27, 0x4e, 0x7e, 0x01};
  if (std::memcmp(&blocks[0], expected_head, 4) != 0) {
    std::puts("consumer: golden block mismatch");
    return 1;
  }
  std::printf("consumer: turbo3 %s found and working\n", TURBO3_VERSION_STRING);
  return 0;
}
