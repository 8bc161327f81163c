//===- ModelShapes.h - shard-gen's configs as the cost model's shapes ----===//
//
// Shared by the unit tests that compare the cost model with shard-gen's
// models.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TEST_UNIT_MODELSHAPES_H
#define AUTOSHARD_TEST_UNIT_MODELSHAPES_H

#include "autoshard/CostModel/Model.h"
#include "autoshard/Models/ModelConfig.h"

#include <gtest/gtest.h>

namespace autoshard::testing {

inline cost::TransformerShape shapeOf(const models::ModelConfig &config) {
  cost::TransformerShape shape;
  shape.family = config.family == models::ModelFamily::GPT2
                     ? cost::TransformerShape::Family::GPT2
                     : cost::TransformerShape::Family::Llama;
  shape.layers = config.layers;
  shape.hidden = config.hidden;
  shape.heads = config.heads;
  shape.kvHeads = config.kvHeads;
  shape.ffn = config.ffn;
  shape.vocab = config.vocab;
  shape.maxPositions = config.maxPositions;
  shape.tieEmbeddings = config.tieEmbeddings;
  return shape;
}

inline models::ModelConfig named(llvm::StringRef name) {
  std::optional<models::ModelConfig> config = models::lookupModelConfig(name);
  EXPECT_TRUE(config.has_value()) << name.str();
  return config.value_or(models::ModelConfig());
}

} // namespace autoshard::testing

#endif // AUTOSHARD_TEST_UNIT_MODELSHAPES_H
