// asrt_dropout's masks: which elements a dropout keeps, on every backend.
#pragma once

#include "data/Philox.h"

#include <cstdint>

namespace autoshard::rt {

/// The mask of one dropout call: element `i` of the step's whole-batch
/// tensor is kept iff the uniform word i of the Philox stream keyed by
/// (step, stream), with the run's seed as nonce, is >= p. A value type
/// that kernels take by value; the same numbers on the host and the GPU.
struct DropoutMask {
  uint32_t key0, key1, nonce0, nonce1;
  float p;

  /// The four words of block `blockIndex`: elements [4 * blockIndex,
  /// 4 * blockIndex + 4).
  ASRT_HOST_DEVICE void block(uint64_t blockIndex, uint32_t words[4]) const {
    words[0] = static_cast<uint32_t>(blockIndex);
    words[1] = static_cast<uint32_t>(blockIndex >> 32);
    words[2] = nonce0;
    words[3] = nonce1;
    philoxRounds(words, key0, key1);
  }
  ASRT_HOST_DEVICE bool keepsWord(uint32_t word) const {
    return uniformFromBits(word) >= p;
  }
  /// Whether element `index` of the whole tensor is kept (a block per
  /// call: loops over many elements use block()).
  ASRT_HOST_DEVICE bool keeps(uint64_t index) const {
    uint32_t words[4];
    block(index / 4, words);
    return keepsWord(words[index % 4]);
  }
};

/// The mask of dropout `stream` (train.dropout's stream) at optimizer step
/// `step` (0-based, the global one) of a run seeded `seed`.
DropoutMask dropoutMask(uint64_t seed, int64_t step, int64_t stream, float p);

} // namespace autoshard::rt
