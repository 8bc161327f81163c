// asrt_dropout's masks: which elements a dropout keeps, on every backend.
#include "data/Dropout.h"

namespace autoshard::rt {

DropoutMask dropoutMask(uint64_t seed, int64_t step, int64_t stream,
                        float p) {
  // Keyed like parameter initialisation (core/Init.cpp: a hash of what is
  // drawn, the seed as nonce), on a name no parameter stream hashes from.
  uint64_t key = fnv1a64(static_cast<uint64_t>(stream),
                         fnv1a64(static_cast<uint64_t>(step),
                                 fnv1a64("train.dropout")));
  return {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32),
          static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), p};
}

} // namespace autoshard::rt
